"""Large trace collections kept compact: JSONL entries as their source lines, steps as columns.

A large run's logs hold tens of thousands of records. Keeping every one as a parsed Python
dict cost more than twice the JSON parse itself (allocating the objects, not parsing them;
make bench), while the built-in graders read only a few fields and only user JavaScript and
``grader_payload.json`` see whole records. So preprocessing parses each line once, takes the
fields it needs, and keeps the line's bytes; a record is parsed again only when read.

Both classes are read-only sequences that compare equal to the lists they stand for, pickle
compactly, and serialize as JSON arrays (``jscompat``, ``js_sandbox.payload_json``).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

import orjson

from graders.jsrt.digits import has_long_digit_run
from graders.jsrt.jsonio import Item, parse_json
from graders.jsrt.lazylist import LazyList


def load_item(item: Item) -> Any:
    """The record of a kept line: ``JSON.parse``'s value of it.

    A bytes item is a stripped line that orjson accepted, or that the reference path would
    also have kept while orjson refuses it (a float beyond range, bad UTF-8 in a field
    preprocessing does not read; ``jsonio.parse_jsonl_records``). orjson's value is exactly
    ``JSON.parse``'s unless the line holds an integer beyond 2**53, which only a line with a
    16-digit run can: that line, like one orjson refuses, is parsed as the reference parses it.
    """
    if type(item) is not bytes:
        return item.value  # type: ignore[union-attr]
    try:
        value = orjson.loads(item)
    except orjson.JSONDecodeError:
        pass
    else:
        if not has_long_digit_run(item):
            return value
    return parse_json(item)


class JsonLines(LazyList):
    """Parsed JSONL records kept as their lines; ``columns`` holds fields extracted at parse time.

    A column is the raw ``record.get(field)`` of every record (None for non-records), in order,
    or a :class:`SafeInts` of it.
    """

    __slots__ = ("columns", "items")

    def __init__(self, items: list[Item] | None = None, columns: dict[str, list[Any]] | None = None) -> None:
        self.items: list[Item] = items if items is not None else []
        self.columns: dict[str, list[Any]] = columns if columns is not None else {}

    def __len__(self) -> int:
        return len(self.items)

    def _get(self, index: int) -> Any:
        return load_item(self.items[index])

    def __iter__(self) -> Iterator[Any]:
        return map(load_item, self.items)

    def __reduce__(self) -> tuple[Any, ...]:
        return (JsonLines, (self.items, self.columns))


def count_column(records: Sequence[Any], name: str) -> list[Any]:
    """The values of the count field ``name`` of every record (None for a non-record), in order:
    the column preprocessing extracted while parsing when ``records`` carries one, else
    ``record.get(name)``. An absent count may read as 0 or None: every reader of a count treats
    them alike (``Number(undefined) || 0``). Graders ask for a count column through this, never
    for how the records are stored."""
    column = records.columns.get(name) if isinstance(records, JsonLines) else None
    if column is not None:
        return column
    return [r.get(name) if isinstance(r, dict) else None for r in records]
