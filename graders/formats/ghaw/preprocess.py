"""One preprocessing pass per run: artifact files -> the gh-aw trace object (docs/reference/graders.md §5).

The trace is a plain JSON-shaped dict with the reference's keys in the reference's order,
because graders (including user JavaScript) and ``grader_payload.json`` consume it as JSON.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from itertools import chain
from operator import attrgetter
from typing import Any, Final, cast

from graders.formats.evidence import TokenUsageLine, UsageBlock
from graders.formats.ghaw.toolcalls import gateway_tool_call, merge_tool_calls, native_tool_calls
from graders.jsrt.jscompat import js_number_or_zero, js_truthy
from graders.jsrt.jsonio import (
    MAX_FILE_SIZE,
    TOO_DEEP,
    Item,
    JsonlStats,
    LineBatch,
    parse_json_document,
    parse_jsonl_items,
    parse_jsonl_records,
    too_deep,
)
from graders.jsrt.lazyjson import JsonLines, load_item
from graders.jsrt.lazylist import SafeInts, TokenSteps, positions
from graders.jsrt.records import EventRecord, GatewayRecord, R, TokenInts, TokenRecord
from graders.runs.runfiles import RunFiles

TOKEN_USAGE_PATHS: Final = (
    "sandbox/firewall-audit-logs/api-proxy-logs/token-usage.jsonl",
    "sandbox/firewall/audit/api-proxy-logs/token-usage.jsonl",
    "sandbox/firewall/logs/api-proxy-logs/token-usage.jsonl",
)
AGENT_USAGE_PATH: Final = "agent_usage.json"
GATEWAY_PATHS: Final = ("mcp-logs/gateway.jsonl", "mcp-logs/mcp-gateway.jsonl", "mcp-logs/rpc-messages.jsonl")
# gh-aw's own path first; `gh aw logs` also stores the artifact under its artifact name.
AGENT_OUTPUT_PATHS: Final = ("agent_output.json", "agent-output/agent_output.json")
SESSION_STATE_DIR: Final = "sandbox/agent/logs/copilot-session-state"
EVALS_PATH: Final = "evals.jsonl"
TRAJECTORY_IR_PATH: Final = "agent/graders/trajectory_ir.json"

_RETRY = re.compile(r"retry|retrying", re.IGNORECASE)
_MAX_SAFE: Final = 2**53


@dataclass
class PreprocessReport:
    """What preprocessing read and skipped; it becomes the ``runs`` row's warnings."""

    sources: dict[str, str] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)
    bytes_read: int = 0

    def skipped_lines(self, rel: str, stats: JsonlStats) -> None:
        parts = []
        for label, n in (
            ("unparsable", stats.unparsable),
            ("over 1 MiB", stats.oversized),
            ("literal null", stats.null),
        ):
            if n:
                parts.append(f"{n} {label}")
        if parts:
            self.warnings.append(f"{rel}: skipped {', '.join(parts)} line(s)")


def _readable(files: RunFiles, rel: str, report: PreprocessReport) -> bool:
    size = files.size(rel)
    if size is None:
        return False
    if size > MAX_FILE_SIZE:
        report.warnings.append(f"Graders: skipping oversized file {rel} ({size} bytes)")
        return False
    return True


def _first_available(files: RunFiles, paths: tuple[str, ...], report: PreprocessReport) -> str | None:
    for rel in paths:
        if _readable(files, rel, report):
            return rel
    return None


Batch = tuple[list[Item], list[Any]]


# Shown each raw block of the token-usage file as it is read, with its records and their counts
# when every kept line decoded as a ``TokenUsageLine`` (else None): ``prepare_run``'s observed
# token reader (``evidence.TokenLines.feed``).
BlockHook = Callable[[str, LineBatch, UsageBlock | None], None]


def _jsonl_batches(files: RunFiles, rel: str | None, report: PreprocessReport,
                   parse: Callable[[list[bytes], JsonlStats, int], Batch] = parse_jsonl_items,
                   ) -> Iterator[tuple[LineBatch, Batch]]:
    """A JSONL file's blocks and their kept records, one (lazy items, values) pair per block."""
    if rel is None:
        return
    stats = JsonlStats()
    for batch in files.iter_line_batches(rel):
        parsed = parse(batch, stats, stats.lines + 1)
        files.keep(len(parsed[0]), rel)
        yield batch, parsed
    report.skipped_lines(rel, stats)


def _record_batches(files: RunFiles, rel: str | None, report: PreprocessReport, record_type: type[R],
                    strict_types: tuple[type[Any], ...] = ()) -> Iterator[tuple[LineBatch, Batch]]:
    """The same, the values seen as ``record_type`` structs (None for non-records), or as the first
    of ``strict_types`` a whole block decodes into (``jsonio.parse_jsonl_records``)."""
    return _jsonl_batches(files, rel, report,
                          lambda b, stats, n: parse_jsonl_records(b, stats, record_type, n, strict_types))


def _read_jsonl(files: RunFiles, rel: str | None, report: PreprocessReport) -> list[Any]:
    entries: list[Any] = []
    for _, (_, values) in _jsonl_batches(files, rel, report):
        entries.extend(values)
    return entries


def _iter_records(files: RunFiles, rel: str | None, report: PreprocessReport,
                  record_type: type[R]) -> Iterator[R | None]:
    # chain: the records of each block are walked in C, not resumed one by one through generators.
    return chain.from_iterable(records for _, (_, records) in _record_batches(files, rel, report, record_type))


def _read_json(files: RunFiles, rel: str | None, report: PreprocessReport) -> Any:
    if rel is None:
        return None
    data = files.read(rel)
    if not data:
        return None
    value = parse_json_document(data)
    if value is None and data.strip() != b"null":
        reason = TOO_DEEP if too_deep(data) else "not valid JSON"
        report.warnings.append(f"{rel}: {reason}, treated as absent")
    return value


def read_trajectory_ir_file(files: RunFiles, report: PreprocessReport | None = None) -> Any:
    """The parsed ``agent/graders/trajectory_ir.json``, or None when absent, oversized or invalid.

    gh-aw writes this file but never reads it; we use it as the last IR candidate of the
    trajectory graders (docs/deviations-trajectory.md). It is not part of the trace object.
    """
    report = report if report is not None else PreprocessReport()
    if not _readable(files, TRAJECTORY_IR_PATH, report):
        return None
    return _read_json(files, TRAJECTORY_IR_PATH, report)


def events_files(files: RunFiles) -> list[str]:
    """``copilot-session-state/events.jsonl`` and one level below, sorted by path."""
    found = []
    prefix = SESSION_STATE_DIR + "/"
    for rel in files.under(SESSION_STATE_DIR):
        rest = rel[len(prefix) :].split("/")
        if rest == ["events.jsonl"] or (len(rest) == 2 and rest[1] == "events.jsonl"):
            found.append(rel)
    return sorted(found, key=lambda p: p.encode("utf-16-be", "surrogatepass"))


def read_evals(files: RunFiles, report: PreprocessReport | None = None) -> dict[str, Any] | None:
    """The ``evals.jsonl`` summary of ``grader_results.json`` (null when there are no records)."""
    report = report if report is not None else PreprocessReport()
    if not _readable(files, EVALS_PATH, report) or files.size(EVALS_PATH) == 0:
        return None
    records = _read_jsonl(files, EVALS_PATH, report)
    if not records:
        return None
    summary: dict[str, Any] = {"total": 0, "yes": 0, "no": 0, "unknown": 0, "byQuestion": {}}
    for record in records:
        if not isinstance(record, (dict, list)):
            continue
        rec = record if isinstance(record, dict) else {}
        qid = rec.get("id") if isinstance(rec.get("id"), str) else ""
        answer_field = rec.get("answer")
        raw = answer_field.upper() if isinstance(answer_field, str) else "UNKNOWN"
        answer = raw if raw in ("YES", "NO") else "UNKNOWN"
        summary["total"] += 1
        summary[{"YES": "yes", "NO": "no"}.get(answer, "unknown")] += 1
        if qid:
            summary["byQuestion"][qid] = answer
    return summary if summary["total"] > 0 else None


def _safe_ints(values: list[Any]) -> bool:
    """Every value is an int within ±2**53 (what real logs hold); checked in C."""
    return not values or (set(map(type, values)) == {int} and -_MAX_SAFE <= min(values) and max(values) <= _MAX_SAFE)


def _numbers(raw: list[Any], ints_in_range: bool = False) -> tuple[list[Any], bool]:
    """``Number(x) || 0`` of each value, and whether all of them are ints within ±2**53;
    ``raw`` itself when it holds only such ints.

    A block of a large log is nearly all ints: the other values are found by type in C and
    converted one by one, instead of testing every value in Python. ``ints_in_range``: the
    caller knows every int is within range (a ``TokenInts`` column), so none is tested.
    """
    kinds = set(map(type, raw))
    if kinds <= {int} and (ints_in_range or not raw or (-_MAX_SAFE <= min(raw) and max(raw) <= _MAX_SAFE)):
        return raw, True
    out = list(raw)
    converted = []
    types = list(map(type, raw))
    for kind in kinds - {int}:
        for i in positions(types, kind):
            out[i] = n = js_number_or_zero(raw[i])
            converted.append(n)
    if not ints_in_range and int in kinds and not (-_MAX_SAFE <= min(out) and max(out) <= _MAX_SAFE):
        # rare: huge ints
        out = [x if type(x) is not int or -_MAX_SAFE <= x <= _MAX_SAFE else js_number_or_zero(x) for x in out]
        return out, _safe_ints(out)
    return out, all(type(n) is int and -_MAX_SAFE <= n <= _MAX_SAFE for n in converted)


def _models(raw: list[Any]) -> list[Any]:
    """``x || null`` of each value."""
    kinds = set(map(type, raw))
    if kinds <= {str} and "" not in raw:
        return raw
    types = list(map(type, raw))
    out = list(raw)
    for kind in kinds - {str}:
        for i in positions(types, kind):
            out[i] = raw[i] if js_truthy(raw[i]) else None
    if str in kinds:
        # list.index compares by ==; only a string equals "" among JSON values.
        for i in positions(raw, ""):
            out[i] = None
    return out


def _column(records: list[Any], name: str) -> list[Any]:
    """``record.get(name)`` of each record view (None for non-records), in C when all are records."""
    try:
        return list(map(attrgetter(name), records))
    except AttributeError:
        return [None if r is None else getattr(r, name) for r in records]


def _total(start: float, values: list[Any], safe_ints: bool) -> float:
    # JavaScript adds left to right in doubles; sum() is exact only for ints (and, from
    # Python 3.12, compensates float sums), so anything else is added one by one.
    if type(start) is int and safe_ints:
        return start + sum(values)
    for v in values:
        start += v
    return start


@dataclass
class TokenUsage:
    """The token-usage file's share of the trace: its records, steps and totals."""

    entries: JsonLines
    steps: TokenSteps
    total_in: float = 0
    total_out: float = 0
    total_ms: float = 0


# The structs a token-usage block is decoded into first (``jsonio.parse_jsonl_records``): a
# ``TokenUsageLine`` is also the observed layer's record; a ``TokenInts`` is preprocessing's only.
_STRICT_TOKENS: Final = (TokenUsageLine, TokenInts)


def read_token_usage(files: RunFiles, rel: str | None, report: PreprocessReport,
                     on_block: BlockHook | None = None) -> TokenUsage:
    """Token-usage records, their steps and totals, in one pass over the file.

    Records are kept as lines (``lazyjson``); the raw ``input_tokens`` column is kept for the
    working-set grader, which reads it before ``Number()``: a ``SafeInts`` when every block
    decoded as ``TokenUsageLine`` or ``TokenInts`` (real logs), which that grader sums in C.
    A block is decoded as a ``TokenUsageLine`` first, which ``on_block`` is given, so the
    observed layer's reader needs no decode of its own.
    """
    items: list[Item] = []
    raw_inputs: list[Any] = []
    steps = TokenSteps([], [], [], [])
    usage = TokenUsage(JsonLines(items, {"input_tokens": raw_inputs}), steps)
    all_safe = True
    for batch, (kept, values) in _record_batches(files, rel, report, TokenRecord, _STRICT_TOKENS):
        kind = type(values[0]) if values else None
        items.extend(kept)
        # Both strict structs hold ints in range, or strings; their records are never None.
        strict = kind is TokenUsageLine or kind is TokenInts
        # Columns by comprehension: a struct field read there is about twice as fast as attrgetter's.
        raw_in: list[Any]
        raw_out: list[Any]
        raw_ms: list[Any]
        raw_models: list[Any]
        if kind is TokenUsageLine:
            usage_lines = cast(list[TokenUsageLine], values)
            raw_in, raw_out = [r.input for r in usage_lines], [r.output for r in usage_lines]
            raw_ms, raw_models = [r.duration for r in usage_lines], [r.model for r in usage_lines]
        elif kind is TokenInts:
            ints = cast(list[TokenInts], values)
            raw_in, raw_out = [r.input_tokens for r in ints], [r.output_tokens for r in ints]
            raw_ms, raw_models = [r.duration_ms for r in ints], [r.model for r in ints]
        else:
            raw_in, raw_out = _column(values, "input_tokens"), _column(values, "output_tokens")
            raw_ms, raw_models = _column(values, "duration_ms"), _column(values, "model")
        inputs, inputs_safe = _numbers(raw_in, strict)
        outputs, outputs_safe = _numbers(raw_out, strict)
        durations, durations_safe = _numbers(raw_ms, strict)
        if on_block is not None:
            on_block(cast(str, rel), batch, None if kind is not TokenUsageLine else UsageBlock(
                usage_lines, raw_in, raw_out, inputs is raw_in and outputs is raw_out))
        all_safe = all_safe and (not values or (strict and inputs is raw_in))
        raw_inputs.extend(raw_in)
        steps.inputs.extend(inputs)
        steps.outputs.extend(outputs)
        steps.durations.extend(durations)
        steps.models.extend(_models(raw_models))
        usage.total_in = _total(usage.total_in, inputs, inputs_safe)
        usage.total_out = _total(usage.total_out, outputs, outputs_safe)
        usage.total_ms = _total(usage.total_ms, durations, durations_safe)
    if all_safe:
        usage.entries.columns["input_tokens"] = SafeInts(raw_inputs)
    return usage


@dataclass
class GatewayLog:
    """The gateway log's share of the trace: its records, tool calls and record subsets."""

    entries: JsonLines = field(default_factory=JsonLines)
    tool_calls: list[dict[str, Any]] = field(default_factory=list)
    requests: JsonLines = field(default_factory=JsonLines)
    retries: JsonLines = field(default_factory=JsonLines)
    errors: JsonLines = field(default_factory=JsonLines)


def read_gateway(files: RunFiles, rel: str | None, report: PreprocessReport) -> GatewayLog:
    """Gateway records (kept as lines), their tool calls, and the request/retry/error subsets."""
    log = GatewayLog()
    calls = log.tool_calls
    requests, retries, errors = log.requests.items, log.retries.items, log.errors.items
    for _, (kept, records) in _record_batches(files, rel, report, GatewayRecord):
        log.entries.items.extend(kept)
        # Direct field reads per record: this loop runs once per log line.
        for item, r in zip(kept, records, strict=True):
            if r is None:  # non-records match none of the filters
                continue
            etype = r.type
            event = r.event
            method = r.method
            payload = r.payload
            message = r.message
            # /retry|retrying/i: for ASCII text a lower-cased substring test is exactly the
            # regex, several times faster; other text keeps the regex's Unicode case folding.
            retry_text = type(message) is str and (
                "retry" in message.lower() if message.isascii() else _RETRY.search(message) is not None)
            if event is None and method is None and payload is None and r.tool_name is None and r.retry is None:
                # The same tests with those five fields absent (most lines, e.g. plain logs).
                is_call = etype == "tool_call"
                if etype == "request" or etype == "response":
                    requests.append(item)
                if retry_text:
                    retries.append(item)
                if etype == "error" or r.level == "error":
                    errors.append(item)
            else:
                # is_gateway_tool_call, inlined (same tests, same order); the call is built last.
                is_call = (etype == "tool_call" or method == "tools/call" or event == "tool_call"
                           or isinstance(r.tool_name, str)
                           or (payload is not None and isinstance(payload.tool_name, str)))
                # js_truthy(method), inlined: JSON values hold no NaN and no undefined.
                if etype == "request" or etype == "response" or (method is not None and method != "" and method != 0):
                    requests.append(item)
                if r.retry is True or event == "retry" or retry_text:
                    retries.append(item)
                if "error" in (r.level, etype, event):
                    errors.append(item)
            if is_call:
                # The call is the whole record (a minority of lines): a line is parsed again,
                # into a dict nothing else references, and becomes the call in place; a value
                # kept as such (reference-path line) is copied.
                calls.append(gateway_tool_call(load_item(item), in_place=type(item) is bytes))
    return log


def preprocess(files: RunFiles, report: PreprocessReport | None = None,
               on_token_block: BlockHook | None = None) -> dict[str, Any]:
    """Build the preprocessed trace of one run (``preprocessTrace``).

    The large collections (token-usage and gateway records, their subsets, the steps) are
    lazy sequences (``lazyjson``): equal to the reference's arrays, serialized as arrays.
    ``on_token_block`` is shown every raw block of the token-usage file it reads (whose path
    is then ``report.sources["tokenUsage"]``), so another reader of that file need not read it again.
    """
    report = report if report is not None else PreprocessReport()

    token_rel = _first_available(files, TOKEN_USAGE_PATHS, report)
    usage = read_token_usage(files, token_rel, report, on_token_block)
    usage_rel = AGENT_USAGE_PATH if _readable(files, AGENT_USAGE_PATH, report) else None
    agent_usage = _read_json(files, usage_rel, report)
    gateway_rel = _first_available(files, GATEWAY_PATHS, report)
    gateway = read_gateway(files, gateway_rel, report)
    output_rel = _first_available(files, AGENT_OUTPUT_PATHS, report)
    agent_output = _read_json(files, output_rel, report)
    for label, rel in (("tokenUsage", token_rel), ("gateway", gateway_rel), ("agentOutput", output_rel)):
        if rel is not None:
            report.sources[label] = rel

    native: list[dict[str, Any]] = []
    for rel in events_files(files):
        if _readable(files, rel, report):
            # Streamed: events are parsed block by block and only the tool calls are kept.
            native.extend(native_tool_calls(_iter_records(files, rel, report, EventRecord)))
    tool_calls = merge_tool_calls(native, gateway.tool_calls)

    ao = agent_output if isinstance(agent_output, (dict, list)) else None
    files_list: list[Any] = []
    artifacts: list[Any] = []
    if isinstance(ao, dict):
        if isinstance(ao.get("files"), list):
            files_list = ao["files"]
        if isinstance(ao.get("outputs"), list):
            artifacts = ao["outputs"]
        elif isinstance(ao.get("items"), list):
            artifacts = ao["items"]

    report.bytes_read = files.bytes_read
    return {
        "tokenUsageEntries": usage.entries,
        "agentUsage": agent_usage,
        "mcpGatewayEntries": gateway.entries,
        "agentOutput": agent_output,
        "toolCalls": tool_calls,
        "nativeToolCalls": native,
        "gatewayRequests": gateway.requests,
        "retryEvents": gateway.retries,
        "errorEvents": gateway.errors,
        "steps": usage.steps,
        "totalInputTokens": usage.total_in,
        "totalOutputTokens": usage.total_out,
        "totalDurationMs": usage.total_ms,
        "totalRequests": len(usage.entries),
        "files": files_list,
        "artifacts": artifacts,
    }
