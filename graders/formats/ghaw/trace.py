"""Trace-rule input from a gh-aw run: its preprocessed trace (docs/reference/graders.md §5) and task identity.

* Steps are ``trace["toolCalls"]`` in order; the name is ``name`` or else ``tool``; a step
  failed by the same rule as the ``tool_success_rate`` grader (``graders.formats.ghaw.toolcalls.is_tool_failure``).
* Delivered: a gh-aw run has no task-level verdict in its trace, so a run is delivered unless
  its agent output reports errors (``agentOutput.errors`` is a non-empty list), or its observed
  conclusion (graders/formats/evidence.py: run_summary.json, the unified session, the agent's
  exit status…) is ``failure``. A known success never overrides agent-output errors. Failed
  tool calls alone do not undeliver a run; they feed ``retry_storm`` instead.
* Task (:func:`task_key`): reruns of one workflow on the same issue or pull request are one
  task, ``"<workflow>#<number>"``; without such a number the workflow name is the task.
"""

from __future__ import annotations

from typing import Any

from graders.formats.ghaw.toolcalls import FAILED_STATUSES
from graders.formats.model import Run, Step

OBSERVATION_CHARS = 200
# Where an aw_info.json may carry the triggering issue / PR number (first present wins).
_NUMBER_PATHS: tuple[tuple[str, ...], ...] = (
    ("issue_number",),
    ("pull_request_number",),
    ("pr_number",),
    ("context", "issue", "number"),
    ("context", "pull_request", "number"),
    ("event", "issue", "number"),
    ("event", "pull_request", "number"),
)


def _error_text(call: dict[str, Any]) -> str:
    err = call.get("error")
    if isinstance(err, dict):
        err = err.get("message")
    return err[:OBSERVATION_CHARS] if isinstance(err, str) else ""


def delivered(trace: dict[str, Any]) -> bool:
    out = trace.get("agentOutput")
    errors = out.get("errors") if isinstance(out, dict) else None
    return not (isinstance(errors, list) and errors)


def run_from_ghaw_trace(trace: dict[str, Any], task: str, run_id: str, conclusion: str | None = None) -> Run:
    """The trace-rule run of a gh-aw trace; ``conclusion`` is the observed one (None: unknown)."""
    calls = trace.get("toolCalls")
    steps: list[Step] = []
    append = steps.append
    for i, call in enumerate(calls if isinstance(calls, list) else [], 1):
        c = call if isinstance(call, dict) else {}
        get = c.get
        name = get("name") or get("tool") or ""
        args = get("arguments")
        has_error = "error" in c  # most calls carry none
        # is_tool_failure, inlined (same tests; a non-record is no failure, as {} is not).
        ok = not (get("success") is False or get("completed") is False or get("status") in FAILED_STATUSES or has_error)
        # Positional, in Step's field order: this runs once per tool call of every run.
        append(Step(i, name if isinstance(name, str) else str(name), args if isinstance(args, dict) else {},
                    _error_text(c) if has_error else "", ok))
    return Run(task=task, run_id=run_id, ok=conclusion != "failure" and delivered(trace), steps=steps)


def _dig(obj: Any, path: tuple[str, ...]) -> Any:
    for key in path:
        if not isinstance(obj, dict):
            return None
        obj = obj.get(key)
    return obj


def task_key(aw_info: dict[str, Any] | None, workflow: str) -> str:
    """``workflow#N`` for a run triggered by issue/PR N (they share one number space), else ``workflow``."""
    for path in _NUMBER_PATHS:
        n = _dig(aw_info, path)
        if isinstance(n, bool):
            continue
        if isinstance(n, int):
            return f"{workflow}#{n}"
        if isinstance(n, str) and n.isascii() and n.isdigit():  # int()'s text, without its 4,300-digit limit
            return f"{workflow}#{n.lstrip('0') or '0'}"
    return workflow
