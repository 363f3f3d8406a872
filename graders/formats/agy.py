"""Agy (gh-aw's ``agy`` engine; docs/formats.md §8.3): ``{event: init|step_update|result}`` records.
A ``step_update`` of ``step_type: tool`` is one call per (conversation, ``step_index``), its last
``state`` wins: ``DONE`` succeeded, ``ERROR``/``FAILED``/``CANCELLED`` (or an ``error``) failed,
``ACTIVE``/``PENDING`` at the end is unanswered. Tokens: the ``result`` usage, else every finished
step's usage once (whether ``input_tokens`` holds the cache reads is not documented: unknown).
"""

from __future__ import annotations

from typing import Any

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
    stated,
    text,
)
from graders.grading.registry import input_format

KIND = "agy"
_EVENTS = frozenset({"init", "step_update", "result"})
_FAILED = frozenset({"ERROR", "FAILED", "CANCELLED", "CANCELED", "ABORTED", "REJECTED"})
_DONE = frozenset({"DONE", "COMPLETED", "SUCCESS"})


def agy_record(o: dict[str, Any]) -> bool:
    event = kind_of(o, "event")
    return event is not None and event in _EVENTS and isinstance(o.get(event), dict) and "type" not in o


def read_session(source: Source) -> list[Session]:
    s = Session(KIND, source.name)
    book = CallBook()
    steps: set[tuple[str, str]] = set()
    for _, o in json_lines(source, s.warnings):
        event = kind_of(o, "event")
        if event is None or event not in _EVENTS:
            s.skip(o.get("event", o.get("type")))
            continue
        body = as_dict(o.get(event))
        s.stamp(o.get("timestamp"))
        s.run_id = s.run_id or text(o.get("conversation_id")) or text(body.get("conversation_id"))
        if event == "step_update":
            state = str(body.get("state") or "").upper()
            key = (repr(body.get("conversation_id")), repr(body.get("step_index")))
            if body.get("step_type") == "tool":
                info = as_dict(body.get("tool_info"))
                cid = f"{key[0]}#{key[1]}" if body.get("step_index") is not None else None
                call = book.start(cid, str(body.get("tool_name") or info.get("name") or ""), info.get("parameters"))
                if state in _DONE or state in _FAILED or body.get("error") or info.get("error"):
                    failed = state in _FAILED or bool(body.get("error") or info.get("error"))
                    why = error_text(body.get("error") or info.get("error")) or f"state {state}"
                    book.finish(call.call_id, not failed, why, info.get("output"))
            u = body.get("usage")
            if state in _DONE and isinstance(u, dict) and key not in steps:
                steps.add(key)
                s.usage.append(Usage(None, count(u.get("input_tokens")), count(u.get("output_tokens")),
                                     count(u.get("cache_read_tokens")), reasoning=stated(u.get("thinking_tokens"))))
        elif event == "result":
            s.status = text(body.get("status"))
            if s.status is not None and s.status.upper() not in _DONE:
                s.delivered = False
            u = as_dict(body.get("usage"))
            if u:
                s.tokens = TokenTotals(count(u.get("input_tokens")), count(u.get("output_tokens")),
                                       count(u.get("cache_read_tokens")), 0, None, "result.usage",
                                       stated(u.get("thinking_tokens")))
                # The run's bill: the finished steps' usage may leave calls out (a subset stream).
                s.billed = [Usage(None, s.tokens.input, s.tokens.output, s.tokens.cache_read,
                                  reasoning=s.tokens.reasoning)]
    s.calls = book.calls
    s.tokens = s.tokens or TokenTotals.of_usage(s.usage, None, "sum of step_update usage")
    for b in s.billed:  # the model calls: the finished steps that state their usage (at least one)
        b.requests = max(1, len(s.usage))
    return [s]


@input_format(KIND)
class Agy(LineFormat):
    kind = KIND
    engines = ("agy",)
    signature = staticmethod(agy_record)
    reader = staticmethod(read_session)
