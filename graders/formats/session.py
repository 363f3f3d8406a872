"""What every reader returns: one agent session as tool calls and LLM usage records.

A :class:`Session` is format-neutral. From it come the two views graders need: the gh-aw-shaped
trace dict (docs/reference/graders.md §5 keys, so the built-in and trajectory graders run
unchanged) and the trace-rules ``Run`` (its steps).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Mapping
from contextvars import ContextVar
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Protocol

from graders.formats.ghaw.trace import run_from_ghaw_trace
from graders.formats.model import Run, Step
from graders.jsrt.jscompat import js_stringify
from graders.jsrt.jsonio import TOO_DEEP, JsonError, JsonTooDeep, parse_json

if TYPE_CHECKING:
    from graders.runs.runfiles import RunFiles

# Retrieval (path/pattern/query/url) and action (file_path/command) args: what grounding needs.
STEP_ARG_KEYS = ("file_path", "path", "pattern", "query", "command", "url", "prompt")
OBSERVATION_CHARS = 200


class FormatError(ValueError):
    """A file its format's reader cannot read; the message names the file and the problem."""


class Stream(Protocol):
    """A file read as it is used, not held whole (``fleetgrade run``'s session files: a run may
    read 1 GiB, and holding it all was most of the job's peak memory; docs/hostile-input.md)."""

    def head(self, size: int) -> bytes:
        """The file's first ``size`` bytes (what a sniffer sees)."""

    def lines(self) -> Iterator[bytes]:
        """The file's lines split on ``\\n``, without it, read block by block."""

    def read(self) -> bytes:
        """The whole file (a JSON document format)."""


@dataclass
class Source:
    """One input file: its name (as shown in messages), its bytes or a :class:`Stream` of them,
    and the files it names (``related``: path relative to the file's folder → bytes or stream,
    e.g. Claude Code subagent files). A folder format (gh-aw) gets its folder as ``files``
    instead. Readers use :meth:`head`, :meth:`lines` and :meth:`read`, never ``data`` itself."""

    name: str
    data: bytes | Stream = b""
    related: Mapping[str, bytes | Stream] = field(default_factory=dict)
    files: RunFiles | None = None

    def head(self, size: int) -> bytes:
        return self.data[:size] if isinstance(self.data, bytes) else self.data.head(size)

    def lines(self) -> Iterator[bytes]:
        if isinstance(self.data, bytes):
            return iter(self.data.split(b"\n"))
        return self.data.lines()

    def read(self) -> bytes:
        return self.data if isinstance(self.data, bytes) else self.data.read()


# Called once per record a reader keeps (a call, a usage record) while ``fleetgrade run`` reads a
# file (``prepare_sessions``): a run's budget counts records as well as bytes, as a few bytes of
# input can make a record of hundreds (graders/runs/runfiles.MAX_RUN_RECORDS).
ON_RECORD: ContextVar[Callable[[], None] | None] = ContextVar("on_record", default=None)


def _kept() -> None:
    on_record = ON_RECORD.get()
    if on_record is not None:
        on_record()


@dataclass(slots=True)
class Call:
    """One tool call. ``ok`` None: no result recorded (counts as success, as gh-aw's merge does
    for a gateway call without a response)."""

    name: str
    args: dict[str, Any] = field(default_factory=dict)
    ok: bool | None = None
    observation: str = ""
    call_id: str | None = None
    agent: str | None = None  # the subagent that made the call; None for the main agent
    error: str | None = None

    def __post_init__(self) -> None:
        _kept()


@dataclass(slots=True)
class Usage:
    """One LLM request's tokens. ``input`` excludes cached tokens (gh-aw token-usage semantics)."""

    model: str | None = None
    input: int = 0
    output: int = 0
    cache_read: int = 0
    cache_write: int = 0
    duration_ms: float = 0
    purpose: str | None = None
    agent: str | None = None
    requests: int = 1  # an aggregate record (Copilot ``session.shutdown``) stands for several

    def __post_init__(self) -> None:
        _kept()


@dataclass
class Session:
    kind: str  # the format: runs.source_kind
    source: str  # the file it was read from (display path)
    run_id: str | None = None
    workflow: str | None = None
    created_at: str | None = None  # ISO 8601, the session's first timestamp
    attempt: int | None = None
    repository: str | None = None
    delivered: bool = True  # task-level outcome where the format records one
    calls: list[Call] = field(default_factory=list)
    usage: list[Usage] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    trace_dict: dict[str, Any] | None = None  # set by folder formats (gh-aw) that build their own

    def trace(self) -> dict[str, Any]:
        """The gh-aw-shaped trace (docs/reference/graders.md §5 keys, in its order)."""
        if self.trace_dict is not None:
            return self.trace_dict
        return ghaw_trace(self.calls, self.usage)

    def run(self, task: str | None = None, run_id: str | None = None) -> Run:
        """The trace-rules run: every call a step, subagent calls attributed (``Step.agent``)."""
        rid = run_id or self.run_id or self.source
        if self.trace_dict is not None:  # a gh-aw run: its steps are its preprocessed tool calls
            run = run_from_ghaw_trace(self.trace_dict, task or self.workflow or rid, rid)
            run.ok = self.delivered
            return run
        steps = [
            Step(i, c.name, {k: c.args[k] for k in STEP_ARG_KEYS if c.args.get(k)},
                 c.observation[:OBSERVATION_CHARS], c.ok is not False, c.agent)
            for i, c in enumerate(self.calls, 1)
        ]
        return Run(task=task or self.workflow or rid, run_id=rid, ok=self.delivered, steps=steps)


def tool_call(c: Call) -> dict[str, Any]:
    """A call as gh-aw's native tool-call record: a failure carries ``error`` (``is_tool_failure``)."""
    out: dict[str, Any] = {"source": "agent", "name": c.name, "tool": c.name, "arguments": c.args}
    if c.call_id is not None:
        out["toolCallId"] = c.call_id
    if c.agent is not None:
        out["agentId"] = c.agent
    if c.ok is None:
        return out
    out["completed"] = True
    out["success"] = c.ok
    out["status"] = "success" if c.ok else "error"
    if not c.ok:
        out["error"] = {"message": c.error or c.observation[:OBSERVATION_CHARS]}
    return out


def usage_record(u: Usage) -> dict[str, Any]:
    """A usage record shaped like a line of AWF's ``token-usage.jsonl``."""
    rec: dict[str, Any] = {"model": u.model, "input_tokens": u.input, "output_tokens": u.output,
                           "cache_read_tokens": u.cache_read, "cache_write_tokens": u.cache_write,
                           "duration_ms": u.duration_ms}
    if u.purpose is not None:
        rec["purpose"] = u.purpose
    if u.agent is not None:
        rec["agent_id"] = u.agent
    if u.requests != 1:
        rec["requests"] = u.requests
    return rec


def ghaw_trace(calls: list[Call], usage: list[Usage]) -> dict[str, Any]:
    entries = [usage_record(u) for u in usage]
    tool_calls = [tool_call(c) for c in calls]
    return {
        "tokenUsageEntries": entries,
        "agentUsage": None,
        "mcpGatewayEntries": [],
        "agentOutput": None,
        "toolCalls": tool_calls,
        "nativeToolCalls": list(tool_calls),
        "gatewayRequests": [],
        "retryEvents": [],
        "errorEvents": [],
        "steps": [{"index": i, "inputTokens": u.input, "outputTokens": u.output, "durationMs": u.duration_ms,
                   "model": u.model} for i, u in enumerate(usage)],
        "totalInputTokens": sum(u.input for u in usage),
        "totalOutputTokens": sum(u.output for u in usage),
        "totalDurationMs": sum(u.duration_ms for u in usage),
        # An aggregate record (Copilot session.shutdown's per-model totals) counts its requests.
        "totalRequests": sum(u.requests for u in usage),
        "files": [],
        "artifacts": [],
    }


# ---- helpers shared by the readers -------------------------------------------------------------

def json_lines(source: Source, warnings: list[str] | None = None) -> Iterator[tuple[int, dict[str, Any]]]:
    """(line number, object) of every JSON-object line, as ``JSON.parse`` reads it (numbers and
    depth: ``graders.jsrt.jsonio``); other lines are skipped with a warning.

    Lines are numbered as ``str.splitlines`` numbers the decoded file (a ``\\r`` or ``\\x85``
    ends a line too), one ``\\n``-line at a time, so the file is never decoded whole."""
    lineno = 0
    for raw in source.lines():
        for line in raw.decode("utf-8", errors="replace").splitlines() or [""]:
            lineno += 1
            line = line.strip()
            if not line:
                continue
            try:
                obj = parse_json(line)
            except JsonError as exc:
                if warnings is not None:
                    reason = TOO_DEEP if isinstance(exc, JsonTooDeep) else "not valid JSON"
                    warnings.append(f"{source.name}:{lineno}: skipped: {reason}")
                continue
            if isinstance(obj, dict):
                yield lineno, obj
            elif warnings is not None:
                warnings.append(f"{source.name}:{lineno}: skipped: not a JSON object")


def first_object(head: bytes) -> dict[str, Any] | None:
    """The first complete JSON-object line of a file's head, for sniffing."""
    for raw in head.split(b"\n")[:20]:
        raw = raw.strip()
        if not raw:
            continue
        try:
            obj = parse_json(raw)
        except JsonError:
            return None
        return obj if isinstance(obj, dict) else None
    return None


def as_dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def text(value: Any) -> str | None:
    """A non-blank string, or an integer id as text; None otherwise."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return str(value)
    if isinstance(value, str) and value.strip():
        return value.strip()
    return None


def count(value: Any) -> int:
    """A token count: a non-negative integer (numbers and digit strings), else 0."""
    if isinstance(value, bool):
        return 0
    if isinstance(value, int):
        return max(0, value)
    if isinstance(value, float) and value == value and value not in (float("inf"), float("-inf")):
        return max(0, int(value))
    if isinstance(value, str) and value.strip().isdigit():
        return int(value.strip())
    return 0


def iso_time(value: Any) -> str | None:
    """An ISO 8601 timestamp (text) or epoch seconds / milliseconds (number) as ISO text in UTC."""
    if isinstance(value, str) and value.strip():
        try:
            ts = datetime.fromisoformat(value.strip().replace("Z", "+00:00"))
        except ValueError:
            return None
        if ts.tzinfo is None:
            ts = ts.replace(tzinfo=UTC)
        return ts.astimezone(UTC).isoformat()
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        seconds = value / 1000 if value > 1e11 else value  # epoch ms vs s
        try:
            return datetime.fromtimestamp(seconds, UTC).isoformat()
        except (ValueError, OverflowError, OSError):
            return None
    return None


def json_text(value: Any) -> str:
    """``json.dumps`` of a parsed value, at any depth it was read to (``jsonio.MAX_DEPTH``)."""
    try:
        return json.dumps(value, default=str)
    except RecursionError:
        return js_stringify(value) or ""


def error_text(value: Any) -> str:
    if isinstance(value, dict):
        value = value.get("message", value.get("error"))
    return value if isinstance(value, str) else ("" if value is None else json_text(value))
