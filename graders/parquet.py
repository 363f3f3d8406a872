"""Deterministic Parquet encoding of table rows (same rows → byte-identical files)."""

from __future__ import annotations

import io
from collections.abc import Iterable
from typing import Any
from urllib.parse import quote

import pyarrow as pa
import pyarrow.parquet as pq

from schemas.tables import SORT_KEYS, TABLES

ROW_GROUP_SIZE = 64_000
HIVE_NULL = "__HIVE_DEFAULT_PARTITION__"


def partition_value(value: str | None) -> str:
    """A hive path segment value: percent-encoded, with the hive spelling of null."""
    if value is None or value == "":
        return HIVE_NULL
    return quote(value, safe=" -_.~+@")


def partition_path(table: str, workflow: str | None, date: str | None) -> str:
    return f"{table}/workflow={partition_value(workflow)}/date={partition_value(date)}"


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


def encode_table(table: str, rows: Iterable[dict[str, Any]]) -> bytes:
    """Rows of one partition → Parquet bytes, sorted by the table's sort keys."""
    schema = TABLES[table]
    ordered = sorted(rows, key=_sort_key(SORT_KEYS[table]))
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
