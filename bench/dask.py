"""The pipeline on Dask (``--runner dask``, pipeline/runners/dask_runner.py): a local cluster of
1 and 2 worker processes against the in-process direct runner, on the same fleet.

The cluster is started, and its workers import fleetgrade (a first job on a 3-run fleet), before
the timing: a cluster outlives its jobs. A second 3-run job gives the fixed cost of a job on a
warm cluster (graph submission, scheduling, per-bundle DoFn set-up); both are rows of their own.
Beside each wall time, the CPU time of this process and its children (the local cluster's
workers, which outlive the job) over the same job.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import Any

import psutil
from apache_beam.options.pipeline_options import PipelineOptions

from bench.common import core_fleet, fleet, row
from bench.pipeline import run_pipeline, timed_run

WORKERS = (1, 2)


def run_on_cluster(root: Path, address: str) -> float:
    """Seconds for the pipeline on ``root`` on the cluster at ``address``."""
    from pipeline.runners.dask_runner import DaskRunner

    return timed_run(root, DaskRunner(), PipelineOptions([f"--dask_client_address={address}"]))


def cpu_seconds() -> float:
    """User and system CPU of this process and of its live children (a cluster's workers)."""
    me = psutil.Process()
    total = 0.0
    for proc in (me, *me.children(recursive=True)):
        try:
            times = proc.cpu_times()
        except psutil.NoSuchProcess:
            continue
        total += times.user + times.system
    return total


def run(quick: bool) -> list[dict[str, Any]]:
    # The workers' start-up lines, and the fleets' deliberate dead letters (as bench/pipeline.py).
    os.environ.setdefault("DASK_LOGGING__DISTRIBUTED", "error")
    os.environ.setdefault("DASK_LOGGING__FLEETGRADE", "error")
    from pipeline.runners.dask_runner import local_cluster

    logging.getLogger("distributed").setLevel(logging.ERROR)
    root = core_fleet(quick)
    tiny = fleet(7, 3, "tiny", malformed_rate=0.0)
    before = cpu_seconds()
    direct = run_pipeline(root, "in-process")
    direct_cpu = cpu_seconds() - before
    rows = [row("dask: direct in-process, same fleet", direct, "s"),
            row("dask: direct in-process, CPU time", direct_cpu, "s")]
    for workers in WORKERS:
        cluster = local_cluster(workers)
        try:
            first = run_on_cluster(tiny, cluster.scheduler_address)
            warm = run_on_cluster(tiny, cluster.scheduler_address)
            before = cpu_seconds()
            total = run_on_cluster(root, cluster.scheduler_address)
            cpu = cpu_seconds() - before
        finally:
            cluster.close()
        rows += [
            row(f"dask x{workers}: first job, 3-run fleet (workers import fleetgrade)", first, "s"),
            row(f"dask x{workers}: next job, 3-run fleet (fixed cost, warm cluster)", warm, "s"),
            row(f"dask x{workers}: wall time", total, "s", baseline=direct, ratio=total / direct,
                note=f"{workers} worker process(es) of one thread, on {os.cpu_count()} cores"),
            row(f"dask x{workers}: CPU time (this process and the workers)", cpu, "s", baseline=direct_cpu,
                ratio=cpu / direct_cpu),
        ]
    return rows
