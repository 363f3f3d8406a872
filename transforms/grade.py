"""Fan out to the grader families, one Beam step per family (design.md §2, "Fan out")."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import apache_beam as beam
from apache_beam import typehints
from apache_beam.metrics import Metrics

from graders.grading.engine import Executor, grade_trace
from graders.grading.plan import PlanSet, family_ids
from graders.grading.registry import close_executor, make_executor, sandboxed_families
from graders.prepare import PreparedRun, bind_executor
from graders.tables.rows import counts_part, dead_letter_row, failure_part, result_rows, run_row

SANDBOX_MIN_RAM = "4GB"


class GradeFamily(beam.DoFn):
    """Grades one family on every run; sandboxes live per worker, created in ``setup``."""

    def __init__(self, plans: PlanSet, family: str) -> None:
        self.plans = plans
        self.family = family
        self.executors: dict[str, Executor] = {}
        self.graded = Metrics.counter("fleetgrade", f"graded_{family}")
        self.errors = Metrics.counter("fleetgrade", f"grader_errors_{family}")

    def setup(self) -> None:
        if self.family in sandboxed_families():
            executor = make_executor(self.family, self.plans.allow_unsandboxed)
            if executor is not None:
                self.executors[self.family] = executor

    def process(self, prep: PreparedRun) -> Iterator[dict[str, Any] | beam.pvalue.TaggedOutput]:
        plan = prep.plan(self.plans.for_workflow(prep.meta.workflow))
        ids = family_ids(plan, self.family)
        if not ids:
            return
        executors = {source: bind_executor(ex, prep) for source, ex in self.executors.items()}
        results = grade_trace(prep.trace, plan, executors, only=ids, file_ir=prep.file_ir)
        self.graded.inc(len(results))
        self.errors.inc(sum(r["status"] == "error" for r in results))
        yield from result_rows(prep.meta, results, plan, prep.input_digest)
        # The run's status counts leave with its rows, as a part of its ``runs`` row.
        yield beam.pvalue.TaggedOutput(COUNTS, counts_part(prep.meta, results))

    def teardown(self) -> None:
        for executor in self.executors.values():
            close_executor(executor)
        self.executors.clear()


COUNTS = "counts"  # GradeFamily's side output: its counts part of each graded run's ``runs`` row


def _run_stub(prep: PreparedRun, plans: PlanSet) -> dict[str, Any]:
    """The run's ``runs`` row before its status counts are known (graders/tables/rows.py, RUN_PART).

    Only this small row leaves the grading step for the ``runs`` table, never the trace.
    """
    plan = prep.plan(plans.for_workflow(prep.meta.workflow))
    return run_row(prep.meta, prep.trace, [], prep.report, plan, prep.input_digest, prep.source_kind)


class GradeRuns(beam.PTransform):
    """PreparedRun → {"grader_results": {family: rows}, "runs": {part: rows}, "dead_letter": rows}.

    Everything stays in per-family collections, handed to the sink as a table's named parts: the
    local runner materializes a Flatten or a join, which held a row per run of the fleet at once
    (make bench memory). ``runs`` parts become rows where their partition is written
    (``graders.tables.rows.assemble_runs``); dead letters are one per run (``dead_letter``'s spec, ``one_per_identity``).
    """

    def __init__(self, plans: PlanSet, resource_hints: bool = False) -> None:
        super().__init__()
        self.plans = plans
        self.resource_hints = resource_hints

    def expand(self, prepared: beam.PCollection) -> dict[str, Any]:
        per_family: dict[str, beam.PCollection] = {}
        # Inside a per-run boundary too: a run whose stub fails is a dead letter, not a failed job.
        stubs, bad_stubs = prepared | "RunStubs" >> beam.Map(_run_stub, self.plans).with_exception_handling()
        runs: dict[str, beam.PCollection] = {"stub": stubs}
        dead: dict[str, beam.PCollection] = {"runs": bad_stubs | "StubFailureRows" >> beam.Map(failure_row)}
        for family in self.plans.families():
            # The side output is declared, so Beam does not warn that it has no type hint.
            grade: Any = beam.ParDo(GradeFamily(self.plans, family)).with_output_types(
                typehints.Dict[str, typehints.Any], **{COUNTS: typehints.Dict[str, typehints.Any]})
            # Only for distributed runners: a hint gives the step its own environment, which keeps
            # the local runner from fusing it with its siblings (every trace would be encoded).
            if self.resource_hints and family in sandboxed_families():
                # A V8 helper or bubblewrap evaluators per worker need headroom beyond the graders.
                grade = grade.with_resource_hints(min_ram=SANDBOX_MIN_RAM)
            graded = prepared | f"Grade[{family}]" >> grade.with_outputs(COUNTS, main="rows").with_exception_handling()
            per_family[family] = graded["rows"]
            runs[f"counts-{family}"] = graded[COUNTS]
            dead[family] = graded["bad"] | f"GradeFailureRows[{family}]" >> beam.Map(failure_row)
            runs[f"failed-{family}"] = dead[family] | f"FailureParts[{family}]" >> beam.Map(failure_row_part)
        return {"grader_results": per_family, "runs": runs, "dead_letter": dead}


def _failure(exc_info: Any) -> tuple[str, str]:
    """(error class, message) of a ``with_exception_handling`` bad record: Beam hands over
    (type, repr, formatted traceback), not the exception; the traceback ends "Type: message"."""
    if isinstance(exc_info, BaseException):
        return type(exc_info).__name__, str(exc_info) or type(exc_info).__name__
    if not (isinstance(exc_info, tuple) and len(exc_info) == 3 and isinstance(exc_info[0], type)):
        return "Error", str(exc_info)
    kind, text, lines = exc_info
    last = str(lines[-1]).rstrip("\n") if lines else ""  # format_exception_only's text
    prefix = f"{kind.__name__}: "
    message = last.split(prefix, 1)[1] if last.startswith(prefix) else str(text)
    return kind.__name__, message


def failure_row_part(row: dict[str, Any]) -> dict[str, Any]:
    """The ``runs`` failure part of a run a grading step failed on: it is a dead letter only."""
    return failure_part(row["workflow"], row["date"], row["run_id"], row["attempt"])


def failure_row(bad: tuple[Any, Any]) -> dict[str, Any]:
    element, exc_info = bad
    meta = getattr(element, "meta", None)
    error_class, message = _failure(exc_info)
    row = dead_letter_row(
        getattr(meta, "root", "?"), "grade", message,
        run_id=getattr(meta, "run_id", None), workflow=getattr(meta, "workflow", None),
        date=getattr(meta, "date", None), error_class=error_class,
    )
    row["attempt"] = getattr(meta, "attempt", None)
    return row
