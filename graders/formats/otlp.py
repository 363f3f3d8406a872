"""OpenTelemetry GenAI traces exported as OTLP JSON (docs/formats.md §6; conventions in
open-telemetry/semantic-conventions-genai, every ``gen_ai.*`` attribute Development stability).

Accepted shapes: one OTLP JSON document ``{resourceSpans: […]}``, JSON lines each such a document
(the collector's file exporter), or JSON lines of flat spans ``{type: "span", traceId, spanId,
parentSpanId, name, startTime: [s, ns], endTime, status, attributes: {…}}`` (Copilot's file exporter).

* ``invoke_agent`` span with no ``invoke_agent`` above it → a run (a trace without one: the trace).
* ``execute_tool`` spans below it → its steps, in start order: ``gen_ai.tool.name``,
  ``gen_ai.tool.call.id``, ``gen_ai.tool.call.arguments``/``.result`` where recorded; failed when the
  span's status is ERROR or it carries ``error.type``. Steps under a nested ``invoke_agent`` are
  attributed to that agent.
* ``chat``/``generate_content``/``text_completion`` spans → LLM requests with ``gen_ai.usage.*``;
  ``input_tokens`` includes cached tokens by the conventions, so the cache reads and creations
  (``cache_creation`` or ``cache_write``) are taken off to give gh-aw's non-cached ``input_tokens``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from graders.formats.session import (
    Call,
    FormatError,
    Session,
    Source,
    Usage,
    as_dict,
    count,
    first_object,
    iso_time,
    json_text,
    text,
)
from graders.grading.registry import input_format
from graders.jsrt.jsonio import JsonError, parse_json

KIND = "otel-genai"
LLM_OPERATIONS = frozenset({"chat", "generate_content", "text_completion"})
STATUS_ERROR = (2, "2", "STATUS_CODE_ERROR", "ERROR")


def any_value(v: Any) -> Any:
    """An OTLP ``AnyValue`` as a plain value (``intValue`` is a JSON string)."""
    if not isinstance(v, dict):
        return v
    for key in ("stringValue", "boolValue", "doubleValue"):
        if key in v:
            return v[key]
    if "intValue" in v:
        raw = v["intValue"]
        try:
            return int(raw)
        except (TypeError, ValueError):
            return raw
    if "arrayValue" in v:
        return [any_value(x) for x in _list(as_dict(v["arrayValue"]).get("values"))]
    if "kvlistValue" in v:
        return attributes(as_dict(v["kvlistValue"]).get("values"))
    return None


def attributes(raw: Any) -> dict[str, Any]:
    """``[{key, value: AnyValue}]`` (OTLP) or a flat map → a dict."""
    if isinstance(raw, dict):
        return dict(raw)
    out: dict[str, Any] = {}
    for kv in raw if isinstance(raw, list) else []:
        if isinstance(kv, dict) and isinstance(kv.get("key"), str):
            out[kv["key"]] = any_value(kv.get("value"))
    return out


def _nanos(value: Any) -> int:
    if isinstance(value, list) and len(value) == 2:  # [seconds, nanos] (hrtime)
        return count(value[0]) * 1_000_000_000 + count(value[1])
    return count(value)


@dataclass
class Span:
    trace_id: str
    span_id: str
    parent: str | None
    name: str
    start: int
    end: int
    error: str | None
    attrs: dict[str, Any]
    resource: dict[str, Any] = field(default_factory=dict)

    @property
    def operation(self) -> str:
        op = self.attrs.get("gen_ai.operation.name")
        return op if isinstance(op, str) else self.name.split(" ", 1)[0]


def _span(raw: dict[str, Any], resource: dict[str, Any]) -> Span | None:
    sid = text(raw.get("spanId"))
    if sid is None:
        return None
    attrs = attributes(raw.get("attributes"))
    status = as_dict(raw.get("status"))
    error = None
    if status.get("code") in STATUS_ERROR:
        error = text(status.get("message")) or text(attrs.get("error.type")) or "status ERROR"
    elif text(attrs.get("error.type")) is not None:
        error = text(attrs.get("error.type"))
    return Span(text(raw.get("traceId")) or "", sid, text(raw.get("parentSpanId")), str(raw.get("name") or ""),
                _nanos(raw.get("startTimeUnixNano", raw.get("startTime"))),
                _nanos(raw.get("endTimeUnixNano", raw.get("endTime"))), error, attrs, resource)


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def _document_spans(doc: dict[str, Any]) -> list[Span]:
    spans: list[Span] = []
    for rs in _list(doc.get("resourceSpans")):
        if not isinstance(rs, dict):
            continue
        resource = attributes(as_dict(rs.get("resource")).get("attributes"))
        for ss in _list(rs.get("scopeSpans") or rs.get("instrumentationLibrarySpans")):
            for raw in _list(as_dict(ss).get("spans")):
                if isinstance(raw, dict) and (s := _span(raw, resource)) is not None:
                    spans.append(s)
    return spans


def parse_spans(source: Source) -> list[Span]:
    text_ = source.read().decode("utf-8", errors="replace")
    try:
        whole = parse_json(text_)
    except JsonError:
        whole = None
    if isinstance(whole, dict) and "resourceSpans" in whole:
        return _document_spans(whole)
    spans: list[Span] = []
    for line in text_.splitlines():
        try:
            obj = parse_json(line) if line.strip() else None
        except JsonError:
            continue
        if isinstance(obj, dict) and "resourceSpans" in obj:
            spans.extend(_document_spans(obj))
        elif isinstance(obj, dict) and obj.get("type") == "span" and (
                s := _span(obj, attributes(as_dict(obj.get("resource")).get("attributes")))):
            spans.append(s)
    return spans


def _args(value: Any) -> dict[str, Any]:
    if isinstance(value, str):
        try:
            value = parse_json(value)
        except JsonError:
            return {"arguments": value}
    if isinstance(value, dict):
        return value
    return {} if value is None else {"arguments": value}


def _result(value: Any) -> str:
    if value is None:
        return ""
    return value if isinstance(value, str) else json_text(value)


def _usage(s: Span, agent: str | None) -> Usage:
    a = s.attrs
    cache_read = count(a.get("gen_ai.usage.cache_read.input_tokens"))
    cache_write = count(a.get("gen_ai.usage.cache_creation.input_tokens", a.get("gen_ai.usage.cache_write.input_tokens")))
    model = text(a.get("gen_ai.response.model")) or text(a.get("gen_ai.request.model"))
    return Usage(model, max(0, count(a.get("gen_ai.usage.input_tokens")) - cache_read - cache_write),
                 count(a.get("gen_ai.usage.output_tokens")), cache_read, cache_write,
                 max(0, s.end - s.start) / 1e6, None, agent)


def read_sessions(source: Source) -> list[Session]:
    spans = parse_spans(source)
    if not spans:
        raise FormatError(f"{source.name}: no OTLP spans (resourceSpans[].scopeSpans[].spans[])")
    by_id = {(s.trace_id, s.span_id): s for s in spans}

    def agent_above(s: Span, stop: Span | None = None) -> Span | None:
        seen: set[str] = set()
        p = by_id.get((s.trace_id, s.parent or ""))
        while p is not None and p is not stop and p.span_id not in seen:
            seen.add(p.span_id)
            if p.operation == "invoke_agent":
                return p
            p = by_id.get((p.trace_id, p.parent or ""))
        return None

    def root_of(s: Span) -> Span | None:
        top, a, seen = None, agent_above(s), set()
        while a is not None and a.span_id not in seen:  # parent links can form a cycle
            seen.add(a.span_id)
            top, a = a, agent_above(a)
        return top

    roots = [s for s in spans if s.operation == "invoke_agent" and agent_above(s) is None]
    members: dict[tuple[str, str], list[Span]] = {}
    for s in spans:
        root = s if s in roots else root_of(s)
        key = (s.trace_id, root.span_id) if root is not None else (s.trace_id, "")
        members.setdefault(key, []).append(s)
    per_trace: dict[str, int] = {}
    for trace_id, _ in members:
        per_trace[trace_id] = per_trace.get(trace_id, 0) + 1
    sessions: list[Session] = []
    for (trace_id, root_id), group in members.items():
        root = by_id.get((trace_id, root_id))
        ops = {s.operation for s in group}
        if root is None and not ({"execute_tool"} | LLM_OPERATIONS) & ops:
            continue  # a trace with no GenAI spans
        group.sort(key=lambda s: (s.start, s.span_id))
        ra = root.attrs if root is not None else {}
        res = (root or group[0]).resource
        rid = text(ra.get("gen_ai.conversation.id")) or trace_id or "otel-trace"
        if per_trace[trace_id] > 1 and text(ra.get("gen_ai.conversation.id")) is None:
            rid = f"{trace_id}-{root_id or 'rest'}"
        session = Session(KIND, source.name, run_id=rid,
                          workflow=text(ra.get("gen_ai.workflow.name")) or text(ra.get("gen_ai.agent.name"))
                          or text(res.get("service.name")),
                          created_at=iso_time(min(s.start for s in group) / 1e9) if group[0].start else None,
                          delivered=root is None or root.error is None)
        llm: list[Usage] = []
        for s in group:
            nested = agent_above(s, root)
            agent = (text(nested.attrs.get("gen_ai.agent.name")) or text(nested.attrs.get("gen_ai.agent.id"))
                     or nested.span_id) if nested is not None else None
            if s.operation == "execute_tool":
                name = text(s.attrs.get("gen_ai.tool.name")) or s.name.removeprefix("execute_tool ").strip()
                session.calls.append(Call(name, _args(s.attrs.get("gen_ai.tool.call.arguments")), s.error is None,
                                          _result(s.attrs.get("gen_ai.tool.call.result")),
                                          text(s.attrs.get("gen_ai.tool.call.id")), agent, s.error))
            elif s.operation in LLM_OPERATIONS:
                llm.append(_usage(s, agent))
        if not llm and root is not None and any(k.startswith("gen_ai.usage.") for k in ra):
            llm.append(_usage(root, None))  # only the agent span recorded tokens
        session.usage = llm
        sessions.append(session)
    if not sessions:
        raise FormatError(f"{source.name}: OTLP spans, but none is a GenAI span "
                          "(invoke_agent, execute_tool, chat, …)")
    return sessions


@input_format(KIND)
class OtlpGenAI:
    kind = KIND
    folder = False

    def sniff(self, name: str, head: bytes) -> bool:
        if not (name.endswith(".json") or name.endswith(".jsonl") or name.endswith(".ndjson")):
            return False
        start = head.lstrip()[:4096]
        if start.startswith(b"{") and b'"resourceSpans"' in start:
            return True
        obj = first_object(head)
        return obj is not None and obj.get("type") == "span" and "spanId" in obj

    def read(self, source: Source) -> list[Session]:
        return read_sessions(source)
