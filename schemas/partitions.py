"""The partitioning every table shares: ``workflow`` and ``date``, kept in the path, not the files."""

from __future__ import annotations

import pyarrow as pa

PARTITION_COLUMNS = ("workflow", "date")
# How readers are told the partitioning: `date` is a DATE in every reader (pyarrow, DuckDB, Polars,
# BigQuery), whatever a partition holds; an undated partition (`__HIVE_DEFAULT_PARTITION__`) reads as null.
PARTITION_SCHEMA = pa.schema([("workflow", pa.string()), ("date", pa.date32())])


def file_schema(schema: pa.Schema) -> pa.Schema:
    """The schema without the partition columns, for files under ``workflow=…/date=…/``."""
    return pa.schema([f for f in schema if f.name not in PARTITION_COLUMNS])
