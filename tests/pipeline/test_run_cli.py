"""`fleetgrade run` end to end on the bundled sample fleet: tables, counts, atomicity, determinism."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from graders.families.observed import observed_plan
from graders.grading.plan import default_plan
from pipeline.cli import main
from pipeline.tables import connect, dataset
from tests.conftest import REPO

FLEET = REPO / "examples" / "fleet"
TRACE_CONFIG = REPO / "examples" / "trace-grader.config.yaml"


def file_digests(root: Path) -> dict[str, str]:
    return {
        str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*")) if p.is_file()
    }


@pytest.fixture(scope="module")
def demo_output(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("demo") / "out"
    assert main(["run", "--input", str(FLEET), "--output", str(out), "--log-level", "WARNING",
                 "--trace-config", str(TRACE_CONFIG)]) == 0
    return out


def graded_folders() -> set[str]:
    folders = {"/".join(f.split("/")[:2]) for f in run_folders()}
    return folders - {f"{w}/run-{n}" for w, n in (("ci-doctor", 900001), ("daily-file-diet", 900002),
                                                    ("issue-triage", 900003), ("issue-triage", 900004))}


def test_trace_rule_tables(demo_output):
    con = connect(str(demo_output))
    runs = con.execute("SELECT count(*) FROM runs").fetchone()[0]
    assert con.execute("SELECT count(*) FROM trace_verdicts").fetchone()[0] == runs
    assert con.execute("SELECT sum(n) FROM task_reliability").fetchone()[0] == runs
    # A task's row is in the partition of its latest run.
    bad = con.execute(
        "SELECT count(*) FROM task_reliability t WHERE t.date <> (SELECT max(v.date) FROM trace_verdicts v "
        "WHERE v.workflow = t.workflow AND v.task = t.task)").fetchone()[0]
    assert bad == 0
    verdicts = {v for (v,) in con.execute("SELECT DISTINCT verdict FROM trace_verdicts").fetchall()}
    assert verdicts == {"clean-pass", "pass-with-warnings", "corrupt-success", "fail"}


def run_folders() -> set[str]:
    return {str(p.parent.relative_to(FLEET)) for p in FLEET.rglob("*") if p.is_file() and p.parent != FLEET}


def test_every_discovered_run_is_graded_or_dead_lettered(demo_output):
    con = connect(str(demo_output))
    graded = con.execute("SELECT count(*) FROM runs").fetchone()[0]
    dead = con.execute("SELECT count(*) FROM dead_letter").fetchone()[0]
    discovered = {f.split("/")[0] + "/" + f.split("/")[1] for f in run_folders()}
    assert graded + dead == len(discovered)
    assert dead == 4
    reasons = dict(con.execute("SELECT regexp_extract(input, 'run-\\d+$'), error_class FROM dead_letter").fetchall())
    assert reasons == {"run-900001": "MetadataError", "run-900002": "MetadataError",
                       "run-900003": "MetadataError", "run-900004": "NoArtifactsError"}


def test_partitions_cover_every_workflow_and_date(demo_output):
    parts = {(p.parent.parent.name, p.parent.name) for p in (demo_output / "grader_results").rglob("*.parquet")}
    assert {w for w, _ in parts} == {"workflow=ci-doctor", "workflow=daily-file-diet", "workflow=issue-triage"}
    # Three days of every workflow, and 11 days before them of issue-triage and ci-doctor.
    days = {f"date=2026-11-{d}" for d in range(17, 31)}
    assert {d for _, d in parts} == days
    assert len(parts) == 3 * 3 + 2 * 11
    assert not list(demo_output.rglob("_staging*")), "no staging or temp files after success"
    assert all(p.name == "part-00000.parquet" for p in demo_output.rglob("*") if p.is_file())


def test_tables_read_back_with_pyarrow_and_duckdb(demo_output):
    table = dataset(str(demo_output), "grader_results").to_table()
    assert {"workflow", "date", "grader_id", "value", "status", "implementation_digest", "config_digest",
            "input_digest", "fleetgrade_version"} <= set(table.column_names)
    runs = connect(str(demo_output)).execute("SELECT count(*), count(DISTINCT input_digest) FROM runs").fetchone()
    assert runs[0] == runs[1] == len(graded_folders())
    per_run = connect(str(demo_output)).execute(
        "SELECT workflow, count(*) FROM grader_results GROUP BY workflow, run_id, attempt").fetchall()
    # Every grader on every graded run, plus daily-file-diet's archived operational-value evaluator,
    # plus the observed graders graded beside the plan (docs/observed-graders.md).
    n = len(default_plan().enabled) + len(observed_plan().enabled)
    assert {(w, c) for w, c in per_run} == {("ci-doctor", n), ("issue-triage", n), ("daily-file-diet", n + 1)}


def test_archived_operational_value_evaluators_run_sandboxed(demo_output):
    rows = connect(str(demo_output)).execute(
        "SELECT status, value, len(metrics), error FROM grader_results WHERE grader_id = 'operational-value'"
    ).fetchall()
    statuses = {r[0] for r in rows}
    assert statuses == {"pass", "unavailable", "error"}
    assert all(r[2] == 2 for r in rows if r[0] in ("pass", "unavailable"))
    assert all("digest mismatch" in r[3] for r in rows if r[0] == "error")
    meta = pq.read_metadata(next((demo_output / "runs").rglob("*.parquet")))
    assert meta.num_rows >= 1


def test_rerun_is_byte_identical_and_replaces(demo_output, tmp_path):
    before = file_digests(demo_output)
    flags = ["--log-level", "WARNING", "--trace-config", str(TRACE_CONFIG)]
    assert main(["run", "--input", str(FLEET), "--output", str(demo_output), *flags]) == 0
    assert file_digests(demo_output) == before
    other = tmp_path / "again"
    assert main(["run", "--input", str(FLEET), "--output", str(other), *flags]) == 0
    assert file_digests(other) == before


def test_a_run_graders_fail_on_is_dead_lettered_once_and_has_no_runs_row(tmp_path, monkeypatch):
    """Every family fails on one run: one dead letter (not one per family), no runs row, and
    inputs = graded + dead letters still holds."""
    import graders.one_run as grade

    real = grade.result_rows
    victim = sorted(graded_folders())[0]

    def failing(meta, *args, **kwargs):
        if meta.root.endswith("/" + victim):
            raise RuntimeError("grader exploded")
        return real(meta, *args, **kwargs)

    monkeypatch.setattr(grade, "result_rows", failing)
    out = tmp_path / "out"
    assert main(["run", "--input", str(FLEET), "--output", str(out), "--log-level", "ERROR"]) == 0
    con = connect(str(out))
    rows = con.execute("SELECT input, stage, error_class, message FROM dead_letter WHERE stage = 'grade'").fetchall()
    assert len(rows) == 1
    assert rows[0][0].endswith(victim) and rows[0][1:] == ("grade", "RuntimeError", "grader exploded")
    roots = {"/".join(r.split("/")[-2:]) for (r,) in con.execute("SELECT root FROM runs").fetchall()}
    assert roots == graded_folders() - {victim}
    dead = con.execute("SELECT count(*) FROM dead_letter").fetchone()[0]
    assert len(roots) + dead == len({"/".join(f.split("/")[:2]) for f in run_folders()})

