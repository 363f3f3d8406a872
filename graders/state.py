"""Incremental backfill state: what graded each run, so a nightly run redoes only what changed.

One row per run folder (``<output>/_state/part-00000.parquet``): the run's listing digest (paths,
sizes, modification times), the grading digest (the run's plan and implementations, the trace
rules, the fleetgrade version), and where its rows live. A run is regraded when it is new, its
listing changed, or its grading digest changed; its old rows are then dropped by identity.
"""

from __future__ import annotations

import dataclasses
import hashlib
from collections.abc import Iterable
from typing import Any

import orjson

from graders.plan import GradingPlan
from graders.rows import implementation_digest
from graders.trace_rules.config import TraceConfig
from schemas.state_table import STATE_SCHEMA, STATE_TABLE  # noqa: F401  (re-exported)
from schemas.version import FLEETGRADE_VERSION

# Tables whose rows belong to a graded run, identified by (run_id, attempt) in its partition.
RUN_TABLES = ("grader_results", "runs", "trace_verdicts")


def listing_digest(listing: Iterable[tuple[Any, ...]]) -> str:
    h = hashlib.sha256()
    for item in sorted(listing):
        h.update(orjson.dumps(list(item)))
        h.update(b"\n")
    return h.hexdigest()


def _config_json(cfg: TraceConfig) -> Any:
    raw = dataclasses.asdict(cfg)
    return {k: sorted(v) if isinstance(v, (set, frozenset)) else v for k, v in sorted(raw.items())}


def grading_digest(plan: GradingPlan, trace_config: TraceConfig, archived_evaluators: bool = True) -> str:
    """Everything besides the inputs that decides a run's rows.

    A run's own archived evaluator is part of its input listing, not of this digest.
    """
    doc = {
        "archived_evaluators": archived_evaluators,
        "manifest": plan.manifest(),
        "implementations": [implementation_digest(e) for e in plan.entries],
        "trace_rules": _config_json(trace_config),
        "fleetgrade": FLEETGRADE_VERSION,
    }
    return hashlib.sha256(orjson.dumps(doc, option=orjson.OPT_SORT_KEYS, default=list)).hexdigest()


def graded_state(root: str, listing: str, grading: str, workflow: str, date: str, run_id: str,
                 attempt: int) -> dict[str, Any]:
    return {"root": root, "listing_digest": listing, "grading_digest": grading, "outcome": "graded",
            "workflow": workflow, "date": date, "run_id": run_id, "attempt": attempt,
            "fleetgrade_version": FLEETGRADE_VERSION}


def dead_state(root: str, listing: str, grading: str, workflow: str | None, date: str | None) -> dict[str, Any]:
    return {"root": root, "listing_digest": listing, "grading_digest": grading, "outcome": "dead",
            "workflow": workflow, "date": date, "run_id": None, "attempt": None,
            "fleetgrade_version": FLEETGRADE_VERSION}


def drops_for(previous: dict[str, Any] | None) -> list[tuple[str, str | None, str | None, tuple[Any, ...]]]:
    """The rows a regraded run had: (table, workflow, date, identity) to drop before writing anew."""
    if not previous:
        return []
    w, d = previous.get("workflow"), previous.get("date")
    if previous.get("outcome") == "graded":
        ident = (previous.get("run_id"), previous.get("attempt"))
        return [(t, w, d, ident) for t in RUN_TABLES]
    return [("dead_letter", w, d, (previous.get("root"), "prepare"))]


def unchanged(previous: dict[str, Any] | None, listing: str, grading: str) -> bool:
    if not previous:
        return False
    return bool(previous.get("listing_digest") == listing and previous.get("grading_digest") == grading)
