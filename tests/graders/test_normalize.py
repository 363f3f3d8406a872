"""``normalize_result`` against gh-aw's ``normalizeResult`` as transcribed step by step
(docs/reference/graders.md §4), with and without the plan's result template."""

from __future__ import annotations

import copy
import math
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from graders.grading.normalize import (
    SEVERITIES,
    evaluate_threshold,
    fresh_base,
    normalize_result,
    result_base,
)
from graders.grading.plan import PlanEntry, default_plan
from graders.jsrt.jscompat import UNDEFINED, js_string, js_truthy


def reference(raw: Any, meta: PlanEntry) -> dict[str, Any]:
    base = result_base(meta)
    if raw is None or raw is UNDEFINED:
        base["status"] = "unavailable"
        base["message"] = "grader returned null/undefined"
        return base
    if isinstance(raw, dict):
        value = raw.get("value", UNDEFINED)
        if isinstance(raw.get("severity"), str) and raw["severity"] in SEVERITIES:
            base["severity"] = raw["severity"]
        if js_truthy(raw.get("details")):
            base["details"] = js_string(raw["details"])
        if js_truthy(raw.get("message")):
            base["message"] = js_string(raw["message"])
        if isinstance(raw.get("passed"), bool):
            base["passed"] = raw["passed"]
        if isinstance(raw.get("metrics"), list):
            base["metrics"] = copy.deepcopy(raw["metrics"])
        if isinstance(raw.get("diagnostics"), dict):
            base["diagnostics"] = copy.deepcopy(raw["diagnostics"])
    else:
        value = raw
    if value is None or value is UNDEFINED:
        base["status"] = "unavailable"
        if not js_truthy(base.get("message")):
            base["message"] = "grader returned no value"
        return base
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        base["status"] = "error"
        base["error"] = f"grader {meta.id} returned non-finite value: {js_string(value)}"
        return base
    base["value"] = value
    if base["passed"] is None:
        base["passed"] = evaluate_threshold(value, meta.direction, meta.threshold)
    base["status"] = "fail" if base["passed"] is False else "pass"
    return base


_VALUE = st.one_of(st.none(), st.just(UNDEFINED), st.integers(-(2**60), 2**60), st.floats(), st.booleans(),
                   st.sampled_from(["", "1", "x"]), st.lists(st.integers(0, 2), max_size=2))
_RAW = st.one_of(_VALUE, st.fixed_dictionaries({}, optional={
    "value": _VALUE,
    "passed": st.one_of(st.none(), st.booleans(), st.just(1)),
    "message": st.sampled_from(["", "m", 0, 1, None, UNDEFINED]),
    "details": st.sampled_from(["", "d", None, 0, 2.5]),
    "severity": st.sampled_from(["error", "note", "other", 3, None]),
    "metrics": st.one_of(st.none(), st.lists(st.fixed_dictionaries({"id": st.just("a"), "value": st.floats()}))),
    "diagnostics": st.one_of(st.just([]), st.dictionaries(st.sampled_from(["b", "a"]), st.integers(0, 3))),
}))
_ENTRIES = default_plan().enabled


@settings(max_examples=500, deadline=None)
@given(_RAW, st.sampled_from(_ENTRIES), st.booleans())
def test_normalize_is_normalize_result_as_written(raw, entry, templated):
    base = fresh_base(result_base(entry)) if templated else None
    got = normalize_result(raw, entry, base)
    want = reference(raw, entry)
    assert got == want
    assert list(got) == list(want)  # the same keys in the same order: the result's JSON text


def test_a_number_too_large_for_a_float_fails_as_before():
    with pytest.raises(OverflowError):
        normalize_result(10**400, _ENTRIES[0])
