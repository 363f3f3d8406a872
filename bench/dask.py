"""The pipeline on Dask (``--runner dask``, pipeline/runners/dask_runner.py): a local cluster of
1 and 2 worker processes against the in-process direct runner, on the same fleet.

The cluster is started, and its workers import fleetgrade (a first job on a 3-run fleet), before
the timing: a cluster outlives its jobs. A second 3-run job gives the fixed cost of a job on a
warm cluster (graph submission, scheduling, per-bundle DoFn set-up); both are rows of their own.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import Any

from apache_beam.options.pipeline_options import PipelineOptions

from bench.common import core_fleet, fleet, row
from bench.pipeline import run_pipeline, timed_run

WORKERS = (1, 2)


def run_on_cluster(root: Path, address: str) -> float:
    """Seconds for the pipeline on ``root`` on the cluster at ``address``."""
    from pipeline.runners.dask_runner import DaskRunner

    return timed_run(root, DaskRunner(), PipelineOptions([f"--dask_client_address={address}"]))


def run(quick: bool) -> list[dict[str, Any]]:
    # The workers' start-up lines, and the fleets' deliberate dead letters (as bench/pipeline.py).
    os.environ.setdefault("DASK_LOGGING__DISTRIBUTED", "error")
    os.environ.setdefault("DASK_LOGGING__FLEETGRADE", "error")
    from pipeline.runners.dask_runner import local_cluster

    logging.getLogger("distributed").setLevel(logging.ERROR)
    root = core_fleet(quick)
    tiny = fleet(7, 3, "tiny", malformed_rate=0.0)
    direct = run_pipeline(root, "in-process")
    rows = [row("dask: direct in-process, same fleet", direct, "s")]
    for workers in WORKERS:
        cluster = local_cluster(workers)
        try:
            first = run_on_cluster(tiny, cluster.scheduler_address)
            warm = run_on_cluster(tiny, cluster.scheduler_address)
            total = run_on_cluster(root, cluster.scheduler_address)
        finally:
            cluster.close()
        rows += [
            row(f"dask x{workers}: first job, 3-run fleet (workers import fleetgrade)", first, "s"),
            row(f"dask x{workers}: next job, 3-run fleet (fixed cost, warm cluster)", warm, "s"),
            row(f"dask x{workers}: wall time", total, "s", baseline=direct, ratio=total / direct,
                note=f"{workers} worker process(es) of one thread, on {os.cpu_count()} cores"),
        ]
    return rows
