"""Table rows from grading outcomes (README.md, "Tables"). Pure: the Beam sink only writes them."""

from __future__ import annotations

import functools
import hashlib
import math
from typing import Any, Final

import orjson

from graders.formats.ghaw.preprocess import PreprocessReport
from graders.grading.plan import GradingPlan, PlanEntry
from schemas.documents import RunMeta
from schemas.tables import GRADER_RESULTS, PARTITION_COLUMNS
from schemas.version import FLEETGRADE_VERSION


def implementation_digest(entry: PlanEntry) -> str:
    """What graded a row: the script/evaluator digest, else the built-in's id and revision."""
    if entry.digest:
        return entry.digest
    return _builtin_digest(entry.id, entry.revision)


@functools.cache  # once per grader and revision, not once per row
def _builtin_digest(grader_id: str, revision: int) -> str:
    return hashlib.sha256(f"fleetgrade/{grader_id}/r{revision}".encode()).hexdigest()


def _float(value: Any) -> float | None:
    if value is None or isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value) if math.isfinite(value) else None


def _metrics(value: Any) -> list[dict[str, Any]] | None:
    if not isinstance(value, list):
        return None
    out = []
    for m in value:
        if isinstance(m, dict):
            out.append({"id": str(m.get("id", "")), "value": _float(m.get("value"))})
    return out


def _json_text(value: Any) -> str | None:
    if value is None:
        return None
    return orjson.dumps(value, option=orjson.OPT_SORT_KEYS).decode()


# The ``grader_results`` columns, in the order every row holds them (schemas/tables.py).
RESULT_COLUMNS: Final = (*PARTITION_COLUMNS, *GRADER_RESULTS.names)


def _row_templates(plan: GradingPlan) -> dict[str, dict[str, Any]]:
    """Per enabled grader id: its row with the columns the plan alone fixes filled in (index,
    family, direction, threshold, implementation and config digests), the others None."""
    digest = plan.digest()
    templates = {}
    for i, e in enumerate(plan.enabled):
        row = dict.fromkeys(RESULT_COLUMNS)
        row.update(grader_id=e.id, grader_index=i, family=e.family, direction=e.direction or None,
                   threshold=_float(e.threshold), implementation_digest=implementation_digest(e),
                   config_digest=digest, fleetgrade_version=FLEETGRADE_VERSION)
        templates[e.id] = row
    return templates


def result_rows(
    meta: RunMeta,
    results: list[dict[str, Any]],
    plan: GradingPlan,
    input_digest: str,
) -> list[dict[str, Any]]:
    # A copy of the grader's template, then the run's and the result's columns: a quarter of
    # the cost of a 28-key dict built whole, per result of every run.
    templates = plan.derived("rows.templates", lambda: _row_templates(plan))
    workflow, date, run_id, attempt = meta.workflow, meta.date, meta.run_id, meta.attempt
    rows = []
    for r in results:
        row = templates[r["id"]].copy()
        get = r.get
        row["workflow"] = workflow
        row["date"] = date
        row["run_id"] = run_id
        row["attempt"] = attempt
        row["name"] = get("name")
        row["description"] = get("description")
        row["source"] = get("source")
        value = get("value")
        row["value"] = (float(value) if type(value) is int or (type(value) is float and math.isfinite(value))
                        else _float(value))
        row["unit"] = get("unit")
        row["passed"] = get("passed")
        row["status"] = r["status"]
        row["severity"] = get("severity")
        row["message"] = get("message")
        row["error"] = get("error")
        row["details"] = get("details")
        metrics = get("metrics")
        if metrics is not None:
            row["metrics"] = _metrics(metrics)
        diagnostics = get("diagnostics")
        if diagnostics is not None:
            row["diagnostics"] = _json_text(diagnostics)
        impl = get("implementation", {})
        row["implementation_id"] = impl.get("id")
        row["implementation_version"] = impl.get("version")
        row["input_digest"] = input_digest
        rows.append(row)
    return rows


def status_counts(results: list[dict[str, Any]]) -> dict[str, int]:
    """The ``runs`` row's counts of each status."""
    statuses = [r["status"] for r in results]
    return {
        "graders": len(results),
        "passed": statuses.count("pass"),
        "failed": statuses.count("fail"),
        "errors": statuses.count("error"),
        "unavailable": statuses.count("unavailable"),
    }


# The ``runs`` cost columns and the cost graders whose values they hold (schemas/tables.py).
COST_COLUMNS: Final = {
    "tokens_input": "tokens-input", "tokens_output": "tokens-output", "tokens_cache_read": "tokens-cache-read",
    "tokens_cache_write": "tokens-cache-write", "tokens_reasoning": "tokens-reasoning",
    "model_calls": "model-calls", "ai_credits": "ai-credits",
}


def cost_columns(results: list[dict[str, Any]], models: list[dict[str, Any]] | None) -> dict[str, Any]:
    """The ``runs`` cost columns: the cost graders' values as graded (null where unavailable),
    and the model mix ``model-calls`` counted."""
    values = {r["id"]: r.get("value") for r in results if r.get("status") in ("pass", "fail")}
    return {**{col: values.get(gid) for col, gid in COST_COLUMNS.items()}, "models": models}


def run_row(
    meta: RunMeta,
    trace: dict[str, Any],
    results: list[dict[str, Any]],
    report: PreprocessReport,
    plan: GradingPlan,
    input_digest: str,
    source_kind: str = "gh-aw",
    models: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    return {
        "workflow": meta.workflow,
        "date": meta.date,
        "run_id": meta.run_id,
        "attempt": meta.attempt,
        "created_at": meta.created_at,
        "repository": meta.repository,
        "metadata_source": meta.metadata_source,
        "source_kind": source_kind,
        "root": meta.root,
        **status_counts(results),
        "total_input_tokens": _float(trace.get("totalInputTokens")),
        "total_output_tokens": _float(trace.get("totalOutputTokens")),
        "total_duration_ms": _float(trace.get("totalDurationMs")),
        "steps": len(trace.get("steps") or []),
        "tool_calls": len(trace.get("toolCalls") or []),
        "artifacts": len(trace.get("artifacts") or []),
        "bytes_read": report.bytes_read,
        **cost_columns(results, models),
        "warnings": list(report.warnings),
        "input_digest": input_digest,
        "config_digest": plan.digest(),
        "fleetgrade_version": FLEETGRADE_VERSION,
    }


def dead_letter_row(
    input_path: str,
    stage: str,
    error: BaseException | str,
    run_id: str | None = None,
    workflow: str | None = None,
    date: str | None = None,
    error_class: str = "Error",
) -> dict[str, Any]:
    """One input that could not be graded; workflow/date are null when undetermined.

    ``error_class`` names the class of an error given as text (one known only by name)."""
    if isinstance(error, BaseException):
        error_class, message = type(error).__name__, str(error) or type(error).__name__
    else:
        message = error
    return {
        "workflow": workflow,
        "date": date,
        "input": input_path,
        "run_id": run_id,
        "stage": stage,
        "error_class": error_class,
        "message": message,
        "fleetgrade_version": FLEETGRADE_VERSION,
    }
