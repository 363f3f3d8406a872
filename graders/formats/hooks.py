"""Hook audit logs (docs/formats.md §5): JSON lines written by agent hooks, in two shapes.

* ``hook``-keyed: ``{ts, session_id, hook: "PreToolUse"|"PostToolUse"|…, tool, command, exit_code,
  output_preview}``: file paths of Read/Edit/Write sit in ``command``; ``exit_code`` may be ``""``.
* ``event``-keyed: Claude Code's hook stdin payload plus ``{event, ts}``: ``{session_id,
  hook_event_name, tool_name, tool_input, tool_response, event, ts}``.
* One record per call with no hook name, as some PostToolUse audit scripts write it
  (``{timestamp, session|session_id, tool, input?}``).

Two readings:

* :func:`runs_from_audit`: trace-grader's reading (``fleetgrade trace --audit``), kept bit-exact:
  every tool event a step (a call logged Pre and Post counts twice).
* :class:`HookLog`: the full reading. A ``PreToolUse`` and the next ``PostToolUse`` of the same
  (session, tool, arguments) are one call (:func:`dedupe`), paths are taken from ``command``
  where that is where they are, a non-zero ``exit_code`` or an error response fails the call,
  an empty one says nothing. One session per ``session_id``.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from graders.formats.jsonl import Warn, ignore_warning, iter_objects
from graders.formats.model import Run, Step
from graders.formats.session import (
    Call,
    FormatError,
    Session,
    Source,
    any_record,
    error_text,
    json_lines,
)
from graders.grading.registry import input_format
from graders.jsrt.jscompat import stable_stringify

KIND = "hook-log"
Line = str | bytes | dict[str, Any]
_AUDIT_ARG_KEYS = ("file_path", "path", "command", "url")
# Tools whose hook ``command`` field is the file they touched, not a shell command.
PATH_TOOLS = frozenset({"Read", "Edit", "Write", "MultiEdit", "NotebookEdit", "NotebookRead"})
PAIRED = "_paired"  # marks a Post record that already absorbed its Pre (dedupe is idempotent)


def _text(value: Any) -> str:
    return value if isinstance(value, str) else str(value)


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


# ---- the full reading ---------------------------------------------------------------------------

def phase(ev: dict[str, Any]) -> str:
    """``pre``, ``post`` or ``other``: from ``hook``, ``hook_event_name`` or ``event``."""
    for key in ("hook", "hook_event_name", "event"):
        value = ev.get(key)
        if isinstance(value, str):
            v = value.replace("_", "").replace("-", "").lower()
            if v in ("pretooluse", "pretool"):
                return "pre"
            if v in ("posttooluse", "posttool", "posttoolusefailure"):
                return "post"
    return "other"


def tool_of(ev: dict[str, Any]) -> str | None:
    name = ev.get("tool_name") or ev.get("tool")
    return name if isinstance(name, str) and name else (str(name) if name not in (None, "", False) else None)


def arguments(ev: dict[str, Any]) -> dict[str, Any]:
    """The call's arguments: ``tool_input``, else the ``command``/path fields of the flat shape."""
    for key in ("tool_input", "input"):  # "input": audit scripts that rename the payload's tool_input
        inp = ev.get(key)
        if isinstance(inp, dict):
            return inp
    args = {k: ev[k] for k in _AUDIT_ARG_KEYS if ev.get(k)}
    command = args.get("command")
    if isinstance(command, str) and tool_of(ev) in PATH_TOOLS and "file_path" not in args:
        args["file_path"] = args.pop("command")  # the hook logged the file as the "command"
    return args


def _key(ev: dict[str, Any]) -> tuple[str, str, str]:
    return (_text(ev.get("session_id") or ""), tool_of(ev) or "",
            stable_stringify(arguments(ev)))


def dedupe(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Tool events with each Pre/Post pair of one call made one record (the Post's, marked, at
    the Pre's place); a Pre without its Post and a Post without its Pre stay. Idempotent."""
    out: list[dict[str, Any] | None] = []
    open_pre: dict[tuple[str, str, str], list[int]] = {}
    for ev in events:
        kind = phase(ev)
        if kind == "pre":
            open_pre.setdefault(_key(ev), []).append(len(out))
            out.append(ev)
        elif kind == "post" and not ev.get(PAIRED) and open_pre.get(_key(ev)):
            at = open_pre[_key(ev)].pop()
            out[at] = {**ev, PAIRED: True}
        else:
            out.append(ev)
    return [e for e in out if e is not None]


def _failure(ev: dict[str, Any]) -> str | None:
    """Why the call failed, or None: a non-zero ``exit_code`` (empty says nothing) or an error response."""
    code = ev.get("exit_code")
    if isinstance(code, bool):
        code = None
    if isinstance(code, str):
        code = int(code.strip()) if code.strip().lstrip("-").isdigit() else None
    if isinstance(code, (int, float)) and code != 0:
        return f"exit code {code:g}"
    if phase(ev) == "post" and _text(ev.get("hook_event_name") or ev.get("event") or "").lower().endswith("failure"):
        return error_text(ev.get("error")) or "PostToolUseFailure"
    resp = ev.get("tool_response")
    if isinstance(resp, dict):
        if resp.get("is_error") is True or resp.get("isError") is True or resp.get("success") is False:
            return error_text(resp.get("error")) or error_text(resp.get("content")) or "tool_response reports an error"
        if resp.get("error"):
            return error_text(resp.get("error"))
    if ev.get("ok") is False:
        return "ok: false"
    return None


def _observation(ev: dict[str, Any]) -> str:
    preview = ev.get("output_preview")
    if isinstance(preview, str):
        return preview
    resp = ev.get("tool_response")
    if isinstance(resp, str):
        return resp
    if isinstance(resp, dict):
        for key in ("stdout", "content", "output", "result"):
            if isinstance(resp.get(key), str):
                return str(resp[key])
    return ""


def read_sessions(source: Source) -> list[Session]:
    warnings: list[str] = []
    by_session: dict[str, list[dict[str, Any]]] = {}
    stamps: dict[str, Session] = {}  # each session's first timestamp (Session.stamp's rule)
    any_line = False
    for _, ev in json_lines(source, warnings):
        any_line = True
        sid = _text(ev.get("session_id") or ev.get("sessionId") or ev.get("session") or "hook-session")
        stamps.setdefault(sid, Session(KIND, source.name)).stamp(ev.get("ts") or ev.get("timestamp"))
        if tool_of(ev) is not None:
            by_session.setdefault(sid, []).append(ev)
    if not any_line:
        raise FormatError(f"{source.name}: no hook log records (JSON object lines)")
    sessions: list[Session] = []
    for sid, events in by_session.items():
        stamped = stamps[sid]
        s = Session(KIND, source.name, run_id=sid, created_at=stamped.created_at, warnings=list(warnings),
                    date_part=stamped.date_part, bad_time=stamped.bad_time)
        for ev in dedupe(events):
            why = _failure(ev) if phase(ev) != "pre" else None
            s.calls.append(Call(tool_of(ev) or "", arguments(ev),
                                None if phase(ev) == "pre" else why is None,
                                _observation(ev), None, None, why))
        sessions.append(s)
    if not sessions:
        raise FormatError(f"{source.name}: a hook log with no tool events (no 'tool' or 'tool_name')")
    return sessions


def hook_record(obj: dict[str, Any]) -> bool:
    if any(isinstance(obj.get(k), str) for k in ("hook", "hook_event_name", "event")):
        return "type" not in obj and any(k in obj for k in ("session_id", "tool", "tool_name", "ts"))
    # Audit scripts that log one record per call without the hook's name (a PostToolUse hook
    # writing {timestamp, session, tool, …}): a tool and a session at the top.
    return isinstance(obj.get("tool") or obj.get("tool_name"), str) and any(
        k in obj for k in ("session_id", "session", "sessionId")) and "type" not in obj


@input_format(KIND)
class HookLog:
    kind = KIND
    folder = False

    def sniff(self, name: str, head: bytes) -> bool:
        return name.endswith((".jsonl", ".log", ".ndjson")) and any_record(head, hook_record)

    def read(self, source: Source) -> list[Session]:
        return read_sessions(source)
