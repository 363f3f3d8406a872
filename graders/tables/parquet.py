"""Deterministic Parquet encoding of table rows (same rows → byte-identical files), and the one
validated decoding of every file an output holds (:class:`DamagedOutput` names a file that is not).

The codec is the one place that knows the Arrow types: row builders hand over plain values (dates
as ``YYYY-MM-DD`` text, times as ISO 8601 text, counts that may arrive as floats) and
:func:`typed_rows` turns each into its column's type (``timestamp[us, UTC]``, ``date32``, int64).
Files written by an older fleetgrade (times and dates as text, token totals as doubles, an int64
``attempt``) decode to the same values, so a stored row and a new one merge into one typed file.
"""

from __future__ import annotations

import io
import math
from collections.abc import Callable, Iterable
from datetime import UTC, date, datetime
from functools import cache
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from graders.tables.paths import ORIGINAL_COLUMN, keeps_original
from schemas.tables import SPECS

ROW_GROUP_SIZE = 64_000
# The column types of the files this codec writes, kept in each file's footer: 2 has UTC
# timestamps, DATEs and int64 counts; the first (no key) had text times and dates, double token totals.
TABLE_FORMAT = b"2"
FORMAT_KEY = b"fleetgrade.table_format"
_INT64_MAX = 2**63 - 1

Coerce = Callable[[Any], Any]


def _timestamp(value: Any) -> datetime | None:
    """A UTC instant from a datetime (naive means UTC, as run dates are read) or ISO 8601 text."""
    if isinstance(value, str):
        try:
            value = datetime.fromisoformat(value.strip())
        except ValueError:
            return None
    if not isinstance(value, datetime):
        return None
    try:
        return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)
    except (OverflowError, ValueError):  # an offset that moves it past year 9999
        return None


def _date(value: Any) -> date | None:
    if isinstance(value, datetime):
        return value.date()
    if isinstance(value, date):
        return value
    if isinstance(value, str):
        try:
            return date.fromisoformat(value.strip())
        except ValueError:
            return None
    return None


def _count(value: Any) -> int | None:
    """A whole number: an int, or a float with no fraction (JSON numbers are floats in traces);
    anything else (a fraction, a non-finite or out-of-range number, text) is unknown (null)."""
    if type(value) is int:
        return value if -_INT64_MAX - 1 <= value <= _INT64_MAX else None
    if isinstance(value, float) and math.isfinite(value) and value.is_integer() and abs(value) <= _INT64_MAX:
        return int(value)
    return None


def _coercion(t: pa.DataType) -> Coerce | None:
    if pa.types.is_timestamp(t):
        return _timestamp
    if pa.types.is_date32(t):
        return _date
    if pa.types.is_int64(t):  # counts and totals; narrower ints are ids and indexes given as ints
        return _count
    return None


@cache
def _coercions(table: str) -> tuple[tuple[str, Coerce], ...]:
    """The columns of ``table`` whose values are converted to their type, with the converter."""
    found = ((f.name, _coercion(f.type)) for f in SPECS[table].schema)
    return tuple((name, fn) for name, fn in found if fn is not None)


def typed_rows(table: str, rows: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """``rows`` with each time, date and count column as its Arrow type's Python value."""
    columns = _coercions(table)
    if not columns:
        return list(rows)
    out = []
    for row in rows:
        row = dict(row)
        for name, fn in columns:
            row[name] = fn(row.get(name))
        out.append(row)
    return out


def _same_types(found: pa.Schema, wanted: pa.Schema) -> bool:
    return all(found.get_field_index(f.name) >= 0 and found.field(f.name).type == f.type for f in wanted)


PARQUET_MAGIC = b"PAR1"


class DamagedOutput(ValueError):
    """A file of the output that cannot be read back as its table (truncated, overwritten, not
    Parquet, not the table's columns): its path and what is wrong, in one line."""

    def __init__(self, path: str, reason: str) -> None:
        super().__init__(f"{path}: damaged output file ({reason})")
        self.path, self.reason = path, reason


def damage(data: bytes) -> str | None:
    """Why ``data`` is no complete Parquet file, from its ends alone (no decoding), or None."""
    if len(data) < 12 or data[:4] != PARQUET_MAGIC or data[-4:] != PARQUET_MAGIC:
        return f"not a complete Parquet file: {len(data)} bytes, no Parquet footer (truncated or overwritten?)"
    return None


def decode_table(table: str, data: bytes, path: str = "a stored partition") -> list[dict[str, Any]]:
    """The rows of one partition file (without the partition columns), typed as the table's
    schema says: a file an older fleetgrade wrote (other column types, a column missing) reads as
    a current one would. :class:`DamagedOutput` naming ``path`` when they cannot be read as
    ``table``'s; every reader of a stored file (incremental state, the sink's merge, carried
    verdicts, statistics, the upgrade) decodes through here."""
    reason = damage(data)
    if reason is None:
        schema = SPECS[table].schema
        try:
            stored = pq.read_table(io.BytesIO(data))
            missing = [c for c in SPECS[table].sort_key if stored.schema.get_field_index(c) < 0]
            if missing:  # every format of the table had its sort key: another file
                reason = f"not a {table} file: no {', '.join(missing)} column"
            elif _same_types(stored.schema, schema):
                return stored.select(schema.names).to_pylist()
            else:
                return typed_rows(table, ({c: row.get(c) for c in schema.names} for row in stored.to_pylist()))
        except (pa.ArrowException, OSError, ValueError, TypeError, IndexError, KeyError, MemoryError) as exc:
            first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
            reason = f"cannot be read as the {table} table: {first}"
    raise DamagedOutput(path, reason)


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
    spec = SPECS[table]
    schema = spec.schema
    ordered = sorted(typed_rows(table, rows), key=_sort_key(spec.sort_key))
    if "workflow" not in schema.names and keeps_original(workflow):
        schema = schema.append(pa.field(ORIGINAL_COLUMN, pa.string()))
        ordered = [{**row, ORIGINAL_COLUMN: workflow} for row in ordered]
    arrow = pa.Table.from_pylist(ordered, schema=schema.with_metadata({FORMAT_KEY: TABLE_FORMAT}))
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


def current_format(data: bytes) -> bool:
    """Whether a stored partition file was written in the current table format (its footer only);
    False for a damaged one (decoding it names it)."""
    try:
        metadata = pq.read_schema(io.BytesIO(data)).metadata or {}
    except (pa.ArrowException, OSError, ValueError):
        return False
    return metadata.get(FORMAT_KEY) == TABLE_FORMAT
