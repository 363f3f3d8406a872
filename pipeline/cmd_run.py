"""``fleetgrade run``: grade a fleet into hive-partitioned Parquet."""

from __future__ import annotations

import argparse
import logging
import time
from pathlib import Path
from typing import TYPE_CHECKING

from pipeline.errors import UsageError, closest
from pipeline.options import add_run_arguments
from transforms.heap import relax_young_collections

if TYPE_CHECKING:
    from graders.grading.plan import PlanSet

LOG = logging.getLogger("fleetgrade")
# A damaged output file found by a pass is rewritten and its runs marked; the next pass regrades
# them (and may find another file of theirs damaged): one pass per file, at most this many.
MAX_PASSES = 4


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser(
        "run",
        help="grade every run under --input and write Parquet tables under --output",
        description="Grade a fleet with Apache Beam. Beam's own flags pass through to it "
        "(e.g. --project, --region, --temp_location for the dataflow runner; --dry_run=True "
        "checks everything and grades nothing); any other unknown flag is an error.",
    )
    add_run_arguments(p)
    p.set_defaults(func=handle)


def handle(args: argparse.Namespace) -> int:
    # First, as a worker does after set-up: the job's imports and graph make ~0.3M containers,
    # over which CPython's young threshold (700) ran ~450 collections (docs/performance.md, "Fixed cost").
    relax_young_collections()
    # Everything that can be wrong with the command is checked before any run is read.
    from pipeline import preflight
    from pipeline.launch import check_local, counter, launch
    from pipeline.plans import PlanLoadError, load_plans, load_trace_config

    preflight.check_window(args.since, args.until)
    validated = check_local(args)
    try:
        plans = load_plans(args.graders, args.graders_dir, args.archived_evaluators, args.allow_unsandboxed,
                           args.grader_timeout_limit)
        trace_config = load_trace_config(args.trace_config)
    except PlanLoadError as exc:
        raise UsageError(str(exc)) from exc
    compiled = preflight.compile_inline_graders(plans, args.graders, args.graders_dir)
    validated.append(f"graders ({compiled} inline script(s) compiled)")

    from pipeline import graph

    for attempt in range(1, MAX_PASSES + 1):
        started = time.monotonic()
        result = launch(args, "run", validated, lambda p, job: graph.build(
            p, args.input, args.output, plans, job, trace_config, full=args.full, since=args.since,
            until=args.until, resource_hints=args.runner == "dataflow", regression_window=args.regression_window,
            regression_baseline=args.regression_baseline, outlier_factor=args.outlier_factor,
            outlier_days=args.outlier_days))
        if result is None:
            return 0
        late = counter(result, "runs_prepared_out_of_window")
        window = counter(result, "runs_out_of_window") + late
        dead_at_grading = counter(result, "runs_dead_lettered_grading")  # transforms.grade.DEAD_AT_GRADING
        LOG.info(
            "%d run(s) discovered: %d graded, %d dead-lettered, %d unchanged, %d outside --since/--until; "
            "%d stray file(s) skipped; %d partition file(s) written, %d unchanged, in %.1fs → %s",
            counter(result, "runs_discovered"), counter(result, "runs_prepared") - late - dead_at_grading,
            counter(result, "runs_dead_lettered") + dead_at_grading, counter(result, "runs_unchanged"), window,
            counter(result, "stray_files_skipped"), counter(result, "partitions_written"),
            counter(result, "partitions_unchanged"), time.monotonic() - started, args.output,
        )
        damaged = counter(result, "partitions_damaged")
        if not damaged or args.full:  # --full regraded every run they held already
            _warn_unused_graders_files(args.graders_dir, plans, args.output)
            return 0
        if attempt < MAX_PASSES:
            LOG.warning("%d damaged output file(s) rewritten; regrading the runs they held", damaged)
    raise UsageError(f"damaged output files still found after {MAX_PASSES} passes; run again with --full",
                     args.output, exit_code=1)


def _warn_unused_graders_files(graders_dir: str | None, plans: PlanSet, output: str) -> None:
    """A ``--graders-dir`` file whose workflow has no run in the output (a typo in its name, most
    often) would be silently unused: say so, with the closest workflow. A local output only: a
    bucket's would be listed whole for a warning."""
    if not graders_dir or output.startswith("gs://") or not plans.by_workflow:
        return
    from pipeline.plans import graders_dir_files
    from pipeline.tables import connect, present_tables

    tables = [t for t in ("runs", "dead_letter") if t in present_tables(output)]
    if not tables:
        return
    con = connect(output)
    try:
        known = {w for t in tables for (w,) in con.execute(
            f"SELECT DISTINCT workflow FROM {t} WHERE workflow IS NOT NULL").fetchall()}
    finally:
        con.close()  # not left to the interpreter's exit (pipeline/tables.py: connect)
    files = graders_dir_files(graders_dir)
    for name in (name for name, _ in plans.by_workflow if name not in known):
        LOG.warning("%s: no run of workflow %r in %s, so its graders were not used%s",
                    files.get(name, Path(graders_dir, name)), name, output, closest(name, known, "workflows"))
