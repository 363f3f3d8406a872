"""``fleetgrade run --runner dask``, end to end.

- On the session's cluster (a scheduler and two worker processes on 127.0.0.1), the demo fleet
  and a small synthetic fleet give byte-identical tables to ``--runner direct`` after a first
  run, an unchanged rerun, a partial rerun and ``--full`` (``tools/output_identity.sh``). The
  demo's graders run inline JavaScript (V8) and archived evaluators (bubblewrap) in the workers.
  (The 1,000-run synthetic fleet, by hand: docs/dask.md.)
- Without ``--dask_client_address``, fleetgrade starts a local cluster on 127.0.0.1 and stops
  it; its console lines (progress, dead letters, the summary's counters from the runner's
  metrics) and dead-letter rows are the direct runner's; and on workers that cannot sandbox,
  the evaluator fails closed with a per-grader error.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
import uuid
from pathlib import Path

import psutil
import pyarrow.parquet as pq
import pytest

from tests.conftest import REPO
from tests.helpers.dask_cluster import worker_env

EXE = str(Path(sys.executable).parent / "fleetgrade")
IDENTITY = REPO / "tools" / "output_identity.sh"
DEMO = REPO / "examples" / "fleet"
DEMO_FLAGS = ("--graders-dir", str(REPO / "examples" / "graders"),
              "--trace-config", str(REPO / "examples" / "trace-grader.config.yaml"))
TIMEOUT = 900  # four runs of a fleet on a loaded 2-core machine


def identity(fleet: Path, work: Path, *flags: str) -> str:
    proc = subprocess.run(["sh", str(IDENTITY), EXE, str(fleet), str(work), *flags], cwd=REPO, env=worker_env(),
                          capture_output=True, text=True, timeout=TIMEOUT, check=False)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.count("## ") == 4 and ".parquet" in proc.stdout, proc.stdout[:2000]
    return proc.stdout


@pytest.fixture(scope="module")
def fleet(tmp_path_factory) -> Path:
    """The demo fleet and a small synthetic fleet in one folder (their run ids differ), so that
    one pass of four runs per runner covers both: the suite stays fast."""
    folder = tmp_path_factory.mktemp("fleets")
    subprocess.run([EXE, "synth", "--runs", "8", "--seed", "43", "--out", str(folder / "synth")], check=True,
                   capture_output=True, timeout=TIMEOUT)
    shutil.copytree(DEMO, folder / "fleet")
    for workflow in (folder / "synth").iterdir():
        if workflow.is_dir():
            shutil.copytree(workflow, folder / "fleet" / workflow.name, dirs_exist_ok=True)
    return folder / "fleet"


@pytest.mark.slow
def test_dask_runs_are_byte_identical_to_direct(fleet, dask_scheduler, tmp_path):
    work = tmp_path / "work"  # one folder for both: paths are in the rows
    direct = identity(fleet, work, *DEMO_FLAGS)
    on_dask = identity(fleet, work, *DEMO_FLAGS, "--runner", "dask", f"--dask_client_address={dask_scheduler.address}")
    assert on_dask == direct


def copy_runs(dest: Path) -> Path:
    """Two demo runs: one with an archived evaluator, one graded by inline JavaScript."""
    for run in ("daily-file-diet/run-7100213", "issue-triage/run-7100011"):
        shutil.copytree(DEMO / run, dest / run)
    return dest


def summary(stderr: str) -> str:
    line = next(ln for ln in stderr.splitlines() if "run(s) discovered" in ln)
    return line.split("fleetgrade: ", 1)[1].split(" in ", 1)[0]


def console(stderr: str) -> list[str]:
    """fleetgrade's lines without their times, and without those that depend on the job's speed
    or on the partitions written (the summary's counts kept)."""
    lines = [ln.split(" ", 2)[2] for ln in stderr.splitlines() if " fleetgrade: " in ln]
    return [ln.split(";")[0] if "run(s) discovered:" in ln else ln for ln in lines
            if not ln.startswith(("INFO fleetgrade: writing the tables (", "INFO fleetgrade: progress:",
                                  "INFO fleetgrade: committed"))]


def table_bytes(out: Path, table: str) -> dict[str, bytes]:
    return {str(f.relative_to(out)): f.read_bytes() for f in sorted((out / table).rglob("*.parquet"))}


def grades(out: Path) -> dict[tuple[str, str], tuple[str, str]]:
    rows = pq.read_table(out / "grader_results").to_pylist()
    return {(r["run_id"], r["grader_id"]): (r["status"], r["error"] or "") for r in rows}


@pytest.mark.slow
def test_local_cluster_run_fails_closed_without_a_sandbox(tmp_path):
    fleet = copy_runs(tmp_path / "fleet")
    broken = fleet / "issue-triage" / "run-7100999"  # a dead letter
    shutil.copytree(fleet / "issue-triage" / "run-7100011", broken)
    (broken / "aw_info.json").write_text('{"run_id": 7100999, broken')
    base = [EXE, "run", "--input", str(fleet), *DEMO_FLAGS]
    direct = subprocess.run([*base, "--output", str(tmp_path / "direct")], capture_output=True, text=True,
                            timeout=TIMEOUT, check=False)
    assert direct.returncode == 0, direct.stderr[-2000:]
    # Workers without bubblewrap (nor prlimit) on their PATH: the fleetgrade run's own cluster.
    marker = uuid.uuid4().hex
    env = dict(worker_env(), PATH=str(Path(sys.executable).parent), FLEETGRADE_TEST_MARKER=marker)
    proc = subprocess.run([*base, "--output", str(tmp_path / "dask"), "--runner", "dask"], env=env,
                          capture_output=True, text=True, timeout=TIMEOUT, check=False)
    assert proc.returncode == 0, proc.stderr[-2000:]
    # The same lines as the direct runner's: the discovery, the dead letter naming its file (the
    # workers' fleetgrade log on this terminal), the counts (from the runner's metrics; the
    # partitions written differ: the evaluator's grades are errors here).
    lines = console(proc.stderr)
    assert lines == console(direct.stderr), proc.stderr[-3000:]
    assert any(f"dead letter: {broken / 'aw_info.json'}: not valid JSON" in ln for ln in lines), lines
    assert any("3 run(s) discovered: 2 graded, 1 dead-lettered" in ln for ln in lines), lines
    assert " 0 partition file(s) written" not in summary(proc.stderr)
    assert table_bytes(tmp_path / "dask", "dead_letter") == table_bytes(tmp_path / "direct", "dead_letter") != {}
    on_dask, expected = grades(tmp_path / "dask"), grades(tmp_path / "direct")
    assert on_dask.keys() == expected.keys()
    sandboxed = {k: v for k, v in on_dask.items() if k[1] == "operational-value"}
    assert sandboxed and all(status == "error" and "operational-value sandbox unavailable: prlimit" in error
                             for status, error in sandboxed.values()), sandboxed
    assert {k: v for k, v in on_dask.items() if k not in sandboxed} == {
        k: v for k, v in expected.items() if k not in sandboxed}
    assert any(k[1] == "label-rate" for k in on_dask)  # the inline JavaScript grader ran in a worker
    assert _marked(marker) == []  # the local cluster is gone with the run


def _marked(marker: str, wait: float = 30) -> list[int]:
    """The processes started with ``marker`` in their environment, once they had ``wait`` seconds
    to end (a killed worker, multiprocessing's resource tracker, on a loaded machine)."""
    deadline = time.monotonic() + wait
    while (found := _with_marker(marker)) and time.monotonic() < deadline:
        time.sleep(0.5)
    return found


def _with_marker(marker: str) -> list[int]:
    found = []
    for proc in psutil.process_iter():
        try:
            if proc.environ().get("FLEETGRADE_TEST_MARKER") == marker:
                found.append(proc.pid)
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            continue
    return found


def test_dask_runner_without_the_extra_is_a_usage_error(tmp_path):
    fleet = copy_runs(tmp_path / "fleet")
    # A dask module that fails to import, first on the path: as where the extra is not installed.
    (tmp_path / "nodask" / "dask").mkdir(parents=True)
    (tmp_path / "nodask" / "dask" / "__init__.py").write_text("raise ImportError('No module named dask')\n")
    env = dict(os.environ, PYTHONPATH=str(tmp_path / "nodask"))
    proc = subprocess.run([EXE, "run", "--input", str(fleet), "--output", str(tmp_path / "out"), "--runner", "dask"],
                          env=env, capture_output=True, text=True, timeout=TIMEOUT, check=False)
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert "fleetgrade run: the dask runner needs the dask extra (pip install 'fleetgrade[dask]')" in proc.stderr
    assert "Traceback" not in proc.stderr
