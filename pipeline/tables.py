"""Reading the output tables back: DuckDB views and pyarrow datasets over the partitions."""

from __future__ import annotations

from pathlib import Path

import duckdb
import pyarrow.dataset as ds

from graders.tables.paths import ORIGINAL_COLUMN, parse_partition, reader_glob
from schemas.tables import PARTITION_SCHEMA, SPECS, public_tables


def table_glob(output: str, table: str) -> str:
    return f"{output.rstrip('/')}/{reader_glob(table)}"


def has_partitions(output: str, table: str) -> bool:
    """Whether a local output holds a partition file of ``table``."""
    return any(Path(output).glob(reader_glob(table)))


def present_tables(output: str) -> list[str]:
    """Tables that have at least one partition (local folders; gs:// via DuckDB's httpfs is not assumed)."""
    if output.startswith("gs://"):
        return public_tables()
    return [t for t in public_tables() if has_partitions(output, t)]


def _quoted(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def create_table_view(con: duckdb.DuckDBPyConnection, output: str, table: str) -> None:
    """The view ``table`` over a table's partitions, hive partition columns included.

    A workflow whose name is too long for a path segment (or is hive's spelling of null) has a
    hashed segment (``graders.tables.paths.partition_value``); its files keep the name, which the
    view shows instead of the segment's."""
    glob = table_glob(output, table)
    source = (f"read_parquet({_quoted(glob)}, hive_partitioning = true, "
              "hive_types = {'workflow': VARCHAR, 'date': DATE}, union_by_name = true)")
    parsed = (parse_partition(row[0]) for row in con.execute("SELECT file FROM glob(?)", [glob]).fetchall())
    if any(p is not None and p.hashed for p in parsed):
        source = (f"(SELECT * EXCLUDE ({ORIGINAL_COLUMN}) REPLACE (coalesce({ORIGINAL_COLUMN}, workflow) "
                  f"AS workflow) FROM {source})")
    con.execute(f"CREATE VIEW {table} AS SELECT * FROM {source}")


def connect(output: str) -> duckdb.DuckDBPyConnection:
    """An in-memory DuckDB with one view per table, hive partition columns included.

    On an object store, where what is present is not listed here, an optional table (one only
    some commands write, ``TableSpec.optional``) gets a view only when DuckDB finds its files."""
    con = duckdb.connect()
    for table in present_tables(output):
        try:
            create_table_view(con, output, table)
        except duckdb.IOException:
            if not SPECS[table].optional:
                raise
    return con


def dataset(output: str, table: str) -> ds.Dataset:
    """A pyarrow dataset of one table with its partition columns."""
    return ds.dataset(
        f"{output.rstrip('/')}/{table}",
        format="parquet",
        partitioning=ds.partitioning(PARTITION_SCHEMA, flavor="hive"),
    )
