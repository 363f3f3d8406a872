"""Gemini CLI, two formats (docs/formats.md §8.3).

* ``gemini-stream-json``: ``gemini --output-format stream-json``, the Gemini engine's stdout in a
  gh-aw run: ``init``, ``message``, ``tool_use{tool_id, tool_name, parameters}``,
  ``tool_result{tool_id, status, output, error}``, ``error``, ``result{status, stats}``.
* ``gemini-chat``: the chat recordings the CLI keeps (``~/.gemini/tmp/<project>/chats/session-*``):
  one JSON object ``{sessionId, projectHash, startTime, lastUpdated, messages[]}``, or the newer
  JSONL journal (a metadata record, message records, ``{"$set": …}`` updates, ``{"$rewindTo": id}``),
  where a message id may be written again and its last record wins. The calls are the
  ``toolCalls[]`` of ``gemini`` messages (each ``id`` once). A rewound message's calls did run:
  they stay, and the rewind is a warning.
"""

from __future__ import annotations

from typing import Any

from graders.formats.session import (
    CallBook,
    FormatError,
    LineFormat,
    Session,
    Source,
    TokenTotals,
    Usage,
    as_dict,
    count,
    error_text,
    json_lines,
    kind_of,
    stated,
    text,
)
from graders.grading.registry import input_format
from graders.jsrt.jsonio import JsonError, parse_json

STREAM = "gemini-stream-json"
CHAT = "gemini-chat"

_STREAM_TYPES = frozenset({"init", "message", "tool_use", "tool_result", "error", "result"})
# A tool call's ``status`` in a recording: done well, failed or declined; any other is unfinished.
_CHAT_OK = frozenset({"success"})
_CHAT_FAILED = frozenset({"error", "cancelled", "canceled"})
_MESSAGE_TYPES = frozenset({"user", "gemini", "info", "error", "warning"})


def stream_record(o: dict[str, Any]) -> bool:
    kind = kind_of(o)
    if kind == "init":
        return isinstance(o.get("session_id"), str) and "subtype" not in o and "model" in o
    if kind in ("tool_use", "tool_result"):
        return "tool_id" in o
    return kind == "result" and isinstance(o.get("stats"), dict)


def read_stream(source: Source) -> list[Session]:
    session = Session(STREAM, source.name)
    book = CallBook()
    for _, o in json_lines(source, session.warnings):
        kind = kind_of(o)
        if kind not in _STREAM_TYPES:
            session.skip(o.get("type"))
            continue
        session.stamp(o.get("timestamp"))
        if kind == "init":
            session.run_id = session.run_id or text(o.get("session_id"))
        elif kind == "tool_use":
            book.start(text(o.get("tool_id")), str(o.get("tool_name") or ""), o.get("parameters"))
        elif kind == "tool_result":
            status = str(o.get("status") or "").lower()
            failed = status != "success" or o.get("error") is not None
            book.finish(text(o.get("tool_id")), not failed, error_text(o.get("error")) or f"status {status}",
                        o.get("output"))
        elif kind == "error" and str(o.get("severity") or "error").lower() == "error":
            session.delivered = False
        elif kind == "result":
            session.status = text(o.get("status"))
            if session.status not in (None, "success"):
                session.delivered = False
            stats = as_dict(o.get("stats"))
            inp, cached = count(stats.get("input_tokens")), count(stats.get("cached"))
            session.tokens = TokenTotals(inp, count(stats.get("output_tokens")), cached, 0, True, "result.stats")
            session.usage = [Usage(None, max(0, inp - cached), count(stats.get("output_tokens")), cached,
                                   0, float(count(stats.get("duration_ms"))))]
    session.calls = book.calls
    return [session]


def chat_record(o: dict[str, Any]) -> bool:
    if isinstance(o.get("sessionId"), str) and "projectHash" in o:
        return True
    if isinstance(o.get("$set"), dict) or isinstance(o.get("$rewindTo"), str):
        return True
    return (kind_of(o) in _MESSAGE_TYPES and isinstance(o.get("id"), str) and "content" in o
            and not any(k in o for k in ("message", "sessionId", "session_id", "parentUuid")))


def _chat_records(source: Source, session: Session) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """(metadata, messages) of a recording: last record of each message id wins, first-seen order."""
    head = source.head(4096).lstrip()
    if head.startswith(b"{") and b"\n{" not in head:  # one JSON document, not JSON lines
        try:
            whole = parse_json(source.read())
        except JsonError:
            whole = None
        if isinstance(whole, dict) and isinstance(whole.get("messages"), list):
            return whole, [m for m in whole["messages"] if isinstance(m, dict)]
    meta: dict[str, Any] = {}
    messages: dict[str, dict[str, Any]] = {}
    rewinds = 0
    for _, o in json_lines(source, session.warnings):
        if isinstance(o.get("$rewindTo"), str):
            rewinds += 1
        elif isinstance(o.get("$set"), dict):
            update = o["$set"]
            for m in update.get("messages") or [] if isinstance(update.get("messages"), list) else []:
                if isinstance(m, dict) and isinstance(m.get("id"), str):
                    messages[m["id"]] = m
            meta.update({k: v for k, v in update.items() if k != "messages"})
        elif isinstance(o.get("id"), str) and o.get("type") is not None:
            if kind_of(o) not in _MESSAGE_TYPES:
                session.skip(o.get("type"))
            messages[o["id"]] = o
        elif isinstance(o.get("sessionId"), str):
            meta.update(o)
        else:
            session.skip(o.get("type"))
    if rewinds:
        session.warnings.append(f"{source.name}: {rewinds} rewind(s) in the recording; the rewound "
                                "messages' tool calls ran and are counted")
    return meta, list(messages.values())


def read_chat(source: Source) -> list[Session]:
    session = Session(CHAT, source.name)
    meta, messages = _chat_records(source, session)
    if not messages and not meta:
        raise FormatError(f"{source.name}: no Gemini CLI chat recording (sessionId and messages)")
    session.run_id = text(meta.get("sessionId"))
    session.stamp(meta.get("startTime"))
    book = CallBook()
    for m in messages:
        session.stamp(m.get("timestamp"))
        for tc in m.get("toolCalls") or [] if isinstance(m.get("toolCalls"), list) else []:
            if not isinstance(tc, dict):
                continue
            call = book.start(text(tc.get("id")), str(tc.get("name") or ""), tc.get("args"), text(tc.get("agentId")))
            status = str(tc.get("status") or "").lower()
            if status in _CHAT_OK or status in _CHAT_FAILED:
                shown = tc.get("resultDisplay")
                book.finish(call.call_id, status in _CHAT_OK, f"status {status}", shown if isinstance(shown, str) else "")
        tokens = m.get("tokens")
        if m.get("type") == "gemini" and isinstance(tokens, dict):
            inp, cached = count(tokens.get("input")), count(tokens.get("cached"))
            model = m.get("model")
            session.usage.append(Usage(model if isinstance(model, str) else None, max(0, inp - cached),
                                       count(tokens.get("output")), cached, reasoning=stated(tokens.get("thoughts"))))
    session.calls = book.calls
    session.tokens = TokenTotals.of_usage(session.usage, True, "sum of gemini message tokens")
    return [session]


@input_format(STREAM)
class GeminiStream(LineFormat):
    kind = STREAM
    engines = ("gemini",)
    signature = staticmethod(stream_record)
    reader = staticmethod(read_stream)


@input_format(CHAT)
class GeminiChat(LineFormat):
    kind = CHAT
    suffixes = (".jsonl",)
    signature = staticmethod(chat_record)
    reader = staticmethod(read_chat)

    def sniff(self, name: str, head: bytes) -> bool:
        if name.endswith(".json"):  # one JSON object: its opening keys say what it is
            start = head[:4096]
            return head.lstrip().startswith(b"{") and b'"sessionId"' in start and b'"projectHash"' in start
        return super().sniff(name, head)
