"""Running a Beam pipeline from a command: logging, the checks, the runner, the output's lock,
counters. ``fleetgrade run`` and ``regrade`` are ``check_local`` + ``launch`` around their graph."""

from __future__ import annotations

import argparse
import logging
import os
import uuid
from collections.abc import Callable
from typing import TYPE_CHECKING

from pipeline import console, preflight
from pipeline.beam_flags import parse_check
from pipeline.errors import UsageError
from pipeline.options import (
    LOCAL_RUNNERS,
    dask_missing,
    is_dry_run,
    pipeline_options,
    reports_progress,
    runner_object,
)
from pipeline.runners.loopback import loopback_grpc
from transforms.heap import tune_heap
from transforms.output_lock import OutputError, output_lock
from transforms.progress import reporting

if TYPE_CHECKING:
    import apache_beam as beam
    from apache_beam.options.pipeline_options import PipelineOptions
    from apache_beam.runners.runner import PipelineResult


def configure_logging(level: str) -> None:
    console.configure_logging(level)
    for noisy in ("apache_beam", "urllib3", "google"):
        logging.getLogger(noisy).setLevel(max(logging.WARNING, logging.getLevelName(level)))
    # Dask's scheduler and local workers set their loggers' levels from dask's config when
    # distributed is imported (later, by the dask runner), and their processes inherit this.
    # Its warnings are a cluster's housekeeping ("worker process still alive after 4.0 seconds").
    # The level is set, not defaulted: an earlier in-process command's level must not outlive it (children
    # inherit the environment, and a stale "warning" silenced their progress lines).
    os.environ.setdefault("DASK_LOGGING__DISTRIBUTED", "error")
    os.environ["DASK_LOGGING__FLEETGRADE"] = level.lower()
    logging.getLogger("apache_beam.utils.retry").addFilter(_no_traceback)


def _no_traceback(record: logging.LogRecord) -> bool:
    """Beam's retry logger says each retry with its traceback: the line is enough."""
    record.exc_info, record.exc_text, record.stack_info = None, None, None
    return True


def beam_options(args: argparse.Namespace) -> PipelineOptions:
    """Beam's options from our flags and the pass-through ones; a bad value is a usage error."""

    if args.runner == "dask" and (missing := dask_missing()):
        raise UsageError(missing, "--runner dask")
    parse_check(args.extra)
    options = pipeline_options(args, args.extra)
    if args.runner == "portable":
        from apache_beam.options.pipeline_options import PortableOptions

        # Without one, Beam would try to start a job server itself (a download, or Docker).
        if not options.view_as(PortableOptions).job_endpoint:
            raise UsageError("the portable runner needs --job_endpoint HOST:PORT (a Flink or Spark job service)",
                             "--runner portable")
    return options


def new_pipeline(args: argparse.Namespace, options: PipelineOptions) -> beam.Pipeline:
    """The pipeline on the chosen runner (never Prism locally); Beam validates its options here."""
    import apache_beam as beam

    loopback_grpc()  # the servers Beam starts in this process serve this machine only
    runner = runner_object(args.runner)
    if args.runner in LOCAL_RUNNERS:  # the local runner holds the job's buffers in this process
        tune_heap()
    try:
        if runner is None:
            return beam.Pipeline(options=options)
        return beam.Pipeline(runner=runner, options=options)
    except ValueError as exc:  # "Pipeline has validations errors: …" (missing --project, …)
        text = str(exc).replace("Pipeline has validations errors:", "").strip()
        errors = "; ".join(line.strip().rstrip(".") for line in text.splitlines() if line.strip())
        raise UsageError(f"Beam options: {errors}", f"--runner {args.runner}") from exc


def run_pipeline(args: argparse.Namespace, options: PipelineOptions, p: beam.Pipeline,
                 build: Callable[[beam.Pipeline], object], read_as: str = "graded") -> PipelineResult | None:
    """Build with ``build(p)`` and wait for the end; None for a dry run, which runs nothing.

    On a dry run the graph is built either way; Dataflow's runner then makes the job request
    without submitting it, and the local runners (which ignore ``--dry_run``) are not started.
    """
    build(p)
    if is_dry_run(options):
        if args.runner == "dataflow":  # Beam's Dataflow runner honours --dry_run itself
            p.run().wait_until_finish()
        else:  # the others would run the job: serialize the graph a runner would be handed
            p.to_runner_api()
        return None
    # One line for the job; never on Dataflow. ``read_as``: what a run read is to this command.
    with reporting(enabled=reports_progress(args.runner, options), read_as=read_as):
        result = p.run()
        result.wait_until_finish()
    return result


def run_locked(args: argparse.Namespace, options: PipelineOptions, p: beam.Pipeline, command: str,
               build: Callable[[beam.Pipeline, str], object]) -> PipelineResult | None:
    """:func:`run_pipeline` as one job (``build(p, job_id)``) holding the output's one-writer lock
    (transforms/output_lock.py); a dry run writes nothing, so it takes no lock."""
    job = uuid.uuid4().hex
    if is_dry_run(options):
        return run_pipeline(args, options, p, lambda q: build(q, job))
    from transforms.upgrade import upgrade_output

    try:
        with output_lock(args.output, job, command):
            upgrade_output(args.output)  # an older fleetgrade's column types, before anything reads them
            return run_pipeline(args, options, p, lambda q: build(q, job),
                                "graded" if command == "run" else "to regrade")
    except OutputError as exc:
        raise UsageError(str(exc), exit_code=exc.exit_code) from exc


def check_local(args: argparse.Namespace) -> list[str]:
    """Logging set up, then what needs no Beam checked first, so these mistakes are reported at
    once: the input and output places. Returns what was validated (for the dry-run line)."""
    configure_logging(args.log_level)
    preflight.check_placement(args.input, args.output, args.runner)
    return ["flags", f"runner {args.runner}", *preflight.check_places(args.input, args.output, args.allow_empty)]


def launch(args: argparse.Namespace, command: str, validated: list[str],
           build: Callable[[beam.Pipeline, str], object]) -> PipelineResult | None:
    """Beam's options and pipeline, the places checked as Beam sees them, then the job built by
    ``build(p, job_id)`` and run under the output's lock; None after a dry run (its line printed)."""
    options = beam_options(args)
    p = new_pipeline(args, options)
    validated = [*validated, *preflight.check_places(args.input, args.output, args.allow_empty, options)]
    result = run_locked(args, options, p, command, build)
    if result is None:
        print(f"fleetgrade {command}: {dry_run_line(args, validated)}")
    return result


def dry_run_line(args: argparse.Namespace, validated: list[str]) -> str:
    where = "the Dataflow job request was built, not submitted" if args.runner == "dataflow" else (
        "the pipeline graph was built, not run")
    return f"dry run, nothing was read from any run or written; validated {', '.join(validated)}; {where}"


def counter(result: PipelineResult, name: str) -> int:
    """A ``fleetgrade`` Beam counter's total (0 on runners that report no metrics)."""
    from apache_beam.metrics.metric import MetricsFilter

    try:
        metrics = result.metrics().query(MetricsFilter().with_name(name))
    except Exception:  # some runners do not report metrics
        return 0
    return int(sum(c.committed or c.attempted or 0 for c in metrics["counters"]))
