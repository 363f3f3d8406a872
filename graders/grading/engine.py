"""Run a grading plan over one preprocessed trace (``main()`` step 7 of docs/reference/graders.md §4)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

import orjson

from graders.grading import registry
from graders.grading.normalize import error_result, fresh_base, normalize_result
from graders.grading.plan import GradingPlan, PlanEntry
from graders.grading.registry import GraderContext


class Executor(Protocol):
    """Runs one sandboxed grader (inline JS, operational-value Bash) and returns its raw output."""

    def __call__(self, entry: PlanEntry, trace: dict[str, Any], ctx: GraderContext) -> Any: ...


class TimeoutBreaker:
    """An executor that stops running a grader once it timed out on ``limit`` consecutive runs.

    A looping inline script cost its full time limit on every run (0.2 runs/s). After ``limit``
    consecutive timeouts (an executor marks them with ``timed_out`` on the exception), every further
    call fails at once, saying why, at no cost; any other outcome resets the count. The counts are
    this worker's, kept across the runs it grades in this job (not across workers: which runs a
    tripped grader skipped then depends on how a runner hands out runs, docs/sandboxing.md). A grader
    is its id and digest, so a fixed script starts afresh."""

    def __init__(self, inner: Any, limit: int, streaks: dict[tuple[str, str], int] | None = None) -> None:
        self.inner, self.limit = inner, limit
        self.streaks: dict[tuple[str, str], int] = {} if streaks is None else streaks

    def __call__(self, entry: PlanEntry, trace: dict[str, Any], ctx: GraderContext) -> Any:
        key = (entry.id, entry.digest)
        streak = self.streaks.get(key, 0)
        if self.limit and streak >= self.limit:
            raise RuntimeError(f"not run: it timed out on {streak} consecutive runs of this job, so it is errored "
                               "for the rest of the job (--grader-timeout-limit)")
        try:
            raw = self.inner(entry, trace, ctx)
        except Exception as exc:
            self.streaks[key] = streak + 1 if getattr(exc, "timed_out", False) else 0
            raise
        self.streaks[key] = 0
        return raw

    def __getattr__(self, name: str) -> Any:
        """The inner executor's other parts (``close``); ``for_run`` binds it, sharing the counts."""
        attr = getattr(self.inner, name)
        if name == "for_run":
            return lambda *args, **kwargs: TimeoutBreaker(attr(*args, **kwargs), self.limit, self.streaks)
        return attr


def describe_exception(exc: BaseException) -> str:
    """The message part of ``getErrorMessage(err)``."""
    js_message = getattr(exc, "js_message", None)
    if isinstance(js_message, str):
        return js_message  # a JavaScript error's own message, even an empty one
    return str(exc) or type(exc).__name__


_LOOKUP: Any = object()


def registered_spec(entry: PlanEntry) -> registry.GraderSpec | None:
    """The registered function that grades ``entry``, None when an executor (or nothing) does."""
    return registry.get(entry.id) if entry.source in registry.REGISTERED_SOURCES else None


def grade_one(
    entry: PlanEntry,
    trace: dict[str, Any],
    ctx: GraderContext,
    executors: Mapping[str, Executor] | None = None,
    template: dict[str, Any] | None = None,
    spec: registry.GraderSpec | None = _LOOKUP,
) -> dict[str, Any]:
    """One grader's normalized result; ``template``: the entry's ``GradingPlan.result_templates``;
    ``spec``: its ``registered_spec``, when the caller has looked it up."""
    if entry.error:
        return error_result(entry, f"grader {entry.id} runtime error: {entry.error}")
    if spec is _LOOKUP:
        spec = registered_spec(entry)
    if spec is None and not (executors and entry.family in executors):
        result = normalize_result(None, entry)
        result["status"] = "unavailable"
        result["error"] = f"grader {entry.id}: no implementation available"
        return result
    try:
        raw = spec.fn(trace, ctx) if spec is not None else executors[entry.family](entry, trace, ctx)  # type: ignore[index]
    except Exception as exc:  # a grader failure is a result, never a crashed run
        return error_result(entry, f"grader {entry.id} runtime error: {describe_exception(exc)}")
    try:
        result = normalize_result(raw, entry, None if template is None else fresh_base(template))
        storable(result)
    except Exception as exc:  # what it returned cannot be kept (a RecursionError copying it…): its own error
        return error_result(entry, f"grader {entry.id} returned a result that cannot be stored: "
                                   f"{describe_exception(exc)}")
    return result


def storable(result: dict[str, Any]) -> None:
    """Raise unless the result's free-form parts can be written as the rows' JSON text
    (``graders.tables.rows``): orjson refuses values nested deeper than 254 levels."""
    if "diagnostics" in result or "metrics" in result:
        orjson.dumps([result.get("diagnostics"), result.get("metrics")], option=orjson.OPT_SORT_KEYS)


def grade_trace(
    trace: dict[str, Any],
    plan: GradingPlan,
    executors: Mapping[str, Executor] | None = None,
    only: frozenset[str] | None = None,
    file_ir: Any = None,
    evidence: Any = None,
) -> list[dict[str, Any]]:
    """Every enabled grader of ``plan`` (or those in ``only``), in manifest order.

    ``run.graderCount`` is always the plan's enabled count, also when the pipeline grades one
    family at a time. ``file_ir`` is the parsed ``trajectory_ir.json``
    (``preprocess.read_trajectory_ir_file``); ``evidence`` the run's ``RunEvidence``
    (graders/formats/evidence.py), which the observed family grades.
    """
    count = len(plan.enabled)
    results = []
    run_memo: dict[Any, Any] = {}
    shared: GraderContext | None = None
    for entry, template, spec in plan.derived("engine.graded", lambda: _graded(plan)):
        if only is not None and entry.id not in only:
            continue
        if entry.config is None:
            # Graders without a config share one context (and its empty config) per call.
            if shared is None:
                shared = GraderContext(config={}, grader_count=count, file_ir=file_ir, evidence=evidence,
                                       run_memo=run_memo)
            ctx = shared
        else:
            ctx = GraderContext(config=entry.config, grader_count=count, file_ir=file_ir, evidence=evidence,
                                run_memo=run_memo)
        results.append(grade_one(entry, trace, ctx, executors, template, spec))
    return results


def _graded(plan: GradingPlan) -> tuple[tuple[PlanEntry, dict[str, Any], registry.GraderSpec | None], ...]:
    """Each enabled entry with its result template and registered function: once per plan."""
    return tuple(zip(plan.enabled, plan.result_templates, map(registered_spec, plan.enabled), strict=True))


def results_document(
    results: list[dict[str, Any]],
    run_id: str = "",
    attempt: int = 1,
    evals: dict[str, Any] | None = None,
    experiments: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """``grader_results.json`` (unavailable results count in none of passed/failed/errors)."""
    context: dict[str, Any] = {}
    if experiments:
        context["experiments"] = experiments
    if evals:
        context["evals"] = evals
    return {
        "version": 1,
        "run": {
            "id": run_id,
            "attempt": attempt,
            "graderCount": len(results),
            "passed": sum(r["status"] == "pass" for r in results),
            "failed": sum(r["status"] == "fail" for r in results),
            "errors": sum(r["status"] == "error" for r in results),
        },
        "context": context,
        "results": results,
    }
