"""``fleetgrade run``: grade a fleet into hive-partitioned Parquet."""

from __future__ import annotations

import argparse
import logging
import sys
import time
import uuid

import apache_beam as beam
from apache_beam.metrics.metric import MetricsFilter

from pipeline import graph
from pipeline.options import add_run_arguments, local_runner, pipeline_options
from pipeline.plans import PlanLoadError, load_plans, load_trace_config

LOG = logging.getLogger("fleetgrade")


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser(
        "run",
        help="grade every run under --input and write Parquet tables under --output",
        description="Grade a fleet with Apache Beam. Unknown --flags are passed to Beam "
        "(e.g. --project, --region, --temp_location for DataflowRunner).",
    )
    add_run_arguments(p)
    p.set_defaults(func=handle, accepts_extra=True)


def _counter(result: beam.runners.runner.PipelineResult, name: str) -> int:
    try:
        metrics = result.metrics().query(MetricsFilter().with_name(name))
    except Exception:  # some runners do not report metrics
        return 0
    return int(sum(c.committed or c.attempted or 0 for c in metrics["counters"]))


def handle(args: argparse.Namespace) -> int:
    logging.basicConfig(level=args.log_level, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    for noisy in ("apache_beam", "urllib3", "google"):
        logging.getLogger(noisy).setLevel(max(logging.WARNING, logging.getLevelName(args.log_level)))
    try:
        plans = load_plans(args.graders, args.graders_dir, args.archived_evaluators, args.allow_unsandboxed)
        trace_config = load_trace_config(args.trace_config)
    except PlanLoadError as exc:
        print(f"fleetgrade run: {exc}", file=sys.stderr)
        return 2
    options = pipeline_options(args, args.extra)
    runner = local_runner(args.runner)
    token = uuid.uuid4().hex
    started = time.monotonic()
    p = beam.Pipeline(runner=runner, options=options) if runner is not None else beam.Pipeline(options=options)
    graph.build(p, args.input, args.output, plans, token, trace_config, full=args.full, since=args.since,
                until=args.until, resource_hints=args.runner.lower().startswith("dataflow"))
    result = p.run()
    result.wait_until_finish()
    late = _counter(result, "runs_prepared_out_of_window")
    window = _counter(result, "runs_out_of_window") + late
    LOG.info(
        "%d run(s) discovered: %d graded, %d dead-lettered, %d unchanged, %d outside --since/--until; "
        "%d stray file(s) skipped; %d partition file(s) written, %d unchanged, in %.1fs → %s",
        _counter(result, "runs_discovered"), _counter(result, "runs_prepared") - late,
        _counter(result, "runs_dead_lettered"), _counter(result, "runs_unchanged"), window,
        _counter(result, "stray_files_skipped"), _counter(result, "partitions_written"),
        _counter(result, "partitions_unchanged"), time.monotonic() - started, args.output,
    )
    return 0
