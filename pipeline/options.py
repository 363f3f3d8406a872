"""Options of ``fleetgrade run`` and the local runner choice (no Prism download, ever)."""

from __future__ import annotations

import argparse
import datetime
from typing import Any

from apache_beam.options.pipeline_options import DirectOptions, PipelineOptions, StandardOptions
from apache_beam.runners.runner import PipelineRunner


def add_run_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--input", required=True, help="fleet folder or gs:// prefix holding run folders")
    parser.add_argument("--output", required=True, help="output folder or gs:// prefix for the Parquet tables")
    parser.add_argument("--graders", metavar="FILE", help="graders map (YAML/JSON) or a gh-aw workflow .md")
    parser.add_argument("--graders-dir", metavar="DIR", help="one graders file per workflow name")
    parser.add_argument(
        "--trace-config", metavar="YAML", help="trace-grader rules (forbidden tools, ordering, budgets)"
    )
    parser.add_argument(
        "--no-archived-evaluators", dest="archived_evaluators", action="store_false",
        help="do not grade runs with the operational-value evaluator archived in their artifacts",
    )
    parser.add_argument("--full", action="store_true",
                        help="regrade every run, not only new or changed ones (incremental is the default)")
    parser.add_argument("--since", metavar="YYYY-MM-DD", type=_date, help="grade only runs dated on or after")
    parser.add_argument("--until", metavar="YYYY-MM-DD", type=_date, help="grade only runs dated on or before")
    add_runner_arguments(parser)


def add_runner_arguments(parser: argparse.ArgumentParser) -> None:
    """Flags of every command that runs a pipeline (run, regrade)."""
    parser.add_argument(
        "--runner",
        default="direct",
        help="direct (in-process FnApiRunner), direct-multiprocess, portable, DataflowRunner, …",
    )
    parser.add_argument("--direct-num-workers", type=int, default=0, help="workers for direct-multiprocess")
    parser.add_argument(
        "--allow-unsandboxed", action="store_true",
        help="DANGEROUS: run evaluators without bubblewrap when no sandbox can be created",
    )
    parser.add_argument("--log-level", default="INFO", choices=["DEBUG", "INFO", "WARNING", "ERROR"])


def _date(text: str) -> str:
    try:
        return datetime.date.fromisoformat(text).isoformat()
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a YYYY-MM-DD date: {text!r}") from None


def local_runner(name: str) -> PipelineRunner | None:
    """The runner object for local names; None means "let Beam resolve ``--runner``"."""
    if name in ("direct", "DirectRunner", "direct-multiprocess", "FnApiRunner"):
        from apache_beam.runners.portability.fn_api_runner import FnApiRunner

        return FnApiRunner()
    return None


def pipeline_options(args: argparse.Namespace, extra: list[str]) -> PipelineOptions:
    """Beam options from our flags plus any pass-through Beam flags (``--project``, …)."""
    flags: list[str] = list(extra)
    opts: dict[str, Any] = {}
    if args.runner == "direct-multiprocess":
        opts.update(direct_running_mode="multi_processing", direct_num_workers=args.direct_num_workers or 2)
    elif args.runner in ("direct", "DirectRunner", "FnApiRunner"):
        opts.update(direct_running_mode="in_memory")
    else:
        flags.append(f"--runner={args.runner}")
    options = PipelineOptions(flags, **opts)
    options.view_as(StandardOptions)
    options.view_as(DirectOptions)
    return options
