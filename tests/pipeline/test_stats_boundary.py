"""The statistics inside the per-run boundary (issue 40), through the real ``fleetgrade run``:
a run dated 0001-01-01 (it killed the job with ``OverflowError: date value out of range``) and
a run whose grader values sit near the float maximum (``intermediate overflow in fsum``) each
end as a warned run left out of the statistics; the job exits 0 and writes every partition."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from pipeline.tables import connect
from tests.conftest import REPO
from tools.synth import main as synth_main

FLEETGRADE = str(Path(sys.executable).parent / "fleetgrade")
PREFIX = "statistics: "


def _fleet(root: Path) -> tuple[Path, str, str]:
    """A small synthetic fleet with one run dated 0001-01-01 and one run (both its attempts)
    whose execution-duration is 1.7e308 ms; (fleet, the first run's folder, the second's)."""
    fleet = root / "fleet"
    assert synth_main(["--runs", "30", "--days", "4", "--seed", "40", "--medium-fraction", "0",
                       "--large-fraction", "0", "--malformed-rate", "0", "--rerun-rate", "0.2",
                       "--out", str(fleet)]) == 0
    runs = sorted(p.parent for p in fleet.glob("*/run-*/aw_info.json"))
    retried = next(r for r in runs if r.with_name(r.name + "-attempt-2").is_dir())
    dated = next(r for r in runs if r != retried and not r.name.endswith("attempt-2")
                 and r.with_name(r.name + "-attempt-2") not in runs)
    info = json.loads((dated / "aw_info.json").read_text())
    (dated / "aw_info.json").write_text(json.dumps({**info, "created_at": "0001-01-01T00:00:00Z"}))
    for run in (retried, retried.with_name(retried.name + "-attempt-2")):
        for usage in run.rglob("token-usage.jsonl"):
            first = json.loads(usage.read_text().splitlines()[0])
            usage.write_text(json.dumps({**first, "duration_ms": 1.7e308}) + "\n")
    return fleet, str(dated.relative_to(fleet)), str(retried.relative_to(fleet))


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "FLEETGRADE_SHARED": os.environ.get("FLEETGRADE_SHARED", "/work/shared")}
    return subprocess.run([FLEETGRADE, *args], capture_output=True, text=True, timeout=600, cwd=REPO, env=env)


@pytest.mark.slow
def test_values_at_the_edge_of_their_type_never_stop_the_job(tmp_path: Path) -> None:
    fleet, dated, huge = _fleet(tmp_path)
    out = tmp_path / "out"
    done = _run("run", "--input", str(fleet), "--output", str(out), "--log-level", "WARNING")
    assert done.returncode == 0, done.stderr[-3000:]
    con = connect(str(out))
    warned = {(r[0][len(str(fleet)) + 1:], r[1]): [w for w in r[2] if w.startswith(PREFIX)]
              for r in con.execute("SELECT root, CAST(date AS VARCHAR), warnings FROM runs").fetchall()}
    tables = {r[0] for r in con.execute("SHOW TABLES").fetchall()}
    dead = {r[0] for r in con.execute("SELECT input FROM dead_letter").fetchall()} if "dead_letter" in tables else set()
    # Inputs = graded + dead-lettered; the 0001-01-01 run is graded and warned, unless the run's
    # identity check refuses such a date, in which case its dead letter names it.
    assert len(warned) + len(dead) == len(json.loads((fleet / "synth-manifest.json").read_text())["fleet"]) == 30
    if (dated, "0001-01-01") in warned:
        assert warned[(dated, "0001-01-01")] == [
            "statistics: date '0001-01-01' is outside 0100-01-01 … 9999-11-30, the dates the statistics' windows "
            "span; the run is left out of grader_stats and regressions"]
    else:
        assert any(str(fleet / dated) in d for d in dead), dead
    for root in (huge, huge + "-attempt-2"):
        (messages,) = [w for (r, _), w in warned.items() if r == root]
        assert messages == ["statistics: execution-duration: value 1.7e+308 is beyond ±1e+100, the range the "
                            "statistics compute in; left out of grader_stats and regressions"]
    assert sum(bool(w) for w in warned.values()) == (3 if (dated, "0001-01-01") in warned else 2)
    # Every partition is written: each (workflow, date) with grades has its grader_stats, but
    # the one dated outside the windows' range; the huge values are counted, never averaged.
    graded = set(con.execute("SELECT DISTINCT workflow, CAST(date AS VARCHAR) FROM grader_results").fetchall())
    stats = set(con.execute("SELECT DISTINCT workflow, CAST(date AS VARCHAR) FROM grader_stats").fetchall())
    assert stats == {(w, d) for w, d in graded if d != "0001-01-01"}
    assert con.execute("SELECT count(*) FROM regressions").fetchone()[0] > 0
    (mean, unavailable), = con.execute(
        "SELECT max(mean), sum(n_unavailable) FROM grader_stats WHERE grader_id = 'execution-duration' "
        "AND window_days = 28").fetchall()
    assert mean < 1e100 and unavailable >= 2
    # An unchanged rerun and a --full rebuild read the stored 0001-01-01 partition back: both
    # succeed and change nothing.
    files = {p: p.read_bytes() for p in out.rglob("*.parquet")}
    for flags in ((), ("--full",)):
        again = _run("run", "--input", str(fleet), "--output", str(out), "--log-level", "WARNING", *flags)
        assert again.returncode == 0, again.stderr[-3000:]
        assert {p: p.read_bytes() for p in out.rglob("*.parquet")} == files
