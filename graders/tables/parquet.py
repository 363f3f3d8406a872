"""Deterministic Parquet encoding of table rows (same rows → byte-identical files), and the one
validated decoding of every file an output holds (:class:`DamagedOutput` names a file that is not)."""

from __future__ import annotations

import io
from collections.abc import Iterable
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from graders.tables.paths import ORIGINAL_COLUMN, keeps_original
from schemas.tables import SPECS

ROW_GROUP_SIZE = 64_000


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
    """The rows of one partition file (without the partition columns); :class:`DamagedOutput`
    naming ``path`` when they cannot be read as ``table``'s. Every reader of a stored file
    (incremental state, the sink's merge, carried verdicts, statistics) decodes through here."""
    reason = damage(data)
    if reason is None:
        try:
            return pq.read_table(io.BytesIO(data), schema=SPECS[table].schema).to_pylist()
        except (pa.ArrowException, OSError, ValueError, TypeError, IndexError, MemoryError) as exc:
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
    ordered = sorted(rows, key=_sort_key(spec.sort_key))
    if "workflow" not in schema.names and keeps_original(workflow):
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
