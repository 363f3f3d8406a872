"""Each input-format reader on the real public samples (tests/data/real/, PROVENANCE.md there)
and on synthetic edge cases (said so where they are: no licensed real hook log or OTLP export
was found, docs/formats.md §5–§7)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from graders.families.builtin import tool_failure_count, tool_success_rate
from graders.families.trace_rules.config import default_config
from graders.families.trace_rules.verdicts import grade_run
from graders.formats import FormatError, Source, formats, get_format, read_file, sniff
from graders.formats.hooks import dedupe
from graders.grading.registry import REGISTRY, PluginError

REAL = Path(__file__).resolve().parents[2] / "data" / "real"
SPOTTER = REAL / "claude_code" / "spotter-session-with-subagents"
SESSION = "ae4a77f8-aedd-4bc1-888f-c94edc91af04"


def _source(path: Path, related_root: Path | None = None) -> Source:
    related = {}
    if related_root is not None:
        related = {p.relative_to(related_root).as_posix(): p.read_bytes()
                   for p in sorted(related_root.rglob("subagents/*.jsonl"))}
    return Source(str(path), path.read_bytes(), related)


def _lines(*objs: dict[str, Any]) -> bytes:
    return b"".join(json.dumps(o).encode() + b"\n" for o in objs)


# ---- registry ---------------------------------------------------------------------------------

def test_every_format_is_in_the_one_registry_under_its_kind() -> None:
    names = REGISTRY.names("input_format")
    assert sorted(names) == ["agy", "aw-session", "claude-code", "claude-stream-json", "codex-exec", "codex-rollout",
                             "copilot-cli", "gemini-chat", "gemini-stream-json", "gh-aw", "goose", "hook-log",
                             "opencode", "otel-genai", "pi"]
    assert [f.kind for f in formats()] == list(names)
    assert all(get_format(k).kind == k for k in names)
    assert [f.kind for f in formats() if f.folder] == ["gh-aw"]
    with pytest.raises(PluginError, match="no input_format named 'nope'"):
        get_format("nope")


@pytest.mark.parametrize(("path", "kind"), [
    (f"claude_code/spotter-session-with-subagents/{SESSION}.jsonl", "claude-code"),
    ("claude_code/spotter-short/short.jsonl", "claude-code"),
    ("claude_code/spotter-tool-heavy/tool_heavy.jsonl", "claude-code"),
    ("claude_code/spotter-subagent-progress/subagent.jsonl", "claude-code"),
    ("gh_aw_logs/ghaw-copilot-routed-gpt-responses/agent-session.jsonl", "copilot-cli"),
    ("gh_aw_logs/ghaw-copilot-subagent-failed-and-alias/agent-session.jsonl", "copilot-cli"),
    ("aw_session/ghaw-copilot-cross-family/aw_session.jsonl", "aw-session"),
    ("gh_aw_logs/ghaw-claude-awf-steering-notices/usage/aw_session.jsonl", "aw-session"),
])
def test_real_samples_are_sniffed_as_their_format(path: str, kind: str) -> None:
    data = (REAL / path).read_bytes()
    fmt = sniff(path, data[:65536])
    assert fmt is not None and fmt.kind == kind
    # Unambiguous: no other file format claims it, so the registry's order does not matter.
    assert [f.kind for f in formats() if not f.folder and f.sniff(path, data[:65536])] == [kind]


def test_a_token_usage_file_is_no_session() -> None:
    path = REAL / "gh_aw_logs/ghaw-copilot-routed-gpt-responses/sandbox/firewall/logs/api-proxy-logs/token-usage.jsonl"
    with pytest.raises(FormatError, match="not a recognised agent session or trace format"):
        read_file(Source(str(path), path.read_bytes()))


# ---- Claude Code ------------------------------------------------------------------------------

def test_claude_subagent_steps_follow_their_task_call_attributed() -> None:
    (s,) = read_file(_source(SPOTTER / f"{SESSION}.jsonl", SPOTTER))
    assert s.kind == "claude-code" and s.run_id == SESSION and s.created_at.startswith("2026-02-12T14:11:56")
    names = [c.name for c in s.calls]
    task = names.index("Task")
    sub = [c for c in s.calls if c.agent is not None]
    # The subagent file holds 12 tool calls; the compaction file is no subagent.
    assert len(sub) == 12 and {c.agent for c in sub} == {"aac57f5"}
    assert s.calls[task + 1 : task + 13] == sub
    assert len(s.calls) == 24
    run = s.run()
    assert [st.agent for st in run.steps].count("aac57f5") == 12


def test_claude_usage_counts_each_response_once() -> None:
    (s,) = read_file(_source(SPOTTER / f"{SESSION}.jsonl", SPOTTER))
    main = [u for u in s.usage if u.agent is None]
    lines = [json.loads(x) for x in (SPOTTER / f"{SESSION}.jsonl").read_text().splitlines()]
    ids = {o["message"]["id"] for o in lines if o.get("type") == "assistant" and not o.get("isSidechain")
           and isinstance(o.get("message", {}).get("usage"), dict)}
    assert len(main) == len(ids)
    trace = s.trace()
    assert trace["totalRequests"] == len(s.usage) == len(trace["steps"])
    assert trace["totalInputTokens"] == sum(u.input for u in s.usage)


def test_claude_progress_lines_are_the_subagent_when_no_file() -> None:
    (s,) = read_file(_source(REAL / "claude_code/spotter-subagent-progress/subagent.jsonl"))
    sub = [c for c in s.calls if c.agent is not None]
    assert len(sub) >= 1 and all(c.agent for c in sub)
    # Not both: with the subagent file present, its progress lines add nothing.
    (with_file,) = read_file(_source(SPOTTER / f"{SESSION}.jsonl", SPOTTER))
    (without,) = read_file(_source(SPOTTER / f"{SESSION}.jsonl"))
    assert [c.name for c in with_file.calls] == [c.name for c in without.calls]


def test_claude_failed_tool_results_fail_their_calls() -> None:
    (s,) = read_file(_source(REAL / "claude_code/spotter-short/short.jsonl"))
    assert [c.ok for c in s.calls] == [False, False]
    trace = s.trace()
    assert tool_failure_count(trace, None) == 2 and tool_success_rate(trace, None) == 0  # type: ignore[arg-type]


def test_claude_file_of_other_lines_only_is_refused() -> None:
    with pytest.raises(FormatError, match="no Claude Code transcript lines"):
        read_file(Source("x.jsonl", _lines({"type": "file-history-snapshot", "messageId": "m", "snapshot": {}})))


# ---- Copilot CLI ------------------------------------------------------------------------------

def test_copilot_shutdown_metrics_are_the_tokens_without_cache() -> None:
    path = REAL / "gh_aw_logs/ghaw-copilot-routed-gpt-responses/agent-session.jsonl"
    (s,) = read_file(_source(path))
    assert s.run_id == "70d39a99-d463-4864-83a9-959f20c1feb7" and s.repository == "example-org/routing-sandbox"
    (u,) = s.usage
    # inputTokens 97,401 = 12 fresh + 70,123 cache read + 27,266 cache write (docs/formats.md §3)
    assert (u.model, u.input, u.cache_read, u.cache_write, u.output, u.requests) == (
        "gpt-5.6-luna", 12, 70123, 27266, 535, 4)
    assert s.trace()["totalRequests"] == 4


def test_unified_session_usage_is_the_input_without_cache() -> None:
    # Each firewall.token_usage record: a GPT request's inputTokens hold its cache reads (the
    # /responses API), a Claude request's do not. Fresh input by hand, from the file's first nine
    # records (the parent's): 4,701 + (5,099 - 4,698) + (8,622 - 5,096) + (8,725 - 5,850)
    # + (9,061 - 8,722) for GPT, 3 + 3 + 6 + 6 for Claude = 11,860.
    (s, *_) = read_file(_source(REAL / "aw_session/ghaw-pi-claude-two-subagents/aw_session.jsonl"))
    gpt = [u for u in s.usage if u.model == "gpt-5.6-luna" and u.agent is None]
    claude = [u for u in s.usage if u.model and u.model.startswith("claude") and u.agent is None]
    assert [u.input for u in gpt][:5] == [4701, 401, 3526, 2875, 339]
    assert sum(u.input for u in claude) == 18 and all(u.cache_read + u.cache_write > 0 for u in claude)
    assert sum(u.input for u in s.usage if u.agent is None) == 11860


def test_copilot_subagent_error_is_not_the_runs() -> None:
    (s,) = read_file(_source(REAL / "gh_aw_logs/ghaw-copilot-subagent-failed-and-alias/agent-session.jsonl"))
    assert s.delivered is True


V1_START = {"type": "session.start", "data": {"sessionId": "s-1", "copilotVersion": "1.0.90",
                                              "startTime": "2026-11-01T09:00:00Z"}, "id": "e0"}
V0_START = {"type": "session.start", "data": {"sessionId": "s-0", "version": 1, "copilotVersion": "0.0.405",
                                              "startTime": "2026-02-01T09:00:00Z"}, "id": "e0"}


def test_copilot_1x_input_subagents_and_hooks() -> None:
    """Synthetic: the 1.0.x shapes documented in docs/formats.md §3."""
    data = _lines(
        V1_START,
        {"type": "hook.start", "data": {"hookInvocationId": "h1", "hookType": "preToolUse", "input": {}}},
        {"type": "hook.end", "data": {"hookInvocationId": "h1", "hookType": "preToolUse", "success": True}},
        {"type": "tool.execution_start", "data": {"toolCallId": "a", "toolName": "view", "input": {"path": "x.py"}}},
        {"type": "tool.execution_complete", "data": {"toolCallId": "a", "success": True, "result": {"content": "ok"}}},
        {"type": "tool.execution_start", "agentId": "sub-1",
         "data": {"toolCallId": "b", "toolName": "bash", "input": {"command": "make"}}},
        {"type": "tool.execution_complete", "agentId": "sub-1",
         "data": {"toolCallId": "b", "success": False, "error": {"message": "exit 2"}}},
        {"type": "hook.start", "data": {"hookInvocationId": "h2", "hookType": "postToolUse"}},
        {"type": "hook.end", "data": {"hookInvocationId": "h2", "success": False, "error": "hook crashed"}},
        {"type": "assistant.usage", "data": {"model": "m", "inputTokens": 110, "cacheReadTokens": 100,
                                             "outputTokens": 5, "duration": 900}},
    )
    (s,) = read_file(Source("events.jsonl", data))
    assert [(c.name, c.args, c.ok, c.agent) for c in s.calls] == [
        ("view", {"path": "x.py"}, True, None), ("bash", {"command": "make"}, False, "sub-1")]
    assert s.calls[1].error == "exit 2"
    assert any("postToolUse hook failed: hook crashed" in w for w in s.warnings)
    assert [(u.input, u.cache_read, u.duration_ms) for u in s.usage] == [(10, 100, 900.0)]
    assert s.created_at == "2026-11-01T09:00:00+00:00"


def test_copilot_0x_arguments_and_error_session() -> None:
    """Synthetic: 0.0.x puts the arguments in ``arguments``; a main-agent error fails the run."""
    data = _lines(
        V0_START,
        {"type": "tool.execution_start", "data": {"toolCallId": "a", "toolName": "str_replace_editor",
                                                  "arguments": {"command": "view", "path": "README.md"}}},
        {"type": "tool.execution_complete", "data": {"toolCallId": "a", "success": True}},
        {"type": "session.error", "data": {"message": "rate limited"}},
    )
    (s,) = read_file(Source("events.jsonl", data))
    assert s.calls[0].args == {"command": "view", "path": "README.md"} and s.delivered is False
    assert grade_run(s.run(), default_config()).verdict == "fail"


# ---- unified agent session --------------------------------------------------------------------

def test_aw_session_tokens_are_the_agent_phase_firewall_records() -> None:
    (s,) = read_file(_source(REAL / "gh_aw_logs/ghaw-claude-awf-steering-notices/usage/aw_session.jsonl"))
    assert s.run_id == "37971713032" and s.workflow is not None
    # 1,338 = 1,332 + 2 + 2 + 2 (docs/formats.md §1.4): the detection phase's records are not the agent's
    assert s.trace()["totalInputTokens"] == 1338 and len(s.usage) == 4
    assert s.usage[0].purpose == "routing_classification"


def test_aw_session_other_version_is_refused() -> None:
    data = _lines({"type": "session.format", "data": {"version": 2}})
    with pytest.raises(FormatError, match="version 2 is not supported"):
        read_file(Source("aw_session.jsonl", data))


def test_aw_session_failed_tool_and_exit_code() -> None:
    """Synthetic: explicit failure forms (T-UAS-014) and a non-zero agent exit code."""
    data = _lines(
        {"type": "session.format", "data": {"version": 1}},
        {"type": "workflow.info", "timestamp": "2026-10-01T00:00:00Z", "data": {"workflow": "triage", "runId": 9}},
        {"type": "tool.execution_start", "data": {"toolCallId": "1", "toolName": "create_pull_request", "input": {}}},
        {"type": "tool.execution_complete", "data": {"toolCallId": "1", "isError": True, "error": "403"}},
        {"type": "tool.execution_start", "provenance": {"phase": "detection"},
         "data": {"toolCallId": "2", "toolName": "x", "input": {}}},
        {"type": "agent.execution", "data": {"exitCode": 1}},
    )
    (s,) = read_file(Source("aw_session.jsonl", data))
    assert (s.workflow, s.run_id, s.delivered) == ("triage", "9", False)
    assert [(c.name, c.ok, c.error) for c in s.calls] == [("create_pull_request", False, "403")]


# ---- hook logs (synthetic: no licensed real log was found) ---------------------------------------

HOOK = [
    {"ts": "2026-11-02T10:00:00Z", "session_id": "s1", "hook": "PreToolUse", "tool": "Read", "command": "src/a.py",
     "exit_code": ""},
    {"ts": "2026-11-02T10:00:01Z", "session_id": "s1", "hook": "PostToolUse", "tool": "Read", "command": "src/a.py",
     "exit_code": "", "output_preview": "def a(): ..."},
    {"ts": "2026-11-02T10:00:02Z", "session_id": "s1", "hook": "PreToolUse", "tool": "Bash", "command": "make test",
     "exit_code": ""},
    {"ts": "2026-11-02T10:00:09Z", "session_id": "s1", "hook": "PostToolUse", "tool": "Bash", "command": "make test",
     "exit_code": 2, "output_preview": "FAILED"},
    {"ts": "2026-11-02T10:00:10Z", "session_id": "s2", "hook": "PreToolUse", "tool": "Grep", "command": "TODO"},
]


def test_hook_log_pre_post_are_one_call_paths_from_command() -> None:
    sessions = read_file(Source("audit.jsonl", _lines(*HOOK)))
    assert [s.run_id for s in sessions] == ["s1", "s2"]
    s1 = sessions[0]
    assert [(c.name, c.args, c.ok) for c in s1.calls] == [
        ("Read", {"file_path": "src/a.py"}, True), ("Bash", {"command": "make test"}, False)]
    assert s1.calls[1].error == "exit code 2" and s1.calls[0].observation == "def a(): ..."
    assert s1.created_at == "2026-11-02T10:00:00+00:00"
    # A Pre with no Post: a call with no result recorded (not a failure).
    assert [(c.name, c.ok) for c in sessions[1].calls] == [("Grep", None)]
    assert tool_failure_count(s1.trace(), None) == 1  # type: ignore[arg-type]


def test_hook_log_event_shape() -> None:
    """Synthetic: Claude Code's hook payload with ``event``/``hook_event_name``."""
    data = _lines(
        {"event": "PreToolUse", "ts": 1793000000, "session_id": "c1", "hook_event_name": "PreToolUse",
         "tool_name": "Edit", "tool_input": {"file_path": "a.py", "old_string": "x", "new_string": "y"}},
        {"event": "post_tool_use", "ts": 1793000001, "session_id": "c1", "hook_event_name": "PostToolUse",
         "tool_name": "Edit", "tool_input": {"file_path": "a.py", "old_string": "x", "new_string": "y"},
         "tool_response": {"success": False, "error": "old_string not found"}},
    )
    (s,) = read_file(Source("hooks.jsonl", data))
    assert [(c.name, c.args["file_path"], c.ok, c.error) for c in s.calls] == [
        ("Edit", "a.py", False, "old_string not found")]


def test_dedupe_keeps_unpaired_and_repeated_calls() -> None:
    pre = {"session_id": "s", "hook": "PreToolUse", "tool": "Bash", "command": "ls"}
    post = {**pre, "hook": "PostToolUse"}
    # Two calls of the same command, each logged Pre and Post, stay two calls.
    assert len(dedupe([pre, post, pre, post])) == 2
    assert len(dedupe([post, post])) == 2  # Posts with no Pre are calls of their own
    assert len(dedupe([pre, pre, post])) == 2


# ---- OTLP GenAI (synthetic: the semantic-conventions shapes of docs/formats.md §6) ------------------

def _attr(key: str, value: Any) -> dict[str, Any]:
    if isinstance(value, bool):
        return {"key": key, "value": {"boolValue": value}}
    if isinstance(value, int):
        return {"key": key, "value": {"intValue": str(value)}}
    return {"key": key, "value": {"stringValue": value}}


def _span(sid: str, parent: str | None, name: str, start: int, attrs: dict[str, Any],
          status: dict[str, Any] | None = None) -> dict[str, Any]:
    span = {"traceId": "t" * 32, "spanId": sid, "name": name, "kind": 1,
            "startTimeUnixNano": str(start * 10**9), "endTimeUnixNano": str((start + 1) * 10**9),
            "attributes": [_attr(k, v) for k, v in attrs.items()], "status": status or {}}
    if parent:
        span["parentSpanId"] = parent
    return span


def otlp(*spans: dict[str, Any]) -> bytes:
    return json.dumps({"resourceSpans": [{
        "resource": {"attributes": [_attr("service.name", "svc")]},
        "scopeSpans": [{"scope": {"name": "x"}, "spans": list(spans)}]}]}).encode()


AGENT = {"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "triage", "gen_ai.conversation.id": "c-7"}


def test_otlp_agent_span_is_a_run_tools_are_steps() -> None:
    data = otlp(
        _span("a", None, "invoke_agent triage", 1793000000, AGENT),
        _span("l", "a", "chat gpt-5", 1793000001, {
            "gen_ai.operation.name": "chat", "gen_ai.request.model": "gpt-5", "gen_ai.usage.input_tokens": 1200,
            "gen_ai.usage.cache_read.input_tokens": 1000, "gen_ai.usage.output_tokens": 50}),
        _span("t1", "a", "execute_tool get_issue", 1793000002, {
            "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "get_issue",
            "gen_ai.tool.call.id": "call_1", "gen_ai.tool.call.arguments": '{"number": 7}',
            "gen_ai.tool.call.result": "issue 7"}),
        _span("t2", "a", "execute_tool add_label", 1793000003, {
            "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "add_label", "error.type": "403"},
            {"code": 2, "message": "forbidden"}),
        _span("n", "a", "invoke_agent helper", 1793000004, {"gen_ai.operation.name": "invoke_agent",
                                                             "gen_ai.agent.name": "helper"}),
        _span("t3", "n", "execute_tool search", 1793000005, {"gen_ai.tool.name": "search"}),
    )
    (s,) = read_file(Source("trace.json", data))
    assert (s.run_id, s.workflow, s.delivered) == ("c-7", "triage", True)
    assert [(c.name, c.call_id, c.args, c.ok, c.agent) for c in s.calls] == [
        ("get_issue", "call_1", {"number": 7}, True, None), ("add_label", None, {}, False, None),
        ("search", None, {}, True, "helper")]
    assert s.calls[0].observation == "issue 7" and s.calls[1].error == "forbidden"
    (u,) = s.usage
    assert (u.input, u.cache_read, u.output, u.model, u.duration_ms) == (200, 1000, 50, "gpt-5", 1000.0)
    assert s.created_at is not None and s.created_at.startswith("2026-10-26")


def test_otlp_failed_agent_is_not_delivered_and_lines_shape() -> None:
    doc = otlp(_span("a", None, "invoke_agent x", 1793000000, AGENT, {"code": "STATUS_CODE_ERROR"}),
               _span("t", "a", "execute_tool y", 1793000001, {"gen_ai.operation.name": "execute_tool",
                                                                "gen_ai.tool.name": "y"}))
    (s,) = read_file(Source("trace.jsonl", doc + b"\n"))
    assert s.delivered is False and grade_run(s.run(), default_config()).verdict == "fail"


def test_otlp_without_genai_spans_is_refused() -> None:
    with pytest.raises(FormatError, match="none is a GenAI span"):
        read_file(Source("t.json", otlp(_span("a", None, "GET /", 1793000000, {"http.method": "GET"}))))


def test_hook_log_one_record_per_call_shape() -> None:
    """Synthetic: what PostToolUse audit scripts in public dotfiles write (no hook name)."""
    data = _lines({"timestamp": "2026-11-03T08:00:00+01:00", "session": "d1", "tool": "Write", "cwd": "/w",
                   "input": {"file_path": "notes.md", "content": "x"}},
                  {"timestamp": "2026-11-03T08:00:05+01:00", "session": "d1", "tool": "Bash", "success": True})
    (s,) = read_file(Source("post-tool.jsonl", data))
    assert s.kind == "hook-log" and s.run_id == "d1" and s.created_at == "2026-11-03T07:00:00+00:00"
    assert [(c.name, c.args.get("file_path"), c.ok) for c in s.calls] == [("Write", "notes.md", True), ("Bash", None, True)]


def test_otlp_parent_cycle_does_not_hang() -> None:
    """Synthetic: two agent spans that name each other as parent (a broken export)."""
    data = otlp(_span("a", "b", "invoke_agent x", 1793000000, AGENT),
                _span("b", "a", "invoke_agent y", 1793000001, AGENT),
                _span("t", "a", "execute_tool z", 1793000002, {"gen_ai.tool.name": "z"}))
    sessions = read_file(Source("cycle.json", data))
    assert sum(len(s.calls) for s in sessions) == 1


def test_trace_input_of_one_claude_file_reads_its_subagents() -> None:
    from graders.formats.files import read_input

    (s,) = read_input(str(SPOTTER / f"{SESSION}.jsonl"), lambda _: None)
    assert sum(c.agent == "aac57f5" for c in s.calls) == 12
