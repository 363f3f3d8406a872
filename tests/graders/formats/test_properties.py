"""Property tests of the readers: on any bytes and any JSON lines, a reader returns sessions or
raises its declared error (``FormatError``), never anything else; what it returns grades."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from graders.families.builtin import tool_failure_count, tool_success_rate
from graders.formats import FormatError, Source, formats, sniff
from graders.formats.hooks import dedupe, phase

FILE_FORMATS = [f for f in formats() if not f.folder]
SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])

# Keys and values the formats use, so generated records reach the readers' branches.
KEYS = st.sampled_from([
    "type", "data", "message", "content", "sessionId", "session_id", "isSidechain", "agentId", "toolCallId",
    "toolName", "input", "arguments", "success", "error", "hook", "event", "tool", "tool_name", "command",
    "exit_code", "tool_input", "tool_response", "timestamp", "ts", "usage", "modelMetrics", "resourceSpans",
    "scopeSpans", "spans", "spanId", "parentSpanId", "traceId", "attributes", "status", "provenance", "id",
    "version", "hookInvocationId", "parentToolUseID", "toolUseResult", "tool_use_id", "name", "is_error",
])
WORDS = st.sampled_from([
    "user", "assistant", "progress", "agent_progress", "tool_use", "tool_result", "session.start",
    "session.format", "tool.execution_start", "tool.execution_complete", "hook.start", "hook.end",
    "session.shutdown", "assistant.usage", "PreToolUse", "PostToolUse", "invoke_agent", "execute_tool", "chat",
    "firewall.token_usage", "workflow.info", "agent.execution", "2026-01-02T03:04:05Z", "Read", "", "1",
])
JSON = st.recursive(
    st.none() | st.booleans() | st.integers(-2**70, 2**70) | st.floats(allow_nan=True) | WORDS | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(KEYS | st.text(max_size=4), inner, max_size=5),
    max_leaves=25,
)
RECORD = st.dictionaries(KEYS, JSON, max_size=8)
LINES = st.lists(RECORD | JSON, min_size=0, max_size=12)


def _check(fmt: Any, data: bytes, name: str) -> None:
    try:
        sessions = fmt.read(Source(name, data))
    except FormatError as exc:
        assert name in str(exc)  # the declared error names the file
        return
    for s in sessions:
        trace = s.trace()
        rate = tool_success_rate(trace, None)  # type: ignore[arg-type]
        assert 0 <= rate <= 1
        assert tool_failure_count(trace, None) <= len(trace["toolCalls"])  # type: ignore[arg-type]
        assert len(s.run().steps) == len(trace["toolCalls"])
        json.dumps(trace, default=str)


@SETTINGS
@given(st.binary(max_size=400))
def test_readers_on_any_bytes_only_raise_format_error(data: bytes) -> None:
    for fmt in FILE_FORMATS:
        _check(fmt, data, "in.jsonl")
    found = sniff("in.jsonl", data)
    assert found is None or found.kind in {f.kind for f in FILE_FORMATS}


@SETTINGS
@given(LINES)
def test_readers_on_any_json_lines_only_raise_format_error(records: list[Any]) -> None:
    data = b"\n".join(json.dumps(r).encode() for r in records)
    for fmt in FILE_FORMATS:
        _check(fmt, data, "in.jsonl")
        _check(fmt, json.dumps({"resourceSpans": records}).encode(), "in.json")


HOOK_EVENT = st.fixed_dictionaries({
    "session_id": st.sampled_from(["s1", "s2"]),
    "hook": st.sampled_from(["PreToolUse", "PostToolUse", "Stop"]),
    "tool": st.sampled_from(["Read", "Bash"]),
    "command": st.sampled_from(["a", "b"]),
})


@SETTINGS
@given(st.lists(HOOK_EVENT, max_size=14))
def test_hook_dedupe_is_idempotent_and_only_merges_pairs(events: list[dict[str, Any]]) -> None:
    once = dedupe(events)
    assert dedupe(once) == once
    pres = sum(phase(e) == "pre" for e in events)
    posts = sum(phase(e) == "post" for e in events)
    merged = len(events) - len(once)
    # Each merge joins one Pre and one Post; the other records stay.
    assert 0 <= merged <= min(pres, posts)
    assert sum(phase(e) == "other" for e in once) == sum(phase(e) == "other" for e in events)
