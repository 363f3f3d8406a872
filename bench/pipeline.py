"""The core fleet through the Beam pipeline (local FnApiRunner), as a ratio to the plain loop.

Modes: in-process (``in_memory``) and multi-process with 2 workers. Start-up overhead
(runner set-up, worker processes) is measured separately on a 3-run fleet and subtracted
for the "excluding start-up" ratio.
"""

from __future__ import annotations

import logging
import shutil
import time
import uuid
from pathlib import Path
from typing import Any

import apache_beam as beam
from apache_beam.options.pipeline_options import PipelineOptions
from apache_beam.runners.portability.fn_api_runner import FnApiRunner
from apache_beam.runners.runner import PipelineRunner

from bench.common import BENCH_DIR, core_fleet, fleet, plain_loop, row
from graders.grading.plan import PlanSet, default_plan
from pipeline import graph
from transforms.heap import tune_heap

MODES: dict[str, dict[str, Any]] = {
    "in-process": {"direct_running_mode": "in_memory"},
    "multi-process x2": {"direct_running_mode": "multi_processing", "direct_num_workers": 2},
}


def run_pipeline(root: Path, mode: str) -> float:
    """Seconds for ``fleetgrade run`` on ``root`` into a fresh output folder."""
    # The fleets' malformed runs are logged as dead letters on purpose; keep the table readable.
    for name in ("fleetgrade", "apache_beam"):
        logging.getLogger(name).setLevel(logging.ERROR)
    tune_heap()  # as ``fleetgrade run`` does for a local runner (pipeline/launch.py)
    return timed_run(root, FnApiRunner(), PipelineOptions([], **MODES[mode]))


def timed_run(root: Path, runner: PipelineRunner, options: PipelineOptions) -> float:
    """Seconds for the fleet graph on ``root`` into a fresh output folder, on ``runner``."""
    out = BENCH_DIR / "out" / uuid.uuid4().hex
    try:
        started = time.perf_counter()
        p = beam.Pipeline(runner=runner, options=options)
        graph.build(p, str(root), str(out), PlanSet(default_plan()), uuid.uuid4().hex)
        p.run().wait_until_finish()
        return time.perf_counter() - started
    finally:
        shutil.rmtree(out, ignore_errors=True)


def run(quick: bool) -> list[dict[str, Any]]:
    root = core_fleet(quick)
    tiny = fleet(7, 3, "tiny", malformed_rate=0.0)
    rows = []
    for mode in MODES:
        # Pairs (plain loop, pipeline) back to back; best of each, so that a burst of load from
        # other processes on the machine does not land on one side only.
        repeats = 1 if quick and mode != "in-process" else 2
        loops, pipes = [], []
        for _ in range(repeats):
            loops.append(plain_loop(root).seconds)
            pipes.append(run_pipeline(root, mode))
        startup = run_pipeline(tiny, mode)
        base, total = min(loops), min(pipes)
        rows += [
            row(f"pipeline {mode}: plain loop, same fleet", base, "s"),
            row(f"pipeline {mode}: wall time", total, "s", baseline=base, ratio=total / base),
            row(f"pipeline {mode}: start-up (3-run fleet)", startup, "s"),
            row(f"pipeline {mode}: excluding start-up", total - startup, "s", baseline=base,
                ratio=(total - startup) / base, target="pipeline"),
        ]
    return rows
