"""Reading the output tables back: DuckDB views and pyarrow datasets over the partitions."""

from __future__ import annotations

from pathlib import Path

import duckdb
import pyarrow.dataset as ds

from graders.tables.parquet import DamagedOutput, decode_table
from graders.tables.paths import ORIGINAL_COLUMN, parse_partition, reader_glob
from pipeline.errors import Failure, UsageError, query_error
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
    if not output.startswith("gs://"):  # DuckDB's glob skips a FIFO or a folder there, silently
        odd = next((p for p in Path(output).glob(reader_glob(table)) if p.is_symlink() or not p.is_file()), None)
        if odd is not None:
            raise UsageError(f"{DamagedOutput(str(odd), 'not a regular file')}; `fleetgrade run --full` with this "
                             "--output rebuilds the output from the fleet", output, exit_code=1)
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
    try:
        for table in present_tables(output):
            try:
                create_table_view(con, output, table)
            except duckdb.IOException as exc:
                if not SPECS[table].optional:
                    raise explain(output, exc) from exc
            except duckdb.Error as exc:  # a damaged partition file, most likely
                raise explain(output, exc) from exc
    except BaseException:
        # Closed now: a database left to the interpreter's exit after a failed read aborted the
        # process (std::terminate, SIGABRT) in about 1 run in 5.
        con.close()
        raise
    return con


def dataset(output: str, table: str) -> ds.Dataset:
    """A pyarrow dataset of one table with its partition columns."""
    return ds.dataset(
        f"{output.rstrip('/')}/{table}",
        format="parquet",
        partitioning=ds.partitioning(PARTITION_SCHEMA, flavor="hive"),
    )


def damaged_files(output: str) -> list[DamagedOutput]:
    """Every partition file of a local output that cannot be read back as its table (each file
    decoded whole, as a job reads it back): asked only once DuckDB has failed on the output."""
    found = []
    for table in SPECS:
        for path in sorted(Path(output).glob(reader_glob(table))):
            try:
                decode_table(table, path.read_bytes(), str(path))
            except DamagedOutput as exc:
                found.append(exc)
            except OSError as exc:
                found.append(DamagedOutput(str(path), f"cannot be read: {exc.strerror or exc}"))
    return found


def explain(output: str, exc: Exception, where: str | None = None, *, own_query: bool = False) -> UsageError:
    """A DuckDB failure on ``output`` as one line: the damaged file it met, and how to rebuild it
    (``fleetgrade run --full``), when a file of the output is damaged; else DuckDB's own words, a
    usage mistake when the user's query is wrong (``query_error``), a failure when the command's
    ``own_query`` failed."""
    reading = isinstance(exc, (duckdb.IOException, duckdb.InvalidInputException, duckdb.InternalException))
    damaged = damaged_files(output) if reading and not output.startswith("gs://") else []
    if not damaged:
        return Failure(" ".join(str(exc).split()), where) if own_query else query_error(exc, where)
    more = f" (and {len(damaged) - 1} more damaged file(s))" if len(damaged) > 1 else ""
    return Failure(f"{damaged[0]}{more}; `fleetgrade run --full` with this --output rebuilds the output from "
                   "the fleet", output)
