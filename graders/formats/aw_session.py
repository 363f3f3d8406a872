"""gh-aw's unified agent session, ``usage/aw_session.jsonl`` (docs/formats.md §2; spec v1.7.0,
file-format version 1), read on its own or as the preferred source of a gh-aw run's calls.

Line 1 is ``session.format{version}``; another version is refused. Detection-phase records are
not the agent's (T-UAS-062). Tool calls are ``tool.execution_start``/``_complete`` joined by
``toolCallId`` (explicit failure: ``success: false``, ``isError``/``is_error``, a non-zero exit
code, a failed status, an ``error``; T-UAS-014), attributed to their ``agentId``; a
``subagent.failed`` fails the call that launched it. The MCP gateway's own view of calls
(``mcp.rpc.request``/``response`` of ``tools/call``, else ``mcp.tool_call``) adds the calls no agent
record accounts for (``session.merge_gateway``). Tokens are the firewall's ``firewall.token_usage``
records (what ``token-usage.jsonl`` holds, classifier calls included with their ``purpose``), else
the agent's ``session.result.usage``: one source, never both. The run failed when
``agent.execution`` has a non-zero exit code or the main agent's ``session.result`` reports an
error. ``assistant.refusal`` and a failed ``model_routing.outcome`` are warnings of the run;
``workflow.info`` names it; ``grader.result``, ``safe_output.*`` and the rest are read by the
observed layer (graders/formats/evidence.py).
"""

from __future__ import annotations

from typing import Any

from graders.formats.session import (
    Call,
    CallBook,
    FormatError,
    Session,
    Source,
    TokenTotals,
    Usage,
    as_dict,
    count,
    error_text,
    head_records,
    json_lines,
    kind_of,
    merge_gateway,
    text,
)
from graders.formats.usage import counts_cache
from graders.grading.registry import input_format

KIND = "aw-session"
FORMAT_VERSION = 1
# The spec's known vocabulary (unified_session.d.ts, v1.7.0); other types are counted as unknown.
KNOWN = frozenset({
    "session.format", "agent.execution", "session.init", "session.start", "user.message", "system.message",
    "prompt.system", "prompt.user", "assistant.message", "assistant.refusal", "assistant.reasoning",
    "assistant.message_delta", "assistant.reasoning_delta", "assistant.turn_start", "assistant.turn_end",
    "assistant.usage", "session.task_complete", "tool.execution_start", "tool.execution_complete",
    "session.result", "session.shutdown", "session.model_change", "session.info", "session.error",
    "session.idle", "mcp.rpc.request", "mcp.rpc.response", "mcp.difc.filtered", "mcp.guard.blocked",
    "mcp.tool_call", "mcp.event", "firewall.http_access", "firewall.token_usage", "firewall.model_routing",
    "firewall.steering", "firewall.event", "safe_output.request", "safe_output.result", "safe_output.error",
    "experiment.state", "experiment.assignment", "grader.manifest", "grader.result", "eval.result",
    "usage.report", "execution.result", "detection.result", "guardrail.daily_aic", "workflow.info",
    "github_api.rate_limit", "session.collection_warning", "session.collection", "model_routing.outcome",
    "subagent.started", "subagent.configured", "subagent.completed", "subagent.failed", "subagent.selected",
    "subagent.request", "pi.subagent_dispatch", "pi.subagent_event", "hook.start", "hook.end",
})
_NAMESPACES = ("dynamicWorkflows.", "workflow.run_", "gemini.", "claude.", "codex.", "copilot.", "goose.",
               "opencode.", "pi.", "agy.")
_FAILED_STATUS = frozenset({"error", "failed", "failure", "declined", "cancelled", "canceled"})


def _data(ev: dict[str, Any]) -> dict[str, Any]:
    d = ev.get("data")
    return d if isinstance(d, dict) else {}


def _phase(ev: dict[str, Any]) -> Any:
    prov = ev.get("provenance")
    return prov.get("phase") if isinstance(prov, dict) else None


def _failed(data: dict[str, Any]) -> str | None:
    if data.get("success") is False:
        return error_text(data.get("error")) or "success: false"
    if data.get("isError") is True or data.get("is_error") is True:
        return error_text(data.get("error")) or "isError"
    code = data.get("exitCode", data.get("exit_code"))
    if isinstance(code, int) and not isinstance(code, bool) and code != 0:
        return f"exit code {code}"
    status = data.get("status")
    if isinstance(status, str) and status.lower() in _FAILED_STATUS:
        return error_text(data.get("error")) or f"status {status}"
    if data.get("error"):
        return error_text(data.get("error"))
    return None


def _usage(data: dict[str, Any], agent: str | None) -> Usage:
    u = as_dict(data.get("usage"))
    model, purpose = data.get("model"), data.get("purpose")
    model = model if isinstance(model, str) else None
    inp, read, write = count(u.get("inputTokens")), count(u.get("cacheReadInputTokens")), count(u.get("cacheCreationInputTokens"))
    # Usage.input excludes the cache; a GPT-family request's inputTokens include it (/responses).
    stated = u.get("inputTokensIncludeCache")
    if counts_cache(model, inp, read, write, stated if isinstance(stated, bool) else None):
        inp = max(inp - read - write, 0)
    return Usage(model, inp, count(u.get("outputTokens")), read, write,
                 float(count(data.get("durationMs"))), purpose if isinstance(purpose, str) else None, agent)


class _Gateway:
    """The MCP gateway's tool calls: requests paired with responses per server (by ``rpcId``
    when both carry one, else in order), and structured ``mcp.tool_call`` records."""

    def __init__(self) -> None:
        self.rpc: list[Call] = []
        self.pending: dict[str, list[tuple[Any, Call]]] = {}
        self.structured: list[Call] = []

    def request(self, data: dict[str, Any]) -> None:
        if data.get("method") != "tools/call":
            return
        server = text(data.get("serverName")) or ""
        call = Call(str(data.get("toolName") or ""), {}, None, "", text(data.get("toolCallId")), None, None, server)
        self.rpc.append(call)
        self.pending.setdefault(server, []).append((data.get("rpcId"), call))

    def response(self, data: dict[str, Any]) -> None:
        queue = self.pending.get(text(data.get("serverName")) or "", [])
        rid = data.get("rpcId")
        at = next((i for i, (r, _) in enumerate(queue) if rid is not None and r == rid), None)
        if at is None:
            at = next((i for i, (r, _) in enumerate(queue) if r is None or rid is None), None)
        if at is None:
            return
        _, call = queue.pop(at)
        why = _failed(data)
        call.ok, call.error = why is None, why

    def tool_call(self, data: dict[str, Any]) -> None:
        why = _failed(data)
        status = data.get("status")
        self.structured.append(Call(str(data.get("toolName") or ""), {}, None if status is None and why is None
                                    else why is None, "", text(data.get("toolCallId")), None, why,
                                    text(data.get("serverName"))))

    def calls(self) -> list[Call]:
        return self.rpc or self.structured


def read_session(source: Source, gateway_out: list[Call] | None = None) -> Session:
    """The session; ``gateway_out``: the gateway's calls are put there instead of merged in (a run
    folder merges its own gateway log, which the unified session projects)."""
    session = Session(KIND, source.name)
    lines = json_lines(source, session.warnings)
    header = next(lines, None)
    if header is None or header[1].get("type") != "session.format":
        raise FormatError(f"{source.name}: a unified agent session starts with a session.format record")
    version = _data(header[1]).get("version")
    if version != FORMAT_VERSION:
        raise FormatError(f"{source.name}: unified agent session format version {version!r} is not supported "
                          f"(this reader reads version {FORMAT_VERSION})")
    book = CallBook()
    gateway = _Gateway()
    firewall: list[Usage] = []
    agent_usage: list[Usage] = []
    refusals = 0
    for _, ev in lines:
        if _phase(ev) == "detection":
            continue
        kind, data, agent = kind_of(ev), _data(ev), text(ev.get("agentId"))
        if kind is None or (kind not in KNOWN and not kind.startswith(_NAMESPACES)):
            session.skip(ev.get("type"))
            continue
        session.stamp(ev.get("timestamp"))
        if kind == "workflow.info":
            session.workflow = text(data.get("workflow")) or session.workflow
            session.run_id = text(data.get("runId")) or session.run_id
            session.repository = text(data.get("repository")) or session.repository
        elif kind == "session.init":
            session.run_id = session.run_id or text(data.get("sessionId"))
        elif kind == "tool.execution_start":
            name = str(data.get("toolName") or "")
            server = text(data.get("mcpServerName"))
            if server is None and name.startswith("mcp__") and name.count("__") >= 2:
                server = name.split("__")[1]
            inp = data.get("input")
            book.start(text(data.get("toolCallId")), name, inp if isinstance(inp, dict) else {}, agent, server)
        elif kind == "tool.execution_complete":
            why = _failed(data)
            out = data.get("output", data.get("result"))
            book.finish(text(data.get("toolCallId")), why is None, why, out if isinstance(out, str) else "",
                        str(data.get("toolName") or ""), agent)
        elif kind == "subagent.failed":
            launched = book.get(text(data.get("toolCallId")))
            if launched is not None:
                launched.ok, launched.error = False, error_text(data.get("error")) or "subagent failed"
        elif kind == "mcp.rpc.request":
            gateway.request(data)
        elif kind == "mcp.rpc.response":
            gateway.response(data)
        elif kind == "mcp.tool_call":
            gateway.tool_call(data)
        elif kind == "assistant.refusal":
            refusals += 1
        elif kind == "model_routing.outcome":
            status = text(data.get("status"))
            if data.get("failureCode") or (status is not None and status.lower() in _FAILED_STATUS):
                session.warnings.append(f"{source.name}: model routing {status or 'failed'}"
                                        + (f" ({data.get('failureCode')})" if data.get("failureCode") else ""))
        elif kind == "firewall.token_usage":
            firewall.append(_usage(data, agent))
        elif kind == "session.result":
            if isinstance(data.get("usage"), dict):
                agent_usage.append(_usage(data, agent))
                if agent is None:
                    u = data["usage"]
                    include = u.get("inputTokensIncludeCache")
                    session.tokens = TokenTotals(count(u.get("inputTokens")), count(u.get("outputTokens")),
                                                 count(u.get("cacheReadInputTokens")),
                                                 count(u.get("cacheCreationInputTokens")),
                                                 include if isinstance(include, bool) else None, "session.result.usage")
            status = data.get("status")
            if agent is None:
                session.status = status if isinstance(status, str) else session.status
                if data.get("errorType") or (isinstance(status, str) and status != "success"):
                    session.delivered = False
        elif kind == "agent.execution":
            code = data.get("exitCode")
            if isinstance(code, int) and not isinstance(code, bool) and code != 0:
                session.delivered = False
    if refusals:
        session.warnings.append(f"{source.name}: {refusals} assistant refusal(s) (assistant.refusal)")
    if gateway_out is None:
        session.calls = merge_gateway(book.calls, gateway.calls())
    else:
        session.calls = book.calls
        gateway_out.extend(gateway.calls())
    session.usage = firewall or agent_usage
    return session


@input_format(KIND)
class AwSession:
    kind = KIND
    folder = False

    def sniff(self, name: str, head: bytes) -> bool:
        records = head_records(head)
        return bool(records) and records[0].get("type") == "session.format"

    def read(self, source: Source) -> list[Session]:
        return [read_session(source)]
