"""The 10 basic built-in graders of gh-aw (docs/reference/graders.md §6): family ``builtin``, defined (and so
registered) in gh-aw's registry order, which is the plan's order."""

from __future__ import annotations

import math
from typing import Any

from graders.formats.ghaw.toolcalls import FAILED_STATUSES
from graders.grading.registry import GraderContext, grader, per_run
from graders.jsrt.jscompat import UNDEFINED, js_number_or_zero, js_string, js_stringify, js_truthy
from graders.jsrt.lazyjson import count_column
from graders.jsrt.lazylist import known_safe_ints, positions

Trace = dict[str, Any]


def _count_failures(calls: list[Any]) -> int:
    """``sum(map(is_tool_failure, calls))`` with its tests inlined: once per call of every run."""
    return len([c for c in calls if isinstance(c, dict) and (
        c.get("success") is False or c.get("completed") is False or c.get("status") in FAILED_STATUSES or "error" in c)])


def _failure_count(trace: Trace, ctx: GraderContext | None) -> int:
    """Failed tool calls, counted once per run (two graders ask)."""
    return per_run(ctx, trace, "builtin.failures", lambda: _count_failures(trace["toolCalls"]))


@grader("tool-success-rate", name="Tool Success Rate", description="Fraction of tool calls that succeeded",
        unit="ratio", direction="higher_is_better", threshold=0.8, min=0, max=1, family="builtin")
def tool_success_rate(trace: Trace, ctx: GraderContext) -> float:
    calls = trace["toolCalls"]
    if not calls:
        return 1
    return (len(calls) - _failure_count(trace, ctx)) / len(calls)


@grader("tool-failure-count", name="Tool Failure Count", description="Number of tool calls that failed",
        unit="count", direction="lower_is_better", threshold=5, family="builtin")
def tool_failure_count(trace: Trace, ctx: GraderContext) -> int:
    return _failure_count(trace, ctx)


@grader("retries", name="Retries", description="Number of retry events detected in gateway logs",
        unit="count", direction="lower_is_better", threshold=10, family="builtin")
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
    return name if js_truthy(name) else c.get("tool", UNDEFINED)


def _loop_args(c: dict[str, Any]) -> Any:
    """``call.arguments || call.params || ""``."""
    args = c.get("arguments", UNDEFINED)
    if type(args) is dict or type(args) is list or js_truthy(args):  # objects and arrays are truthy
        return args
    params = c.get("params", UNDEFINED)
    return params if js_truthy(params) else ""


_UNSET: Any = object()
_NO_RECORD: dict[str, Any] = {}


def _names_of_calls(trace: Trace, ctx: GraderContext | None) -> list[Any]:
    """``call.name || call.tool`` of every call, once per run (two graders read them)."""
    return per_run(ctx, trace, "builtin.call_names", lambda: _call_names(trace["toolCalls"]))


def _call_names(calls: list[Any]) -> list[Any]:
    # A record's non-empty string name is taken inline (most calls); the rest ask _call_name.
    return [name if isinstance(c, dict) and type(name := c.get("name")) is str and name
            else _call_name(c if isinstance(c, dict) else _NO_RECORD) for c in calls]


@grader("loops", name="Loops", description="Consecutive identical tool calls (same name and arguments)",
        unit="count", direction="lower_is_better", threshold=3, family="builtin")
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
    prev_call: Any = None
    prev_text: Any = _UNSET  # the previous call's JSON text, once written out
    for call, name in zip(trace["toolCalls"], _names_of_calls(trace, ctx), strict=True):
        name_text = name if type(name) is str else js_string(name)
        if name_text == prev_name:  # only then are the arguments looked up, and written out
            if prev_text is _UNSET:
                prev_text = js_stringify(_loop_args(prev_call if isinstance(prev_call, dict) else _NO_RECORD))
            text = js_stringify(_loop_args(call if isinstance(call, dict) else _NO_RECORD))
            if text == prev_text:
                count += 1
            prev_text = text
        else:
            prev_text = _UNSET
        prev_name = name_text
        prev_call = call
    return count


# Name types whose equal values convert to equal texts: a gateway record's name is often undefined.
_PLAIN_NAMES = frozenset({str, type(UNDEFINED), type(None)})


@grader("trajectory-efficiency", name="Trajectory Efficiency",
        description="Ratio of unique tool names to total tool calls (higher = more diverse usage)",
        unit="ratio", direction="higher_is_better", min=0, max=1, family="builtin")
def trajectory_efficiency(trace: Trace, ctx: GraderContext) -> float:
    calls = trace["toolCalls"]
    if not calls:
        return 1
    names = _names_of_calls(trace, ctx)
    try:
        seen = set(names)
    except TypeError:  # an array or object name
        seen = None
    if seen is not None and set(map(type, seen)) <= _PLAIN_NAMES:
        # Equal Python values have equal texts for these types (not for True and 1), so the
        # texts of the distinct values are the distinct texts.
        distinct = {name if type(name) is str else js_string(_or(name, "")) for name in seen}
    else:
        distinct = {name if type(name) is str else js_string(_or(name, "")) for name in names}
    return min(1, len(distinct) / len(calls))


@grader("execution-step-count", name="Execution Step Count", description="Total LLM request count",
        unit="count", direction="lower_is_better", family="builtin")
def execution_step_count(trace: Trace, ctx: GraderContext) -> float:
    return trace["totalRequests"]


@grader("execution-duration", name="Execution Duration", description="Total execution duration", unit="ms",
        direction="lower_is_better", family="builtin")
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


def _counted_ints(raw: list[Any]) -> tuple[int, int] | None:
    """(total, peak) of the column as the working-set grader counts it, when that needs no
    per-value test: ints and strings only (a string is never counted, so it reads as 0), every
    int within 0..2**53 - 1. Otherwise None."""
    if not known_safe_ints(raw):
        types = list(map(type, raw))
        kinds = set(types)
        if not kinds <= {int, str}:
            return None
        if str in kinds:
            raw = list(raw)
            for i in positions(types, str):
                raw[i] = 0
    if not raw:
        return 0, 0
    peak = max(raw)
    if peak > _MAX_SAFE_INT or min(raw) < 0:
        return None
    return sum(raw), peak


@grader("working-set-rebuild-factor", name="Working-Set Rebuild Factor",
        description="Cumulative input tokens divided by peak invocation input tokens", unit="factor",
        direction="lower_is_better", min=1, family="builtin")
def working_set_rebuild_factor(trace: Trace, ctx: GraderContext) -> float | None:
    """Cumulative / peak of valid ``input_tokens``; null when the peak is 0."""
    entries = trace["tokenUsageEntries"]
    raw = count_column(entries, "input_tokens")
    total = 0
    peak = 0
    counted = _counted_ints(raw)
    if counted is not None:
        (total, peak), raw = counted, []
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


@grader("context-growth", name="Context Growth", description="Ratio of total tokens to first-request tokens",
        unit="factor", direction="lower_is_better", family="builtin")
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


@grader("artifact-production", name="Artifact Production",
        description="Count of outputs/artifacts produced by the agent", unit="count",
        direction="higher_is_better", family="builtin")
def artifact_production(trace: Trace, ctx: GraderContext) -> int:
    return len(trace["artifacts"])
