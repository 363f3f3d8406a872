"""`fleetgrade bigquery-ddl`: every table's DDL, parsed back, matches its Arrow schema exactly."""

from __future__ import annotations

import re

import pyarrow as pa
import pytest

from pipeline.bigquery import UnmappedTypeError, all_ddl, bq_type
from pipeline.cli import main
from schemas import tables

PREFIX = "gs://bucket/graded"

STATEMENT = re.compile(
    r"CREATE EXTERNAL TABLE `ds\.(?P<table>\w+)` \((?P<cols>.*)\)\n"
    r"WITH PARTITION COLUMNS \(workflow STRING, date DATE\)\n"
    r"OPTIONS \(format = 'PARQUET', uris = \['(?P<uri>[^']+)'\], hive_partition_uri_prefix = '(?P<root>[^']+)', "
    r"require_hive_partition_filter = false\);"
)


def split_top(text: str) -> list[str]:
    """Split on commas outside <…>."""
    parts, depth, cur = [], 0, ""
    for ch in text:
        depth += ch == "<"
        depth -= ch == ">"
        if ch == "," and depth == 0:
            parts.append(cur.strip())
            cur = ""
        else:
            cur += ch
    return [*parts, cur.strip()] if cur.strip() else parts


def parse_type(t: str):
    """A BigQuery type string as a nested tuple: ("ARRAY", inner), ("STRUCT", [(name, type)]), or a name."""
    if t.startswith("ARRAY<"):
        return ("ARRAY", parse_type(t[6:-1]))
    if t.startswith("STRUCT<"):
        return ("STRUCT", parse_columns(t[7:-1]))
    return t


def parse_columns(text: str) -> list[tuple[str, object]]:
    cols = []
    for part in split_top(text):
        name, typ = part.split(" ", 1)
        cols.append((name.strip("`"), parse_type(typ)))
    return cols


def expected(t: pa.DataType):
    """Independent statement of the mapping the brief fixes."""
    simple = {pa.string(): "STRING", pa.int32(): "INT64", pa.int64(): "INT64", pa.float64(): "FLOAT64",
              pa.bool_(): "BOOL", pa.date32(): "DATE"}
    if t in simple:
        return simple[t]
    if pa.types.is_timestamp(t):
        return "TIMESTAMP" if t.tz else "DATETIME"
    if pa.types.is_list(t):
        return ("ARRAY", expected(t.value_type))
    if pa.types.is_struct(t):
        return ("STRUCT", [(f.name, expected(f.type)) for f in t])
    raise AssertionError(f"test has no expectation for {t}")


def check_ddl(ddl: str, schemas: dict[str, pa.Schema]) -> None:
    schemas = {k: v for k, v in schemas.items() if k in tables.public_tables()}  # `_state` is internal
    found = {m["table"]: m for m in STATEMENT.finditer(ddl)}
    assert sorted(found) == sorted(schemas)
    assert ddl.count("CREATE EXTERNAL TABLE") == len(schemas)
    for name, schema in schemas.items():
        m = found[name]
        assert m["uri"] == f"{PREFIX}/{name}/*" and m["root"] == f"{PREFIX}/{name}"
        want = [(f.name, expected(f.type)) for f in schema if f.name not in tables.PARTITION_COLUMNS]
        assert parse_columns(m["cols"]) == want, name


def _schemas() -> dict[str, pa.Schema]:
    return {name: spec.schema for name, spec in tables.SPECS.items()}


def _spec(name: str, schema: pa.Schema) -> tables.TableSpec:
    return tables.TableSpec(name, schema, (), tables.Replace.TABLE, "tests.pipeline.test_bigquery:_spec", "a test's")


def test_ddl_matches_every_arrow_schema(capsys):
    assert main(["bigquery-ddl", PREFIX + "/", "--dataset", "ds"]) == 0
    out = capsys.readouterr().out
    check_ddl(out, _schemas())
    assert "metrics ARRAY<STRUCT<id STRING, value FLOAT64>>" in out
    assert "warnings ARRAY<STRING>" in out


def test_tables_registered_later_are_included(monkeypatch):
    # Shapes the trace and observation tables use: partition columns in the schema, timestamps,
    # nested flags, and a column named with a reserved word.
    flag = pa.struct([("check", pa.string()), ("step", pa.int64()), ("tool", pa.string())])
    extra = pa.schema([
        ("workflow", pa.string()), ("date", pa.string()), ("run_id", pa.string()),
        ("evidence_at", pa.timestamp("us", tz="UTC")), ("local_at", pa.timestamp("us")),
        ("day", pa.date32()), ("case", pa.string()), ("flags", pa.list_(flag)), ("ok", pa.bool_()),
    ])
    monkeypatch.setitem(tables.SPECS, "extra_table", _spec("extra_table", extra))
    ddl = all_ddl(PREFIX, "ds")
    check_ddl(ddl, _schemas())
    assert "`case` STRING" in ddl
    assert "flags ARRAY<STRUCT<check STRING, step INT64, tool STRING>>" in ddl
    assert "(run_id STRING, evidence_at TIMESTAMP" in ddl, "partition columns are not file columns"


@pytest.mark.parametrize("t", [pa.uint64(), pa.map_(pa.string(), pa.int64()), pa.list_(pa.list_(pa.int64())),
                               pa.dictionary(pa.int32(), pa.string()), pa.decimal128(10, 2), pa.null()])
def test_unmapped_types_raise(t):
    with pytest.raises(UnmappedTypeError):
        bq_type(t)


def test_unmapped_type_is_a_clear_cli_error(monkeypatch, capsys):
    monkeypatch.setitem(tables.SPECS, "bad", _spec("bad", pa.schema([("m", pa.map_(pa.string(), pa.int64()))])))
    assert main(["bigquery-ddl", PREFIX, "--dataset", "ds"]) == 1
    assert "no BigQuery type" in capsys.readouterr().err


def test_bad_dataset_is_rejected(capsys):
    assert main(["bigquery-ddl", PREFIX, "--dataset", "ds`; DROP"]) == 2
    assert "invalid dataset" in capsys.readouterr().err
