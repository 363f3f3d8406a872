"""The job's progress line: formatting and ETA as pure functions, the counts' files, and a real run."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from tests.conftest import REPO
from transforms.progress import (
    DISCOVERED,
    DONE,
    ENV,
    FINISHED,
    INTERVAL_ENV,
    KEPT,
    Snapshot,
    Tally,
    discovery_line,
    eta_seconds,
    format_duration,
    progress_line,
    read_line,
    read_snapshot,
)


@pytest.mark.parametrize("seconds,text", [(0, "0s"), (44.6, "45s"), (60, "1m00s"), (185, "3m05s"),
                                          (3599, "59m59s"), (7620, "2h07m"), (-3, "0s")])
def test_format_duration(seconds: float, text: str) -> None:
    assert format_duration(seconds) == text


def test_eta() -> None:
    assert eta_seconds(100, 4.0) == 25.0
    assert eta_seconds(0, 0.0) == 0.0
    assert eta_seconds(5, 0.0) is None


def test_lines_count_the_whole_job() -> None:
    snap = Snapshot(discovered=5000, kept=800, done=400, finished=True)
    # done = kept + graded; the rate and ETA go by the runs graded in the time spent grading.
    assert progress_line(snap, 10.0) == "progress: 1200/5000 runs done (24.0%), 40.0 runs/s, ETA 1m35s"
    assert progress_line(Snapshot(discovered=300, done=20), 4.0) == \
        "progress: 20 runs done, 300+ discovered so far, 5.0 runs/s"
    assert progress_line(Snapshot(discovered=3, finished=True), 0.0) == \
        "progress: 0/3 runs done (0.0%), 0.0 runs/s, ETA ?"
    assert discovery_line(Snapshot(discovered=5000, kept=800, finished=True, run_folders=4999, session_folders=1)) == (
        "discovered 4999 run folder(s) and 1 folder(s) of session or trace files: 4200 to read "
        "(800 unchanged or outside --since/--until)")
    assert discovery_line(Snapshot(discovered=37, finished=True, run_folders=37)) == "discovered 37 run folder(s): 37 to read"
    # Once all are read: the counts of the job's summary line.
    assert read_line(Snapshot(discovered=300, done=300, finished=True, dead=5, stray=1)) == \
        "all 300 run(s) read: 295 graded, 5 dead-lettered; 1 stray file(s) skipped"
    assert read_line(Snapshot(discovered=9, kept=4, done=5, finished=True, dead=1, late=2), "to regrade") == \
        "all 5 run(s) read: 2 to regrade, 1 dead-lettered, 2 outside --since/--until"


def test_tallies_of_every_worker_add_up(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(ENV, str(tmp_path))
    discover, a, b = Tally("discover"), Tally("prepare"), Tally("prepare")
    for _ in range(7):
        discover.add(DISCOVERED)
    discover.add(KEPT, 2)
    discover.add(FINISHED)
    a.add(DONE, 3)
    b.add(DONE)
    for t in (discover, a, b):
        t.flush()
    assert read_snapshot(str(tmp_path)) == Snapshot(discovered=7, kept=2, done=4, finished=True)
    monkeypatch.delenv(ENV)
    off = Tally("prepare")  # on Dataflow: no folder, nothing written
    off.add(DONE)
    off.flush()
    assert off.path is None and len(os.listdir(tmp_path)) == 3


def test_a_run_says_how_many_runs_it_discovered(tmp_path: Path) -> None:
    env = dict(os.environ, **{INTERVAL_ENV: "0.2"})
    done = subprocess.run(
        [str(Path(sys.executable).parent / "fleetgrade"), "run", "--input", str(REPO / "examples" / "fleet"),
         "--output", str(tmp_path / "out")], capture_output=True, text=True, env=env, timeout=300, check=False)
    assert done.returncode == 0, done.stderr
    lines = [line.split("fleetgrade: ", 1)[1] for line in done.stderr.splitlines() if "INFO fleetgrade: " in line]
    assert "discovered 73 run folder(s): 73 to read" in lines
    summary = next(i for i, line in enumerate(lines) if line.startswith("73 run(s) discovered: "))
    assert lines.index("discovered 73 run folder(s): 73 to read") < summary
    assert not any("by this worker" in line for line in lines)
    # Once discovery is done, every progress line carries the job's total.
    after = lines[lines.index("discovered 73 run folder(s): 73 to read"):]
    assert all("/73 runs done" in line for line in after if line.startswith("progress: ")), lines


def test_a_stray_file_is_not_counted_as_a_graded_run(tmp_path: Path) -> None:
    # A file at the fleet's root is a candidate session group to discovery and a stray once read:
    # the last progress line must count the runs the summary counts.
    shutil.copytree(REPO / "examples" / "fleet", tmp_path / "fleet")
    (tmp_path / "fleet" / "synth-manifest.json").write_text('{"runs": 73}\n')
    env = dict(os.environ, **{INTERVAL_ENV: "0.2"})
    done = subprocess.run(
        [str(Path(sys.executable).parent / "fleetgrade"), "run", "--input", str(tmp_path / "fleet"),
         "--output", str(tmp_path / "out")], capture_output=True, text=True, env=env, timeout=300, check=False)
    assert done.returncode == 0, done.stderr
    lines = [line.split("fleetgrade: ", 1)[1] for line in done.stderr.splitlines() if "INFO fleetgrade: " in line]
    # Discovery counts folders (a folder of session files holds how many runs is known once read);
    # the last progress line and the summary count the same runs, graded, dead-lettered and strays.
    assert "discovered 73 run folder(s) and 1 folder(s) of session or trace files: 74 to read" in lines, lines
    assert "all 73 run(s) read: 69 graded, 4 dead-lettered; 2 stray file(s) skipped; writing the tables" in lines, lines
    assert any(line.startswith("73 run(s) discovered: 69 graded, 4 dead-lettered, 0 unchanged, 0 outside "
                               "--since/--until; 2 stray file(s) skipped;") for line in lines), lines
    # And the tables hold what the summary says: inputs = graded + dead-lettered, row for row.
    def rows(table: str) -> int:
        return sum(pq.read_metadata(part).num_rows for part in (tmp_path / "out" / table).rglob("*.parquet"))

    assert (rows("runs"), rows("dead_letter")) == (69, 4)
