"""A small planted-shift fleet graded once per test session (check and report tests share it).

240 small runs over 21 days (2026-11-20 … 12-10); from 2026-12-04 on, ci-doctor's tool calls
fail 30 points more often (a regression) and issue-triage's 7 points less often (better).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from pipeline.cli import main
from tools.synth import main as synth_main

SHIFT_DATE = "2026-12-04"
SHIFTS = (f"ci-doctor:tool-success-rate:{SHIFT_DATE}:-0.3", f"issue-triage:tool-success-rate:{SHIFT_DATE}:0.07")


def graded_fleet(root: Path, *shifts: str) -> Path:
    fleet, out = root / "fleet", root / "out"
    flags = [arg for s in shifts for arg in ("--shift", s)]
    assert synth_main(["--runs", "240", "--days", "21", "--seed", "7", "--medium-fraction", "0",
                 "--large-fraction", "0", "--malformed-rate", "0", "--out", str(fleet), *flags]) == 0
    assert main(["run", "--input", str(fleet), "--output", str(out), "--log-level", "WARNING"]) == 0
    return out


@pytest.fixture(scope="session")
def shifted_output(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return graded_fleet(tmp_path_factory.mktemp("shifted"), *SHIFTS)
