"""BigQuery external-table DDL for the hive-partitioned Parquet tables (``fleetgrade bigquery-ddl``).

Column types are mapped from the Arrow schemas of ``schemas.tables.SPECS``; an Arrow type with no
exact BigQuery equivalent raises instead of being guessed, so a schema change cannot silently
produce a wrong table definition.
"""

from __future__ import annotations

import re

import pyarrow as pa

from schemas.tables import PARTITION_COLUMNS, SPECS, public_tables

# GoogleSQL reserved keywords: such a column name (e.g. observations' `case`) must be quoted.
RESERVED = frozenset(
    """all and any array as asc assert_rows_modified at between by case cast collate contains create cross
    cube current default define desc distinct else end enum escape except exclude exists extract false fetch
    following for from full group grouping groups hash having if ignore in inner intersect interval into is
    join lateral left like limit lookup merge natural new no not null nulls of on or order outer over
    partition preceding proto qualify range recursive respect right rollup rows select set some struct
    tablesample then to treat true unbounded union unnest using when where window with within""".split()
)

# Partition columns come from the path (`workflow=<w>/date=<d>`), never from the files.
PARTITION_DDL = "workflow STRING, date DATE"


class UnmappedTypeError(TypeError):
    """An Arrow type that has no BigQuery column type here."""


def bq_type(t: pa.DataType) -> str:
    """The BigQuery standard SQL type of one Arrow type."""
    if pa.types.is_string(t) or pa.types.is_large_string(t):
        return "STRING"
    if pa.types.is_integer(t) and not pa.types.is_uint64(t):
        return "INT64"  # every narrower integer fits; uint64 does not
    if pa.types.is_float32(t) or pa.types.is_float64(t):
        return "FLOAT64"
    if pa.types.is_boolean(t):
        return "BOOL"
    if pa.types.is_binary(t) or pa.types.is_large_binary(t):
        return "BYTES"
    if pa.types.is_date32(t):
        return "DATE"
    if pa.types.is_timestamp(t):
        # Parquet timestamps adjusted to UTC are BigQuery TIMESTAMPs; local (naive) ones DATETIMEs.
        return "TIMESTAMP" if t.tz is not None else "DATETIME"
    if pa.types.is_list(t) or pa.types.is_large_list(t):
        if pa.types.is_list(t.value_type) or pa.types.is_large_list(t.value_type):
            raise UnmappedTypeError(f"BigQuery has no ARRAY of ARRAY: {t}")
        return f"ARRAY<{bq_type(t.value_type)}>"
    if pa.types.is_struct(t):
        fields = ", ".join(f"{ident(t.field(i).name)} {bq_type(t.field(i).type)}" for i in range(t.num_fields))
        return f"STRUCT<{fields}>"
    raise UnmappedTypeError(f"no BigQuery type for Arrow type {t}")


def ident(name: str) -> str:
    """A column name, backquoted when it is a reserved keyword or not a plain identifier."""
    if name.lower() in RESERVED or not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name):
        if "`" in name:
            raise UnmappedTypeError(f"column name {name!r} cannot be quoted")
        return f"`{name}`"
    return name


def columns_ddl(schema: pa.Schema) -> str:
    """The column list of a table's files (partition columns excluded)."""
    return ", ".join(f"{ident(f.name)} {bq_type(f.type)}" for f in schema if f.name not in PARTITION_COLUMNS)


def table_ddl(prefix: str, dataset: str, table: str, schema: pa.Schema) -> str:
    root = f"{prefix.rstrip('/')}/{table}"
    return (
        f"CREATE EXTERNAL TABLE `{dataset}.{table}` ({columns_ddl(schema)})\n"
        f"WITH PARTITION COLUMNS ({PARTITION_DDL})\n"
        f"OPTIONS (format = 'PARQUET', uris = ['{root}/*'], hive_partition_uri_prefix = '{root}', "
        "require_hive_partition_filter = false);"
    )


def all_ddl(prefix: str, dataset: str) -> str:
    """One statement per public table of ``schemas.tables.SPECS``, in a stable order."""
    return "\n\n".join(table_ddl(prefix, dataset, name, SPECS[name].schema) for name in public_tables()) + "\n"
