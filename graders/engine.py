"""Run a grading plan over one preprocessed trace (``main()`` step 7 of graders.md §4)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Protocol

import orjson

from graders import registry
from graders.normalize import ResultMeta, error_result, normalize_result, result_template
from graders.plan import GradingPlan, PlanEntry
from graders.registry import GraderContext


class Executor(Protocol):
    """Runs one sandboxed grader (inline JS, operational-value Bash) and returns its raw output."""

    def __call__(self, entry: PlanEntry, trace: dict[str, Any], ctx: GraderContext) -> Any: ...


def result_meta(entry: PlanEntry) -> ResultMeta:
    return ResultMeta(
        id=entry.id,
        name=entry.name or entry.id,
        description=entry.description or "",
        unit=entry.unit or "",
        direction=entry.direction or "",
        threshold=entry.threshold,
        source=entry.source or "builtin",
        digest=entry.digest,
    )


def describe_exception(exc: BaseException) -> str:
    """The message part of ``getErrorMessage(err)``."""
    js_message = getattr(exc, "js_message", None)
    if isinstance(js_message, str):
        return js_message  # a JavaScript error's own message, even an empty one
    return str(exc) or type(exc).__name__


def grade_one(
    entry: PlanEntry,
    trace: dict[str, Any],
    ctx: GraderContext,
    executors: Mapping[str, Executor] | None = None,
) -> dict[str, Any]:
    return _grade(_Compiled.of(entry), trace, ctx, executors)


class _Compiled:
    """A plan entry with what grading it reads on every run looked up once per plan: its
    result metadata, its registered function and its normalized result's fixed fields."""

    __slots__ = ("entry", "fn", "meta", "template")

    def __init__(self, entry: PlanEntry, meta: ResultMeta, fn: Callable[..., Any] | None) -> None:
        self.entry = entry
        self.meta = meta
        self.fn = fn
        self.template = result_template(meta)

    @classmethod
    def of(cls, entry: PlanEntry) -> _Compiled:
        spec = registry.get(entry.id) if entry.source == "builtin" else None
        return cls(entry, result_meta(entry), spec.fn if spec is not None else None)


def _compiled(plan: GradingPlan) -> list[_Compiled]:
    return [_Compiled.of(e) for e in plan.enabled]


def _grade(c: _Compiled, trace: dict[str, Any], ctx: GraderContext,
           executors: Mapping[str, Executor] | None) -> dict[str, Any]:
    entry = c.entry
    meta = c.meta
    if entry.error:
        return error_result(meta, f"grader {entry.id} runtime error: {entry.error}")
    fn = c.fn
    try:
        if fn is not None:
            raw = fn(trace, ctx)
        elif executors and entry.source in executors:
            raw = executors[entry.source](entry, trace, ctx)
        else:
            result = normalize_result(None, meta, c.template)
            result["status"] = "unavailable"
            result["error"] = f"grader {entry.id}: no implementation available"
            return result
    except Exception as exc:  # a grader failure is a result, never a crashed run
        return error_result(meta, f"grader {entry.id} runtime error: {describe_exception(exc)}")
    try:
        result = normalize_result(raw, meta, c.template)
        storable(result)
    except Exception as exc:  # what it returned cannot be kept (a RecursionError copying it…): its own error
        return error_result(meta, f"grader {entry.id} returned a result that cannot be stored: "
                                  f"{describe_exception(exc)}")
    return result


def storable(result: dict[str, Any]) -> None:
    """Raise unless the result's free-form parts can be written as the rows' JSON text
    (``graders.rows``): orjson refuses values nested deeper than 254 levels."""
    if "diagnostics" in result or "metrics" in result:
        orjson.dumps([result.get("diagnostics"), result.get("metrics")], option=orjson.OPT_SORT_KEYS)


def grade_trace(
    trace: dict[str, Any],
    plan: GradingPlan,
    executors: Mapping[str, Executor] | None = None,
    only: frozenset[str] | None = None,
    file_ir: Any = None,
) -> list[dict[str, Any]]:
    """Every enabled grader of ``plan`` (or those in ``only``), in manifest order.

    ``run.graderCount`` is always the plan's enabled count, also when the pipeline grades one
    family at a time. ``file_ir`` is the parsed ``trajectory_ir.json``
    (``preprocess.read_trajectory_ir_file``).
    """
    count = len(plan.enabled)
    results = []
    run_memo: dict[Any, Any] = {}
    unconfigured: GraderContext | None = None  # one context for the run's graders without a config
    for c in plan.derived("engine.compiled", _compiled):
        entry = c.entry
        if only is not None and entry.id not in only:
            continue
        if entry.config is not None:
            ctx = GraderContext(config=entry.config, grader_count=count, file_ir=file_ir, run_memo=run_memo)
        elif unconfigured is None:
            ctx = unconfigured = GraderContext(config={}, grader_count=count, file_ir=file_ir, run_memo=run_memo)
        else:
            ctx = unconfigured
        results.append(_grade(c, trace, ctx, executors))
    return results


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
