"""OpenCode ``opencode run --format json`` (docs/formats.md §8.3; gh-aw's OpenCode sample engine):
records ``{type, timestamp (ms), sessionID, part}`` of type ``step_start``, ``text``, ``reasoning``,
``tool_use``, ``step_finish``, and ``error``. A ``tool_use`` part is one call per ``callID`` (its
last state wins): ``completed`` with a non-zero ``metadata.exit`` or ``error`` fails it, ``pending``/
``running`` at the end leaves it unanswered. Tokens: every ``step_finish`` part's ``tokens`` once
(``input`` is without the cache reads and writes).
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

KIND = "opencode"
_TYPES = frozenset({"step_start", "text", "reasoning", "tool_use", "step_finish", "error"})


def opencode_record(o: dict[str, Any]) -> bool:
    return isinstance(o.get("sessionID"), str) and (isinstance(o.get("part"), dict) or isinstance(o.get("error"), dict))


def _failure(state: dict[str, Any]) -> str | None:
    status = str(state.get("status") or "")
    if status == "error":
        return error_text(state.get("error")) or "status error"
    code = as_dict(state.get("metadata")).get("exit")
    if isinstance(code, int) and not isinstance(code, bool) and code != 0:
        return f"exit code {code}"
    return None


def read_session(source: Source) -> list[Session]:
    s = Session(KIND, source.name)
    book = CallBook()
    steps: set[str] = set()
    for _, o in json_lines(source, s.warnings):
        kind = kind_of(o)
        if kind not in _TYPES:
            s.skip(o.get("type"))
            continue
        s.stamp(o.get("timestamp"))
        s.run_id = s.run_id or text(o.get("sessionID"))
        part = as_dict(o.get("part"))
        if kind == "tool_use":
            state = as_dict(part.get("state"))
            call = book.start(text(part.get("callID")), str(part.get("tool") or ""), state.get("input"))
            if state.get("status") in ("completed", "error"):
                why = _failure(state)
                book.finish(call.call_id, why is None, why, state.get("output"))
        elif kind == "step_finish":
            key = repr(part.get("id") or (part.get("messageID"), o.get("timestamp")))
            tokens = as_dict(part.get("tokens"))
            if tokens and key not in steps:  # a part written twice counts once
                steps.add(key)
                cache = as_dict(tokens.get("cache"))
                s.usage.append(Usage(None, count(tokens.get("input")), count(tokens.get("output")),
                                     count(cache.get("read")), count(cache.get("write")),
                                     reasoning=stated(tokens.get("reasoning"))))
        elif kind == "error":
            s.delivered = False
            s.status = "error"
    s.calls = book.calls
    s.tokens = TokenTotals.of_usage(s.usage, False, "sum of step_finish tokens")
    return [s]


@input_format(KIND)
class OpenCode(LineFormat):
    kind = KIND
    engines = ("opencode",)
    signature = staticmethod(opencode_record)
    reader = staticmethod(read_session)
