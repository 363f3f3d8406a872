"""The evaluator's stdin request (docs/reference/graders.md §10), built from recorded run metadata.

The step builds the run subject from live ``GITHUB_*`` variables; a fleet grader sees archived runs,
so the subject comes from the run's metadata (``aw_info.json`` and the path layout) instead.
Nothing here reads this process's environment.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Final

from graders.families.opvalue.errors import OperationalValueError
from graders.jsrt.jscompat import js_number

SCHEMA_VERSION: Final = 1
_DIGITS: Final = re.compile(r"[0-9]+")


@dataclass(frozen=True)
class RunSubject:
    """What the step reads from GITHUB_RUN_ID, GITHUB_RUN_ATTEMPT, GITHUB_REPOSITORY, …"""

    run_id: str
    attempt: Any = 1
    repository: str = ""
    workflow: str = ""
    ref: str = ""
    sha: str = ""
    event_name: str = ""
    created_at: str | None = None

    @classmethod
    def from_aw_info(cls, info: dict[str, Any], **overrides: Any) -> RunSubject:
        """From ``aw_info.json`` (``run_id`` may be a number); ``overrides`` fill or replace fields."""

        def text(key: str) -> str:
            value = info.get(key)
            if isinstance(value, bool) or value is None:
                return ""
            if isinstance(value, float) and value.is_integer():
                value = int(value)
            return str(value)

        fields: dict[str, Any] = {
            "run_id": text("run_id"),
            "attempt": info.get("run_attempt", 1),
            "repository": text("repository"),
            "workflow": text("workflow_name"),
            "ref": text("ref"),
            "sha": text("sha"),
            "event_name": text("event_name"),
            "created_at": text("created_at") or None,
        }
        fields.update(overrides)
        return cls(**fields)


def normalized_attempt(attempt: Any) -> int | float:
    """``Number(GITHUB_RUN_ATTEMPT) || 1`` (NaN and 0 become 1)."""
    if attempt is None:
        return 1
    number = js_number(attempt)
    if number != number or number == 0:  # NaN or 0 are falsy in JS
        return 1
    return number


def run_subject(subject: RunSubject) -> dict[str, Any]:
    """``buildRunSubject``: the run id must be all digits and not "0"."""
    run_id = subject.run_id
    if not _DIGITS.fullmatch(run_id) or run_id == "0":
        raise OperationalValueError("GITHUB_RUN_ID must identify the workflow run")
    return {
        "id": run_id,
        "attempt": normalized_attempt(subject.attempt),
        "repository": subject.repository,
        "workflow": subject.workflow,
        "ref": subject.ref,
        "sha": subject.sha,
        "eventName": subject.event_name,
    }


def build_request(
    subject: RunSubject,
    outputs: Any = None,
    config: Any = None,
    event: Any = None,
) -> dict[str, Any]:
    """``{schemaVersion: 1, run, event, outputs, config}`` as the newest step sends it.

    ``event`` is kept only when it is an object; ``outputs`` only when it is a list (the trace's
    ``artifacts``); ``config`` falls back to {} when absent or falsy, like ``meta.config || {}``.
    """
    return {
        "schemaVersion": SCHEMA_VERSION,
        "run": run_subject(subject),
        "event": event if isinstance(event, dict) else {},
        "outputs": outputs if isinstance(outputs, list) else [],
        "config": config if config not in (None, False, 0, "") else {},
    }


def build_regrade_request(
    subject: RunSubject,
    evidence_at: str,
    case: Any = None,
    outputs: Any = None,
    config: Any = None,
    event: Any = None,
) -> dict[str, Any]:
    """The newest request plus the older design's ``evidenceAt``, ``case`` and ``run.createdAt``."""
    request = build_request(subject, outputs=outputs, config=config, event=event)
    request["run"]["createdAt"] = subject.created_at
    request["evidenceAt"] = evidence_at
    request["case"] = case if isinstance(case, dict) else None
    return request
