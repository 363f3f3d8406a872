"""One run graded end to end: identity → preprocessed trace → every grader family → trace rules →
its table rows, the whole ``runs`` row included.

``fleetgrade grade``, the bench's plain loop and the pipeline's Grade step all grade through
``RunGrader``, so a run's rows are made the same way everywhere; the Beam graph only routes them.

Each family is graded on its own, as its own step was before: a family that raises (a
RecursionError, a sandbox that breaks) does not stop the others, and the run becomes one dead
letter and nothing else (no ``runs``, ``grader_results`` or ``trace_verdicts`` row: a run is
graded or dead-lettered, never both; inputs = graded + dead-lettered). Failures are kept as
text, never as exceptions: a kept exception's traceback holds this frame, a reference cycle, and workers collect
cycles rarely (transforms/heap.py).
"""

from __future__ import annotations

import traceback
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from graders.families.observed import OBSERVED, grade_observed, model_mix, observed_plan
from graders.families.opvalue.request import RunSubject
from graders.families.trace_rules.config import TraceConfig
from graders.families.trace_rules.verdicts import grade_run as grade_trace_rules
from graders.formats.ghaw.trace import run_from_ghaw_trace, task_key
from graders.formats.session import steps_of
from graders.grading.engine import Executor, TimeoutBreaker, grade_trace
from graders.grading.plan import TIMEOUT_LIMIT, GradingPlan, PlanSet, family_ids
from graders.grading.registry import close_executor, make_executor, sandboxed_families
from graders.prepare import PreparedRun, prepare_run
from graders.runs.runfiles import RunFiles
from graders.runs.runmeta import determine_run_meta
from graders.stats.cells import stats_warnings
from graders.tables.drift import drift_rows
from graders.tables.rows import dead_letter_row, result_rows, run_row
from schemas.documents import RunMeta
from schemas.version import FLEETGRADE_VERSION

GRADE_STAGE = "grade"  # the dead-letter stage of a run a family or the trace rules failed on
TRACE_RULES = "trace-rules"


@dataclass
class RunGrades:
    """Everything one run adds to the tables."""

    results: list[dict[str, Any]]  # every graded result of the plan, in manifest order (grader_results.json)
    grader_results: list[dict[str, Any]]  # the rows of the families that graded, the observed family's last
    run: dict[str, Any] | None  # the whole ``runs`` row; None when the run is a dead letter
    trace_verdict: dict[str, Any] | None
    dead_letter: dict[str, Any] | None
    # Graded results per family: the pipeline's per-family counters.
    by_family: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    # ``grader_drift`` rows: archived gh-aw grades the plan's results do not repeat (graders/tables/drift.py).
    grader_drift: list[dict[str, Any]] = field(default_factory=list)


def failure_text(exc_info: Any) -> tuple[str, str]:
    """(error class, message) of a failure, as Beam's ``with_exception_handling`` reports it:
    (type, repr, formatted traceback), whose last line is "Type: message" (the message is the
    repr when the line names the class otherwise, e.g. a module-qualified one)."""
    if isinstance(exc_info, BaseException):
        return type(exc_info).__name__, str(exc_info) or type(exc_info).__name__
    if not (isinstance(exc_info, tuple) and len(exc_info) == 3 and isinstance(exc_info[0], type)):
        return "Error", str(exc_info)
    kind, text, lines = exc_info
    last = str(lines[-1]).rstrip("\n") if lines else ""  # format_exception_only's text
    prefix = f"{kind.__name__}: "
    message = last.split(prefix, 1)[1] if last.startswith(prefix) else str(text)
    return kind.__name__, message


def _caught(exc: BaseException) -> tuple[str, str]:
    """``failure_text`` of an exception being handled, read at once so it is not kept."""
    return failure_text((type(exc), repr(exc), traceback.format_exception(exc)))


def grade_failure_row(meta: RunMeta | None, failure: tuple[str, str]) -> dict[str, Any]:
    """The dead letter of a run grading failed on (``meta`` None: not even its identity is known)."""
    error_class, message = failure
    row = dead_letter_row(
        getattr(meta, "root", "?"), GRADE_STAGE, message, run_id=getattr(meta, "run_id", None),
        workflow=getattr(meta, "workflow", None), date=getattr(meta, "date", None), error_class=error_class,
    )
    row["attempt"] = getattr(meta, "attempt", None)
    return row


def verdict_row(prep: PreparedRun, cfg: TraceConfig) -> dict[str, Any]:
    """The run's ``trace_verdicts`` row: its steps are its preprocessed ``toolCalls``."""
    m = prep.meta
    # A session file's reader gave its steps (subagents attributed); a gh-aw run's come from its
    # trace, and a run whose observed conclusion is failure is not delivered (docs/observed-graders.md).
    conclusion = prep.evidence.conclusion if prep.evidence is not None else None
    run = prep.steps_run or run_from_ghaw_trace(
        prep.trace, task_key(prep.aw_info, m.workflow), m.run_id, conclusion)
    if prep.steps_run is None and prep.evidence is not None and prep.evidence.step_calls:
        # The engine's own calls, which the trace (gh-aw's preprocessing) does not read.
        run.steps = steps_of(prep.evidence.step_calls)
    report = grade_trace_rules(run, cfg)
    return {
        "workflow": m.workflow,
        "date": m.date,
        "run_id": m.run_id,
        "attempt": m.attempt,
        "task": report.task,
        "verdict": report.verdict,
        "delivered": report.delivered,
        "step_count": report.step_count,
        "corrupt_success": report.corrupt_success,
        "flags": [f.to_dict() for f in report.flags],
        "fleetgrade_version": FLEETGRADE_VERSION,
    }


def bind_executor(executor: Executor, prep: PreparedRun) -> Executor:
    """Executors that need the run's identity (operational-value's request) get it here."""
    for_run = getattr(executor, "for_run", None)
    if not callable(for_run):
        return executor
    m = prep.meta
    subject = RunSubject.from_aw_info(prep.aw_info or {}, run_id=m.run_id, attempt=m.attempt,
                                      workflow=(prep.aw_info or {}).get("workflow_name") or m.workflow)
    bound: Executor = for_run(subject)
    return bound


def open_executors(families: Iterable[str], allow_unsandboxed: bool = False,
                   timeout_limit: int = TIMEOUT_LIMIT) -> dict[str, Executor]:
    """The sandboxes of the sandboxed families among ``families`` (close with ``close_executors``),
    each stopping a grader that times out on ``timeout_limit`` consecutive runs (engine.TimeoutBreaker)."""
    executors: dict[str, Executor] = {}
    sandboxed = sandboxed_families()
    for family in families:
        if family in sandboxed:
            executor = make_executor(family, allow_unsandboxed)
            if executor is not None:
                executors[family] = TimeoutBreaker(executor, timeout_limit)
    return executors


def close_executors(executors: dict[str, Executor]) -> None:
    for executor in executors.values():
        close_executor(executor)
    executors.clear()


class RunGrader:
    """Grades prepared runs with ``plans`` (each run's workflow's plan) and, with ``rules``, the
    trace rules; ``executors`` are the sandboxes by family (``open_executors``), owned by the caller."""

    def __init__(self, plans: PlanSet, rules: TraceConfig | None = None,
                 executors: Mapping[str, Executor] | None = None) -> None:
        self.plans = plans
        self.rules = rules
        self.executors = executors if executors is not None else {}
        self.families = plans.families()

    def plan_of(self, prep: PreparedRun) -> GradingPlan:
        return prep.plan(self.plans.for_workflow(prep.meta.workflow))

    def grade(self, prep: PreparedRun, strict: bool = False) -> RunGrades:
        """The run's rows; with ``strict`` a failure raises instead of making a dead letter (one
        run graded on its own, where the error is the command's)."""
        plan = self.plan_of(prep)
        index = {e.id: i for i, e in enumerate(plan.enabled)}
        failures: list[tuple[str, str]] = []
        rows: list[dict[str, Any]] = []
        by_family: dict[str, list[dict[str, Any]]] = {}
        for family in self.families:
            ids = family_ids(plan, family)
            if not ids:
                continue
            try:
                results, family_rows = self._grade_family(prep, plan, family, ids)
            except Exception as exc:  # the family's rows are lost, never the job
                if strict:
                    raise
                failures.append(_caught(exc))
                continue
            by_family[family] = results
            rows.extend(family_rows)
        results = sorted((r for rs in by_family.values() for r in rs), key=lambda r: index[r["id"]])
        # The observed graders, beside the plan (never in its manifest): rows after the plan's.
        observed: list[dict[str, Any]] = []
        try:
            observed = grade_observed(prep.evidence, trace=prep.trace)
            observed_rows = result_rows(prep.meta, observed, observed_plan(), prep.input_digest)
        except Exception as exc:
            if strict:
                raise
            failures.append(_caught(exc))
        else:
            for row in observed_rows:
                row["grader_index"] += len(plan.enabled)
            by_family[OBSERVED] = observed
            rows.extend(observed_rows)
        drift = drift_rows(prep.meta, prep.evidence, results)
        verdict = run = None
        if self.rules is not None:
            try:
                verdict = verdict_row(prep, self.rules)
            except Exception as exc:
                if strict:
                    raise
                failures.append(_caught(exc))
        try:
            # The observed grades count in the run's status counts too.
            run = run_row(prep.meta, prep.trace, [*results, *observed], prep.report, plan, prep.input_digest,
                          prep.source_kind, model_mix(prep.evidence))
            # What the fleet statistics cannot take is said on the run (graders/stats/bounds.py).
            run["warnings"].extend(stats_warnings(prep.meta.date, rows))
        except Exception as exc:
            if strict:
                raise
            failures.append(_caught(exc))
        if failures:  # one dead letter per run, the first failure by (error class, message), and no other row
            return RunGrades([], [], None, None, grade_failure_row(prep.meta, min(failures)))
        return RunGrades(results, rows, run, verdict, None, by_family, drift)

    def _grade_family(self, prep: PreparedRun, plan: GradingPlan, family: str,
                      ids: frozenset[str]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
        executor = self.executors.get(family)
        executors = {family: bind_executor(executor, prep)} if executor is not None else {}
        results = grade_trace(prep.trace, plan, executors, only=ids, file_ir=prep.file_ir)
        return results, result_rows(prep.meta, results, plan, prep.input_digest)

    def grade_files(self, files: RunFiles, run_root: str,
                    identify: Callable[[RunFiles, str], RunMeta] = determine_run_meta) -> RunGrades:
        """Identity, preprocessing and grading of one run folder; raises when it cannot be prepared."""
        return self.grade(prepare_run(files, run_root, identify))
