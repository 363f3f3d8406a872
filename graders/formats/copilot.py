"""GitHub Copilot CLI session ``events.jsonl``, 0.0.x and 1.0.x (docs/formats.md §3).

Two readings:

* :func:`runs_from_copilot_events` (``fleetgrade trace --copilot-events``, unchanged): steps are
  ``tool.execution_start`` events in file order joined by ``toolCallId`` to
  ``tool.execution_complete``; a step failed when the completion says ``success: false`` or
  carries an ``error``; tool events inside a subagent (``agentId`` on the envelope or
  ``data.parentToolCallId``) are skipped; a repeated start for one call id counts once.
* :class:`Copilot` (``fleetgrade run``, ``fleetgrade trace --input``): the same join, with
  subagent calls kept and attributed to their agent, ``input`` (1.0.x) or ``arguments`` (0.0.x)
  as the arguments, ``hook.start``/``hook.end`` paired by ``hookInvocationId`` (a failed hook is
  a warning of the run), and tokens from ``assistant.usage`` per request, else
  ``session.shutdown``'s per-model totals (``inputTokens`` there includes cache reads and writes:
  the corpus run ``ghaw-copilot-routed-gpt-responses`` has 97,401 = 12 + 70,123 + 27,266; the
  non-cached remainder becomes ``input_tokens``).
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
    Usage,
    as_dict,
    count,
    error_text,
    head_records,
    iso_time,
    json_lines,
    text,
)
from graders.grading.registry import input_format

KIND = "copilot-cli"
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
        text_ = err["message"]
    elif isinstance(err, str):
        text_ = err
    else:
        res = data.get("result")
        content = res.get("content") if isinstance(res, dict) else res
        text_ = content if isinstance(content, str) else ""
    return text_[:OBSERVATION_CHARS]


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


# ---- the full reading ---------------------------------------------------------------------------

def _arguments(data: dict[str, Any]) -> dict[str, Any]:
    for key in ("arguments", "input"):
        value = data.get(key)
        if isinstance(value, dict):
            return value
    command = data.get("command")
    return {"command": command} if isinstance(command, str) and command else {}


def _agent(ev: dict[str, Any], data: dict[str, Any]) -> str | None:
    return text(ev.get("agentId")) or text(data.get("parentToolCallId"))


def _model_usage(metrics: Any, duration_ms: float) -> list[Usage]:
    """``modelMetrics{<model>: {requests{count}, usage{inputTokens, …}}}`` → one record per model."""
    out: list[Usage] = []
    for model, m in sorted(metrics.items()) if isinstance(metrics, dict) else []:
        m = as_dict(m)
        u, req = as_dict(m.get("usage")), as_dict(m.get("requests"))
        cache_read, cache_write = count(u.get("cacheReadTokens")), count(u.get("cacheWriteTokens"))
        fresh = max(0, count(u.get("inputTokens")) - cache_read - cache_write)
        out.append(Usage(str(model), fresh, count(u.get("outputTokens")), cache_read, cache_write,
                         duration_ms if not out else 0, None, None, max(1, count(req.get("count")))))
    return out


def read_session(source: Source) -> Session:
    session = Session(KIND, source.name)
    calls: dict[str, Call] = {}
    order: list[Call] = []
    hooks: dict[str, tuple[str, dict[str, Any]]] = {}
    per_request: list[Usage] = []
    totals: list[Usage] = []
    seen = False
    for lineno, ev in json_lines(source, session.warnings):
        kind = ev.get("type")
        if not isinstance(kind, str):
            continue
        seen = True
        data = _data(ev)
        session.stamp(ev.get("timestamp"))
        if kind.split(".", 1)[0] not in _NAMESPACES:
            session.skip(kind)
        if kind in ("session.start", "session.init"):
            session.run_id = session.run_id or text(data.get("sessionId"))
            ctx = data.get("context")
            if isinstance(ctx, dict):
                session.repository = session.repository or text(ctx.get("repository"))
            session.created_at = iso_time(data.get("startTime")) or session.created_at
        elif kind == "tool.execution_start":
            cid = _call_id(data.get("toolCallId"))
            if cid is not None and cid in calls:
                continue
            call = Call(str(data.get("toolName") or ""), _arguments(data), None, "", cid, _agent(ev, data),
                        None, text(data.get("mcpServerName")))
            order.append(call)
            if cid is not None:
                calls[cid] = call
        elif kind == "tool.execution_complete":
            found = calls.get(_call_id(data.get("toolCallId")) or "")
            if found is not None:
                failed = data.get("success") is False or bool(data.get("error"))
                found.ok, found.observation = not failed, _observation(data)
                if failed:
                    found.error = error_text(data.get("error")) or found.observation or "success: false"
        elif kind in ("hook.start", "hook.end"):
            hid = text(data.get("hookInvocationId")) or f"line {lineno}"
            if kind == "hook.start":
                hooks[hid] = (str(data.get("hookType") or "hook"), data)
            elif data.get("success") is False or data.get("error"):
                hook_type = str(data.get("hookType") or hooks.get(hid, ("hook", {}))[0])
                session.warnings.append(f"{source.name}:{lineno}: {hook_type} hook failed: "
                                        f"{error_text(data.get('error')) or 'success: false'}")
        elif kind == "assistant.usage":
            model = data.get("model")
            cache_read, cache_write = count(data.get("cacheReadTokens")), count(data.get("cacheWriteTokens"))
            per_request.append(Usage(model if isinstance(model, str) else None,
                                     max(0, count(data.get("inputTokens")) - cache_read - cache_write),
                                     count(data.get("outputTokens")), cache_read, cache_write,
                                     float(count(data.get("duration"))), None, _agent(ev, data)))
        elif kind == "session.shutdown" or (kind == "session.result" and not totals
                                            and isinstance(data.get("modelMetrics"), dict)):
            totals = _model_usage(data.get("modelMetrics"), float(count(data.get("totalApiDurationMs"))))
        if kind in ("session.error", "abort") or (kind == "session.result" and data.get("errorType")):
            if _agent(ev, data) is None:  # a subagent's error is not the run's
                session.delivered = False
    if not seen:
        raise FormatError(f"{source.name}: no Copilot CLI session events (lines with a 'type')")
    session.calls = order
    session.usage = per_request or totals
    return session


# Event namespaces of Copilot CLI (and of gh-aw's canonical copy of it); others are counted as unknown.
_NAMESPACES = frozenset({"session", "user", "assistant", "tool", "hook", "subagent", "skill", "permission",
                         "abort", "system", "pi", "workflow", "agent", "mcp", "firewall", "safe_output"})
_EVENT_TYPES = ("session.start", "session.init", "session.info", "session.model_change", "user.message",
                "assistant.message", "assistant.turn_start", "tool.execution_start", "hook.start")


def _event(obj: dict[str, Any]) -> bool:
    kind = obj.get("type")
    return isinstance(obj.get("data"), dict) and isinstance(kind, str) and (
        kind in _EVENT_TYPES or (kind.startswith("session.") and "id" in obj))


@input_format(KIND)
class Copilot:
    kind = KIND
    folder = False

    def sniff(self, name: str, head: bytes) -> bool:
        if not name.endswith(".jsonl"):
            return False
        records = head_records(head)
        # A unified session (its session.format header first) is aw-session's.
        return not (records and records[0].get("type") == "session.format") and any(map(_event, records))

    def read(self, source: Source) -> list[Session]:
        return [read_session(source)]
