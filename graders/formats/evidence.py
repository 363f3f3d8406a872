"""What a real run carries that the reference graders never read: the observed layer's input.

One :func:`read_evidence` per run turns its files into a small, frozen :class:`RunEvidence`:

* the run's conclusion, from every source that states one (``run_summary.json`` written by
  `gh aw logs`, ``aw_info.json`` ``workflow_run_conclusion``, the unified session's
  ``session.result`` / ``agent.execution`` records, the exit status in ``agent-stdio.log``);
* the MCP gateway's calls, each request paired with its response (``mcp-logs/rpc-messages.jsonl``);
* the safe-output operations that reported an error;
* the agent's token-usage records with their cache counts and ``purpose``;
* gh-aw's own archived ``grader_results.json`` (else the unified session's ``grader.result``
  records), to compare with fleetgrade's recomputation;
* the run's tool calls as its engine made them, native and MCP, each once (graders/formats/agentcalls.py),
  and the engine log's token totals.

Formats are described in docs/formats.md (§1.4) and the graders in docs/observed-graders.md.
Files are read through ``RunFiles`` only, by artifact-root path (graders/runs/download_layout.py maps
a `gh aw logs` download back to those paths). Hostile input: an unreadable or malformed line is
skipped and counted in ``RunEvidence.malformed``, never raised; a file that cannot be decoded at
all is a warning of the evidence. The run's reading budget (size, bytes, time) still applies.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import re
from collections import Counter
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from itertools import chain
from typing import Annotated, Any, Final, Literal, NamedTuple

import msgspec

from graders.formats.agentcalls import CallCounts, count_calls, run_calls
from graders.formats.session import Call, Session, TokenTotals
from graders.formats.usage import (
    SESSION_USAGE_EVENTS,
    CallRecords,
    RunUsage,
    SessionUsage,
    UsageTotals,
    document,
    read_usage,
)
from graders.formats.usage import count as _int  # a token count: one rule for every reader here
from graders.jsrt.jsonio import MAX_LINE_LENGTH, JsonError, LineBatch, parse_json
from graders.jsrt.lazylist import positions
from graders.jsrt.records import digit_safe
from graders.runs.download_layout import SANDBOX_TOKEN_USAGE, USAGE_TOKEN_USAGE
from graders.runs.layout import GRADER_ARCHIVE_DIRS
from graders.runs.runfiles import RunFiles

Outcome = Literal["success", "failure"]
CallOutcome = Literal["ok", "error", "unanswered"]

# Paths, relative to the artifact root (docs/formats.md §1.2, §1.4).
RUN_SUMMARY: Final = "run_summary.json"  # written by `gh aw logs` itself
AGENT_STDIO: Final = "agent-stdio.log"
# The unified session: the conclusion job's merged projection first, then the agent's own copy.
SESSION_FILES: Final = ("usage/aw_session.jsonl", "agent-session.jsonl")
RPC_MESSAGES: Final = "mcp-logs/rpc-messages.jsonl"
# Copilot CLI 0.0.4xx: no session events.jsonl; its model responses are in a debug log (docs/formats.md §1.4).
AGENT_LOGS: Final = "sandbox/agent/logs"
SESSION_STATE: Final = "sandbox/agent/logs/copilot-session-state"
_DEBUG_LOG: Final = re.compile(r"process-[^/]*\.log")
_DEBUG_DATA: Final = b"[DEBUG] data:"
_LOG_LINE_START: Final = re.compile(rb"\d{4}-\d\d-\d\dT")
MAX_DEBUG_BODY: Final = 4 * 1024 * 1024  # a larger body is skipped (counted), never held
# `gh aw logs` flattens the safe-outputs-items artifact into the run root; `gh run download` does not.
SAFE_OUTPUT_ERRORS: Final = ("safe-output-errors.json", "safe-outputs-items/safe-output-errors.json")
# The agent's token usage: docs/reference/graders.md §5's sandbox candidates in its order, the usage artifact's
# copy when it kept its own name, and the flat legacy layout (docs/formats.md §1.3, layout B).
TOKEN_USAGE_FILES: Final = (*SANDBOX_TOKEN_USAGE, USAGE_TOKEN_USAGE, "token-usage.jsonl")
GRADER_RESULTS: Final = tuple(f"{d}/grader_results.json" for d in GRADER_ARCHIVE_DIRS)
SAFE_OUTPUT_SERVERS: Final = frozenset({"safeoutputs", "safe_outputs", "safe-outputs"})

TEXT_CHARS: Final = 200  # error texts kept in the evidence (and shown in grader details)
# The newer gateway's event names for the same records (gh-aw RPC_EVENT_TO_TYPE).
_EVENT_TYPES: Final = {"rpc_request": "REQUEST", "rpc_response": "RESPONSE", "difc_filtered": "DIFC_FILTERED"}
# GitHub's workflow-run conclusions; the others (neutral, skipped, stale, action_required, "") say nothing.
_GITHUB_SUCCESS: Final = frozenset({"success"})
_GITHUB_FAILURE: Final = frozenset({"failure", "cancelled", "timed_out", "startup_failure"})
_SESSION_FAILURE: Final = frozenset({"failure", "failed", "cancelled", "canceled", "timeout", "timed_out",
                                     "aborted", "interrupted"})
_EXIT_LINE: Final = re.compile(rb"(?:Process exiting with code|Command completed with exit code):\s*(-?\d{1,9})\b")


@dataclass(frozen=True)
class ConclusionSource:
    """One source's statement of how the run ended."""

    source: str  # run_summary.json | aw_info.json | session.result | agent.execution | agent-stdio.log
    path: str
    value: str  # as written: "failure", "exit code 1", …
    outcome: Outcome | None  # None: the source says nothing decisive (neutral, skipped, …)


@dataclass(frozen=True)
class McpCall:
    """One gateway request and its response (``response_line`` None: never answered)."""

    server: str
    method: str
    tool: str  # params.name of a tools/call
    request_line: int
    response_line: int | None
    outcome: CallOutcome
    error: str = ""  # why it is an error, shortened


@dataclass(frozen=True)
class SafeOutputError:
    type: str  # the safe-output type (create_pull_request, …) when known
    message: str
    source: str  # the file it was read from


# A count as both readers see it alike: JavaScript (parse_json) reads a larger integer as a double.
_Count = Annotated[int, msgspec.Meta(ge=0, le=2**53)]
_TOKEN_KEYS: Final = {"input": "input_tokens", "output": "output_tokens", "cache_read": "cache_read_tokens",
                      "cache_write": "cache_write_tokens", "reasoning": "reasoning_tokens",
                      "credits": "ai_credits_this_response", "credits_total": "ai_credits_total",
                      "include_cache": "input_tokens_include_cache"}


class TokenRecord(msgspec.Struct, frozen=True, gc=False, rename=_TOKEN_KEYS):
    """One agent call's token counts (a struct: a large run holds tens of thousands).

    Also the line shape most real logs hold (both counts non-negative integers, the cache counts
    absent or such integers, ``purpose`` and ``model`` absent or strings): a line decoded into it
    is what the per-line rule reads from it (the constraints hold when decoding only).

    The cost fields (graders/formats/usage.py) are kept as the line has them: AWF's AI Credits
    (``ai_credits_this_response``/``_total``, numbers or None, checked where they are summed),
    its explicit cache semantics, and what gh-aw deduplicates and orders records by
    (``event:request_id``, ``timestamp``; None when not a string)."""

    input: _Count
    output: _Count
    cache_read: _Count = 0
    cache_write: _Count = 0
    purpose: str = ""
    model: str = ""
    reasoning: _Count | None = None  # None: the record states none
    credits: float | None = None
    credits_total: float | None = None
    include_cache: bool | None = None
    request_id: str | None = None
    event: str | None = None
    timestamp: str | None = None


# A count both readers and JavaScript read alike, and one preprocessing may ``Number()`` (a string).
_SafeCount = Annotated[int, msgspec.Meta(ge=0, le=2**53 - 1)]
_SafeInt = Annotated[int, msgspec.Meta(ge=-(2**53 - 1), le=2**53 - 1)]


@digit_safe
class TokenUsageLine(TokenRecord, frozen=True, gc=False, rename={**_TOKEN_KEYS, "duration": "duration_ms"}):
    """A token-usage line as real logs write it, decoded once for preprocessing and the observed
    layer (``preprocess.read_token_usage`` hands its blocks to :class:`TokenLines`): both counts
    present, safe non-negative integers or strings, plus the duration preprocessing also sums.

    Narrower than both readers' structs (``records.TokenInts`` for preprocessing, :class:`TokenRecord`
    here), so a line decoded into it is what each of them reads from it; a line with a string
    count is read here by the rule of :func:`_token_batch` (:func:`_usage_lines`)."""

    # A record with a string count is replaced before it is kept (:func:`_usage_lines`), so a kept
    # one has the int counts of its base class.
    input: _SafeCount | str  # type: ignore[assignment]
    output: _SafeCount | str  # type: ignore[assignment]
    duration: _SafeInt | str = 0


@dataclass(frozen=True)
class ArchivedResult:
    """One result of gh-aw's own ``grader_results.json``, as archived with the run."""

    id: str
    value: float | None
    status: str | None
    message: str | None
    # The unified session's ``grader.result`` keeps no message: it is not compared then.
    compare_message: bool = True


@dataclass(frozen=True)
class RunEvidence:
    conclusions: tuple[ConclusionSource, ...] = ()
    mcp_file: str | None = None
    mcp_calls: tuple[McpCall, ...] = ()
    mcp_orphan_responses: tuple[int, ...] = ()  # lines of responses no request could be paired with
    mcp_filtered: int = 0  # DIFC_FILTERED records
    safe_output_errors: tuple[SafeOutputError, ...] = ()
    # The files the safe-output errors were looked for in (none: nothing to say either way).
    safe_output_sources: tuple[str, ...] = ()
    token_file: str | None = None
    token_records: tuple[TokenRecord, ...] = ()
    archived_file: str | None = None
    archived_results: tuple[ArchivedResult, ...] | None = None
    # (path, lines skipped) for every file that had unreadable lines or records.
    malformed: tuple[tuple[str, int], ...] = ()
    warnings: tuple[str, ...] = ()
    # What the run's model calls cost (graders/formats/usage.py): the cost graders' input.
    usage: RunUsage = field(default_factory=RunUsage)
    # The run's tool calls, one meaning across engines (docs/formats.md §8.3), summed up: the
    # agent's own (read from ``calls_source``), then the MCP gateway's it lacks (``gateway_file``).
    call_counts: CallCounts = field(default_factory=CallCounts)
    calls_source: str | None = None  # None with no call source: the tool-call graders are unavailable
    gateway_file: str | None = None
    # The calls themselves when the trace rules read them instead of the trace's (they came from a
    # log gh-aw's preprocessing does not read: the unified session, the engine's stdout); else ().
    step_calls: tuple[Call, ...] = ()
    engine_tokens: TokenTotals | None = None  # the run's totals as the engine's log reports them

    @functools.cached_property
    def derived(self) -> dict[Any, Any]:
        """What graders derive from the evidence alone, by a module-prefixed key: computed by the
        first grader that needs it and shared by the run's others (never compared or hashed)."""
        return {}

    @property
    def conclusion(self) -> Outcome | None:
        """``failure`` when any source says the run failed, else ``success`` when one says it
        succeeded, else None: a run counts as delivered only when no evidence says otherwise."""
        outcomes = {c.outcome for c in self.conclusions}
        if "failure" in outcomes:
            return "failure"
        return "success" if "success" in outcomes else None

    @property
    def conclusion_source(self) -> ConclusionSource | None:
        """The first source (in reading order: run_summary.json, aw_info.json, session, stdio)
        that states the deciding outcome."""
        decided = self.conclusion
        return next((c for c in self.conclusions if decided is not None and c.outcome == decided), None)

    @property
    def tool_calls(self) -> tuple[McpCall, ...]:
        """The gateway's ``tools/call`` requests (the MCP tool calls proper)."""
        return tuple(c for c in self.mcp_calls if c.method == "tools/call")


@dataclass
class _Reading:
    """Counts of what a read skipped, per file, while one run's evidence is read."""

    malformed: Counter[str] = field(default_factory=Counter)
    warnings: list[str] = field(default_factory=list)
    graders: list[ArchivedResult] = field(default_factory=list)  # the unified session's grader.result
    session_usage: SessionUsage = field(default_factory=SessionUsage)

    def bad(self, rel: str) -> None:
        self.malformed[rel] += 1


def _grader_results(data: dict[str, Any]) -> list[ArchivedResult]:
    """``grader.result`` as archived results: one record, or a ``results`` list of them."""
    results = data.get("results")
    items = results if isinstance(results, list) else [data]
    return [ArchivedResult(r["id"], _number(r.get("value")), r.get("status") if isinstance(r.get("status"), str) else None,
                           None, False)
            for r in items if isinstance(r, dict) and isinstance(r.get("id"), str)]


def _short(text: Any) -> str:
    s = text if isinstance(text, str) else str(text)
    return s if len(s) <= TEXT_CHARS else s[: TEXT_CHARS - 1] + "…"


def _lines(files: RunFiles, rel: str, reading: _Reading) -> Iterator[tuple[int, dict[str, Any]]]:
    """(line number, record) of a JSONL file; a line that is no JSON object is counted, not raised."""
    for lineno, raw in enumerate(files.iter_lines(rel), start=1):
        record = _record(raw, rel, reading)
        if record is not None:
            files.keep(1, rel)  # a caller may hold them all (pair_rpc_records): the run's record budget
            yield lineno, record


def _record(raw: bytes, rel: str, reading: _Reading) -> dict[str, Any] | None:
    """One JSONL line's record: None for a blank line, and (counted) for one that is no JSON object."""
    line = raw.strip()
    if not line:
        return None
    if len(line) > MAX_LINE_LENGTH:
        reading.malformed[rel] += 1
        return None
    try:
        record = parse_json(line)
    except (JsonError, UnicodeDecodeError, RecursionError):
        record = None
    if isinstance(record, dict):
        return record
    reading.malformed[rel] += 1
    return None


def _document(files: RunFiles, rel: str, reading: _Reading) -> Any:
    """A whole-file JSON document, or None (counted) when it is not JSON."""
    return document(files, rel, reading.bad)


def _text(value: Any) -> str:
    return value if isinstance(value, str) else ""


# --- conclusion -------------------------------------------------------------------------------


def _github_outcome(value: Any) -> Outcome | None:
    v = _text(value).strip().lower()
    if v in _GITHUB_SUCCESS:
        return "success"
    return "failure" if v in _GITHUB_FAILURE else None


def _status_outcome(value: Any) -> Outcome | None:
    v = _text(value).strip().lower()
    if v in ("success", "succeeded", "completed", "ok"):
        return "success"
    return "failure" if v.startswith("error") or v in _SESSION_FAILURE else None


def _exit_outcome(code: int) -> Outcome:
    return "success" if code == 0 else "failure"


def _run_summary(files: RunFiles, reading: _Reading) -> list[ConclusionSource]:
    if not files.exists(RUN_SUMMARY):
        return []
    doc = _document(files, RUN_SUMMARY, reading)
    run = doc.get("run") if isinstance(doc, dict) else None
    value = run.get("conclusion") if isinstance(run, dict) else None
    if value is None and isinstance(doc, dict):
        value = doc.get("conclusion")
    if not isinstance(value, str) or not value:
        return []
    return [ConclusionSource("run_summary.json", RUN_SUMMARY, value, _github_outcome(value))]


def _aw_info(aw_info: Mapping[str, Any] | None) -> list[ConclusionSource]:
    value = aw_info.get("workflow_run_conclusion") if aw_info else None
    if not isinstance(value, str) or not value:
        return []
    return [ConclusionSource("aw_info.json", "aw_info.json", value, _github_outcome(value))]


def _detection(record: dict[str, Any]) -> bool:
    """A record of the threat-detection phase, never the agent's (T-UAS-062)."""
    prov = record.get("provenance")
    return isinstance(prov, dict) and prov.get("phase") == "detection"


def _run_level(record: dict[str, Any]) -> bool:
    """A record about the run itself: not a subagent's (``agentId``), not the detection phase."""
    return not record.get("agentId") and not _detection(record)


def session_record(data: Mapping[str, Any], timestamp: Any) -> TokenRecord:
    """A unified session's ``firewall.token_usage`` / ``usage.report`` payload as a token record
    (camelCase UsageReportData of unified_session.d.ts: ``usage{inputTokens, …}``, ``aic``,
    ``totalAic``, ``requestId``), read by the rules of a token-usage line."""
    usage = data.get("usage")
    u = usage if isinstance(usage, dict) else {}
    get = u.get
    return TokenRecord(_int(get("inputTokens")), _int(get("outputTokens")), _int(get("cacheReadInputTokens")),
                       _int(get("cacheCreationInputTokens")), _text(data.get("purpose")), _text(data.get("model")),
                       _stated(get("reasoningOutputTokens")), _figure(data.get("aic")), _figure(data.get("totalAic")),
                       _flag(get("inputTokensIncludeCache")), _str_or_none(data.get("requestId")), None,
                       _str_or_none(timestamp))


def _session(files: RunFiles, reading: _Reading,
             ) -> tuple[list[ConclusionSource], str | None, list[dict[str, Any]]]:
    """The run's last ``session.result`` status and ``agent.execution`` exit code, from the first
    session file that has each (the merged projection repeats the agent's records); and the
    ``safe_output.error`` records of the first session file that has any (and that file's name:
    None when the run has no session file)."""
    first: str | None = None
    result: ConclusionSource | None = None
    execution: ConclusionSource | None = None
    safe_errors: list[dict[str, Any]] = []
    graders = reading.graders
    for rel in SESSION_FILES:
        if not files.exists(rel):
            continue
        first = first or rel
        found_result: ConclusionSource | None = None
        found_execution: ConclusionSource | None = None
        found_errors: list[dict[str, Any]] = []
        for _, rec in _lines(files, rel, reading):
            kind = rec.get("type")
            data = rec.get("data")
            if not isinstance(data, dict):
                continue
            if kind == "safe_output.error":
                found_errors.append(data)
            elif kind in SESSION_USAGE_EVENTS and not _detection(rec):
                reading.session_usage.add(rel, kind, session_record(data, rec.get("timestamp")),
                                          kind == "firewall.token_usage" or isinstance(data.get("usage"), dict))
            if kind == "grader.result" and rel == SESSION_FILES[0]:
                graders.extend(_grader_results(data))
            if not _run_level(rec):
                continue
            if kind == "session.result" and isinstance(data.get("status"), str) and data["status"]:
                status = data["status"]
                found_result = ConclusionSource("session.result", rel, status, _status_outcome(status))
            elif kind == "agent.execution":
                code = data.get("exitCode")
                if isinstance(code, int) and not isinstance(code, bool):
                    found_execution = ConclusionSource("agent.execution", rel, f"exit code {code}", _exit_outcome(code))
        result = result or found_result
        execution = execution or found_execution
        if found_errors and not safe_errors:
            safe_errors, first = found_errors, rel
    return [c for c in (result, execution) if c is not None], first, safe_errors


def _agent_stdio(files: RunFiles) -> list[ConclusionSource]:
    """The last exit status the agent's container (AWF) or CLI printed."""
    if not files.exists(AGENT_STDIO):
        return []
    code: int | None = None
    for raw in files.iter_lines(AGENT_STDIO):
        if b"exit" not in raw:  # most lines: skip the regular expression
            continue
        for m in _EXIT_LINE.finditer(raw):
            code = int(m.group(1))
    if code is None:
        return []
    return [ConclusionSource("agent-stdio.log", AGENT_STDIO, f"exit code {code}", _exit_outcome(code))]


# --- MCP gateway ------------------------------------------------------------------------------


@dataclass
class _Request:
    line: int
    method: str
    tool: str
    rpc_id: Any


def _record_kind(rec: dict[str, Any]) -> str:
    kind = rec.get("type")
    if isinstance(kind, str) and kind:
        return kind.upper()
    event = rec.get("event")
    if isinstance(event, str) and event.lower() in _EVENT_TYPES:
        return _EVENT_TYPES[event.lower()]
    payload = rec.get("payload")
    direction = _text(rec.get("direction")).upper()
    if isinstance(payload, dict):
        if direction == "OUT" and "method" in payload:
            return "REQUEST"
        if direction == "IN" and ("result" in payload or "error" in payload):
            return "RESPONSE"
    return ""


def _rpc_id(payload: dict[str, Any]) -> Any:
    rid = payload.get("id")
    return rid if isinstance(rid, (str, int)) and not isinstance(rid, bool) else None


def _response_shape(payload: dict[str, Any]) -> str | None:
    """The method a response answers, guessed from its result (responses carry no method)."""
    result = payload.get("result")
    if not isinstance(result, dict):
        return None
    if "tools" in result:
        return "tools/list"
    if "protocolVersion" in result or "serverInfo" in result:
        return "initialize"
    if "content" in result or "isError" in result:
        return "tools/call"
    return None


def _content_text(result: dict[str, Any]) -> str:
    content = result.get("content")
    parts = [c.get("text") for c in content if isinstance(c, dict)] if isinstance(content, list) else []
    return " ".join(p for p in parts if isinstance(p, str))


def _reported_error(text: str) -> str | None:
    """The safe-output convention: a tool answer whose text is ``{"result":"error", …}``."""
    if '"result"' not in text:
        return None
    try:
        doc = parse_json(text.strip())
    except (JsonError, RecursionError):
        return None
    if isinstance(doc, dict) and doc.get("result") == "error":
        detail = doc.get("error") or doc.get("message") or "result: error"
        return _short(detail if isinstance(detail, str) else str(detail))
    return None


def response_error(rec: dict[str, Any]) -> str | None:
    """Why a RESPONSE record is an error (None when it is not): a transport failure the gateway
    recorded, a JSON-RPC ``error``, a tool result with ``isError``, or ``{"result":"error"}``."""
    if rec.get("error"):
        return _short(f"transport: {rec['error']}")
    payload = rec.get("payload")
    if not isinstance(payload, dict):
        return None
    err = payload.get("error")
    if err is not None:
        if isinstance(err, dict):
            return _short(f"JSON-RPC error {err.get('code', '')}: {err.get('message', '')}".strip())
        return _short(f"JSON-RPC error: {err}")
    result = payload.get("result")
    if not isinstance(result, dict):
        return None
    text = _content_text(result)
    if result.get("isError") is True:
        return _short(text or "isError")
    return _reported_error(text)


def pair_rpc_records(records: list[tuple[int, dict[str, Any]]]) -> tuple[list[McpCall], list[int], int]:
    """Requests paired with responses, per ``server_id``: (calls in request order, orphan
    response lines, DIFC-filtered count).

    A response is paired with the oldest unanswered request of its server that it can answer:
    one with the same JSON-RPC id when both carry one, else (requests in the wild carry no id,
    and response ids repeat) the oldest whose method fits the response's shape (``tools`` →
    tools/list, ``content``/``isError`` → tools/call, ``protocolVersion`` → initialize; any
    method for an error without a result). Nothing is invented: a response no request can take
    is an orphan, a request never answered is ``unanswered``.
    """
    pending: dict[str, list[_Request]] = {}
    answered: dict[int, tuple[int, str | None]] = {}  # request line -> (response line, error)
    requests: list[tuple[str, _Request]] = []
    orphans: list[int] = []
    filtered = 0
    for line, rec in records:
        kind = _record_kind(rec)
        server = _text(rec.get("server_id") or rec.get("serverId"))
        payload = rec.get("payload")
        payload = payload if isinstance(payload, dict) else {}
        if kind == "REQUEST":
            method = _text(rec.get("method") or payload.get("method"))
            params = payload.get("params")
            tool = _text(params.get("name")) if isinstance(params, dict) else ""
            req = _Request(line, method, tool, _rpc_id(payload))
            requests.append((server, req))
            pending.setdefault(server, []).append(req)
        elif kind == "RESPONSE":
            queue = pending.get(server, [])
            rid, shape = _rpc_id(payload), _response_shape(payload)
            match = next((r for r in queue if rid is not None and r.rpc_id == rid), None)
            if match is None:
                match = next((r for r in queue if (r.rpc_id is None or rid is None)
                              and (shape is None or not r.method or r.method == shape)), None)
            if match is None:
                orphans.append(line)
                continue
            queue.remove(match)
            answered[match.line] = (line, response_error(rec))
        elif kind == "DIFC_FILTERED":
            filtered += 1
    calls = []
    for server, req in requests:
        if req.line not in answered:
            calls.append(McpCall(server, req.method, req.tool, req.line, None, "unanswered",
                                 "no response recorded (transport failure or run ended)"))
            continue
        resp_line, error = answered[req.line]
        calls.append(McpCall(server, req.method, req.tool, req.line, resp_line,
                             "error" if error is not None else "ok", error or ""))
    return calls, orphans, filtered


# --- safe outputs, token usage, archived grades ----------------------------------------------


def _failures_of(report: Any, source: str) -> list[SafeOutputError]:
    """A ``safe-output-errors.json`` report (gh-aw ``writeSafeOutputErrorReport``:
    ``{status, errorCode?, message?, failures[{type?, errorCode?, error?}]}``): one error per
    failure, or one for the report when it lists none."""
    if not isinstance(report, dict):
        return []
    failures = report.get("failures")
    if not isinstance(failures, list):
        failures = report.get("errors")  # older writers: {errors: [...]}
    out = [SafeOutputError(_text(f.get("type")), _short(_text(f.get("error") or f.get("message")
                                                               or f.get("errorCode"))), source)
           for f in failures if isinstance(f, dict)] if isinstance(failures, list) else []
    if not out and _text(report.get("status")).lower() not in ("", "success"):
        out.append(SafeOutputError("", _short(_text(report.get("message") or report.get("errorCode"))), source))
    return out


def _safe_output_errors(files: RunFiles, calls: list[McpCall], session: str | None,
                        session_errors: list[dict[str, Any]], reading: _Reading,
                        ) -> tuple[list[SafeOutputError], list[str]]:
    """Errors the agent's safe-output calls got back from the safeoutputs MCP server, plus the
    failures of the Process Safe Outputs step (``safe-output-errors.json``, or its projection
    in the unified session when the file itself is not in the run)."""
    out = [SafeOutputError(c.tool, c.error, RPC_MESSAGES) for c in calls
           if c.method == "tools/call" and c.outcome == "error" and c.server.lower() in SAFE_OUTPUT_SERVERS]
    sources = [RPC_MESSAGES] if files.exists(RPC_MESSAGES) else []
    rel = next((p for p in SAFE_OUTPUT_ERRORS if files.exists(p)), None)
    if rel is not None:
        out += _failures_of(_document(files, rel, reading), rel)
        sources.append(rel)
    elif session is not None:
        for data in session_errors:
            out += _failures_of(data, session)
        sources.append(session)
    return out, sources


def _token_records(files: RunFiles, reading: _Reading, tokens: TokenLines | None = None,
                   ) -> list[tuple[str, list[TokenRecord]]]:
    """(file, records) of every token-usage candidate the run has, in graders.md §5's order: the
    first is the agent's file the token graders read; the cost graders read them all, deduplicated
    as gh-aw reads every candidate (graders/formats/usage.py)."""
    out: list[tuple[str, list[TokenRecord]]] = []
    for rel in TOKEN_USAGE_FILES:
        if not files.exists(rel):
            continue
        if tokens is not None and tokens.file == rel:  # read whole already, block by block
            malformed = tokens.reading.malformed[rel]
            if malformed:
                reading.malformed[rel] += malformed
            out.append((rel, tokens.records))
            continue
        records: list[TokenRecord] = []
        for batch in files.iter_line_batches(rel):
            held = len(records)
            _token_block(batch, rel, reading, records)
            files.keep(len(records) - held, rel)  # the run's record budget, as preprocessing counts its file
        out.append((rel, records))
    return out


class TokenLines:
    """The token-usage records of one run, read from the blocks of the file as another reader
    of the same file reads them (preprocessing, in ``prepare_run``), so the file is read, hashed
    and split once. Give it to :func:`read_evidence` once ``file`` is set (:meth:`finish`)."""

    def __init__(self) -> None:
        self.records: list[TokenRecord] = []
        self.reading = _Reading()
        self.file: str | None = None  # the file every block of which was fed, in order

    def feed(self, rel: str, batch: LineBatch, usage: UsageBlock | None = None) -> None:
        """One block of ``rel``; ``usage``: its records when the other reader decoded every kept
        line as a :class:`TokenUsageLine`, else None (it tried, so that is not tried again)."""
        if usage is not None:
            _usage_lines(usage, rel, self.reading, self.records)
        else:
            _token_block(batch, rel, self.reading, self.records, usage_lines=False)

    def finish(self, rel: str | None) -> None:
        """``rel`` was fed whole (None: no file was)."""
        self.file = rel


def _token_block(batch: LineBatch, rel: str, reading: _Reading, records: list[TokenRecord],
                 usage_lines: bool = True) -> None:
    """One block's records: decoded whole when it can be, else line by line."""
    if not _token_batch(batch, rel, reading, records, usage_lines):
        for raw in batch:
            rec = _record(raw, rel, reading)
            if rec is not None:
                _token_record(rec, rel, reading, records)


def _token_record(rec: dict[str, Any], rel: str, reading: _Reading, records: list[TokenRecord]) -> None:
    """The reference rule for one parsed line: a record with a numeric input or output count."""
    if not any(isinstance(rec.get(k), (int, float)) for k in ("input_tokens", "output_tokens")):
        reading.malformed[rel] += 1
        return
    get = rec.get
    records.append(TokenRecord(_int(get("input_tokens")), _int(get("output_tokens")),
                               _int(get("cache_read_tokens")), _int(get("cache_write_tokens")),
                               _text(get("purpose")), _text(get("model")), _stated(get("reasoning_tokens")),
                               _figure(get("ai_credits_this_response")), _figure(get("ai_credits_total")),
                               _flag(get("input_tokens_include_cache")), _str_or_none(get("request_id")),
                               _str_or_none(get("event")), _str_or_none(get("timestamp"))))


def _stated(value: Any) -> int | None:
    """A count a record may leave out (``reasoning_tokens``): :func:`_int` of a number, else None."""
    return _int(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def _figure(value: Any) -> float | None:
    """A number as a double (what msgspec decodes a ``float`` field to), else None."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    try:
        return float(value)
    except OverflowError:  # an integer beyond the doubles: JSON.parse reads Infinity
        return math.inf


def _flag(value: Any) -> bool | None:
    return value if isinstance(value, bool) else None


def _str_or_none(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def _cost_fields(line: Any) -> tuple[Any, ...]:
    """The cost fields of a decoded line (:class:`_TokenLine` or :class:`TokenUsageLine`) as
    :class:`TokenRecord` holds them (a value of another JSON type is None, as :func:`_token_record` reads it)."""
    reasoning = line.reasoning
    return (reasoning if type(reasoning) is int else None, _figure(line.credits), _figure(line.credits_total),
            _flag(line.include_cache), _str_or_none(line.request_id), _str_or_none(line.event),
            _str_or_none(line.timestamp))


class _TokenLine(msgspec.Struct, gc=False, rename=_TOKEN_KEYS):
    """A token-usage line as real logs write it: counts that are non-negative integers or strings
    (which :func:`_int` reads as 0), or absent (an absent or null input/output count is None),
    ``purpose`` and ``model`` strings or absent. What it decodes is what :func:`_token_record`
    reads from ``parse_json``'s record, once strings are read as 0 (:func:`_token_batch`)."""

    input: _Count | str | None = None
    output: _Count | str | None = None
    cache_read: _Count | str = 0
    cache_write: _Count | str = 0
    purpose: str = ""
    model: str = ""
    reasoning: _Count | str | None = None
    credits: float | bool | str | None = None
    credits_total: float | bool | str | None = None
    include_cache: bool | float | str | None = None
    request_id: str | float | bool | None = None
    event: str | float | bool | None = None
    timestamp: str | float | bool | None = None


_TOKEN_LINE: Final = msgspec.json.Decoder(_TokenLine)
_TOKEN_RECORD: Final = msgspec.json.Decoder(TokenRecord)
_USAGE_LINE: Final = msgspec.json.Decoder(TokenUsageLine)


class UsageBlock(NamedTuple):
    """A token-usage block decoded whole as :class:`TokenUsageLine`: its records, their raw input
    and output counts (in order), and whether all of those are ints (no string among them)."""

    lines: list[TokenUsageLine]
    inputs: list[Any]
    outputs: list[Any]
    ints: bool


def usage_block(lines: list[TokenUsageLine]) -> UsageBlock:
    """The :class:`UsageBlock` of decoded lines, its columns read here."""
    return UsageBlock(lines, [r.input for r in lines], [r.output for r in lines], False)


def _usage_lines(block: UsageBlock, rel: str, reading: _Reading, records: list[TokenRecord]) -> None:
    """A block's :class:`TokenUsageLine` records: kept as they are, but for the few with a string
    count, read as :func:`_token_batch` reads a :class:`_TokenLine` (a string is no number)."""
    lines = block.lines
    start = len(records)
    records.extend(lines)
    if block.ints:
        return
    odd = [*positions(list(map(type, block.inputs)), str), *positions(list(map(type, block.outputs)), str)]
    if not odd:
        return
    dropped = []
    for i in sorted(set(odd)):
        line = lines[i]
        inp, out = line.input, line.output
        if type(inp) is not int:
            if type(out) is not int:
                reading.malformed[rel] += 1
                dropped.append(start + i)
                continue
            inp = 0
        elif type(out) is not int:
            out = 0
        records[start + i] = TokenRecord(inp, out, line.cache_read, line.cache_write, line.purpose, line.model,
                                         *_cost_fields(line))
    for i in reversed(dropped):
        del records[i]


def _token_batch(batch: LineBatch, rel: str, reading: _Reading, records: list[TokenRecord],
                 usage_lines: bool = True) -> bool:
    """A block of the token-usage file decoded line by line in C, when every line decodes into
    a :class:`TokenUsageLine` (unless ``usage_lines`` is False: that was tried), or a
    :class:`TokenRecord`, or else a :class:`_TokenLine`; False (nothing read) sends the block
    through the per-line rule.

    msgspec accepts a line only where ``parse_json`` gives a record with the same fields (it
    refuses non-records, nulls, bools, floats, negative counts and counts beyond 2**53, which
    JavaScript reads as doubles, bad UTF-8 or lone surrogates in those fields, and nests less
    deep; what it skips unread, ``parse_json`` reads too, if through its fallback). So a block
    need not be scanned for 16-digit runs: a large integer elsewhere in a line is never read.
    The per-record Python was most of the observed layer's cost on large token logs."""
    if not batch.short:
        return False
    kept = list(filter(None, map(bytes.strip, batch)))
    if usage_lines:
        try:  # most blocks of real logs (also preprocessing's decode: TokenLines.feed)
            usage = list(map(_USAGE_LINE.decode, kept))
        except (ValueError, RecursionError):
            pass
        else:
            _usage_lines(usage_block(usage), rel, reading, records)
            return True
    try:  # every line a TokenRecord as it is
        records.extend(list(map(_TOKEN_RECORD.decode, kept)))
        return True
    except (ValueError, RecursionError):  # msgspec's DecodeError and ValidationError are ValueErrors
        pass
    try:
        lines = list(map(_TOKEN_LINE.decode, kept))
    except (ValueError, RecursionError):
        return False
    append = records.append
    for line in lines:
        inp, out, read, write = line.input, line.output, line.cache_read, line.cache_write
        if type(inp) is not int:  # a string or None: no number (kept only with a numeric output)
            if type(out) is not int:
                reading.malformed[rel] += 1
                continue
            inp = 0
        elif type(out) is not int:
            out = 0
        append(TokenRecord(inp, out, read if type(read) is int else 0, write if type(write) is int else 0,
                           line.purpose, line.model, *_cost_fields(line)))
    return True


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value)


def _archived(files: RunFiles, reading: _Reading) -> tuple[str | None, tuple[ArchivedResult, ...] | None]:
    rel = next((p for p in GRADER_RESULTS if files.exists(p)), None)
    if rel is None:
        if reading.graders:  # no grader_results.json: the unified session's projection of it
            return f"{SESSION_FILES[0]} (grader.result)", tuple(reading.graders)
        return None, None
    doc = _document(files, rel, reading)
    results = doc.get("results") if isinstance(doc, dict) else None
    if not isinstance(results, list):
        reading.warnings.append(f"{rel}: no results list; archived grades not compared")
        return rel, None
    out = []
    for r in results:
        if not isinstance(r, dict) or not isinstance(r.get("id"), str):
            reading.malformed[rel] += 1
            continue
        status, message = r.get("status"), r.get("message")
        out.append(ArchivedResult(r["id"], _number(r.get("value")), status if isinstance(status, str) else None,
                                  message if isinstance(message, str) else None))
    return rel, tuple(out)


def _debug_bodies(files: RunFiles, rel: str, reading: _Reading) -> Iterator[Any]:
    """The JSON bodies logged after ``[DEBUG] data:`` (they run over several lines, up to the next
    timestamped line); a body that is not JSON, or too large, is counted and skipped."""
    body: list[bytes] | None = None
    size = 0
    for raw in chain(files.iter_lines(rel), [b"0000-00-00T end"]):  # streamed: the log is never held whole
        if body is not None and _LOG_LINE_START.match(raw):
            if size <= MAX_DEBUG_BODY:
                try:
                    yield parse_json(b"\n".join(body))
                except (JsonError, UnicodeDecodeError, RecursionError):
                    reading.malformed[rel] += 1
            else:
                reading.malformed[rel] += 1
            body, size = None, 0
        at = raw.find(_DEBUG_DATA)
        if at >= 0 and _LOG_LINE_START.match(raw):
            body, size = [raw[at + len(_DEBUG_DATA):]], len(raw)
        elif body is not None:
            size += len(raw)
            if size <= MAX_DEBUG_BODY:
                body.append(raw)


def debug_log_tool_calls(files: RunFiles, reading: _Reading) -> list[tuple[str, int]]:
    """(debug log, tool calls its logged model responses asked for) of a Copilot CLI run that has no
    session ``events.jsonl``: the reference reads no tool call of such a run, so it is marked."""
    if any(rel.endswith("/events.jsonl") for rel in files.under(SESSION_STATE)):
        return []
    found = []
    for rel in sorted(files.under(AGENT_LOGS)):
        if "/" in rel[len(AGENT_LOGS) + 1:] or not _DEBUG_LOG.fullmatch(rel.rsplit("/", 1)[1]):
            continue
        calls = 0
        for body in _debug_bodies(files, rel, reading):
            choices = body.get("choices") if isinstance(body, dict) else None
            for choice in choices if isinstance(choices, list) else ():
                message = choice.get("message") if isinstance(choice, dict) else None
                tool_calls = message.get("tool_calls") if isinstance(message, dict) else None
                calls += len(tool_calls) if isinstance(tool_calls, list) else 0
        if calls:
            found.append((rel, calls))
    return found


def evidence_warnings(evidence: RunEvidence) -> list[str]:
    """The run's warnings about its evidence: files with lines the observed layer could not read
    (the token-usage file's are already the preprocessor's warnings)."""
    out = [f"{path}: {n} record(s) not read by the observed graders (not a JSON object of the expected shape)"
           for path, n in evidence.malformed if path != evidence.token_file]
    return out + list(evidence.warnings)


def read_evidence(files: RunFiles, aw_info: Mapping[str, Any] | None = None,
                  tokens: TokenLines | None = None, trace: Mapping[str, Any] | None = None) -> RunEvidence:
    """Everything the observed layer reads from one run (``aw_info`` as already read by
    graders/runs/runmeta.py, so the file is not read twice; ``tokens``: the token-usage file as
    preprocessing read it, used when it is the file read here; ``trace``: the run's preprocessed
    trace, whose native and gateway calls are the fallback sources of the run's calls)."""
    reading = _Reading()
    session_conclusions, session_file, session_safe_errors = _session(files, reading)
    conclusions = [*_run_summary(files, reading), *_aw_info(aw_info), *session_conclusions, *_agent_stdio(files)]
    calls: list[McpCall] = []
    orphans: list[int] = []
    filtered = 0
    mcp_file = RPC_MESSAGES if files.exists(RPC_MESSAGES) else None
    if mcp_file is not None:
        calls, orphans, filtered = pair_rpc_records(list(_lines(files, mcp_file, reading)))
    safe_errors, safe_sources = _safe_output_errors(files, calls, session_file, session_safe_errors, reading)
    token_files = _token_records(files, reading, tokens)
    token_file, token_records = token_files[0] if token_files else (None, [])
    usage = read_usage(files, token_files, reading.session_usage, reading.bad)
    reading.warnings.extend(usage.warnings)
    archived_file, archived = _archived(files, reading)
    for rel, n in debug_log_tool_calls(files, reading):
        reading.warnings.append(f"{rel}: {n} tool call(s) of this Copilot CLI run appear only in its debug log "
                                "(no copilot-session-state events.jsonl); the tool-call graders see none of them")
    found = run_calls(files, aw_info, trace or {}, calls, mcp_file)
    reading.warnings.extend(found.warnings)
    if found.tokens is not None and usage.calls is None and usage.totals is None:  # the engine's log: last
        usage = dataclasses.replace(usage, totals=engine_totals(found.tokens, found.source or AGENT_STDIO),
                                    sources=(*usage.sources, found.source or AGENT_STDIO))
    return RunEvidence(
        conclusions=tuple(conclusions),
        mcp_file=mcp_file,
        mcp_calls=tuple(calls),
        mcp_orphan_responses=tuple(orphans),
        mcp_filtered=filtered,
        safe_output_errors=tuple(safe_errors),
        safe_output_sources=tuple(safe_sources),
        token_file=token_file,
        token_records=tuple(token_records),
        archived_file=archived_file,
        archived_results=archived,
        malformed=tuple(sorted(reading.malformed.items())),
        warnings=tuple(reading.warnings),
        usage=usage,
        call_counts=found.counts,
        calls_source=found.source or found.gateway,
        gateway_file=found.gateway,
        step_calls=tuple(found.steps),
        engine_tokens=found.tokens,
    )


def session_evidence(session: Session, unified: RunFiles | None = None) -> RunEvidence:
    """The observed layer's view of one session file: its calls and token totals, how it ended
    where the file says so, and for a unified session (``unified``: the file as a run's
    ``usage/aw_session.jsonl``) everything a run folder's copy gives."""
    base = RunEvidence() if unified is None else read_evidence(unified)
    conclusions = base.conclusions
    if not conclusions and session.status is not None:
        conclusions = (ConclusionSource(session.kind, session.source, session.status,
                                        "success" if session.delivered else "failure"),)
    elif not conclusions and not session.delivered:
        conclusions = (ConclusionSource(session.kind, session.source, "failed", "failure"),)
    usage = base.usage
    if usage.calls is None and usage.totals is None:  # not a unified session's: the engine log's records
        usage = session_usage(session)
    return dataclasses.replace(base, conclusions=conclusions, call_counts=count_calls(session.calls, len(session.calls)),
                               calls_source=session.source, gateway_file=None, step_calls=(),
                               engine_tokens=session.tokens, warnings=(), usage=usage)


def engine_totals(tokens: TokenTotals, source: str) -> UsageTotals:
    """An engine log's run totals as the cost graders read them (no router call in them)."""
    return UsageTotals(f"{source} ({tokens.source})" if tokens.source else source, tokens.input, tokens.output,
                       tokens.cache_read, tokens.cache_write, tokens.reasoning, "", tokens.input_includes_cache, False)


def session_usage(session: Session) -> RunUsage:
    """A session file's usage as its reader read it: the log's own bill where it states one
    (``billed``), else its per-request records (``input`` without the cached tokens; an aggregate
    record stands for its ``requests``), else the log's totals."""
    usage = session.billed or session.usage
    if usage:
        records = tuple(TokenRecord(u.input, u.output, u.cache_read, u.cache_write, u.purpose or "", u.model or "",
                                    u.reasoning, include_cache=False) for u in usage)
        weights = tuple(u.requests for u in usage)
        calls = CallRecords(session.source, records, 0, weights if any(w != 1 for w in weights) else ())
        return RunUsage(calls=calls, sources=(session.source,))
    if session.tokens is not None:
        return RunUsage(totals=engine_totals(session.tokens, session.source), sources=(session.source,))
    return RunUsage()
