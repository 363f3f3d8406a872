"""Reading the output tables back: DuckDB views and pyarrow datasets over the partitions."""

from __future__ import annotations

from pathlib import Path

import duckdb
import pyarrow.dataset as ds

from schemas.tables import PARTITION_SCHEMA, public_tables


def table_glob(output: str, table: str) -> str:
    return f"{output.rstrip('/')}/{table}/*/*/*.parquet"


def present_tables(output: str) -> list[str]:
    """Tables that have at least one partition (local folders; gs:// via DuckDB's httpfs is not assumed)."""
    if output.startswith("gs://"):
        return public_tables()
    return [t for t in public_tables() if any(Path(output, t).glob("*/*/*.parquet"))]


def connect(output: str) -> duckdb.DuckDBPyConnection:
    """An in-memory DuckDB with one view per table, hive partition columns included."""
    con = duckdb.connect()
    for table in present_tables(output):
        con.execute(
            f"CREATE VIEW {table} AS SELECT * FROM read_parquet('{table_glob(output, table)}', "
            "hive_partitioning = true, hive_types = {'workflow': VARCHAR, 'date': DATE}, union_by_name = true)"
        )
    return con


def dataset(output: str, table: str) -> ds.Dataset:
    """A pyarrow dataset of one table with its partition columns."""
    return ds.dataset(
        f"{output.rstrip('/')}/{table}",
        format="parquet",
        partitioning=ds.partitioning(PARTITION_SCHEMA, flavor="hive"),
    )
