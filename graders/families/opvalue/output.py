"""Validate an evaluator's stdout: the newest metric array, or the older attainment object.

Protocol detection, after parsing stdout as JSON (empty stdout is ``null``):

- a JSON **array** is the newest protocol (docs/reference/graders.md §10): a non-empty ordered list of exactly
  ``{id, value}`` items, unique non-blank ids, values null or finite numbers in native scale (no
  range check, as the newest reference). The first item is the primary value.
- a JSON **object** is the older "attainment" protocol (seed 001, "Older design" in §10), accepted
  only when the request carried an ``evidenceAt`` (a regrade); the value must be null or in [0,1]
  and the object carries ``case``, ``opportunityKey``, ``evidenceCutoff``, ``maturesAt`` and
  ``provenance``. Its messages are those of the older Go regrade command.
- anything else, or an object without an evidence time, fails with the newest message
  "operational-value evaluator output must be a non-empty array".
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Final

from graders.families.opvalue.errors import OperationalValueError
from graders.jsrt.jscompat import js_key_order, js_trim
from graders.jsrt.jsonio import JsonError, is_finite_number, parse_json

PREFIX: Final = "operational-value evaluator"
_TIMESTAMP: Final = re.compile(r"(\d{4})-(\d{2})-(\d{2})T(\d{2}):(\d{2}):(\d{2})(?:\.(\d{1,9}))?Z")


def _fail(message: str) -> OperationalValueError:
    return OperationalValueError(f"{PREFIX} {message}")


def parse_stdout(stdout: str) -> Any:
    """``JSON.parse(stdout || "null")``."""
    try:
        return parse_json(stdout or "null")
    except JsonError as exc:
        raise _fail(f"returned invalid JSON: {exc}") from exc


def validate_metrics(output: Any) -> list[dict[str, Any]]:
    """The newest output contract; returns the metrics unchanged."""
    if not isinstance(output, list) or not output:
        raise _fail("output must be a non-empty array")
    seen: set[str] = set()
    for metric in output:
        if not isinstance(metric, dict) or sorted(metric) != ["id", "value"]:
            raise _fail("metrics must contain exactly id and value")
        metric_id = metric["id"]
        if not isinstance(metric_id, str) or js_trim(metric_id) == "" or metric_id in seen:
            raise _fail("metric ids must be non-empty and unique")
        if metric["value"] is not None and not is_finite_number(metric["value"]):
            raise _fail("metric values must be null or finite numbers")
        seen.add(metric_id)
    return output


def metrics_raw_result(metrics: list[dict[str, Any]]) -> dict[str, Any]:
    """``runOperationalValueGrader``'s raw result: primary value, all metrics, the rest as diagnostics."""
    raw: dict[str, Any] = {"value": metrics[0]["value"], "metrics": metrics}
    if len(metrics) > 1:
        rest = {m["id"]: m["value"] for m in metrics[1:]}
        # Object.fromEntries orders integer-like keys first, as any JS object does.
        raw["diagnostics"] = {k: rest[k] for k in js_key_order(rest)}
    return raw


def parse_timestamp(text: Any, label: str) -> datetime:
    """A UTC ``YYYY-MM-DDTHH:MM:SS[.fraction]Z`` timestamp (the Go layouts accept any fraction)."""
    match = _TIMESTAMP.fullmatch(text) if isinstance(text, str) else None
    if match is None:
        raise OperationalValueError(f"{label} must be a UTC ISO-8601 timestamp")
    year, month, day, hour, minute, second, fraction = match.groups()
    try:
        return datetime(int(year), int(month), int(day), int(hour), int(minute), int(second),
                        int((fraction or "0").ljust(6, "0")[:6]), tzinfo=UTC)
    except ValueError:
        raise OperationalValueError(f"{label} must be a UTC ISO-8601 timestamp") from None


@dataclass(frozen=True)
class Attainment:
    """A validated attainment output at one evidence time."""

    value: float | None
    case: dict[str, Any]
    opportunity_key: str
    evidence_at: str
    evidence_cutoff: str
    matures_at: str
    mature: bool
    provenance: list[dict[str, Any]]
    message: str
    diagnostics: dict[str, Any] | None
    baseline_value: float | None
    delta_from_baseline: float | None

    def raw_result(self) -> dict[str, Any]:
        """Input for ``normalize_result`` (it keeps value, message and diagnostics)."""
        raw: dict[str, Any] = {"value": self.value}
        if self.message:
            raw["message"] = self.message
        if self.diagnostics is not None:
            raw["diagnostics"] = self.diagnostics
        return raw


def _value(output: dict[str, Any]) -> float | None:
    value = output.get("value", ...)
    if value is None:
        return None
    if not is_finite_number(value) or not 0 <= value <= 1:
        raise _fail("result.value must be null or a finite number in [0,1]")
    return float(value)


def _provenance(raw: Any, value: float | None) -> list[dict[str, Any]]:
    items = [] if raw is None else raw
    if not isinstance(items, list) or not all(isinstance(i, dict) for i in items) or (
        value is not None and not items
    ):
        raise _fail("must return provenance for a numeric value")
    for item in items:
        for key in ("repository", "kind", "ref"):
            if not isinstance(item.get(key), str) or not item[key]:
                raise _fail("provenance entries require repository, kind, and ref")
    return items


def parse_attainment(output: Any, evidence_at: str, baseline: float | None = None) -> Attainment:
    """The older ``--grade-run`` output contract at ``evidence_at``."""
    at = parse_timestamp(evidence_at, "evidence-at")
    if not isinstance(output, dict):
        raise _fail("returned invalid JSON")
    value = _value(output)
    case = output.get("case")
    if not isinstance(case, dict):
        raise _fail("output.case must be an object")
    key = output.get("opportunityKey")
    if not isinstance(key, str) or not key.strip():
        raise _fail("opportunityKey must be a non-empty string")
    cutoff_text, matures_text = output.get("evidenceCutoff"), output.get("maturesAt")
    if not isinstance(cutoff_text, str):
        raise _fail("evidenceCutoff must be a UTC ISO-8601 timestamp")
    if not isinstance(matures_text, str):
        raise _fail("maturesAt must be a UTC ISO-8601 timestamp")
    cutoff = parse_timestamp(cutoff_text, "evidenceCutoff")
    matures = parse_timestamp(matures_text, "maturesAt")
    if cutoff > at:
        raise _fail("evidenceCutoff cannot follow evidenceAt")
    if cutoff > matures:
        raise _fail("evidenceCutoff cannot follow maturesAt")
    if "provenance" not in output:
        raise _fail("must return provenance for a numeric value")
    provenance = _provenance(output["provenance"], value)
    message = output.get("message")
    diagnostics = output.get("diagnostics")
    delta = value - baseline if value is not None and baseline is not None else None
    return Attainment(
        value=value, case=case, opportunity_key=key, evidence_at=evidence_at,
        evidence_cutoff=cutoff_text, matures_at=matures_text, mature=at >= matures,
        provenance=provenance, message=message if isinstance(message, str) else "",
        diagnostics=diagnostics if isinstance(diagnostics, dict) else None,
        baseline_value=baseline, delta_from_baseline=delta,
    )


Parsed = list[dict[str, Any]] | Attainment


def parse_output(stdout: str, evidence_at: str | None = None, baseline: float | None = None) -> Parsed:
    """Detect the protocol (module docstring) and validate; metric lists or an :class:`Attainment`."""
    output = parse_stdout(stdout)
    if isinstance(output, dict) and evidence_at is not None:
        return parse_attainment(output, evidence_at, baseline)
    return validate_metrics(output)


def raw_result(parsed: Parsed) -> dict[str, Any]:
    """The raw grader result of either protocol, ready for ``normalize_result``."""
    if isinstance(parsed, Attainment):
        return parsed.raw_result()
    return metrics_raw_result(parsed)
