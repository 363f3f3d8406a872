"""Options of ``fleetgrade run`` and the local runner choice (no Prism download, ever).

Building the parsers needs no Beam (``--help`` stays fast); Beam is imported when a pipeline's
options are made.
"""

from __future__ import annotations

import argparse
import datetime
import math
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from apache_beam.options.pipeline_options import PipelineOptions
    from apache_beam.runners.runner import PipelineRunner

# fleetgrade's runners: name → the names Beam users also know them by (case-insensitive).
RUNNERS: dict[str, tuple[str, ...]] = {
    "direct": ("DirectRunner", "FnApiRunner"),
    "direct-multiprocess": (),
    "portable": ("PortableRunner",),
    "dataflow": ("DataflowRunner",),
    "dask": ("DaskRunner",),
}
_RUNNER_ALIASES = {alias.lower(): name for name, aliases in RUNNERS.items() for alias in (name, *aliases)}
LOCAL_RUNNERS = frozenset({"direct", "direct-multiprocess"})
# The class name Beam resolves for a runner it builds itself.
_BEAM_RUNNER = {"portable": "PortableRunner", "dataflow": "DataflowRunner"}


def runner_name(text: str) -> str:
    """``--runner``'s value as one of fleetgrade's runner names."""
    name = _RUNNER_ALIASES.get(text.lower())
    if name is None:
        raise argparse.ArgumentTypeError(
            f"unknown runner {text!r}; fleetgrade runs on {', '.join(RUNNERS)} "
            f"(also spelled {', '.join(a for aliases in RUNNERS.values() for a in aliases)})")
    return name


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
    parser.add_argument("--regression-window", metavar="DAYS", type=days, default=7,
                        help="regressions: current window in days, ending on each workflow's latest date (default 7)")
    parser.add_argument("--regression-baseline", metavar="DAYS", type=days, default=28,
                        help="regressions: baseline window in days just before the current one (default 28)")
    parser.add_argument("--grader-timeout-limit", metavar="K", type=_count, default=3,
                        help="an inline grader that times out on K consecutive runs (in one worker) is errored, "
                             "unrun, for the rest of the job (default 3; 0: never)")
    parser.add_argument("--outlier-factor", metavar="K", type=_factor, default=2.0,
                        help="cost_outliers: a run is listed when its AI Credits (else tokens) exceed K times its "
                        "workflow's median over the --outlier-days before its date (default 2)")
    parser.add_argument("--outlier-days", metavar="DAYS", type=days, default=14,
                        help="cost_outliers: days of runs the median is taken over (default 14)")
    add_allow_empty_argument(parser)
    add_runner_arguments(parser)


def _factor(text: str) -> float:
    """A multiple of the median: a finite number above 1 (at or below it, a run at the median is "over")."""
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not (math.isfinite(value) and 1 < value <= 1000):
        raise argparse.ArgumentTypeError(f"must be a number above 1 and at most 1000, got {text}")
    return value


def add_allow_empty_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--allow-empty", action="store_true",
                        help="succeed when --input holds no run folder (otherwise that is an error)")


def add_runner_arguments(parser: argparse.ArgumentParser) -> None:
    """Flags of every command that runs a pipeline (run, regrade)."""
    parser.add_argument(
        "--runner",
        default="direct",
        type=runner_name,
        help="direct (in-process), direct-multiprocess, portable (--job_endpoint …), dataflow or dask "
             "(--dask_client_address tcp://HOST:PORT, else a local cluster)",
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


def _count(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = -1
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be a whole number, 0 or more, got {text!r}")
    return value


def days(text: str) -> int:
    """A window length: a whole number of days, at most ten years (dates stay in range)."""
    try:
        value = int(text)
    except ValueError:
        value = 0
    if not 1 <= value <= 3660:
        raise argparse.ArgumentTypeError(f"must be a whole number of days from 1 to 3660, got {text!r}")
    return value


def runner_object(name: str) -> PipelineRunner | None:
    """The runner object fleetgrade builds itself (the local ones, and Beam's Dask runner with
    fleetgrade's fixes); None means "let Beam resolve ``--runner``"."""
    name = runner_name(name)
    if name in LOCAL_RUNNERS:
        from apache_beam.runners.portability.fn_api_runner import FnApiRunner

        return FnApiRunner()
    if name == "dask":
        from pipeline.runners.dask_runner import DaskRunner

        return DaskRunner()
    return None


def reports_progress(runner: str, options: PipelineOptions) -> bool:
    """Progress lines need the workers on this machine, in this environment: the local runners,
    and a Dask cluster the job starts itself (transforms/progress.py)."""
    if runner == "dask":
        from pipeline.runners.dask_runner import starts_local_cluster

        return starts_local_cluster(options)
    return runner in LOCAL_RUNNERS


def dask_missing() -> str | None:
    """Why ``--runner dask`` cannot run here (the optional extra is not installed), or None."""
    try:
        import dask.distributed  # noqa: F401
    except ImportError as exc:
        return f"the dask runner needs the dask extra (pip install 'fleetgrade[dask]'): {exc}"
    return None


def pipeline_options(args: argparse.Namespace, extra: list[str]) -> PipelineOptions:
    """Beam options from our flags plus any pass-through Beam flags (``--project``, …)."""
    from apache_beam.options.pipeline_options import DirectOptions, PipelineOptions, StandardOptions

    flags: list[str] = list(extra)
    opts: dict[str, Any] = {}
    runner = runner_name(args.runner)
    if runner == "direct-multiprocess":
        opts.update(direct_running_mode="multi_processing", direct_num_workers=args.direct_num_workers or 2)
    elif runner == "direct":
        opts.update(direct_running_mode="in_memory")
    elif runner != "dask":  # fleetgrade builds the dask runner itself (runner_object)
        flags.append(f"--runner={_BEAM_RUNNER[runner]}")
    options = PipelineOptions(flags, **opts)
    options.view_as(StandardOptions)
    options.view_as(DirectOptions)
    return options


def is_dry_run(options: PipelineOptions) -> bool:
    """Beam's ``--dry_run`` (TestOptions): any non-empty value counts, as Beam's runners read it."""
    from apache_beam.options.pipeline_options import TestOptions

    return bool(options.view_as(TestOptions).dry_run)
