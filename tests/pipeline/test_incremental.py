"""Incremental, idempotent backfill and crash safety of `fleetgrade run`.

- An unchanged rerun grades nothing and changes no file (bytes and modification times).
- A new run, or a changed graders configuration, regrades only what it must, and the result
  equals a fresh full run.
- A job killed at any point leaves only complete partitions; the next run heals the output to
  exactly what a clean run gives, with no staging files left.
"""

from __future__ import annotations

import hashlib
import logging
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from pipeline.cli import main
from tests.conftest import REPO

SAMPLE = REPO / "examples" / "fleet"
TRACE_CONFIG = REPO / "examples" / "trace-grader.config.yaml"
GRADERS_DIR = REPO / "examples" / "graders"


def snapshot(root: Path) -> dict[str, tuple[str, int]]:
    return {str(p.relative_to(root)): (hashlib.sha256(p.read_bytes()).hexdigest(), p.stat().st_mtime_ns)
            for p in sorted(root.rglob("*")) if p.is_file()}


def contents(root: Path) -> dict[str, str]:
    return {k: v[0] for k, v in snapshot(root).items()}


def run(fleet: Path, out: Path, caplog: pytest.LogCaptureFixture, *flags: str) -> dict[str, int]:
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="fleetgrade"):
        assert main(["run", "--input", str(fleet), "--output", str(out), "--trace-config", str(TRACE_CONFIG),
                     *flags]) == 0
    line = next(r.getMessage() for r in caplog.records if "run(s) discovered" in r.getMessage())
    m = re.search(r"(\d+) graded, (\d+) dead-lettered, (\d+) unchanged, (\d+) outside", line)
    assert m, line
    return dict(zip(("graded", "dead-lettered", "unchanged", "outside"), map(int, m.groups()), strict=True))


@pytest.fixture
def fleet(tmp_path) -> Path:
    dst = tmp_path / "fleet"
    shutil.copytree(SAMPLE, dst)  # copy2 keeps modification times
    return dst


def test_unchanged_rerun_grades_nothing_and_touches_no_file(fleet, tmp_path, caplog):
    out = tmp_path / "out"
    first = run(fleet, out, caplog)
    assert first["graded"] > 0 and first["unchanged"] == 0
    before = snapshot(out)
    second = run(fleet, out, caplog)
    assert second == {"graded": 0, "dead-lettered": 0, "unchanged": first["graded"] + first["dead-lettered"],
                      "outside": 0}
    assert snapshot(out) == before


def test_new_run_and_config_change_regrade_only_what_they_must(fleet, tmp_path, caplog):
    out = tmp_path / "out"
    run(fleet, out, caplog)
    src = sorted((fleet / "ci-doctor").glob("run-*"))[0]
    new = fleet / "ci-doctor" / "run-8800001"
    shutil.copytree(src, new)
    info = (new / "aw_info.json").read_text().replace(src.name.removeprefix("run-").split("-")[0], "8800001")
    (new / "aw_info.json").write_text(info)
    counts = run(fleet, out, caplog)
    assert counts["graded"] == 1 and counts["dead-lettered"] == 0

    triage = len(list((fleet / "issue-triage").glob("run-*")))
    counts = run(fleet, out, caplog, "--graders-dir", str(GRADERS_DIR))
    # Only issue-triage's runs (its dead letters included) are redone.
    assert counts["graded"] + counts["dead-lettered"] == triage

    fresh = tmp_path / "fresh"
    run(fleet, fresh, caplog, "--graders-dir", str(GRADERS_DIR))
    assert contents(out) == contents(fresh)


def test_a_run_folder_that_is_gone_keeps_its_rows_and_state(fleet, tmp_path, caplog):
    """History is kept: a run folder deleted from the input is neither regraded nor dropped."""
    out = tmp_path / "out"
    first = run(fleet, out, caplog)
    before = contents(out)
    gone = sorted((fleet / "ci-doctor").glob("run-*"))[0]
    shutil.rmtree(gone)
    second = run(fleet, out, caplog)
    assert second == {"graded": 0, "dead-lettered": 0, "unchanged": first["graded"] + first["dead-lettered"] - 1,
                      "outside": 0}
    assert contents(out) == before
    roots = [r["root"] for p in (out / "_state").rglob("*.parquet") for r in pq.read_table(p).to_pylist()]
    assert sum(r.endswith("/" + gone.name) for r in roots) == 1


def test_full_and_date_window(fleet, tmp_path, caplog):
    out = tmp_path / "out"
    first = run(fleet, out, caplog, "--since", "2026-11-29", "--until", "2026-11-29")
    assert first["outside"] > 0
    dates = {p.name for p in (out / "runs").glob("*/*")}
    assert dates == {"date=2026-11-29"}
    rest = run(fleet, out, caplog)
    assert rest["graded"] > 0 and rest["unchanged"] > 0
    full = run(fleet, out, caplog, "--full")
    assert full["unchanged"] == 0
    fresh = tmp_path / "fresh"
    run(fleet, fresh, caplog)
    assert contents(out) == contents(fresh)


def state_files(files: dict[str, str]) -> dict[str, str]:
    return {k: v for k, v in files.items() if k.startswith("_state/")}


def test_state_is_partitioned_and_the_single_file_of_earlier_builds_is_replaced(fleet, tmp_path, caplog):
    import pyarrow as pa

    from schemas.state_table import STATE_SCHEMA

    out = tmp_path / "out"
    first = run(fleet, out, caplog)
    before = contents(out)
    parts = sorted((out / "_state").glob("workflow=*/date=*/part-00000.parquet"))
    # A run's state is in its run's partition; a dead letter's in its (often undated) one.
    assert {p.parent.relative_to(out / "_state") for p in parts} == {
        p.relative_to(out / t) for t in ("runs", "dead_letter") for p in (out / t).glob("*/*")}
    # An output of an earlier build: the whole state in one file.
    legacy = pa.concat_tables([pq.read_table(p, schema=STATE_SCHEMA) for p in parts])
    assert legacy.num_rows == first["graded"] + first["dead-lettered"]
    shutil.rmtree(out / "_state")
    (out / "_state").mkdir()
    pq.write_table(legacy, out / "_state" / "part-00000.parquet")
    again = run(fleet, out, caplog)
    assert again["graded"] == 0 and again["unchanged"] == first["graded"] + first["dead-lettered"]
    assert contents(out) == before, "the partitions are written back and the single file is gone"


def test_a_run_that_moves_partition_leaves_no_trace_in_the_old_one(fleet, tmp_path, caplog):
    out = tmp_path / "out"
    run(fleet, out, caplog)
    moved = fleet / "ci-doctor" / "run-7100403"  # the first of the three days
    info = moved / "aw_info.json"
    text = info.read_text()
    assert '"created_at": "2026-11-28T' in text
    info.write_text(text.replace('"created_at": "2026-11-28T', '"created_at": "2026-11-15T'))
    counts = run(fleet, out, caplog)
    assert counts["graded"] == 1
    states = [r for p in (out / "_state").rglob("*.parquet") for r in pq.read_table(p).to_pylist()]
    assert [r["date"] for r in states if r["root"].endswith(moved.name)] == ["2026-11-15"]
    fresh = tmp_path / "fresh"
    run(fleet, fresh, caplog)
    assert contents(out) == contents(fresh)


def _cli(fleet: Path, out: Path, env: dict[str, str] | None = None, *flags: str) -> subprocess.Popen[str]:
    cmd = [sys.executable, "-m", "pipeline.cli", "run", "--input", str(fleet), "--output", str(out),
           "--trace-config", str(TRACE_CONFIG), "--log-level", "WARNING", *flags]
    return subprocess.Popen(cmd, cwd=REPO, env=dict(os.environ, **(env or {})), text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def assert_readable(out: Path) -> None:
    for p in out.rglob("*"):
        if p.is_file() and "_staging" not in p.parts and p.name != "_lock.json":  # a killed job's lock stays
            assert p.name == "part-00000.parquet", p
            pq.read_table(p)  # complete, valid Parquet


@pytest.mark.parametrize("kill_after", [0, 3, 6])
def test_killed_during_commit_heals_on_next_run(fleet, tmp_path, caplog, kill_after):
    out = tmp_path / "out"
    run(fleet, out, caplog)
    before = contents(out)
    # The killed run has real work: a new graders configuration for one workflow.
    proc = _cli(fleet, out, {"FLEETGRADE_FAULT_KILL_AFTER_COMMITS": str(kill_after)}, "--graders-dir",
                str(GRADERS_DIR))
    proc.communicate(timeout=300)
    assert proc.returncode == -signal.SIGKILL
    assert_readable(out)
    changed = {k for k, v in contents(out).items()
               if before.get(k) != v and "_staging" not in k and k != "_lock.json"}
    assert len(changed) == kill_after, "partitions commit one at a time, each complete"
    assert state_files(contents(out)) == state_files(before)
    run(fleet, out, caplog, "--graders-dir", str(GRADERS_DIR))  # takes the dead job's lock over
    assert not (out / "_staging").exists()
    assert not (out / "_lock.json").exists()
    fresh = tmp_path / "fresh"
    run(fleet, fresh, caplog, "--graders-dir", str(GRADERS_DIR))
    assert contents(out) == contents(fresh)


def test_killed_while_grading_leaves_previous_output(fleet, tmp_path, caplog):
    out = tmp_path / "out"
    run(fleet, out, caplog)
    before = contents(out)
    for run_dir in list((fleet / "ci-doctor").glob("run-*"))[:3]:
        (run_dir / "evals.jsonl").write_text('{"id": "q", "answer": "no"}\n')
    proc = _cli(fleet, out)
    deadline = time.monotonic() + 120
    # Staged rows, not only the owner record the job writes before its pipeline starts.
    while proc.poll() is None and not list(out.glob("_staging/*/_shards")) and time.monotonic() < deadline:
        time.sleep(0.02)
    proc.send_signal(signal.SIGKILL)
    proc.communicate(timeout=60)
    # Either nothing was committed yet (previous output intact) or the commit had finished.
    now = {k: v for k, v in contents(out).items() if "_staging" not in k and k != "_lock.json"}
    assert_readable(out)
    assert set(now) == set(before)
    run(fleet, out, caplog)
    fresh = tmp_path / "fresh"
    run(fleet, fresh, caplog)
    assert contents(out) == contents(fresh)
    assert not (out / "_staging").exists()
    assert not (out / "_lock.json").exists()
