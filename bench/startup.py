"""Start-up: ``fleetgrade --help`` against ``python -c pass``, both timed in this run.

Listing the commands imports none of them and no Apache Beam (pipeline/cli.py), so the ratio is
what the command line adds to the interpreter's own start. The two are timed alternately, a
best time each, so a burst of load from the machine's other tenants lands on both sides.
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from bench.common import row


def _seconds(cmd: list[str]) -> float:
    started = time.perf_counter()
    subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
    return time.perf_counter() - started


def run(quick: bool) -> list[dict[str, Any]]:
    repeats = 5 if quick else 15
    exe = str(Path(sys.executable).parent / "fleetgrade")
    python = [sys.executable, "-c", "pass"]
    best_python = best_help = float("inf")
    for _ in range(repeats):
        best_python = min(best_python, _seconds(python))
        best_help = min(best_help, _seconds([exe, "--help"]))
    return [
        row("python -c pass: start-up", best_python * 1000, "ms", note=f"best of {repeats}"),
        row("fleetgrade --help: start-up", best_help * 1000, "ms", baseline=best_python * 1000,
            ratio=best_help / best_python, note=f"best of {repeats}; ratio to python -c pass"),
    ]
