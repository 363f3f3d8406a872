"""The 10 basic built-in graders of gh-aw (docs/reference/graders.md §6), registered in registry order."""

from __future__ import annotations

import math
from typing import Any

from graders.grading.registry import GraderContext, GraderSpec, per_run, register
from graders.jsrt.jscompat import UNDEFINED, js_number_or_zero, js_string, js_stringify, js_truthy
from graders.jsrt.lazyjson import JsonLines
from graders.jsrt.lazylist import SafeInts, positions

Trace = dict[str, Any]


def is_tool_failure(call: Any) -> bool:
    """Failed, unfinished (``completed: false``), error status, or carrying an ``error``."""
    if not isinstance(call, dict):
        return False
    return (
        call.get("success") is False
        or call.get("completed") is False
        or call.get("status") in ("error", "failure")
        or "error" in call
    )


def _failure_count(trace: Trace, ctx: GraderContext | None) -> int:
    """Failed tool calls, counted once per run (two graders ask)."""
    return per_run(ctx, trace, "builtin.failures", lambda: sum(map(is_tool_failure, trace["toolCalls"])))


def tool_success_rate(trace: Trace, ctx: GraderContext) -> float:
    calls = trace["toolCalls"]
    if not calls:
        return 1
    return (len(calls) - _failure_count(trace, ctx)) / len(calls)


def tool_failure_count(trace: Trace, ctx: GraderContext) -> int:
    return _failure_count(trace, ctx)


def retries(trace: Trace, ctx: GraderContext) -> int:
    return len(trace["retryEvents"])


def _or(*values: Any) -> Any:
    for v in values[:-1]:
        if js_truthy(v):
            return v
    return values[-1]


def _call_name(c: dict[str, Any]) -> Any:
    """``call.name || call.tool`` (a non-empty string name is the common case)."""
    name = c.get("name", UNDEFINED)
    if type(name) is str and name:
        return name
    return _or(name, c.get("tool", UNDEFINED))


def _loop_args(c: dict[str, Any]) -> Any:
    args = c.get("arguments", UNDEFINED)
    if type(args) is not dict and type(args) is not list:  # objects and arrays are truthy
        args = _or(args, c.get("params", UNDEFINED), "")
    return args


_UNSET: Any = object()
_NO_RECORD: dict[str, Any] = {}


def _names_of_calls(trace: Trace, ctx: GraderContext | None) -> list[Any]:
    """``call.name || call.tool`` of every call, once per run (two graders read them)."""
    return per_run(ctx, trace, "builtin.call_names",
                   lambda: [_call_name(c if isinstance(c, dict) else _NO_RECORD) for c in trace["toolCalls"]])


def loops(trace: Trace, ctx: GraderContext) -> int:
    """Consecutive calls with equal ``${name}:${JSON.stringify(args)}`` keys.

    Key-order-sensitive JSON on purpose: the reference compares JSON.stringify output
    (docs/reference/graders.md §14.10), unlike the key-sorted dedupe keys. Two keys are equal exactly when
    the names and the JSON texts are (a suffix of compact JSON after a ":" is never JSON
    itself), so the arguments are written out only for a call whose name repeats the one
    before it (a third of the calls of a large run).
    """
    count = 0
    prev_name: str | None = None
    prev_args: Any = None
    prev_text: Any = _UNSET  # the previous call's JSON text, once written out
    for call, name in zip(trace["toolCalls"], _names_of_calls(trace, ctx), strict=True):
        name_text = name if type(name) is str else js_string(name)
        args = _loop_args(call if isinstance(call, dict) else _NO_RECORD)
        if name_text == prev_name:
            if prev_text is _UNSET:
                prev_text = js_stringify(prev_args)
            text = js_stringify(args)
            if text == prev_text:
                count += 1
            prev_text = text
        else:
            prev_text = _UNSET
        prev_name = name_text
        prev_args = args
    return count


def trajectory_efficiency(trace: Trace, ctx: GraderContext) -> float:
    calls = trace["toolCalls"]
    if not calls:
        return 1
    names = _names_of_calls(trace, ctx)
    distinct = set(names) if set(map(type, names)) == {str} else {
        name if type(name) is str else js_string(_or(name, "")) for name in names}
    return min(1, len(distinct) / len(calls))


def execution_step_count(trace: Trace, ctx: GraderContext) -> float:
    return trace["totalRequests"]


def execution_duration(trace: Trace, ctx: GraderContext) -> float:
    return trace["totalDurationMs"]


_MAX_SAFE_INT = 2**53 - 1


def _safe_nonneg_int(value: Any) -> int | None:
    if type(value) is int:  # the common case, without the float checks
        return value if 0 <= value <= _MAX_SAFE_INT else None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    if isinstance(value, float) and not (math.isfinite(value) and value.is_integer()):
        return None
    n = int(value)
    if n < 0 or n > 2**53 - 1:
        return None
    return n


def _counted_ints(raw: list[Any]) -> list[int] | None:
    """The column as the working-set grader counts it, when that needs no per-value test:
    ints and strings only (a string is never counted, so it reads as 0), every int within
    0..2**53 - 1. Otherwise None."""
    if type(raw) is not SafeInts:
        kinds = set(map(type, raw))
        if not kinds <= {int, str}:
            return None
        if str in kinds:
            raw = list(raw)
            for i in positions(list(map(type, raw)), str):
                raw[i] = 0
    if raw and (min(raw) < 0 or max(raw) > _MAX_SAFE_INT):
        return None
    return raw


def working_set_rebuild_factor(trace: Trace, ctx: GraderContext) -> float | None:
    """Cumulative / peak of valid ``input_tokens``; null when the peak is 0."""
    entries = trace["tokenUsageEntries"]
    # Preprocessing extracts the raw column as it parses; a trace read from JSON has none.
    column = entries.columns.get("input_tokens") if isinstance(entries, JsonLines) else None
    raw = column if column is not None else [e.get("input_tokens") if isinstance(e, dict) else None for e in entries]
    total = 0
    peak = 0
    ints = _counted_ints(raw)
    if ints is not None:
        total, peak, raw = sum(ints), max(ints, default=0), []
    for value in raw:
        # _safe_nonneg_int's int case inlined: once per token record, nearly all of them ints.
        if type(value) is int:
            if 0 <= value <= _MAX_SAFE_INT:
                total += value
                if value > peak:
                    peak = value
            continue
        n = _safe_nonneg_int(value)
        if n is None:
            continue
        total += n
        if n > peak:
            peak = n
    if peak == 0:
        return None
    ratio = float(total) / float(peak)
    return max(1.0, ratio) if math.isfinite(ratio) else 1


def context_growth(trace: Trace, ctx: GraderContext) -> float:
    entries = trace["tokenUsageEntries"]
    if len(entries) < 2:
        return 1
    first = entries[0] if isinstance(entries[0], dict) else {}
    first_tokens = js_number_or_zero(first.get("input_tokens")) + js_number_or_zero(first.get("output_tokens"))
    if first_tokens == 0:
        return 1
    total = trace["totalInputTokens"] + trace["totalOutputTokens"]
    try:
        return total / first_tokens
    except ZeroDivisionError:  # pragma: no cover - first_tokens != 0 here
        return math.nan


def artifact_production(trace: Trace, ctx: GraderContext) -> int:
    return len(trace["artifacts"])


for _id, _name, _desc, _unit, _dir, _thr, _min, _max, _fn in (
    ("tool-success-rate", "Tool Success Rate", "Fraction of tool calls that succeeded",
     "ratio", "higher_is_better", 0.8, 0, 1, tool_success_rate),
    ("tool-failure-count", "Tool Failure Count", "Number of tool calls that failed",
     "count", "lower_is_better", 5, None, None, tool_failure_count),
    ("retries", "Retries", "Number of retry events detected in gateway logs",
     "count", "lower_is_better", 10, None, None, retries),
    ("loops", "Loops", "Consecutive identical tool calls (same name and arguments)",
     "count", "lower_is_better", 3, None, None, loops),
    ("trajectory-efficiency", "Trajectory Efficiency",
     "Ratio of unique tool names to total tool calls (higher = more diverse usage)",
     "ratio", "higher_is_better", None, 0, 1, trajectory_efficiency),
    ("execution-step-count", "Execution Step Count", "Total LLM request count",
     "count", "lower_is_better", None, None, None, execution_step_count),
    ("execution-duration", "Execution Duration", "Total execution duration",
     "ms", "lower_is_better", None, None, None, execution_duration),
    ("working-set-rebuild-factor", "Working-Set Rebuild Factor",
     "Cumulative input tokens divided by peak invocation input tokens",
     "factor", "lower_is_better", None, 1, None, working_set_rebuild_factor),
    ("context-growth", "Context Growth", "Ratio of total tokens to first-request tokens",
     "factor", "lower_is_better", None, None, None, context_growth),
    ("artifact-production", "Artifact Production", "Count of outputs/artifacts produced by the agent",
     "count", "higher_is_better", None, None, None, artifact_production),
):
    register(GraderSpec(id=_id, name=_name, description=_desc, unit=_unit, direction=_dir,  # type: ignore[arg-type]
                        family="builtin", fn=_fn, threshold=_thr, min=_min, max=_max))

BUILTIN_IDS = tuple(s for s in (
    "tool-success-rate", "tool-failure-count", "retries", "loops", "trajectory-efficiency",
    "execution-step-count", "execution-duration", "working-set-rebuild-factor", "context-growth",
    "artifact-production",
))
