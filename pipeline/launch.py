"""Running a Beam pipeline from a command: logging, the runner, counters (shared by run and regrade)."""

from __future__ import annotations

import argparse
import logging
from collections.abc import Callable

import apache_beam as beam
from apache_beam.metrics.metric import MetricsFilter
from apache_beam.runners.runner import PipelineResult

from pipeline.options import local_runner, pipeline_options
from pipeline.progress import reporting
from transforms.heap import tune_heap


def configure_logging(level: str) -> None:
    logging.basicConfig(level=level, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    for noisy in ("apache_beam", "urllib3", "google"):
        logging.getLogger(noisy).setLevel(max(logging.WARNING, logging.getLevelName(level)))


def run_pipeline(args: argparse.Namespace, build: Callable[[beam.Pipeline], object]) -> PipelineResult:
    """Build with ``build(p)`` on the chosen runner (never Prism locally) and wait for the end."""
    options = pipeline_options(args, args.extra)
    runner = local_runner(args.runner)
    if runner is not None:  # the local runner holds the job's buffers in this process
        tune_heap()
    p = beam.Pipeline(runner=runner, options=options) if runner is not None else beam.Pipeline(options=options)
    build(p)
    with reporting(enabled=runner is not None):  # one line for the whole job; never on Dataflow
        result = p.run()
        result.wait_until_finish()
    return result


def counter(result: PipelineResult, name: str) -> int:
    """A ``fleetgrade`` Beam counter's total (0 on runners that report no metrics)."""
    try:
        metrics = result.metrics().query(MetricsFilter().with_name(name))
    except Exception:  # some runners do not report metrics
        return 0
    return int(sum(c.committed or c.attempted or 0 for c in metrics["counters"]))
