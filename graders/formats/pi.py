"""Pi coding agent (``@mariozechner/pi-coding-agent``; docs/formats.md §8.3), both of its logs:

* the session file (``~/.pi/agent/sessions/…/*.jsonl``, version 3): a ``session`` header, then
  ``message`` entries whose assistant content holds ``toolCall{id, name, arguments}`` blocks and
  whose ``toolResult`` messages answer them (``toolCallId``, ``isError``);
* the JSON event stream (``pi --mode json``, gh-aw's ``pi-streaming.jsonl``): the same header, then
  ``tool_execution_start|end{toolCallId, toolName, args, result, isError}``, ``message_end`` /
  ``turn_end`` carrying the finalized messages (with ``usage``).

Each call id once, whichever records show it. Tokens: each finalized assistant message's ``usage``
once (``input`` is without the cache reads and writes).
"""

from __future__ import annotations

from typing import Any

from graders.formats.claude_code import result_text
from graders.formats.session import (
    CallBook,
    LineFormat,
    Session,
    Source,
    TokenTotals,
    Usage,
    as_dict,
    count,
    json_lines,
    kind_of,
    text,
)
from graders.grading.registry import input_format

KIND = "pi"
_STREAM = frozenset({"agent_start", "agent_end", "turn_start", "turn_end", "message_start", "message_update",
                     "message_end", "tool_execution_start", "tool_execution_update", "tool_execution_end",
                     "auto_compaction_start", "auto_compaction_end", "auto_retry_start", "auto_retry_end"})
_ENTRIES = frozenset({"session", "message", "model_change", "thinking_level_change", "compaction",
                      "branch_summary", "custom", "custom_message", "label", "session_info"})


def pi_record(o: dict[str, Any]) -> bool:
    kind = kind_of(o)
    if kind == "session":
        return "version" in o and isinstance(o.get("id"), str)
    if kind == "message":  # a session entry: its own id/parentId; the message has a role
        msg = o.get("message")
        return "parentId" in o and isinstance(msg, dict) and msg.get("role") in ("user", "assistant", "toolResult")
    return kind in ("tool_execution_start", "tool_execution_end") and "toolCallId" in o


class _Reader:
    def __init__(self, source: Source) -> None:
        self.session = Session(KIND, source.name)
        self.book = CallBook()
        self.seen: set[Any] = set()

    def message(self, msg: dict[str, Any]) -> None:
        role = msg.get("role")
        if role == "assistant":
            for b in msg.get("content") or [] if isinstance(msg.get("content"), list) else []:
                if isinstance(b, dict) and b.get("type") == "toolCall":
                    self.book.start(text(b.get("id")), str(b.get("name") or ""), b.get("arguments"))
            self.usage(msg)
        elif role == "toolResult":
            shown = result_text(msg.get("content"))
            self.book.finish(text(msg.get("toolCallId")), msg.get("isError") is not True, shown or "isError",
                             shown, str(msg.get("toolName") or ""))

    def usage(self, msg: dict[str, Any]) -> None:
        u = msg.get("usage")
        # A finalized message is written more than once (message_end, turn_end, the session entry).
        key = repr((msg.get("timestamp"), msg.get("responseId"), msg.get("model"), u))
        if not isinstance(u, dict) or key in self.seen or msg.get("stopReason") is None:
            return
        self.seen.add(key)
        model = msg.get("model")
        self.session.usage.append(Usage(model if isinstance(model, str) else None, count(u.get("input")),
                                        count(u.get("output")), count(u.get("cacheRead")), count(u.get("cacheWrite"))))
        if msg.get("stopReason") in ("error", "aborted"):
            self.session.delivered = False
            self.session.status = str(msg.get("stopReason"))


def read_session(source: Source) -> list[Session]:
    r = _Reader(source)
    s = r.session
    for _, o in json_lines(source, s.warnings):
        kind = kind_of(o)
        s.stamp(o.get("timestamp"))
        if kind == "session":
            s.run_id = s.run_id or text(o.get("id"))
        elif kind == "message" or kind == "message_end":
            r.message(as_dict(o.get("message")))
        elif kind == "turn_end":
            r.message(as_dict(o.get("message")))
            for tr in o.get("toolResults") or [] if isinstance(o.get("toolResults"), list) else []:
                r.message(as_dict(tr))
        elif kind == "tool_execution_start":
            r.book.start(text(o.get("toolCallId")), str(o.get("toolName") or ""), o.get("args"))
        elif kind == "tool_execution_end":
            result = as_dict(o.get("result"))
            shown = result_text(result.get("content"))
            r.book.finish(text(o.get("toolCallId")), o.get("isError") is not True, shown or "isError", shown,
                          str(o.get("toolName") or ""))
        elif kind == "agent_end":
            for m in o.get("messages") or [] if isinstance(o.get("messages"), list) else []:
                r.message(as_dict(m))
        elif kind not in _STREAM and kind not in _ENTRIES:
            s.skip(o.get("type"))
    s.calls = r.book.calls
    s.tokens = TokenTotals.of_usage(s.usage, False, "finalized assistant message usage")
    return [s]


@input_format(KIND)
class Pi(LineFormat):
    kind = KIND
    engines = ("pi",)
    signature = staticmethod(pi_record)
    reader = staticmethod(read_session)
