"""One function turns every raw grader output into the gh-aw result shape (docs/reference/graders.md §4).

This mirrors ``normalizeResult`` exactly, JavaScript conversions included, so that values,
statuses and messages agree with the reference.
"""

from __future__ import annotations

import copy
import math
from typing import Any, Final

from graders.jsrt.jscompat import UNDEFINED, js_string, js_truthy
from schemas.grader import ManifestEntry

IMPLEMENTATION_ID: Final = "gh-aw/graders"
GRADER_VERSION: Final = 1
SEVERITIES: Final = ("error", "warning", "info", "note")


def evaluate_threshold(value: float, direction: str, threshold: float | None) -> bool | None:
    if threshold is None:
        return None
    if direction == "higher_is_better":
        return value >= threshold
    if direction == "lower_is_better":
        return value <= threshold
    return None


def _base(meta: ManifestEntry) -> dict[str, Any]:
    base: dict[str, Any] = {"id": meta.id, "name": meta.name or meta.id}
    if meta.description:
        base["description"] = meta.description
    implementation: dict[str, Any] = {"id": IMPLEMENTATION_ID, "version": GRADER_VERSION}
    if meta.digest:
        implementation["digest"] = meta.digest
    base.update(
        value=None,
        unit=meta.unit or "",
        passed=None,
        status="error",
        source=meta.source,
        implementation=implementation,
    )
    return base


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def result_base(meta: ManifestEntry) -> dict[str, Any]:
    """The result of ``meta``'s grader before its raw output is read: what a plan fixes once
    (``GradingPlan.result_templates``); copy it with :func:`fresh_base` before filling it in."""
    return _base(meta)


def fresh_base(template: dict[str, Any]) -> dict[str, Any]:
    """A copy of a :func:`result_base` template that shares nothing with it (same key order)."""
    return {**template, "implementation": dict(template["implementation"])}


def normalize_result(raw: Any, meta: ManifestEntry, base: dict[str, Any] | None = None) -> dict[str, Any]:
    """``normalizeResult(id, rawResult, meta)``; ``base``: a fresh copy of ``meta``'s template, if
    the caller holds one (:func:`fresh_base`)."""
    if base is None:
        base = _base(meta)
    kind = type(raw)
    if (kind is int or kind is float) and math.isfinite(raw):  # a bare number: most graders' output
        passed = base["passed"]
        if passed is None:
            passed = base["passed"] = evaluate_threshold(raw, meta.direction, meta.threshold)
        base["value"] = raw
        base["status"] = "fail" if passed is False else "pass"
        return base
    if raw is None or raw is UNDEFINED:
        base["status"] = "unavailable"
        base["message"] = "grader returned null/undefined"
        return base

    if isinstance(raw, dict):
        get = raw.get
        value = get("value", UNDEFINED)
        severity = get("severity")
        if isinstance(severity, str) and severity in SEVERITIES:
            base["severity"] = severity
        details = get("details")
        if details is not None and js_truthy(details):
            base["details"] = js_string(details)
        message = get("message")
        if message is not None and js_truthy(message):
            base["message"] = js_string(message)
        passed = get("passed")
        if passed is True or passed is False:
            base["passed"] = passed
        metrics = get("metrics")
        if isinstance(metrics, list):
            base["metrics"] = copy.deepcopy(metrics)
        diagnostics = get("diagnostics")
        if isinstance(diagnostics, dict):
            base["diagnostics"] = copy.deepcopy(diagnostics)
    else:
        value = raw

    if value is None or value is UNDEFINED:
        base["status"] = "unavailable"
        if not js_truthy(base.get("message")):
            base["message"] = "grader returned no value"
        return base

    if not _is_number(value) or not math.isfinite(value):
        base["status"] = "error"
        base["error"] = f"grader {meta.id} returned non-finite value: {js_string(value)}"
        return base

    base["value"] = value
    if base["passed"] is None:
        base["passed"] = evaluate_threshold(value, meta.direction, meta.threshold)
    base["status"] = "fail" if base["passed"] is False else "pass"
    return base


def error_result(meta: ManifestEntry, error: str) -> dict[str, Any]:
    """A runtime failure: built from a null raw value, as the reference does (§14.8)."""
    result = normalize_result(None, meta)
    result["status"] = "error"
    result["error"] = error
    return result


def missing_implementation(meta: ManifestEntry) -> dict[str, Any]:
    result = normalize_result(None, meta)
    result["status"] = "error"
    result["error"] = f"grader {meta.id}: no implementation found"
    return result
