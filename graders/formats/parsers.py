"""Input parsers (spec §1, §2): traces.json, hook audit / code-logger JSONL, Claude Code transcripts.

Copilot CLI events and gh-aw traces live in ``copilot.py`` and ``ghaw.py``; they are re-exported
here so callers have one import site.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from graders.formats.copilot import runs_from_copilot_events
from graders.formats.ghaw.trace import run_from_ghaw_trace, task_key
from graders.formats.jsonl import Warn, ignore_warning, iter_objects, json_type
from graders.formats.model import Run, Step

__all__ = [
    "TraceFormatError",
    "run_from_ghaw_trace",
    "runs_from_audit",
    "runs_from_copilot_events",
    "runs_from_traces",
    "runs_from_transcript",
    "task_key",
]

Line = str | bytes | dict[str, Any]

_SCAVENGED_STEP_KEYS = ("file_path", "command", "path", "url", "query")
_AUDIT_ARG_KEYS = ("file_path", "path", "command", "url")
# Retrieval (path/pattern/query/url) and action (file_path/command) args: what grounding needs.
TRANSCRIPT_ARG_KEYS = ("file_path", "path", "pattern", "query", "command", "url", "prompt")
OBSERVATION_CHARS = 200


class TraceFormatError(ValueError):
    """traces.json content the canonical schema cannot represent; the message says where."""


def _text(value: Any) -> str:
    # The reference uses str() on ids and names, so 5 becomes "5"; null is handled by callers.
    return value if isinstance(value, str) else str(value)


def _step_number(value: Any, where: str) -> int:
    if isinstance(value, (bool, int, float, str)):
        try:
            return int(value)  # reference semantics: "3" -> 3, 2.9 -> 2
        except (ValueError, OverflowError):
            pass
    raise TraceFormatError(f"{where}: 'step' must be an integer, got {value!r}")


def _step_from_obj(idx: int, s: Any, where: str) -> Step:
    if not isinstance(s, dict):
        raise TraceFormatError(f"{where}: a step must be an object, got a JSON {json_type(s)}")
    args = s.get("args")
    if args is None:
        args = {k: v for k, v in s.items() if k in _SCAVENGED_STEP_KEYS}
    return Step(
        step=_step_number(s.get("step", idx), where),
        tool=_text(s.get("tool") or s.get("tool_name") or ""),
        args=args if isinstance(args, dict) else {},
        observation=_text(s.get("observation", "") or ""),
        ok=bool(s.get("ok", True)),  # bool(): the string "false" is true (spec §10.8, kept)
    )


def _run_from_obj(r: Any, default_task: str, where: str) -> Run:
    if not isinstance(r, dict):
        raise TraceFormatError(f"{where}: a run must be an object, got a JSON {json_type(r)}")
    raw_steps = r.get("steps")
    if raw_steps is None:
        raw_steps = []
    if not isinstance(raw_steps, list):
        raise TraceFormatError(f"{where}: 'steps' must be a list, got a JSON {json_type(raw_steps)}")
    steps = [_step_from_obj(i, s, f"{where} step {i}") for i, s in enumerate(raw_steps, 1)]
    ok = r.get("ok")
    if ok is None:  # derived: at least one step and every step ok
        ok = bool(steps) and all(s.ok for s in steps)
    task_value = r.get("task", default_task)
    task = default_task if task_value is None else _text(task_value)
    return Run(task=task, run_id=_text(r.get("run_id") or r.get("id") or task), ok=bool(ok), steps=steps)


def runs_from_traces(obj: Any) -> list[Run]:
    """The three top-level shapes: ``{"tasks": [...]}``, ``{"runs": [...]}``, a bare list."""
    runs: list[Run] = []
    if isinstance(obj, dict) and "tasks" in obj:
        groups = obj["tasks"] or []
        if not isinstance(groups, list):
            raise TraceFormatError(f"'tasks' must be a list, got a JSON {json_type(groups)}")
        for ti, t in enumerate(groups, 1):
            if not isinstance(t, dict):
                raise TraceFormatError(f"task {ti}: must be an object, got a JSON {json_type(t)}")
            tid = _text(t.get("task") or t.get("id") or "task")
            group_runs = t.get("runs") or []
            if not isinstance(group_runs, list):
                raise TraceFormatError(f"task {ti}: 'runs' must be a list, got a JSON {json_type(group_runs)}")
            runs.extend(_run_from_obj(r, tid, f"task {ti} run {ri}") for ri, r in enumerate(group_runs, 1))
        return runs
    if obj is not None and not isinstance(obj, (dict, list)):
        raise TraceFormatError(f"top level must be an object or a list, got a JSON {json_type(obj)}")
    raw = obj.get("runs") if isinstance(obj, dict) else obj
    raw = raw or []
    if not isinstance(raw, list):
        raise TraceFormatError(f"'runs' must be a list, got a JSON {json_type(raw)}")
    return [_run_from_obj(r, "task", f"run {ri}") for ri, r in enumerate(raw, 1)]


def runs_from_audit(
    lines: Iterable[Line], task_hint: str | None = None, source: str = "<audit>", warn: Warn = ignore_warning
) -> list[Run]:
    """hooklib audit / code-logger JSONL: one run per session_id, tool events in file order."""
    by_session: dict[str, list[dict[str, Any]]] = {}
    for _, ev in iter_objects(lines, source, warn):
        if not (ev.get("tool_name") or ev.get("tool")):
            continue  # SessionStart, Stop, UserPromptSubmit...
        sid = _text(ev.get("session_id") or task_hint or "audit-session")
        by_session.setdefault(sid, []).append(ev)
    runs: list[Run] = []
    for sid, events in by_session.items():
        steps = [
            Step(
                step=i,
                tool=_text(ev.get("tool_name") or ev.get("tool")),
                args={k: ev[k] for k in _AUDIT_ARG_KEYS if ev.get(k)},
                observation="",
                ok=bool(ev.get("ok", True)),
            )
            for i, ev in enumerate(events, 1)
        ]
        runs.append(Run(task=task_hint or sid, run_id=sid, ok=all(s.ok for s in steps), steps=steps))
    return runs


def result_text(content: Any) -> str:
    """A tool_result ``content`` flattened: a string as is, a list as its parts' texts."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return " ".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
    return ""


def _key(value: Any) -> Any:
    # tool_use ids are normally strings; anything unhashable gets a stable text key instead.
    return value if value is None or isinstance(value, (str, int, float, bool)) else repr(value)


def runs_from_transcript(
    lines: Iterable[Line], task_hint: str | None = None, source: str = "<transcript>", warn: Warn = ignore_warning
) -> list[Run]:
    """One run per Claude Code transcript (zero if it has no tool_use); sidechain lines skipped."""
    results: dict[Any, tuple[bool, str]] = {}
    calls: list[tuple[Any, str, dict[str, Any]]] = []
    session: Any = task_hint
    for _, o in iter_objects(lines, source, warn):
        if o.get("isSidechain"):  # truthy, so the string "false" skips too (kept, spec §10)
            continue
        session = session or o.get("sessionId") or o.get("session_id")
        msg = o.get("message")
        content = msg.get("content") if isinstance(msg, dict) else None
        if not isinstance(content, list):
            continue
        for b in content:
            if not isinstance(b, dict):
                continue
            if b.get("type") == "tool_use":
                inp = b.get("input")
                inp = inp if isinstance(inp, dict) else {}
                args = {k: inp[k] for k in TRANSCRIPT_ARG_KEYS if inp.get(k)}
                calls.append((_key(b.get("id")), _text(b.get("name") or ""), args))
            elif b.get("type") == "tool_result":
                ok = not bool(b.get("is_error"))
                results[_key(b.get("tool_use_id"))] = (ok, result_text(b.get("content"))[:OBSERVATION_CHARS])
    steps = []
    for i, (call_id, tool, args) in enumerate(calls, 1):
        ok, observation = results.get(call_id, (True, ""))
        steps.append(Step(step=i, tool=tool, args=args, observation=observation, ok=ok))
    if not steps:
        return []
    sid = _text(session or "transcript-session")
    # No task-level verdict in a transcript: delivered is forced True, trust the flags.
    return [Run(task=task_hint or sid, run_id=sid, ok=True, steps=steps)]
