"""What every reader returns: one agent session as tool calls and LLM usage records.

A :class:`Session` is format-neutral. From it come the two views graders need: the gh-aw-shaped
trace dict (docs/reference/graders.md §5 keys, so the built-in and trajectory graders run
unchanged) and the trace-rules ``Run`` (its steps).
"""

from __future__ import annotations

import functools
import json
import re
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextvars import ContextVar
from dataclasses import dataclass, field
from datetime import UTC, date, datetime
from typing import TYPE_CHECKING, Any, Protocol

from graders.formats.ghaw.trace import run_from_ghaw_trace
from graders.formats.model import Run, Step
from graders.formats.usage import stated_sum
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
    # An engine's stdout (a gh-aw run's ``agent-stdio.log``): its JSON records are mixed with the
    # container's own lines, which are skipped without a warning each.
    chatter: bool = False

    def head(self, size: int) -> bytes:
        return self.data[:size] if isinstance(self.data, bytes) else self.data.head(size)

    def lines(self) -> Iterator[bytes]:
        if isinstance(self.data, bytes):
            return iter(self.data.split(b"\n"))
        return self.data.lines()

    def read(self) -> bytes:
        return self.data if isinstance(self.data, bytes) else self.data.read()


class FileStream:
    """A session file read as its reader asks (``graders.formats.session.Stream``), never held
    whole: its lines block by block under the run's read budget (``RunFiles.iter_line_batches``,
    which also takes its digest), its head for sniffing."""

    def __init__(self, files: RunFiles, rel: str) -> None:
        self.files, self.rel = files, rel
        self._head = b""

    def head(self, size: int) -> bytes:
        # Not charged to the budget: the same bytes are, when the file is read.
        if len(self._head) < size:
            with self.files.open(self.rel) as fh:
                self._head = fh.read(size)
        return self._head[:size]

    def lines(self) -> Iterator[bytes]:
        for batch in self.files.iter_line_batches(self.rel):
            yield from batch

    def read(self) -> bytes:
        return self.files.read(self.rel)

    def digest(self) -> tuple[int, str]:
        """(bytes, SHA-256) of the file; read through now if its reader did not read it all."""
        if self.rel not in self.files.file_digests:
            for _ in self.files.iter_line_batches(self.rel):
                pass
        return self.files.read_sizes[self.rel], self.files.file_digests[self.rel]


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
    """One tool call (docs/formats.md §8.3). ``ok`` None: started, never completed (unanswered:
    counted as a call, not as an error; the trace shows it as gh-aw's merge shows a gateway call
    without a response)."""

    name: str
    args: dict[str, Any] = field(default_factory=dict)
    ok: bool | None = None
    observation: str = ""
    call_id: str | None = None
    agent: str | None = None  # the subagent that made the call; None for the main agent
    error: str | None = None
    server: str | None = None  # the MCP server it went to, where the log names one

    def __post_init__(self) -> None:
        _kept()


@dataclass(frozen=True)
class TokenTotals:
    """The whole run's tokens as the engine's own log reports them (docs/formats.md §8.3).

    ``input`` is as the log counts it: ``input_includes_cache`` says whether it already holds
    the cached input (``cache_read``, and ``cache_write`` where reported), None where the log
    does not say. ``source`` names the records the totals come from."""

    input: int = 0
    output: int = 0
    cache_read: int = 0
    cache_write: int = 0
    input_includes_cache: bool | None = None
    source: str = ""
    reasoning: int | None = None  # None: the log states none

    def to_dict(self) -> dict[str, Any]:
        return {"input": self.input, "output": self.output, "cache_read": self.cache_read,
                "cache_write": self.cache_write, "input_includes_cache": self.input_includes_cache,
                "source": self.source}

    @classmethod
    def of_usage(cls, usage: Sequence[Usage], includes_cache: bool | None, source: str) -> TokenTotals | None:
        """The totals of usage records (whose ``input`` is without the cache), ``input`` counted as
        the log counts it: with the cache reads when ``includes_cache``; None without records."""
        if not usage:
            return None
        read = sum(u.cache_read for u in usage)
        return cls(sum(u.input for u in usage) + (read if includes_cache else 0), sum(u.output for u in usage),
                   read, sum(u.cache_write for u in usage), includes_cache, source,
                   stated_sum([u.reasoning for u in usage]))

    @classmethod
    def add(cls, totals: Sequence[TokenTotals]) -> TokenTotals | None:
        """Totals of several runs of one log (counted alike: the first one's meaning and source)."""
        if not totals:
            return None
        return cls(sum(t.input for t in totals), sum(t.output for t in totals), sum(t.cache_read for t in totals),
                   sum(t.cache_write for t in totals), totals[0].input_includes_cache, totals[0].source,
                   stated_sum([t.reasoning for t in totals]))


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
    reasoning: int | None = None  # reasoning tokens, where the log states them (the cost graders')

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
    # The log's own run totals as aggregate records (per model where it says, each with its
    # requests), which the cost graders take over ``usage`` where the per-request records fall
    # short of them (a stream's usage as streaming began; a log that omits some calls' usage).
    billed: list[Usage] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    trace_dict: dict[str, Any] | None = None  # set by folder formats (gh-aw) that build their own
    tokens: TokenTotals | None = None  # the run's totals where the log reports them
    status: str | None = None  # how the log says the run ended (``success``, ``error_max_turns``, …)
    # A timestamp that is no ISO 8601 but starts with a valid date: that date (``stamp``).
    date_part: str | None = None
    bad_time: str | None = None  # the first timestamp that did not parse, for messages
    unknown: Counter[str] = field(default_factory=Counter)  # record types the reader does not know
    finished: bool = False

    def stamp(self, value: Any) -> None:
        """The session's first timestamp: ``value`` when it is one and none was seen yet. A text
        that is no ISO 8601 timestamp but starts with a valid ``YYYY-MM-DD`` gives that date
        (``date_part``); later valid timestamps still win over it."""
        if self.created_at is not None or value is None:
            return
        parsed = iso_time(value)
        if parsed is not None:
            self.created_at = parsed
            return
        if isinstance(value, str) and self.bad_time is None:
            self.bad_time = value[:60]
            m = _DATE_PREFIX.match(value.strip())
            if m and _valid_date(m.group(1)):
                self.date_part = m.group(1)

    def skip(self, kind: Any) -> None:
        """A record of a type the reader does not know: skipped, and counted in the warnings."""
        self.unknown[kind if isinstance(kind, str) else f"<{type(kind).__name__}>"] += 1

    def finish(self) -> Session:
        """The reading's own warnings, once: unknown record types skipped, calls never answered."""
        if self.finished:
            return self
        self.finished = True
        if self.unknown:
            total = sum(self.unknown.values())
            kinds = ", ".join(sorted(self.unknown)[:8]) + (", …" if len(self.unknown) > 8 else "")
            self.warnings.append(f"{self.source}: skipped {total} record(s) of a type this reader does not know ({kinds})")
        unanswered = sum(c.ok is None for c in self.calls)
        if unanswered and self.trace_dict is None:
            self.warnings.append(f"{self.source}: {unanswered} tool call(s) started but never completed "
                                 "(counted as calls, not as errors)")
        return self

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
        return Run(task=task or self.workflow or rid, run_id=rid, ok=self.delivered, steps=steps_of(self.calls))


def steps_of(calls: Iterable[Call]) -> list[Step]:
    """The trace rules' steps of calls: a call failed only when it says so (unanswered is no failure)."""
    return [Step(i, c.name, {k: c.args[k] for k in STEP_ARG_KEYS if c.args.get(k)},
                 c.observation[:OBSERVATION_CHARS], c.ok is not False, c.agent)
            for i, c in enumerate(calls, 1)]


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

_DATE_PREFIX = re.compile(r"^(\d{4}-\d{2}-\d{2})")
# How many of a file's leading lines the sniffers look at (within its first 64 KiB).
SNIFF_LINES = 400


def _valid_date(text: str) -> bool:
    try:
        date.fromisoformat(text)
    except ValueError:
        return False
    return True


class CallBook:
    """The calls of one session in order of first sight, each call id once (docs/formats.md
    §8.3): a start and a completion of one id are one call; a completion seen without its start
    is a call too (its start was cut off); a start without an id is a call of its own."""

    def __init__(self) -> None:
        self.calls: list[Call] = []
        self._by_id: dict[str, Call] = {}

    def start(self, cid: str | None, name: str, args: Any = None, agent: str | None = None,
              server: str | None = None) -> Call:
        found = self._by_id.get(cid) if cid is not None else None
        if found is not None:  # seen again (a repeated or updated start): the one call
            found.name = found.name or name
            if not found.args and isinstance(args, dict):
                found.args = args
            found.server = found.server or server
            return found
        call = Call(name, args if isinstance(args, dict) else {}, None, "", cid, agent, None, server)
        self.calls.append(call)
        if cid is not None:
            self._by_id[cid] = call
        return call

    def finish(self, cid: str | None, ok: bool, error: str | None = None, observation: Any = "",
               name: str = "", agent: str | None = None) -> Call:
        call = self.start(cid, name, None, agent)
        call.ok = ok
        call.observation = observation[:OBSERVATION_CHARS] if isinstance(observation, str) else ""
        call.error = None if ok else (error or call.observation or "failed")[:OBSERVATION_CHARS]
        return call

    def get(self, cid: str | None) -> Call | None:
        return self._by_id.get(cid) if cid is not None else None


def kind_of(o: dict[str, Any], key: str = "type") -> str | None:
    """A record's type when it is a string, else None (safe to look up in a set)."""
    value = o.get(key)
    return value if isinstance(value, str) else None


def _norm(name: str | None) -> str:
    return (name or "").strip().lower()


def _agent_keys(c: Call) -> list[str]:
    """The spellings under which a gateway's (server, tool) can find an agent's call."""
    name = _norm(c.name)
    keys = [name]
    if c.server:
        server = _norm(c.server)
        bare = name
        for prefix in (f"mcp__{server}__", f"{server}__", f"{server}-", f"{server}_", f"{server}."):
            if name.startswith(prefix):
                bare = name[len(prefix):]
                break
        keys.append(f"{server}/{bare}")
    return keys


def merge_gateway(calls: list[Call], gateway: list[Call]) -> list[Call]:
    """The agent's calls, then each MCP gateway call no agent call accounts for (docs/formats.md
    §8.3). A gateway call (``server``, tool ``name``) is the first agent call not yet matched that
    names the same server and tool (``server``, or ``mcp__server__tool``, ``server__tool``,
    ``server-tool``, ``server_tool``); matched, they are one call, failed when either side says so
    and answered when either side was."""
    index: dict[str, list[Call]] = {}
    for c in calls:
        for key in _agent_keys(c):
            index.setdefault(key, []).append(c)
    used: set[int] = set()
    extra: list[Call] = []
    for g in gateway:
        server, tool = _norm(g.server), _norm(g.name)
        match = None
        for key in (f"{server}/{tool}", f"mcp__{server}__{tool}", f"{server}__{tool}", f"{server}-{tool}",
                    f"{server}_{tool}", f"{server}.{tool}"):
            match = next((c for c in index.get(key, ()) if id(c) not in used), None)
            if match is not None:
                break
        if match is None:
            extra.append(g)
            continue
        used.add(id(match))
        if g.ok is False and match.ok is not False:
            match.ok, match.error = False, g.error
        elif match.ok is None and g.ok is not None:
            match.ok, match.error = g.ok, g.error
    return [*calls, *extra]


def json_lines(source: Source, warnings: list[str] | None = None) -> Iterator[tuple[int, dict[str, Any]]]:
    """(line number, object) of every JSON-object line, as ``JSON.parse`` reads it (numbers and
    depth: ``graders.jsrt.jsonio``); other lines are skipped with a warning (an engine's stdout,
    ``source.chatter``: its non-JSON lines are skipped silently).

    Lines are numbered as ``str.splitlines`` numbers the decoded file (a ``\\r`` or ``\\x85``
    ends a line too), one ``\\n``-line at a time, so the file is never decoded whole."""
    lineno = 0
    chatter = source.chatter
    for raw in source.lines():
        for line in raw.decode("utf-8", errors="replace").splitlines() or [""]:
            lineno += 1
            line = line.strip()
            if not line or (chatter and not line.startswith("{")):
                continue
            try:
                obj = parse_json(line)
            except JsonError as exc:
                if warnings is not None and not chatter:
                    reason = TOO_DEEP if isinstance(exc, JsonTooDeep) else "not valid JSON"
                    warnings.append(f"{source.name}:{lineno}: skipped: {reason}")
                continue
            if isinstance(obj, dict):
                yield lineno, obj
            elif warnings is not None and not chatter:
                warnings.append(f"{source.name}:{lineno}: skipped: not a JSON object")


@functools.lru_cache(maxsize=4)
def head_records(head: bytes) -> tuple[dict[str, Any], ...]:
    """The JSON-object lines among a file's first ``SNIFF_LINES`` lines (the sniffers' view: a
    format is recognised by its records anywhere there, not by its first line). Cached: every
    sniffer of one file sees the one parse; callers must not change the records."""
    out = []
    for raw in head.split(b"\n", SNIFF_LINES)[:SNIFF_LINES]:
        raw = raw.strip()
        if not raw.startswith(b"{"):
            continue
        try:
            obj = parse_json(raw)
        except (JsonError, UnicodeDecodeError):  # the head's cut-off last line, or garbage
            continue
        if isinstance(obj, dict):
            out.append(obj)
    return tuple(out)


def any_record(head: bytes, signature: Callable[[dict[str, Any]], bool]) -> bool:
    """Whether a record of the file's head has ``signature`` (which must never raise)."""
    return any(signature(o) for o in head_records(head))


class LineFormat:
    """A JSON-lines format recognised by a record of its ``signature`` anywhere in the file's head
    (the readers of issue 41 share it: a subclass names its kind, signature and reader)."""

    kind = ""
    folder = False
    engines: tuple[str, ...] = ()  # the gh-aw ``engine_id``s whose stdout (``agent-stdio.log``) this is
    suffixes: tuple[str, ...] = (".jsonl", ".log", ".ndjson")

    @staticmethod
    def signature(record: dict[str, Any], /) -> bool:
        return False

    @staticmethod
    def reader(source: Source, /) -> list[Session]:
        raise FormatError(f"{source.name}: no reader")

    def sniff(self, name: str, head: bytes) -> bool:
        return name.endswith(self.suffixes) and any_record(head, self.signature)

    def read(self, source: Source) -> list[Session]:
        return self.reader(source)


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


def stated(value: Any) -> int | None:
    """A count a record may leave out: :func:`count` of a number or digit string, else None."""
    if isinstance(value, bool) or not (isinstance(value, (int, float)) or (isinstance(value, str)
                                                                           and value.strip().isdigit())):
        return None
    return count(value)


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
