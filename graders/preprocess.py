"""One preprocessing pass per run: artifact files -> the gh-aw trace object (graders.md §5).

The trace is a plain JSON-shaped dict with the reference's keys in the reference's order,
because graders (including user JavaScript) and ``grader_payload.json`` consume it as JSON.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Final

from graders.jscompat import js_number_or_zero, js_truthy
from graders.jsonio import MAX_FILE_SIZE, JsonlStats, parse_json_document, parse_jsonl_batch
from graders.runfiles import RunFiles
from graders.toolcalls import gateway_tool_call, merge_tool_calls, native_tool_calls

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


def _is_retry(message: str) -> bool:
    # For ASCII text a lower-cased substring test is exactly the case-insensitive regex, and
    # several times faster; other text keeps the regex's Unicode case folding.
    if message.isascii():
        return "retry" in message.lower()
    return _RETRY.search(message) is not None


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


def _read_jsonl(files: RunFiles, rel: str | None, report: PreprocessReport) -> list[Any]:
    if rel is None:
        return []
    stats = JsonlStats()
    entries: list[Any] = []
    for batch in files.iter_line_batches(rel):
        entries.extend(parse_jsonl_batch(batch, stats, stats.lines + 1))
    report.skipped_lines(rel, stats)
    return entries


def _read_json(files: RunFiles, rel: str | None, report: PreprocessReport) -> Any:
    if rel is None:
        return None
    data = files.read(rel)
    if not data:
        return None
    value = parse_json_document(data)
    if value is None and data.strip() != b"null":
        report.warnings.append(f"{rel}: not valid JSON, treated as absent")
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


def preprocess(files: RunFiles, report: PreprocessReport | None = None) -> dict[str, Any]:
    """Build the preprocessed trace of one run (``preprocessTrace``)."""
    report = report if report is not None else PreprocessReport()

    token_rel = _first_available(files, TOKEN_USAGE_PATHS, report)
    token_entries = _read_jsonl(files, token_rel, report)
    usage_rel = AGENT_USAGE_PATH if _readable(files, AGENT_USAGE_PATH, report) else None
    agent_usage = _read_json(files, usage_rel, report)
    gateway_rel = _first_available(files, GATEWAY_PATHS, report)
    gateway_entries = _read_jsonl(files, gateway_rel, report)
    output_rel = _first_available(files, AGENT_OUTPUT_PATHS, report)
    agent_output = _read_json(files, output_rel, report)
    for label, rel in (("tokenUsage", token_rel), ("gateway", gateway_rel), ("agentOutput", output_rel)):
        if rel is not None:
            report.sources[label] = rel

    # One pass per list, one type check and direct dict reads per record: these loops run once
    # per log line, and the earlier comprehensions with helper calls dominated large runs.
    gateway_calls: list[dict[str, Any]] = []
    gateway_requests: list[Any] = []
    retry_events: list[Any] = []
    error_events: list[Any] = []
    for e in gateway_entries:
        if type(e) is not dict:  # non-records match none of the filters
            continue
        get = e.get
        etype = get("type")
        event = get("event")
        method = get("method")
        payload = get("payload")
        # is_gateway_tool_call, inlined (same tests, same order).
        if (etype == "tool_call" or method == "tools/call" or event == "tool_call"
                or isinstance(get("tool_name"), str)
                or (isinstance(payload, dict) and isinstance(payload.get("tool_name"), str))):
            gateway_calls.append(gateway_tool_call(e))
        if etype == "request" or etype == "response" or js_truthy(method):
            gateway_requests.append(e)
        message = get("message")
        if get("retry") is True or event == "retry" or (isinstance(message, str) and _is_retry(message)):
            retry_events.append(e)
        if "error" in (get("level"), etype, event):
            error_events.append(e)

    native: list[dict[str, Any]] = []
    for rel in events_files(files):
        if _readable(files, rel, report):
            native.extend(native_tool_calls(_read_jsonl(files, rel, report)))
    tool_calls = merge_tool_calls(native, gateway_calls)

    total_in: float = 0
    total_out: float = 0
    total_ms: float = 0
    steps = []
    for i, entry in enumerate(token_entries):
        if type(entry) is dict:
            get = entry.get
            inp, out, ms, model = get("input_tokens"), get("output_tokens"), get("duration_ms"), get("model")
            # Fast path for safe integers (what real logs hold); anything else is Number(x) || 0.
            # (Number(undefined) and Number(null) both end as 0 under `|| 0`.)
            if type(inp) is not int or not -_MAX_SAFE <= inp <= _MAX_SAFE:
                inp = js_number_or_zero(inp)
            if type(out) is not int or not -_MAX_SAFE <= out <= _MAX_SAFE:
                out = js_number_or_zero(out)
            if type(ms) is not int or not -_MAX_SAFE <= ms <= _MAX_SAFE:
                ms = js_number_or_zero(ms)
            if type(model) is str:
                model = model or None
            elif not js_truthy(model):
                model = None
        else:
            inp = out = ms = 0
            model = None
        total_in += inp
        total_out += out
        total_ms += ms
        steps.append({"index": i, "inputTokens": inp, "outputTokens": out, "durationMs": ms, "model": model})

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
        "tokenUsageEntries": token_entries,
        "agentUsage": agent_usage,
        "mcpGatewayEntries": gateway_entries,
        "agentOutput": agent_output,
        "toolCalls": tool_calls,
        "nativeToolCalls": native,
        "gatewayRequests": gateway_requests,
        "retryEvents": retry_events,
        "errorEvents": error_events,
        "steps": steps,
        "totalInputTokens": total_in,
        "totalOutputTokens": total_out,
        "totalDurationMs": total_ms,
        "totalRequests": len(token_entries),
        "files": files_list,
        "artifacts": artifacts,
    }

