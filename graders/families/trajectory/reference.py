"""Comparisons against the IR's ``reference``: tool-wise prefix score, state nDTW, code-search
recall (docs/reference/graders.md §7).

nDTW uses costs 0/1, so the reference's O(|R|·|Q|) scalar DP is run one row at a time with
numpy: with a_j = min(D[i−1][j], D[i−1][j−1]) and non-negative costs c_j, the in-row
recurrence D[i][j] = c_j + min(a_j, D[i][j−1]) unrolls to
D[i][j] = C_j + min_{k≤j}(a_k − C_{k−1}) with C the prefix sums of c, i.e. one cumulative
minimum per row.
"""

from __future__ import annotations

import math
from typing import Any, Final

import numpy as np

from graders.families.trajectory.ir import Raw, Record, Trace, candidates, non_empty_str, unavailable
from graders.grading.registry import GraderContext
from graders.jsrt.jscompat import (
    UNDEFINED,
    is_record,
    is_safe_integer,
    js_to_fixed,
    js_trim,
    stable_stringify,
)

_MAX_LISTED: Final = 5


def _valid_call(call: Any) -> bool:
    if not is_record(call) or not non_empty_str(call.get("name")):
        return False
    args = call.get("arguments", UNDEFINED)
    return args is UNDEFINED or args is None or is_record(args)


def _argument_score(reference: Any, actual: Any) -> float:
    """Fraction of the reference's argument keys whose values match canonically (1 with none)."""
    ref = reference if is_record(reference) else {}
    if not ref:
        return 1
    got = actual if is_record(actual) else {}
    # Key-sorted JSON compares values independently of key order; both sides are JSON data
    # here, so stable_stringify agrees with the reference's canonical().
    hits = sum(1 for k, v in ref.items() if k in got and _same_json(got[k], v))
    return hits / len(ref)


def _same_json(a: Any, b: Any) -> bool:
    """Canonical-JSON equality, with exact shortcuts for scalars (bool is never a number)."""
    if isinstance(a, str) and isinstance(b, str):
        return a == b
    if isinstance(a, bool) or isinstance(b, bool):
        return a is b
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return a == b  # 1 and 1.0 both print "1"; -0.0 and 0 both print "0"
    return stable_stringify(a) == stable_stringify(b)


def tool_wise_score(trace: Trace, config: Record, ctx: GraderContext) -> Raw:
    """Longest name-matching prefix against ``reference.toolCalls``, half credit per step for
    the name and half for the arguments."""
    ir = next(
        (c for c in candidates(trace, ctx, include_trace=True)
         if is_record(c.get("reference")) and isinstance(c["reference"].get("toolCalls"), list)),
        None,
    )
    if ir is None or not ir["reference"]["toolCalls"]:
        return unavailable("not applicable: no reference tool-call trajectory")
    expected = ir["reference"]["toolCalls"]
    if not all(_valid_call(c) for c in expected):
        return unavailable("unavailable: malformed reference tool call")
    calls = ir.get("toolCalls")
    if not isinstance(calls, list) or not all(_valid_call(c) for c in calls):
        return unavailable("unavailable: trace lacks well-formed toolCalls")
    indexed = sum(1 for c in calls if is_safe_integer(c.get("eventIndex")) and c["eventIndex"] >= 0)
    if indexed not in (0, len(calls)):
        return unavailable("unavailable: toolCalls mix indexed and unindexed entries")
    observed = sorted(calls, key=lambda c: c["eventIndex"]) if indexed else list(calls)
    prefix = 0
    credit = 0.0
    while prefix < len(expected) and prefix < len(observed) and observed[prefix]["name"] == expected[prefix]["name"]:
        args_score = _argument_score(expected[prefix].get("arguments"), observed[prefix].get("arguments"))
        credit += (1 + args_score) / 2
        prefix += 1
    diverged = ""
    if prefix < len(expected):
        got = observed[prefix]["name"] if prefix < len(observed) else "end of trace"
        diverged = f"; diverged at step {prefix + 1}: expected {expected[prefix]['name']}, got {got}"
    return {
        "value": credit / len(expected),
        "details": (
            f"referenceSteps={len(expected)} observedSteps={len(observed)} correctPrefix={prefix} "
            f"credit={js_to_fixed(credit, 2)}{diverged}"
        ),
    }


def dtw_distance(reference: list[str], path: list[str]) -> int:
    """DTW distance with cost 0 on equal ids and 1 otherwise."""
    # DTW with a symmetric cost is symmetric: loop over the shorter side, vectorize the longer.
    if len(path) < len(reference):
        reference, path = path, reference
    codes: dict[str, int] = {}
    ref = np.array([codes.setdefault(s, len(codes)) for s in reference], dtype=np.int64)
    obs = np.array([codes.setdefault(s, len(codes)) for s in path], dtype=np.int64)
    m = len(obs)
    big = np.int64(len(reference) + m + 1)  # larger than any real distance: stands for Infinity
    previous = np.full(m + 1, big, dtype=np.int64)
    previous[0] = 0
    for r in ref:
        cost = (obs != r).astype(np.int64)
        prefix_cost = np.concatenate(([0], np.cumsum(cost)))
        a = np.minimum(previous[1:], previous[:-1])  # a_j for j = 1..m
        current = np.empty(m + 1, dtype=np.int64)
        current[0] = big
        current[1:] = prefix_cost[1:] + np.minimum.accumulate(a - prefix_cost[:-1])
        np.minimum(current, big, out=current)
        previous = current
    return int(previous[m])


def trajectory_ndtw(trace: Trace, config: Record, ctx: GraderContext) -> Raw:
    """exp(−DTW / |reference|) between ``reference.states`` and the state_change refs in array order."""
    ir = next(
        (c for c in candidates(trace, ctx, include_trace=True)
         if is_record(c.get("reference")) and isinstance(c["reference"].get("states"), list)),
        None,
    )
    if ir is None or not ir["reference"]["states"]:
        return unavailable("not applicable: no reference state trajectory")
    reference = ir["reference"]["states"]
    if not all(non_empty_str(s) for s in reference):
        return unavailable("unavailable: reference states must be non-empty state ids")
    events = ir.get("events")
    if not isinstance(events, list) or not all(is_record(e) for e in events):
        return unavailable("unavailable: trace lacks well-formed events")
    # Array order, not sorted by index (§14.9).
    path = [e.get("ref") for e in events if e.get("kind") == "state_change"]
    if not path:
        return unavailable("unavailable: trace has no state_change events")
    if not all(non_empty_str(s) for s in path):
        return unavailable("unavailable: state_change event is missing a state id")
    distance = dtw_distance(reference, path)
    value = math.exp(-distance / len(reference))
    return {
        "value": min(1.0, max(0.0, value)),
        "details": f"referenceStates={len(reference)} observedStates={len(path)} dtwDistance={distance}",
    }


def _normalize_path(value: str) -> str:
    """``trim()``, then one leading ``./``, then every leading ``/``."""
    text = js_trim(value)
    if text.startswith("./"):
        text = text[2:]
    return text.lstrip("/")


def code_search_recall(trace: Trace, config: Record, ctx: GraderContext) -> Raw:
    """Distinct reference patch files that appear among located ``file`` resources."""
    ir = next(
        (c for c in candidates(trace, ctx, include_trace=True)
         if is_record(c.get("reference")) and is_record(c["reference"].get("patch"))
         and isinstance(c["reference"]["patch"].get("files"), list)),
        None,
    )
    if ir is None or not ir["reference"]["patch"]["files"]:
        return unavailable("not applicable: no reference patch files")
    required = [
        f if isinstance(f, str) else f["path"] if is_record(f) and isinstance(f.get("path"), str) else ""
        for f in ir["reference"]["patch"]["files"]
    ]
    if any(_normalize_path(f) == "" for f in required):
        return unavailable("unavailable: reference patch file is missing a path")
    resources = ir.get("resources")
    if not isinstance(resources, list) or not all(is_record(r) for r in resources):
        return unavailable("unavailable: trace lacks well-formed resources")
    located = {_normalize_path(r["uri"]) for r in resources if r.get("kind") == "file" and isinstance(r.get("uri"), str)}
    located.discard("")
    wanted = list(dict.fromkeys(_normalize_path(f) for f in required))  # distinct, first-seen order
    missed = [f for f in wanted if f not in located]
    found = len(wanted) - len(missed)
    details = f"referenceFiles={len(wanted)} located={found}"
    if missed:
        details += f"; never located: {', '.join(missed[:_MAX_LISTED])}"
    return {"value": found / len(wanted), "details": details}
