"""Claude Code's print-mode stream, ``claude -p --output-format stream-json --verbose`` (docs/formats.md
§8.3): the Claude engine's stdout in a gh-aw run (``agent-stdio.log``), or a file of it.

Records carry ``session_id`` (a transcript's carry ``sessionId``): ``system`` (``init`` opens a
run), ``assistant``/``user`` messages whose ``tool_use``/``tool_result`` blocks are the calls,
and ``result`` (how the run ended, its token totals). Several runs appended in one file are
several runs, one per ``init``; a run whose ``result`` never came is read with a warning. A
message with ``parent_tool_use_id`` is a subagent's: its calls are attributed to that Task call.
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

KIND = "claude-stream-json"
_TYPES = frozenset({"system", "assistant", "user", "result", "stream_event"})


def stream_record(o: dict[str, Any]) -> bool:
    """A record of the stream: a known type and a ``session_id`` (no transcript key)."""
    return (kind_of(o) in _TYPES and isinstance(o.get("session_id"), str) and "sessionId" not in o
            and (o.get("type") != "system" or "subtype" in o))


class _Run:
    def __init__(self, source: Source, index: int) -> None:
        self.session = Session(KIND, source.name)
        self.book = CallBook()
        self.messages: dict[str, int] = {}  # message id -> its Usage's index in session.usage
        self.init = False
        self.result = False
        self.index = index

    def empty(self) -> bool:
        return not (self.book.calls or self.session.usage or self.result)

    def message(self, o: dict[str, Any]) -> None:
        msg = as_dict(o.get("message"))
        agent = text(o.get("parent_tool_use_id"))
        if o.get("type") == "assistant":
            self._usage(msg, agent)
        content = msg.get("content")
        for b in content if isinstance(content, list) else []:
            if not isinstance(b, dict):
                continue
            if b.get("type") == "tool_use":
                name = str(b.get("name") or "")
                server = name.split("__")[1] if name.startswith("mcp__") and name.count("__") >= 2 else None
                self.book.start(text(b.get("id")), name, b.get("input"), agent, server)
            elif b.get("type") == "tool_result":
                observed = result_text(b.get("content"))
                self.book.finish(text(b.get("tool_use_id")), b.get("is_error") is not True,
                                 observed or "tool_result is_error", observed, agent=agent)

    def _usage(self, msg: dict[str, Any], agent: str | None) -> None:
        u = msg.get("usage")
        if not isinstance(u, dict):
            return
        model = msg.get("model")
        usage = Usage(model if isinstance(model, str) else None, count(u.get("input_tokens")),
                      count(u.get("output_tokens")), count(u.get("cache_read_input_tokens")),
                      count(u.get("cache_creation_input_tokens")), 0, None, agent)
        # One API response is written once per content block, its output count as streaming had
        # reached then: the last record of a response replaces the earlier ones.
        mid = text(msg.get("id"))
        if mid is not None and mid in self.messages:
            self.session.usage[self.messages[mid]] = usage
            return
        if mid is not None:
            self.messages[mid] = len(self.session.usage)
        self.session.usage.append(usage)

    def end(self, o: dict[str, Any]) -> None:
        self.result = True
        s = self.session
        s.status = text(o.get("subtype")) or ("error" if o.get("is_error") is True else None)
        if o.get("is_error") is True or (s.status or "").startswith("error"):
            s.delivered = False
        u = o.get("usage")
        if isinstance(u, dict):
            s.tokens = TokenTotals(count(u.get("input_tokens")), count(u.get("output_tokens")),
                                   count(u.get("cache_read_input_tokens")), count(u.get("cache_creation_input_tokens")),
                                   False, "result.usage")
        by_model = o.get("modelUsage")
        if isinstance(by_model, dict):  # every model's bill, subagents' too (``usage``: the main thread's)
            s.billed = [Usage(m, count(v.get("inputTokens")), count(v.get("outputTokens")),
                              count(v.get("cacheReadInputTokens")), count(v.get("cacheCreationInputTokens")))
                        for m, v in sorted(by_model.items()) if isinstance(v, dict)]
            if s.billed:
                s.tokens = TokenTotals.of_usage(s.billed, False, "result.modelUsage")
        for d in o.get("permission_denials") or [] if isinstance(o.get("permission_denials"), list) else []:
            call = self.book.get(text(as_dict(d).get("tool_use_id")))
            if call is not None and call.ok is not False:  # refused by the permission policy
                call.ok, call.error = False, "permission denied"

    def done(self) -> Session:
        s = self.session
        s.calls = self.book.calls
        if not self.result:
            s.warnings.append(f"{s.source}: run {self.index} has no result record: it was cut off before "
                              "it ended; its calls are read as far as they go")
        s.tokens = s.tokens or TokenTotals.of_usage(s.usage, False, "assistant message usage")
        for b in s.billed:  # each model's requests: its responses in the stream (at least one)
            b.requests = max(1, sum(u.model == b.model for u in s.usage))
        return s


def read_runs(source: Source) -> list[Session]:
    runs: list[_Run] = []
    warnings: list[str] = []
    current: _Run | None = None
    for _, o in json_lines(source, warnings):
        kind = kind_of(o)
        if kind == "system" and o.get("subtype") == "init":
            if current is None or current.init or not current.empty():
                current = _Run(source, len(runs) + 1)
                runs.append(current)
            current.init = True
            s = current.session
            s.run_id = text(o.get("session_id"))
            continue
        if current is None:  # a run whose init was cut off (or comes later): read it all the same
            current = _Run(source, 1)
            runs.append(current)
        if kind not in _TYPES:
            current.session.skip(o.get("type"))
            continue
        current.session.run_id = current.session.run_id or text(o.get("session_id"))
        if kind in ("assistant", "user"):
            current.message(o)
        elif kind == "result":
            current.end(o)
    sessions = [r.done() for r in runs]
    seen: dict[str | None, int] = {}
    for s in sessions:
        s.warnings[:0] = warnings
        # A resumed session appends a run with the same session id: its attempt is the next.
        seen[s.run_id] = s.attempt = seen.get(s.run_id, 0) + 1
        if s.attempt == 1:
            s.attempt = None
    return sessions


@input_format(KIND)
class ClaudeStream(LineFormat):
    kind = KIND
    engines = ("claude",)
    signature = staticmethod(stream_record)
    reader = staticmethod(read_runs)

    def sniff(self, name: str, head: bytes) -> bool:
        # An init line longer than the sniffed head (its tool list): its opening says what it is.
        return super().sniff(name, head) or (name.endswith(self.suffixes) and head.lstrip().startswith(
            b'{"type":"system","subtype":"init"') and b'"session_id"' in head)
