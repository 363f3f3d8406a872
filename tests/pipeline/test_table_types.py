"""Column types: times are UTC timestamps, dates DATEs, attempts int32, counts and token totals
int64 in every table; the DuckDB views and the BigQuery DDL agree with the schemas; an output an
older fleetgrade wrote (text times and dates, double token totals, an int64 attempt) is rewritten
on the next job to exactly the bytes a fresh job writes, never left with two types in one table."""

from __future__ import annotations

import datetime as dt
import io
import logging
import shutil
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from graders.tables.parquet import current_format, decode_table, encode_table
from graders.tables.paths import partition_file
from pipeline.bigquery import bq_type
from pipeline.cli import main
from pipeline.tables import connect
from schemas.tables import SPECS, public_tables
from tests.conftest import REPO

UTC_US = pa.timestamp("us", tz="UTC")
SAMPLE = REPO / "examples" / "fleet"
TRACE_CONFIG = REPO / "examples" / "trace-grader.config.yaml"

# What the first table format stored, column by column (README.md, "Changelog").
OLD_TYPES: dict[str, dict[str, pa.DataType]] = {
    "runs": {"created_at": pa.string(), **dict.fromkeys(("graders", "passed", "failed", "errors", "unavailable"),
                                                        pa.int32()),
             "total_input_tokens": pa.float64(), "total_output_tokens": pa.float64()},
    "grader_stats": {"start_date": pa.string()},
    "regressions": dict.fromkeys(("current_start", "baseline_start", "baseline_end", "change_date"), pa.string()),
    "observations": {"attempt": pa.int64()},
}
COUNTS = {
    "runs": {"graders", "passed", "failed", "errors", "unavailable", "total_input_tokens", "total_output_tokens",
             "steps", "tool_calls", "artifacts", "bytes_read"},
    "trace_verdicts": {"step_count"},
    "task_reliability": {"n", "c"},
    "grader_stats": {"n", "n_tasks", "n_unavailable", "n_error", "pass_n", "pass_count"},
    "regressions": {"n_current", "n_baseline", "tasks_current", "tasks_baseline", "runs_needed"},
}


def test_every_table_types_times_dates_attempts_and_counts() -> None:
    seen = set()
    for name in public_tables():
        for field in SPECS[name].schema:
            if field.name == "attempt":
                assert field.type == pa.int32(), name
            elif field.name.endswith("_at") or field.name == "evidence_cutoff":
                assert field.type == UTC_US, (name, field.name)
            elif field.name.endswith(("_date", "_start", "_end")):
                assert field.type == pa.date32(), (name, field.name)
            elif field.name in COUNTS.get(name, ()):
                assert field.type == pa.int64(), (name, field.name)
            seen.add((name, field.name))
    assert {(t, c) for t, cs in COUNTS.items() for c in cs} <= seen
    assert {("runs", "created_at"), ("observations", "evidence_at"), ("regressions", "change_date")} <= seen


def _old_file(table: str, data: bytes) -> bytes:
    """A partition file as the first table format wrote it."""
    arrow = pq.read_table(io.BytesIO(data)).replace_schema_metadata(None)
    for name, old in OLD_TYPES.get(table, {}).items():
        i = arrow.schema.get_field_index(name)
        values = arrow.column(i).to_pylist()
        if pa.types.is_string(old):
            values = [None if v is None else (v.isoformat().replace("+00:00", "Z") if isinstance(v, dt.datetime)
                                              else v.isoformat()) for v in values]
        elif pa.types.is_floating(old):
            values = [None if v is None else float(v) for v in values]
        arrow = arrow.set_column(i, pa.field(name, old), pa.array(values, old))
    sink = io.BytesIO()
    pq.write_table(arrow, sink)
    return sink.getvalue()


RUN_ROW = {"workflow": "w", "date": "2026-11-30", "run_id": "1", "attempt": 2, "created_at": "2026-11-30T23:30:00-02:00",
           "graders": 3, "passed": 2, "failed": 1, "errors": 0, "unavailable": 0, "total_input_tokens": 1200.0,
           "total_output_tokens": 1.5, "total_duration_ms": 12.5, "steps": 4, "fleetgrade_version": "0.1.0"}


def test_the_codec_types_plain_values_and_reads_old_files_alike() -> None:
    data = encode_table("runs", [RUN_ROW], "w")
    [row] = decode_table("runs", data)
    assert row["created_at"] == dt.datetime(2026, 12, 1, 1, 30, tzinfo=dt.UTC)
    # Token totals come from traces as JSON numbers: whole ones are counts, a fraction is no count.
    assert (row["total_input_tokens"], row["total_output_tokens"], row["graders"]) == (1200, None, 3)
    assert pq.read_schema(io.BytesIO(data)).field("created_at").type == UTC_US
    old = _old_file("runs", data)
    assert pq.read_schema(io.BytesIO(old)).field("created_at").type == pa.string()
    assert (current_format(data), current_format(old)) == (True, False)
    assert decode_table("runs", old) == [row]
    assert encode_table("runs", decode_table("runs", old), "w") == data


def test_stats_dates_are_dates_and_text_dates_are_accepted() -> None:
    row = {"grader_id": "g", "window_days": 7, "start_date": "2026-11-24", "n": 3.0, "fleetgrade_version": "x"}
    [back] = decode_table("grader_stats", encode_table("grader_stats", [row]))
    assert (back["start_date"], back["n"]) == (dt.date(2026, 11, 24), 3)


def _some(t: pa.DataType) -> Any:
    """A value of a non-null column (observations declares some)."""
    if pa.types.is_timestamp(t):
        return dt.datetime(2026, 11, 30, tzinfo=dt.UTC)
    return {pa.string(): "x", pa.int32(): 1, pa.int64(): 1}[t]


def _duckdb_as_bigquery(t: str) -> str:
    """A DuckDB column type in BigQuery's spelling, for the comparison below."""
    simple = {"VARCHAR": "STRING", "INTEGER": "INT64", "BIGINT": "INT64", "DOUBLE": "FLOAT64", "BOOLEAN": "BOOL",
              "DATE": "DATE", "TIMESTAMP WITH TIME ZONE": "TIMESTAMP"}
    if t.endswith("[]"):
        return f"ARRAY<{_duckdb_as_bigquery(t[:-2])}>"
    if t.startswith("STRUCT("):
        inner = t[len("STRUCT("):-1]
        fields = []
        depth, start = 0, 0
        for i, ch in enumerate(inner + ","):
            depth += ch == "(" or ch == "["
            depth -= ch == ")" or ch == "]"
            if ch == "," and depth == 0:
                name, kind = inner[start:i].strip().split(" ", 1)
                fields.append(f"{name.strip(chr(34))} {_duckdb_as_bigquery(kind)}")
                start = i + 1
        return f"STRUCT<{', '.join(fields)}>"
    return simple[t]


def test_duckdb_views_and_the_bigquery_ddl_agree_with_the_schemas(tmp_path: Path) -> None:
    """One row per table through the codec, read back by `fleetgrade sql`'s views: each column's
    type, in BigQuery's spelling, is the DDL's (partition columns are DATE and STRING in both)."""
    for name in public_tables():
        path = tmp_path / partition_file(name, "w", "2026-11-30")
        path.parent.mkdir(parents=True)
        row: dict[str, Any] = {f.name: None if f.nullable else _some(f.type) for f in SPECS[name].schema}
        path.write_bytes(encode_table(name, [row], "w"))
    con = connect(str(tmp_path))
    for name in public_tables():
        described = {r[0]: r[1] for r in con.execute(f"DESCRIBE {name}").fetchall()}
        assert (described.pop("workflow"), described.pop("date")) == ("VARCHAR", "DATE")
        ddl = {f.name: bq_type(f.type).replace("`", "") for f in SPECS[name].schema
               if f.name not in ("workflow", "date")}
        assert {k: _duckdb_as_bigquery(v) for k, v in described.items()} == ddl, name


def _files(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*.parquet"))}


@pytest.mark.slow
def test_an_output_of_the_old_types_is_rewritten_to_a_fresh_outputs_bytes(tmp_path: Path,
                                                                        caplog: pytest.LogCaptureFixture) -> None:
    fleet, out = tmp_path / "fleet", tmp_path / "out"
    shutil.copytree(SAMPLE, fleet)
    common = ["--input", str(fleet), "--output", str(out)]
    assert main(["run", *common, "--trace-config", str(TRACE_CONFIG)]) == 0
    assert main(["regrade", *common, "--evidence-at", "2026-12-07T00:00:00Z"]) == 0
    fresh = _files(out)
    downgraded = 0
    for rel, data in fresh.items():
        table = rel.split("/", 1)[0]
        if table in OLD_TYPES or table == "_state":
            (out / rel).write_bytes(_old_file(table, data))
            downgraded += 1
    assert downgraded >= 30  # runs, statistics, observations and state partitions of three workflows
    with pytest.raises(duckdb.Error):  # one table, two types: what an upgrade must never leave
        (out / "runs" / "workflow=ci-doctor" / "date=2026-11-28" / "part-00000.parquet").write_bytes(
            fresh["runs/workflow=ci-doctor/date=2026-11-28/part-00000.parquet"])
        connect(str(out)).execute("SELECT created_at FROM runs WHERE created_at > TIMESTAMPTZ '2026-01-01'").fetchall()
    caplog.set_level(logging.INFO, logger="fleetgrade")
    assert main(["run", *common, "--trace-config", str(TRACE_CONFIG)]) == 0  # every run unchanged
    assert f"rewrote {downgraded - 1} partition file(s)" in caplog.text
    assert _files(out) == fresh
    assert connect(str(out)).execute("SELECT typeof(created_at) FROM runs LIMIT 1").fetchall() == [
        ("TIMESTAMP WITH TIME ZONE",)]
