"""``grader_drift`` rows: gh-aw's archived grades that fleetgrade's recomputation does not repeat.

A run that carries gh-aw's own ``grader_results.json`` (graders/formats/evidence.py reads it)
is a conformance test of its own: every grader both sides graded is compared on value, status
and message, and each one that differs becomes a row with both sides. Graders only one side
graded (a config fleetgrade was not given, the observed family) are not compared.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from graders.formats.evidence import ArchivedResult, RunEvidence
from graders.stats.bounds import number
from schemas.documents import RunMeta
from schemas.version import FLEETGRADE_VERSION


def _value(v: Any) -> float | None:
    return number(v)  # the statistics' one validation: a finite float or None, never an OverflowError


def differences(archived: ArchivedResult, result: dict[str, Any]) -> list[str]:
    """Which of value, status and message differ (a missing message equals an empty one; an
    archive that keeps no message, the unified session's ``grader.result``, is not compared on it)."""
    out = []
    if archived.value != _value(result.get("value")):
        out.append("value")
    if archived.status != result.get("status"):
        out.append("status")
    if archived.compare_message and (archived.message or "") != (result.get("message") or ""):
        out.append("message")
    return out


def drift_rows(meta: RunMeta, evidence: RunEvidence | None, results: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """One row per recomputed grader whose archived result differs; none without an archive."""
    if evidence is None or evidence.archived_results is None:
        return []
    archived = {a.id: a for a in evidence.archived_results}
    rows = []
    for r in results:
        a = archived.get(r.get("id", ""))
        if a is None:
            continue
        differs = differences(a, r)
        if not differs:
            continue
        rows.append({
            "workflow": meta.workflow, "date": meta.date, "run_id": meta.run_id, "attempt": meta.attempt,
            "grader_id": a.id, "differs": differs,
            "archived_value": a.value, "archived_status": a.status, "archived_message": a.message,
            "value": _value(r.get("value")), "status": r.get("status"), "message": r.get("message"),
            "archived_path": evidence.archived_file, "fleetgrade_version": FLEETGRADE_VERSION,
        })
    return rows
