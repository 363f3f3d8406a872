"""``fleetgrade regrade``: replay archived operational-value evaluators at an evidence time.

With ``--input``/``--output`` it is a Beam pipeline over stored runs that adds rows to the
``observations`` table; with a RUN_DIR it regrades one archived run folder and prints the
observation. Either way the original artifacts and tables are only read.
"""

from __future__ import annotations

import argparse
import logging
import sys
import time
from pathlib import Path
from typing import NoReturn

from graders.runs.console import printable
from pipeline.console import json_text
from pipeline.errors import Failure, UsageError
from pipeline.options import add_allow_empty_argument, add_runner_arguments
from transforms.heap import relax_young_collections

LOG = logging.getLogger("fleetgrade")


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser(
        "regrade",
        help="regrade runs' archived operational-value evaluators at an evidence time (observations table)",
        description="Replay each run's archived operational-value evaluator with --evidence-at and add "
        "one row per (run, evaluator digest, evidence time) to the observations table under --output; "
        "or regrade one RUN_DIR and print its observation. Unknown --flags are passed to Beam.",
    )
    p.add_argument("run_dir", nargs="?", metavar="RUN_DIR", help="one archived run folder (instead of --input)")
    p.add_argument("--evidence-at", required=True, metavar="TIME", help="UTC ISO-8601, e.g. 2026-08-30T12:00:00Z")
    p.add_argument("--input", help="fleet folder or gs:// prefix holding run folders")
    p.add_argument("--output", help="output folder or gs:// prefix (the observations table is added there)")
    p.add_argument("--json", action="store_true", help="with RUN_DIR: print the observation as JSON")
    add_allow_empty_argument(p)
    add_runner_arguments(p)
    p.set_defaults(func=handle)


def _fail(message: str) -> NoReturn:
    """An input or usage mistake (exit 2): the command line, or the run it names."""
    raise UsageError(message)


def handle(args: argparse.Namespace) -> int:
    # First, as a worker does after set-up: the job's imports and graph make ~0.3M containers,
    # over which CPython's young threshold (700) ran ~450 collections (docs/performance.md, "Fixed cost").
    relax_young_collections()
    from graders.families.opvalue.errors import OperationalValueError
    from graders.families.opvalue.output import parse_timestamp

    try:
        parse_timestamp(args.evidence_at, "--evidence-at")
    except OperationalValueError as exc:
        return _fail(f"{exc}, got {args.evidence_at!r}")
    if args.run_dir is not None:
        if args.input or args.output or args.extra:
            return _fail("RUN_DIR cannot be combined with --input, --output or Beam flags")
        return regrade_one(Path(args.run_dir), args.evidence_at, args.json, args.allow_unsandboxed)
    if not args.input or not args.output:
        return _fail("either RUN_DIR or both --input and --output are required")
    if args.json:
        return _fail("--json prints one run's observation: give a RUN_DIR")
    return regrade_fleet(args)


def regrade_one(root: Path, evidence_at: str, as_json: bool, allow_unsandboxed: bool) -> int:
    from graders.families.opvalue.errors import OperationalValueError, SandboxUnavailableError
    from graders.families.opvalue.regrade import regrade
    from graders.families.opvalue.sandbox import SandboxOptions
    from graders.prepare import prepare_run
    from graders.replay import has_archived_evaluator, observation_json, regrade_input
    from graders.runs.runfiles import local_run_files

    if not root.is_dir():
        return _fail(f"{root}: not a directory")
    files = local_run_files(root)
    try:
        prep = prepare_run(files, root.name)
    except Exception as exc:  # the message names the file and the problem
        return _fail(f"{root}: cannot prepare the run: {exc}")
    where = f"run {prep.meta.run_id} ({root})"
    if not has_archived_evaluator(files):
        return _fail(f"{where}: no archived operational-value evaluator (operational_value_evaluator.sh)")
    try:
        row = regrade(regrade_input(prep, files), evidence_at, SandboxOptions(allow_unsandboxed=allow_unsandboxed))
    except SandboxUnavailableError as exc:  # the machine, not the run: a failure while running
        raise Failure(f"{where}: {exc}") from exc
    except OperationalValueError as exc:  # the run's archive does not verify, or has no original result
        return _fail(f"{where}: {exc}")
    doc = observation_json(row)
    if as_json:
        sys.stdout.write(json_text(doc))
    else:
        print(printable(f"run {doc['run_id']} at {doc['evidence_at']}: {doc['status']}, value {doc['value']}"))
    return 0


def regrade_fleet(args: argparse.Namespace) -> int:
    from pipeline import regrade_graph
    from pipeline.launch import check_local, counter, launch

    validated = check_local(args)
    started = time.monotonic()
    result = launch(args, "regrade", validated, lambda p, job: regrade_graph.build(
        p, args.input, args.output, args.evidence_at, job, args.allow_unsandboxed))
    if result is None:
        return 0
    unprepared = counter(result, "runs_dead_lettered")
    regraded, skipped = counter(result, "runs_regraded"), counter(result, "runs_regrade_skipped")
    failed = counter(result, "runs_regrade_failed") + unprepared
    LOG.info(
        "%d run(s) discovered, %d regraded, %d skipped (no archived evaluator), %d failed "
        "in %.1fs → %s/observations",
        counter(result, "runs_prepared") + unprepared, regraded, skipped, failed,
        time.monotonic() - started, args.output.rstrip("/"),
    )
    return 0
