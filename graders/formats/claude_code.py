"""Claude Code session transcripts (docs/formats.md §4): ``<session>.jsonl`` and its
``<session>/subagents/agent-<id>.jsonl`` files.

Two readings live here:

* :func:`runs_from_transcript`: trace-grader's own reading (``fleetgrade trace --transcript``),
  kept bit-exact: sidechain lines skipped, one run per file, delivered forced true.
* :class:`ClaudeCode`: the full reading. Subagent work is attributed, not dropped: the steps of a
  ``Task`` call's subagent (from ``subagents/agent-<id>.jsonl``, else from the parent's
  ``progress``/``agent_progress`` lines, never both) follow that call, each marked with the
  subagent's id. Usage is counted once per API response (``message.id``): streaming writes one
  response as several lines, each with the output count reached so far; the last one is kept.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from graders.formats.jsonl import Warn, ignore_warning, iter_objects
from graders.formats.model import Run, Step
from graders.formats.session import (
    Call,
    FormatError,
    Session,
    Source,
    Usage,
    any_record,
    count,
    json_lines,
    kind_of,
    text,
)
from graders.grading.registry import input_format

KIND = "claude-code"
Line = str | bytes | dict[str, Any]

# Retrieval (path/pattern/query/url) and action (file_path/command) args: what grounding needs.
TRANSCRIPT_ARG_KEYS = ("file_path", "path", "pattern", "query", "command", "url", "prompt")
OBSERVATION_CHARS = 200
# Line types of a transcript, older and newer (a line of one of these with a transcript's keys,
# anywhere in the file's head, is Claude Code); other types are skipped and counted.
_LINE_TYPES = frozenset({"user", "assistant", "progress", "system", "summary", "file-history-snapshot",
                         "queue-operation", "mode", "permission-mode", "attachment", "ai-title", "custom-title",
                         "last-prompt", "tag"})
# Keys only a transcript's lines carry (the print-mode stream writes ``session_id`` instead).
_TRANSCRIPT_KEYS = ("sessionId", "parentUuid", "leafUuid", "messageId")
SUBAGENT_FILE = re.compile(r"^(?P<stem>[^/]+)/subagents/agent-(?P<agent>[^/]+)\.jsonl$")
# Context compaction (``agent-acompact-<id>.jsonl``): a summary request and answer, not a subagent.
COMPACTION = "acompact-"


def _text(value: Any) -> str:
    # The reference uses str() on ids and names, so 5 becomes "5"; null is handled by callers.
    return value if isinstance(value, str) else str(value)


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
    """trace-grader's reading: one run per transcript (zero if it has no tool_use); sidechain lines skipped."""
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


# ---- the full reading ---------------------------------------------------------------------------

@dataclass
class _Thread:
    """One agent's calls and usage, as read from its lines."""

    agent: str | None
    calls: list[Call] = field(default_factory=list)
    usage: list[Usage] = field(default_factory=list)
    responses: dict[Any, int] = field(default_factory=dict)  # response -> its Usage's index in usage
    results: dict[Any, tuple[bool, str]] = field(default_factory=dict)

    def add(self, o: dict[str, Any]) -> None:
        msg = o.get("message")
        if not isinstance(msg, dict):
            return
        if o.get("type") == "assistant" or msg.get("role") == "assistant":
            self._usage(o, msg)
        content = msg.get("content")
        for b in content if isinstance(content, list) else []:
            if not isinstance(b, dict):
                continue
            if b.get("type") == "tool_use":
                inp = b.get("input")
                self.calls.append(Call(_text(b.get("name") or ""), inp if isinstance(inp, dict) else {},
                                       None, "", text(b.get("id")), self.agent))
            elif b.get("type") == "tool_result":
                # Only its first characters are ever read (``finish``): the rest is not kept.
                self.results[_key(b.get("tool_use_id"))] = (not bool(b.get("is_error")),
                                                            result_text(b.get("content"))[:OBSERVATION_CHARS])

    def _usage(self, o: dict[str, Any], msg: dict[str, Any]) -> None:
        u = msg.get("usage")
        if not isinstance(u, dict):
            return
        model = msg.get("model")
        usage = Usage(model if isinstance(model, str) else None, count(u.get("input_tokens")),
                      count(u.get("output_tokens")), count(u.get("cache_read_input_tokens")),
                      count(u.get("cache_creation_input_tokens")), 0, None, self.agent)
        response = _key(msg.get("id") or o.get("requestId") or o.get("uuid"))
        if response is not None and response in self.responses:  # a later line of the response: its
            self.usage[self.responses[response]] = usage  # output count as far as streaming went
            return
        if response is not None:
            self.responses[response] = len(self.usage)
        self.usage.append(usage)

    def finish(self) -> None:
        for c in self.calls:
            found = self.results.get(_key(c.call_id))
            if found is not None:
                c.ok, c.observation = found[0], found[1][:OBSERVATION_CHARS]
                if not c.ok:
                    c.error = found[1][:OBSERVATION_CHARS] or "tool_result is_error"


def _read_thread(lines: Iterable[tuple[int, dict[str, Any]]], agent: str | None) -> _Thread:
    thread = _Thread(agent)
    for _, o in lines:
        thread.add(o)
    thread.finish()
    return thread


def _subagent_files(source: Source) -> dict[str, Source]:
    """agent id → its transcript, for the session file ``source`` (``<stem>.jsonl``)."""
    stem = source.name.rsplit("/", 1)[-1].removesuffix(".jsonl")
    found: dict[str, Source] = {}
    for rel, data in sorted(source.related.items()):
        m = SUBAGENT_FILE.match(rel)
        if m and m.group("stem") == stem and not m.group("agent").startswith(COMPACTION):
            found[m.group("agent")] = Source(f"{source.name.removesuffix('.jsonl')}/subagents/"
                                             f"agent-{m.group('agent')}.jsonl", data)
    return found


def read_session(source: Source) -> Session:
    """Lines are read as they stream by, into their agent's thread, not kept: a transcript's
    parsed lines took several times its bytes (docs/hostile-input.md, "Memory")."""
    session = Session(KIND, source.name)
    parent = _Thread(None)
    files = _subagent_files(source)
    progress: dict[str, _Thread] = {}  # agents with no file of their own, in order of first line
    sidechain: dict[str, _Thread] = {}
    task_agent: dict[Any, str] = {}  # the Task call's tool_use id -> the subagent it ran
    messages = agent_progress = False
    for _, o in json_lines(source, session.warnings):
        session.run_id = session.run_id or text(o.get("sessionId")) or text(o.get("session_id"))
        session.stamp(o.get("timestamp"))
        if kind_of(o) not in _LINE_TYPES:
            session.skip(o.get("type"))
            continue
        data = o.get("data")
        if o.get("type") == "progress" and isinstance(data, dict) and data.get("type") == "agent_progress":
            agent = text(data.get("agentId"))
            nested = data.get("message")
            if agent is not None and isinstance(nested, dict):
                agent_progress = True
                if agent not in files:
                    thread = progress.get(agent) or progress.setdefault(agent, _Thread(agent))
                    thread.add(nested)
                parent_id = _key(o.get("parentToolUseID"))
                if parent_id is not None:
                    task_agent.setdefault(parent_id, agent)
            continue
        messages = messages or o.get("type") in ("user", "assistant")
        if o.get("isSidechain") is True:  # older versions wrote subagent lines inline
            agent = text(o.get("agentId")) or "sidechain"
            thread = sidechain.get(agent) or sidechain.setdefault(agent, _Thread(agent))
            thread.add(o)
            continue
        tur = o.get("toolUseResult")
        if isinstance(tur, dict) and text(tur.get("agentId")) is not None:
            msg = o.get("message")
            for b in (msg.get("content") if isinstance(msg, dict) else None) or []:
                if isinstance(b, dict) and b.get("type") == "tool_result":
                    task_agent[_key(b.get("tool_use_id"))] = text(tur.get("agentId")) or ""
        parent.add(o)
    if not agent_progress and not messages:
        raise FormatError(f"{source.name}: no Claude Code transcript lines (user/assistant messages)")
    # A subagent's steps: its own file, else the parent's progress lines (the same steps; never both).
    threads: dict[str, _Thread] = {}
    for agent, sub in files.items():
        threads[agent] = _read_thread(json_lines(sub, session.warnings), agent)
    threads.update(progress)
    for agent in sorted(sidechain):
        threads.setdefault(agent, sidechain[agent])
    for thread in (*progress.values(), *sidechain.values(), parent):
        thread.finish()
    placed: set[str] = set()
    for c in parent.calls:
        session.calls.append(c)
        agent = task_agent.get(_key(c.call_id))
        if agent is not None and agent in threads and agent not in placed:
            placed.add(agent)
            session.calls.extend(threads[agent].calls)
    session.usage.extend(parent.usage)
    for agent, thread in threads.items():
        if agent not in placed:  # no Task call links it: its steps come after the parent's
            session.calls.extend(thread.calls)
        session.usage.extend(thread.usage)
    return session


def transcript_line(o: dict[str, Any]) -> bool:
    return kind_of(o) in _LINE_TYPES and "session_id" not in o and any(k in o for k in _TRANSCRIPT_KEYS)


@input_format(KIND)
class ClaudeCode:
    kind = KIND
    folder = False

    def sniff(self, name: str, head: bytes) -> bool:
        if not name.endswith(".jsonl"):
            return False
        if any_record(head, transcript_line):
            return True
        # A first line longer than the sniffed head: its opening keys still say what it is.
        return head.lstrip().startswith(b"{") and (b'"parentUuid"' in head[:4096] and b'"sessionId"' in head)

    def read(self, source: Source) -> list[Session]:
        return [read_session(source)]
