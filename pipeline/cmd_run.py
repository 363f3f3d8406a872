"""``fleetgrade run``: grade a fleet into hive-partitioned Parquet."""

from __future__ import annotations

import argparse
import logging
import sys
import time
import uuid

from pipeline import graph
from pipeline.launch import configure_logging, counter, run_pipeline
from pipeline.options import add_run_arguments
from pipeline.plans import PlanLoadError, load_plans, load_trace_config
from transforms.output_lock import OutputError, output_lock

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


def handle(args: argparse.Namespace) -> int:
    configure_logging(args.log_level)
    try:
        plans = load_plans(args.graders, args.graders_dir, args.archived_evaluators, args.allow_unsandboxed)
        trace_config = load_trace_config(args.trace_config)
    except PlanLoadError as exc:
        print(f"fleetgrade run: {exc}", file=sys.stderr)
        return 2
    started = time.monotonic()
    job = uuid.uuid4().hex
    try:  # one writer per output; this job's staging goes whatever happens (transforms/output_lock.py)
        with output_lock(args.output, job, "run"):
            result = run_pipeline(args, lambda p: graph.build(
                p, args.input, args.output, plans, job, trace_config, full=args.full, since=args.since,
                until=args.until, resource_hints=args.runner.lower().startswith("dataflow")))
    except OutputError as exc:
        print(f"fleetgrade run: {exc}", file=sys.stderr)
        return exc.exit_code
    late = counter(result, "runs_prepared_out_of_window")
    window = counter(result, "runs_out_of_window") + late
    LOG.info(
        "%d run(s) discovered: %d graded, %d dead-lettered, %d unchanged, %d outside --since/--until; "
        "%d stray file(s) skipped; %d partition file(s) written, %d unchanged, in %.1fs → %s",
        counter(result, "runs_discovered"), counter(result, "runs_prepared") - late,
        counter(result, "runs_dead_lettered"), counter(result, "runs_unchanged"), window,
        counter(result, "stray_files_skipped"), counter(result, "partitions_written"),
        counter(result, "partitions_unchanged"), time.monotonic() - started, args.output,
    )
    return 0
