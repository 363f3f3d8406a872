"""gh-aw's unified agent session, ``usage/aw_session.jsonl`` (docs/formats.md §2; spec v1.4.0,
file-format version 1), read on its own, outside a run folder.

Line 1 is ``session.format{version}``; another version is refused. Detection-phase records are
not the agent's (T-UAS-062). Tool calls are ``tool.execution_start``/``_complete`` joined by
``toolCallId`` (explicit failure: ``success: false``, ``isError``/``is_error``, a non-zero exit
code, an ``error``; T-UAS-014), attributed to their ``agentId``. Tokens are the firewall's
``firewall.token_usage`` records (what ``token-usage.jsonl`` holds, classifier calls included with
their ``purpose``), else the agent's ``session.result.usage``: one source, never both. The run
failed when ``agent.execution`` has a non-zero exit code or the main agent's ``session.result``
reports an error.
"""

from __future__ import annotations

from typing import Any

from graders.formats.session import (
    Call,
    FormatError,
    Session,
    Source,
    Usage,
    as_dict,
    count,
    error_text,
    first_object,
    iso_time,
    json_lines,
    text,
)
from graders.grading.registry import input_format

KIND = "aw-session"
FORMAT_VERSION = 1


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
    if data.get("error"):
        return error_text(data.get("error"))
    return None


def _usage(data: dict[str, Any], agent: str | None) -> Usage:
    u = as_dict(data.get("usage"))
    model, purpose = data.get("model"), data.get("purpose")
    return Usage(model if isinstance(model, str) else None, count(u.get("inputTokens")), count(u.get("outputTokens")),
                 count(u.get("cacheReadInputTokens")), count(u.get("cacheCreationInputTokens")),
                 float(count(data.get("durationMs"))), purpose if isinstance(purpose, str) else None, agent)


def read_session(source: Source) -> Session:
    session = Session(KIND, source.name)
    lines = json_lines(source, session.warnings)
    header = next(lines, None)
    if header is None or header[1].get("type") != "session.format":
        raise FormatError(f"{source.name}: a unified agent session starts with a session.format record")
    version = _data(header[1]).get("version")
    if version != FORMAT_VERSION:
        raise FormatError(f"{source.name}: unified agent session format version {version!r} is not supported "
                          f"(this reader reads version {FORMAT_VERSION})")
    calls: dict[str, Call] = {}
    firewall: list[Usage] = []
    agent_usage: list[Usage] = []
    for _, ev in lines:
        if _phase(ev) == "detection":
            continue
        kind, data, agent = ev.get("type"), _data(ev), text(ev.get("agentId"))
        session.created_at = session.created_at or iso_time(ev.get("timestamp"))
        if kind == "workflow.info":
            session.workflow = text(data.get("workflow")) or session.workflow
            session.run_id = text(data.get("runId")) or session.run_id
            session.repository = text(data.get("repository")) or session.repository
        elif kind == "session.init":
            session.run_id = session.run_id or text(data.get("sessionId"))
        elif kind == "tool.execution_start":
            cid = text(data.get("toolCallId"))
            if cid is not None and cid in calls:
                continue
            inp = data.get("input")
            call = Call(str(data.get("toolName") or ""), inp if isinstance(inp, dict) else {}, None, "", cid, agent)
            session.calls.append(call)
            if cid is not None:
                calls[cid] = call
        elif kind == "tool.execution_complete":
            found = calls.get(text(data.get("toolCallId")) or "")
            if found is not None:
                why = _failed(data)
                found.ok, found.error = why is None, why
                out = data.get("output", data.get("result"))
                found.observation = out if isinstance(out, str) else ""
        elif kind == "firewall.token_usage":
            firewall.append(_usage(data, agent))
        elif kind == "session.result":
            if isinstance(data.get("usage"), dict):
                agent_usage.append(_usage(data, agent))
            status = data.get("status")
            if agent is None and (data.get("errorType") or (isinstance(status, str) and status != "success")):
                session.delivered = False
        elif kind == "agent.execution":
            code = data.get("exitCode")
            if isinstance(code, int) and not isinstance(code, bool) and code != 0:
                session.delivered = False
    session.usage = firewall or agent_usage
    return session


@input_format(KIND)
class AwSession:
    kind = KIND
    folder = False

    def sniff(self, name: str, head: bytes) -> bool:
        obj = first_object(head)
        return obj is not None and obj.get("type") == "session.format"

    def read(self, source: Source) -> list[Session]:
        return [read_session(source)]
