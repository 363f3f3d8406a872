"""``fleetgrade run --regression-window/--regression-baseline``: the windows of ``regressions``,
kept whole across incremental runs, and ``fleetgrade check`` defaulting to the stored ones."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from pipeline.cli import main
from pipeline.stats_read import read_rows, recompute_regressions
from tests.conftest import REPO
from tools.synth import main as synth_main

FLEETGRADE = Path(sys.executable).parent / "fleetgrade"


def fleetgrade(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(FLEETGRADE), *args], cwd=REPO, capture_output=True, text=True, timeout=120,
                          check=False)


def _run(fleet: Path, out: Path, *flags: str) -> None:
    assert main(["run", "--input", str(fleet), "--output", str(out), "--log-level", "WARNING", *flags]) == 0


def _windows(out: Path) -> set[tuple[int, int]]:
    return {(r["window_days"], r["baseline_days"]) for r in read_rows(str(out), "regressions")}


def _stored(out: Path) -> list[dict[str, object]]:
    rows = sorted(read_rows(str(out), "regressions"), key=lambda r: (r["workflow"], r["grader_id"]))
    return [{k: v for k, v in r.items() if k != "fleetgrade_version"} for r in rows]


def test_windows_are_stored_followed_by_check_and_never_mixed(tmp_path: Path) -> None:
    fleet, out = tmp_path / "fleet", tmp_path / "out"
    assert synth_main(["--runs", "60", "--days", "21", "--seed", "3", "--medium-fraction", "0",
                 "--large-fraction", "0", "--malformed-rate", "0", "--out", str(fleet)]) == 0
    _run(fleet, out, "--regression-window", "5", "--regression-baseline", "10")
    assert _windows(out) == {(5, 10)}
    workflows = {r["workflow"] for r in read_rows(str(out), "regressions")}
    assert len(workflows) > 1
    assert _stored(out) == recompute_regressions(str(out), 5, 10)

    # check without --window/--baseline gates on the stored windows; with them, as asked.
    done = fleetgrade("check", str(out), "--json")
    assert done.returncode in (0, 1), done.stderr
    doc = json.loads(done.stdout)
    assert (doc["window"], doc["baseline"]) == (5, 10)
    assert {(r["window_days"], r["baseline_days"]) for r in doc["rows"]} == {(5, 10)}
    asked = json.loads(fleetgrade("check", str(out), "--window", "7", "--baseline", "28", "--json").stdout)
    assert {(r["window_days"], r["baseline_days"]) for r in asked["rows"]} == {(7, 28)}

    # An incremental run with the default windows that regrades one run of one workflow: every
    # workflow is retested with 7/28, none keeps a 5/10 row.
    one = next(p for p in sorted(fleet.glob("*/run-*")) if p.is_dir())
    (one / "aw_info.json").write_text((one / "aw_info.json").read_text() + "\n")
    _run(fleet, out)
    assert _windows(out) == {(7, 28)}
    assert {r["workflow"] for r in read_rows(str(out), "regressions")} == workflows
    assert _stored(out) == recompute_regressions(str(out), 7, 28)
    assert json.loads(fleetgrade("check", str(out), "--json").stdout)["window"] == 7


@pytest.mark.parametrize("flags", [("--regression-window", "0"), ("--regression-baseline", "3661"),
                                   ("--regression-window", "1.5"), ("--regression-baseline", "many")])
def test_bad_windows_exit_2_in_one_line(tmp_path: Path, flags: tuple[str, str]) -> None:
    done = fleetgrade("run", "--input", str(REPO / "examples" / "fleet"), "--output", str(tmp_path / "o"), *flags)
    assert done.returncode == 2
    lines = [ln for ln in done.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and "Traceback" not in done.stderr, done.stderr
    assert lines[0].startswith(f"fleetgrade run: argument {flags[0]}: must be a whole number of days"), lines[0]
    assert not (tmp_path / "o").exists()
