"""GitHub Copilot CLI session ``events.jsonl`` (spec §9), which the reference cannot read.

Steps are ``tool.execution_start`` events in file order (the tool name is only there), joined
by ``toolCallId`` to ``tool.execution_complete``. A step failed when the completion says
``success: false`` or carries an ``error``. Tool events made inside a subagent (``agentId``
on the envelope or ``data.parentToolCallId``) are skipped, like transcript sidechains: the
subagent's own trajectory is not the main run's. A session has no task-level verdict, so
the run is delivered (same rule as transcripts). Unlike the transcript parser, the run id
is always the session id, and a repeated start event for one call id counts once.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from graders.formats.jsonl import Warn, ignore_warning, iter_objects
from graders.formats.model import Run, Step

OBSERVATION_CHARS = 200
_ARG_KEYS = ("file_path", "path", "pattern", "query", "command", "url", "prompt")


def _data(ev: dict[str, Any]) -> dict[str, Any]:
    d = ev.get("data")
    return d if isinstance(d, dict) else {}


def _is_subagent(ev: dict[str, Any], data: dict[str, Any]) -> bool:
    return bool(ev.get("agentId") or data.get("parentToolCallId"))


def _observation(data: dict[str, Any]) -> str:
    err = data.get("error")
    if isinstance(err, dict) and isinstance(err.get("message"), str):
        text = err["message"]
    elif isinstance(err, str):
        text = err
    else:
        res = data.get("result")
        content = res.get("content") if isinstance(res, dict) else res
        text = content if isinstance(content, str) else ""
    return text[:OBSERVATION_CHARS]


def _call_id(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


def runs_from_copilot_events(
    lines: Iterable[str | bytes | dict[str, Any]],
    task_hint: str | None = None,
    source: str = "<copilot-events>",
    warn: Warn = ignore_warning,
) -> list[Run]:
    session: str | None = None
    calls: dict[str, tuple[str, dict[str, Any]]] = {}  # insertion order = step order
    anonymous: list[tuple[str, dict[str, Any]]] = []  # starts without a call id cannot be joined
    order: list[str | int] = []
    done: dict[str, tuple[bool, str]] = {}
    for _, ev in iter_objects(lines, source, warn):
        data = _data(ev)
        kind = ev.get("type")
        if kind == "session.start" and session is None and isinstance(data.get("sessionId"), str):
            session = data["sessionId"]
        if kind not in ("tool.execution_start", "tool.execution_complete") or _is_subagent(ev, data):
            continue
        cid = _call_id(data.get("toolCallId"))
        if kind == "tool.execution_start":
            args_in = data.get("arguments")
            args_in = args_in if isinstance(args_in, dict) else {}
            entry = (str(data.get("toolName") or ""), {k: args_in[k] for k in _ARG_KEYS if args_in.get(k)})
            if cid is None:
                order.append(len(anonymous))
                anonymous.append(entry)
            elif cid not in calls:
                calls[cid] = entry
                order.append(cid)
        elif cid is not None:
            failed = data.get("success") is False or bool(data.get("error"))
            done[cid] = (not failed, _observation(data))
    steps: list[Step] = []
    for i, ref in enumerate(order, 1):
        if isinstance(ref, int):
            (tool, args), (ok, obs) = anonymous[ref], (True, "")
        else:
            (tool, args), (ok, obs) = calls[ref], done.get(ref, (True, ""))
        steps.append(Step(step=i, tool=tool, args=args, observation=obs, ok=ok))
    if not steps:
        return []
    sid = session or task_hint or "copilot-session"
    return [Run(task=task_hint or sid, run_id=sid, ok=True, steps=steps)]
