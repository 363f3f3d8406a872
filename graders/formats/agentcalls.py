"""A gh-aw run's tool calls as its engine made them, one meaning across engines (docs/formats.md §8.3):
what ``tool-call-count``/``tool-error-count`` count and, where the trace lacks them, the trace rules'
steps. gh-aw's own graders never see this: they read the trace only.

The calls come from the first source the run has (T-UAS-058: a persisted canonical stream takes
precedence over raw engine logs, never both):

1. the unified session ``usage/aw_session.jsonl``, then its agent-phase copy ``agent-session.jsonl``;
2. the engine's native log: ``agent-stdio.log`` read by the format of ``aw_info.json``'s
   ``engine_id`` (Claude stream-json, ``codex exec --json``, Gemini stream-json, OpenCode, Goose,
   Agy; Pi's ``pi-streaming.jsonl``), or by the stdout format its records show;
3. Copilot's ``events.jsonl`` (the trace's native calls).

Then the MCP gateway's calls no agent record accounts for are added (``session.merge_gateway``):
``mcp-logs/rpc-messages.jsonl`` (requests paired with responses), else the trace's gateway calls.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final, Protocol

from graders.formats import SNIFF_BYTES, formats
from graders.formats.aw_session import read_session as read_unified
from graders.formats.copilot import read_session as read_canonical
from graders.formats.ghaw.toolcalls import is_tool_failure
from graders.formats.session import (
    Call,
    FileStream,
    FormatError,
    Session,
    Source,
    TokenTotals,
    merge_gateway,
    text,
)

if TYPE_CHECKING:
    from graders.runs.runfiles import RunFiles

UNIFIED: Final = ("usage/aw_session.jsonl", "agent-session.jsonl")
AGENT_STDIO: Final = "agent-stdio.log"
PI_STREAM: Final = "pi-streaming.jsonl"
EVENTS: Final = "copilot-session-state events.jsonl"  # the source name of the trace's native calls


class _McpCall(Protocol):
    """What is read here of an ``evidence.McpCall`` (not imported: evidence imports this module)."""

    @property
    def server(self) -> str: ...
    @property
    def method(self) -> str: ...
    @property
    def tool(self) -> str: ...
    @property
    def outcome(self) -> str: ...
    @property
    def error(self) -> str: ...


LISTED: Final = 20  # errors (and tools) a summary lists


@dataclass(frozen=True)
class CallCounts:
    """What the tool-call graders read of a run's calls (a summary: a run's evidence holds no call,
    so a run of a million gateway calls holds none of them twice)."""

    calls: int = 0
    errors: int = 0
    unanswered: int = 0
    native: int = 0  # the agent's own records; the rest the MCP gateway's only
    by_tool: tuple[tuple[str, int, int], ...] = ()  # (tool, calls, errors), the first LISTED tools by name
    listed: tuple[tuple[str, str | None, str | None, str | None, str | None], ...] = ()  # the first LISTED errors:
    # (tool, server, agent, call id, error)


def count_calls(calls: Iterable[Call], native: int) -> CallCounts:
    """The summary of calls, read once (``calls`` may be a generator)."""
    n = errors = unanswered = 0
    by_tool: dict[str, list[int]] = {}
    listed: list[tuple[str, str | None, str | None, str | None, str | None]] = []
    for c in calls:
        n += 1
        tool = by_tool.setdefault(c.name or "?", [0, 0])
        tool[0] += 1
        if c.ok is False:
            errors += 1
            tool[1] += 1
            if len(listed) < LISTED:
                listed.append((c.name, c.server, c.agent, c.call_id, c.error))
        elif c.ok is None:
            unanswered += 1
    return CallCounts(n, errors, unanswered, native, tuple((t, v[0], v[1]) for t, v in sorted(by_tool.items())[:LISTED]),
                      tuple(listed))


@dataclass
class RunCalls:
    """The run's calls (a summary) and where they came from."""

    source: str | None = None  # the file (and format) of the agent's calls; None: no agent log
    counts: CallCounts = field(default_factory=CallCounts)
    # The calls themselves, kept only when the trace rules read them (``replaces_trace``).
    steps: list[Call] = field(default_factory=list)
    gateway: str | None = None  # the gateway log merged in
    tokens: TokenTotals | None = None  # the engine log's totals, where it reports them
    warnings: list[str] = field(default_factory=list)

    @property
    def replaces_trace(self) -> bool:
        """Whether the trace rules should read these calls instead of the trace's: the agent's calls
        came from a log gh-aw's preprocessing does not read."""
        return self.source is not None and self.source != EVENTS


def _stdout_formats() -> list[Any]:
    return [f for f in formats() if not f.folder and bool(getattr(f, "engines", None))]


def _read_sessions(fmt: Any, rel: str, stream: FileStream, out: RunCalls) -> list[Session] | None:
    try:
        sessions: list[Session] = [s.finish() for s in fmt.read(Source(rel, stream, chatter=True))]
    except (FormatError, ValueError, RecursionError) as exc:
        out.warnings.append(f"{rel}: not read as {fmt.kind}: {exc}")
        return None
    return sessions


def _native_log(files: RunFiles, engine: str | None, out: RunCalls) -> list[Call] | None:
    """The engine's own log, read by its format: the calls, or None when there is none."""
    candidates = _stdout_formats()
    chosen = [f for f in candidates if engine in f.engines]
    pi_logs = sorted(rel for rel in files.sizes if rel.rsplit("/", 1)[-1] == PI_STREAM)
    paths = pi_logs if (engine == "pi" and pi_logs) else ([AGENT_STDIO] if files.exists(AGENT_STDIO) else pi_logs)
    for rel in paths:
        stream = FileStream(files, rel)  # streamed: a run's stdout can be large
        head = stream.head(SNIFF_BYTES)
        # The engine's format when the log holds its records, else the stdout format it shows.
        fmts = [f for f in chosen if f.sniff(rel, head)] or [f for f in candidates if f.sniff(rel, head)]
        for fmt in fmts[:1]:
            sessions = _read_sessions(fmt, rel, stream, out)
            if not sessions:
                continue
            calls = [c for s in sessions for c in s.calls]
            out.source = f"{rel} ({fmt.kind})"
            out.tokens = TokenTotals.add([s.tokens for s in sessions if s.tokens is not None])
            for s in sessions:
                out.warnings.extend(s.warnings)
            return calls
    return None


def _unified(files: RunFiles, out: RunCalls, gateway_out: list[Call]) -> list[Call] | None:
    for rel in UNIFIED:
        if not files.exists(rel):
            continue
        source = Source(rel, FileStream(files, rel))
        try:
            session = (read_unified(source, gateway_out) if rel.startswith("usage/")
                       else read_canonical(source)).finish()
        except (FormatError, ValueError, RecursionError) as exc:
            out.warnings.append(f"{rel}: not read for the run's tool calls: {exc}")
            continue
        if not session.calls and not any(u for u in session.usage):
            continue
        out.source = rel
        out.tokens = session.tokens
        out.warnings.extend(w for w in session.warnings if "started but never completed" not in w)
        return session.calls
    return None


def calls_of_events(native: Sequence[Any]) -> list[Call]:
    """The trace's native calls (Copilot ``events.jsonl``, joined by gh-aw's rules) as calls."""
    out = []
    for c in native:
        if not isinstance(c, dict):
            continue
        server = text(c.get("mcpServerName"))
        name = (text(c.get("mcpToolName")) if server else None) or str(c.get("name") or c.get("tool") or "")
        args = c.get("arguments")
        ok = None if c.get("completed") is False or "success" not in c else not is_tool_failure(c)
        err = c.get("error")
        out.append(Call(name, args if isinstance(args, dict) else {}, ok, "", text(c.get("toolCallId")), None,
                        None if ok is not False else (str(err)[:200] if err else "failed"), server))
    return out


def _gateway(mcp_calls: Sequence[_McpCall], mcp_file: str | None, trace: Mapping[str, Any],
             out: RunCalls) -> Iterator[Call]:
    """The gateway's calls, made one by one (a run may hold very many)."""
    if mcp_file is not None:
        out.gateway = mcp_file
        return (Call(c.tool, {}, None if c.outcome == "unanswered" else c.outcome == "ok", "", None, None,
                     c.error or None, c.server) for c in mcp_calls if c.method == "tools/call")
    gateway = (c for c in trace.get("toolCalls") or () if isinstance(c, dict) and c.get("source") != "agent")
    if any(isinstance(c, dict) and c.get("source") != "agent" for c in trace.get("toolCalls") or ()):
        out.gateway = "the MCP gateway log"
    return (Call(str(c.get("tool_name") or c.get("tool") or c.get("name") or ""), {}, not is_tool_failure(c), "",
                 None, None, "failed" if is_tool_failure(c) else None, text(c.get("mcpServerName")))
            for c in gateway)


def run_calls(files: RunFiles, aw_info: Mapping[str, Any] | None, trace: Mapping[str, Any],
              mcp_calls: Sequence[_McpCall], mcp_file: str | None) -> RunCalls:
    """The run's tool calls: the agent's from its first source, then the gateway's it lacks."""
    out = RunCalls()
    unified_gateway: list[Call] = []
    agent = _unified(files, out, unified_gateway)
    if agent is None:
        engine = text((aw_info or {}).get("engine_id"))
        agent = _native_log(files, engine.lower() if engine else None, out)
    if agent is None:
        native = trace.get("nativeToolCalls")
        if isinstance(native, list) and native:
            agent = calls_of_events(native)
            out.source = EVENTS
    gateway: Iterable[Call] = _gateway(mcp_calls, mcp_file, trace, out)
    if out.gateway is None and unified_gateway:  # the folder has no gateway log: the unified session's view
        gateway, out.gateway = unified_gateway, "usage/aw_session.jsonl (mcp.*)"
    if not agent:  # the gateway's calls alone: counted as they are made, never held
        out.counts = count_calls(gateway, 0)
        return out
    merged = merge_gateway(agent, list(gateway))
    out.counts = count_calls(merged, len(agent))
    if out.replaces_trace:
        out.steps = merged
    return out
