"""Goose ``goose run --output-format stream-json`` (docs/formats.md §8.3; gh-aw's Goose sample engine):
``message`` records ``{message{id, role, created (s), content[]}}`` whose content holds
``toolRequest{id, toolCall}`` and ``toolResponse{id, toolResult}``, ``complete`` (the run's token
totals, input including the cache reads) and ``error``. Each tool id once; a response whose
``toolResult.status`` is ``error``, whose ``value.isError`` is true or whose ``structuredContent``
has a non-zero ``exit_code`` fails its call; a request that could not be parsed
(``toolCall.status: error``) is a failed call.
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
    error_text,
    json_lines,
    kind_of,
    text,
)
from graders.grading.registry import input_format

KIND = "goose"
_TYPES = frozenset({"message", "complete", "error", "notification"})


def goose_record(o: dict[str, Any]) -> bool:
    msg = o.get("message")
    if o.get("type") == "message" and isinstance(msg, dict):
        return isinstance(msg.get("id"), str) and "created" in msg and "parentId" not in o
    return o.get("type") == "complete" and "total_tokens" in o


def _response_failure(result: dict[str, Any]) -> str | None:
    if result.get("status") == "error":
        return error_text(result.get("error") or result.get("value")) or "status error"
    value = as_dict(result.get("value"))
    if value.get("isError") is True:
        return result_text(value.get("content")) or "isError"
    code = as_dict(value.get("structuredContent")).get("exit_code")
    if isinstance(code, int) and not isinstance(code, bool) and code != 0:
        return f"exit code {code}"
    return None


def read_session(source: Source) -> list[Session]:
    s = Session(KIND, source.name)
    book = CallBook()
    for _, o in json_lines(source, s.warnings):
        kind = kind_of(o)
        if kind not in _TYPES:
            s.skip(o.get("type"))
            continue
        if kind == "message":
            msg = as_dict(o.get("message"))
            s.stamp(msg.get("created"))
            s.run_id = s.run_id or text(o.get("session_id"))
            for b in msg.get("content") or [] if isinstance(msg.get("content"), list) else []:
                b = as_dict(b)
                if b.get("type") == "toolRequest":
                    call = as_dict(b.get("toolCall"))
                    value = as_dict(call.get("value"))
                    started = book.start(text(b.get("id")), str(value.get("name") or ""), value.get("arguments"))
                    if call.get("status") == "error":
                        book.finish(started.call_id, False, error_text(call.get("error")) or "tool request not parsed")
                elif b.get("type") == "toolResponse":
                    result = as_dict(b.get("toolResult"))
                    why = _response_failure(result)
                    book.finish(text(b.get("id")), why is None, why, result_text(as_dict(result.get("value")).get("content")))
        elif kind == "complete":
            inp, cached = count(o.get("input_tokens")), count(o.get("cache_read_input_tokens"))
            write = count(o.get("cache_write_input_tokens"))
            s.tokens = TokenTotals(inp, count(o.get("output_tokens")), cached, write, True, "complete")
            s.usage = [Usage(None, max(0, inp - cached - write), count(o.get("output_tokens")), cached, write)]
            s.status = s.status or "complete"
        elif kind == "error":
            s.delivered = False
            s.status = "error"
    s.calls = book.calls
    return [s]


@input_format(KIND)
class Goose(LineFormat):
    kind = KIND
    engines = ("goose",)
    signature = staticmethod(goose_record)
    reader = staticmethod(read_session)
