"""Deterministic Parquet encoding of table rows (same rows → byte-identical files)."""

from __future__ import annotations

import hashlib
import io
import re
from collections.abc import Callable, Iterable
from typing import Any
from urllib.parse import quote, unquote

import pyarrow as pa
import pyarrow.parquet as pq

from schemas.tables import SORT_KEYS, TABLES

ROW_GROUP_SIZE = 64_000
HIVE_NULL = "__HIVE_DEFAULT_PARTITION__"
NAME_MAX = 255  # bytes in one path segment (ext4, xfs, GCS's limit on an object name is longer)
_SAFE = " -_.~+@"
_DIGEST_HEX = 32
# The tail of a hashed value: "~" and 32 hex digits; no value is written so except by hashing.
_HASHED = re.compile(r"~[0-9a-f]{" + str(_DIGEST_HEX) + r"}\Z")
# Where a hashed partition's files keep the value itself (readers take it over the path's).
ORIGINAL_COLUMN = "workflow_name"


def partition_value(value: str | None, key: str = "workflow") -> str:
    """The one encoding of a partition value in a ``<key>=<value>`` path segment.

    Percent-encoded (readers decode it), with hive's spelling of null for None. A value whose
    encoding would not fit ``NAME_MAX`` bytes with its key, or would read back as null or as a
    hashed value, is written as a prefix of its encoding, "~" and 32 hex digits of its SHA-256:
    so the encoding is injective, every segment fits, and no value reads back as null. The
    value itself is then kept in the partition's files (``ORIGINAL_COLUMN``).
    """
    if value is None or value == "":
        return HIVE_NULL
    text = quote(value, safe=_SAFE)
    limit = NAME_MAX - len(key) - 1
    if len(text) <= limit and text != HIVE_NULL and not _HASHED.search(text):
        return text
    digest = hashlib.sha256(value.encode("utf-8", "surrogatepass")).hexdigest()[:_DIGEST_HEX]
    room = limit - _DIGEST_HEX - 1
    prefix: list[str] = []  # whole characters, so the prefix reads back as text
    for char in value:
        piece = quote(char, safe=_SAFE)
        room -= len(piece)
        if room < 0:
            break
        prefix.append(piece)
    return f"{''.join(prefix)}~{digest}"


def is_hashed(encoded: str) -> bool:
    """Whether a segment's value is a hashed one: the value itself is in ``ORIGINAL_COLUMN``."""
    return _HASHED.search(encoded) is not None


def decode_partition_value(encoded: str) -> str | None:
    """What a reader of hive paths sees for a segment's value (for a hashed one, its prefix)."""
    return None if encoded == HIVE_NULL else unquote(encoded)


def partition_path(table: str, workflow: str | None, date: str | None) -> str:
    return f"{table}/workflow={partition_value(workflow)}/date={partition_value(date, 'date')}"


def partition_values(path: str, data: bytes | Callable[[], bytes | None] | None = None,
                     ) -> tuple[str | None, str | None]:
    """(workflow, date) of a partition file: as its hive path gives them, but for a hashed
    workflow, which its file's ``data`` keeps whole (``data`` may be a reader, called only then)."""
    parts = dict(p.split("=", 1) for p in path.split("/") if "=" in p)
    raw_workflow, raw_date = parts.get("workflow"), parts.get("date")
    workflow = None if raw_workflow is None else decode_partition_value(raw_workflow)
    if raw_workflow is not None and data is not None and is_hashed(raw_workflow):
        content = data() if callable(data) else data
        workflow = (stored_original(content) if content is not None else None) or workflow
    return workflow, None if raw_date is None else decode_partition_value(raw_date)


def stored_original(data: bytes) -> str | None:
    """The partition value kept in a hashed partition's file, if it has one."""
    source = io.BytesIO(data)
    if ORIGINAL_COLUMN not in pq.read_schema(source).names:
        return None
    column = pq.read_table(source, columns=[ORIGINAL_COLUMN]).column(0)
    return next((v for v in column.to_pylist() if v is not None), None)


def decode_table(table: str, data: bytes) -> list[dict[str, Any]]:
    """The rows of one partition file (without the partition columns)."""
    return pq.read_table(io.BytesIO(data), schema=TABLES[table]).to_pylist()


_ABSENT = (False, 0)


def _sort_key(keys: tuple[str, ...]) -> Any:
    def key(row: dict[str, Any]) -> tuple[Any, ...]:
        # None sorts first; mixed types never occur within one column. One get per key: this runs
        # once per row written.
        return tuple([_ABSENT if v is None else (True, v) for v in map(row.get, keys)])

    return key


def encode_table(table: str, rows: Iterable[dict[str, Any]], workflow: str | None = None) -> bytes:
    """Rows of one partition → Parquet bytes, sorted by the table's sort keys.

    ``workflow``: the partition's; when its path segment is hashed, it is kept in the file."""
    schema = TABLES[table]
    ordered = sorted(rows, key=_sort_key(SORT_KEYS[table]))
    if workflow and "workflow" not in schema.names and is_hashed(partition_value(workflow)):
        schema = schema.append(pa.field(ORIGINAL_COLUMN, pa.string()))
        ordered = [{**row, ORIGINAL_COLUMN: workflow} for row in ordered]
    arrow = pa.Table.from_pylist(ordered, schema=schema)
    sink = io.BytesIO()
    pq.write_table(
        arrow,
        sink,
        row_group_size=ROW_GROUP_SIZE,
        compression="zstd",
        compression_level=3,
        use_dictionary=True,
        write_statistics=True,
        version="2.6",
        data_page_version="1.0",
    )
    return sink.getvalue()
