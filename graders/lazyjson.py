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
from typing import Any, overload

import orjson

from graders.jsrt.digits import has_long_digit_run


class Parsed:
    """A value that is not kept as its line: the line needed the slow (reference) parse path."""

    __slots__ = ("value",)

    def __init__(self, value: Any) -> None:
        self.value = value

    def __reduce__(self) -> tuple[Any, ...]:
        return (Parsed, (self.value,))


Item = bytes | Parsed


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
    from graders.jsrt.jsonio import parse_json  # jsonio imports this module

    return parse_json(item)


class LazyList(Sequence[Any]):
    """Shared behaviour: list equality, a list repr, and materialization."""

    __slots__ = ()

    def _get(self, index: int) -> Any:
        """The element at ``index``, which is within range."""
        raise NotImplementedError

    @overload
    def __getitem__(self, index: int) -> Any: ...
    @overload
    def __getitem__(self, index: slice) -> list[Any]: ...
    def __getitem__(self, index: int | slice) -> Any:
        if isinstance(index, slice):
            return [self._get(i) for i in range(len(self))[index]]
        n = len(self)
        if index < 0:
            index += n
        if not 0 <= index < n:
            raise IndexError(f"{type(self).__name__} index out of range")
        return self._get(index)

    def materialize(self) -> list[Any]:
        return list(self)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, (list, LazyList)):
            return len(self) == len(other) and self.materialize() == list(other)
        return NotImplemented

    def __ne__(self, other: object) -> bool:
        eq = self.__eq__(other)
        return eq if eq is NotImplemented else not eq

    __hash__ = None  # type: ignore[assignment]  # mutable-list semantics: unhashable

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.materialize()!r})"


def positions(values: list[Any], value: Any) -> Iterator[int]:
    """Indices of ``value`` in ``values`` (a column), found by ``list.index``: a C scan per hit."""
    i = -1
    try:
        while True:
            i = values.index(value, i + 1)
            yield i
    except ValueError:
        return


class SafeInts(list[int]):
    """A column whose values are all ints within ±(2**53 - 1), an absent field read as 0.

    Preprocessing builds one where every record decoded so (``records.TokenInts``), and a
    reader may then sum and compare the column in C instead of testing each value.
    """

    __slots__ = ()


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


class TokenSteps(LazyList):
    """The trace's ``steps``: ``{index, inputTokens, outputTokens, durationMs, model}`` per entry."""

    __slots__ = ("durations", "inputs", "models", "outputs")

    def __init__(self, inputs: list[Any], outputs: list[Any], durations: list[Any], models: list[Any]) -> None:
        self.inputs, self.outputs, self.durations, self.models = inputs, outputs, durations, models

    def __len__(self) -> int:
        return len(self.inputs)

    def _get(self, i: int) -> dict[str, Any]:
        return {"index": i, "inputTokens": self.inputs[i], "outputTokens": self.outputs[i],
                "durationMs": self.durations[i], "model": self.models[i]}

    def __iter__(self) -> Iterator[dict[str, Any]]:
        return map(self._get, range(len(self)))

    def __reduce__(self) -> tuple[Any, ...]:
        return (TokenSteps, (self.inputs, self.outputs, self.durations, self.models))
