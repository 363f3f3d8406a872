"""The engines' readers (issue 41) on the cases their real samples do not hold. Every file here is
synthetic, built from the formats' documented shapes (docs/formats.md §8) and says so."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from graders.formats import FormatError, Source, formats, read_file
from graders.formats.codex import output_failure
from graders.formats.evidence import read_evidence
from graders.formats.session import Call, merge_gateway
from graders.prepare_sessions import session_date
from graders.runs.runfiles import memory_run_files

REAL = Path(__file__).resolve().parents[2] / "data" / "real"


def lines(*records: Any) -> bytes:
    return b"".join((r if isinstance(r, bytes) else json.dumps(r).encode()) + b"\n" for r in records)


def one(name: str, data: bytes) -> Any:
    sessions = read_file(Source(name, data))
    assert len(sessions) == 1
    return sessions[0]


# ---- Claude Code: newer transcripts, and the print-mode stream ----------------------------------

@pytest.mark.parametrize("first", [
    {"type": "mode", "mode": "normal", "sessionId": "s"},
    {"type": "permission-mode", "permissionMode": "default", "sessionId": "s"},
    {"type": "file-history-snapshot", "messageId": "m", "snapshot": {}, "isSnapshotUpdate": False},
    {"type": "queue-operation", "operation": "enqueue", "sessionId": "s", "timestamp": "2026-10-01T00:00:00Z"},
    {"type": "summary", "summary": "x", "leafUuid": "u"},
    {"type": "attachment", "sessionId": "s", "attachment": {}},
    {"type": "ai-title", "sessionId": "s", "title": "t"},
    {"type": "system", "subtype": "local_command", "sessionId": "s", "content": "x"},
])
def test_newer_claude_transcripts_are_read_whatever_record_opens_them(first: dict[str, Any]) -> None:
    real = (REAL / "claude_code/spotter-tool-heavy/tool_heavy.jsonl").read_bytes()
    session = one("t.jsonl", lines(first, {"type": "unknown-next", "sessionId": "s"}) + real)
    assert session.kind == "claude-code"
    assert len(session.calls) == 6  # the real sample's calls, as without the leading records
    assert any("unknown-next" in w for w in session.warnings)


def _init(sid: str) -> dict[str, Any]:
    return {"type": "system", "subtype": "init", "session_id": sid, "model": "claude-x", "tools": []}


def _use(sid: str, tid: str, name: str = "Bash", parent: str | None = None) -> dict[str, Any]:
    return {"type": "assistant", "session_id": sid, "parent_tool_use_id": parent,
            "message": {"id": f"msg-{tid}", "model": "claude-x", "content": [
                {"type": "tool_use", "id": tid, "name": name, "input": {"command": "ls"}}],
                "usage": {"input_tokens": 3, "output_tokens": 5, "cache_read_input_tokens": 100}}}


def _result(sid: str, tid: str, error: bool = False) -> dict[str, Any]:
    return {"type": "user", "session_id": sid, "parent_tool_use_id": None,
            "message": {"content": [{"type": "tool_result", "tool_use_id": tid, "is_error": error, "content": "x"}]}}


def test_claude_stream_appended_runs_are_runs_and_a_cut_off_one_warns() -> None:
    data = lines(_init("a"), _use("a", "t1"), _result("a", "t1", True),
                 {"type": "result", "subtype": "success", "is_error": False, "session_id": "a",
                  "usage": {"input_tokens": 9, "output_tokens": 4, "cache_read_input_tokens": 7}},
                 _init("a"), _use("a", "t2"), _use("a", "t3", "mcp__github__get_issue", parent="t2"))
    first, second = read_file(Source("stdout.jsonl", data))
    assert [len(first.calls), len(second.calls)] == [1, 2]
    assert first.calls[0].ok is False and first.tokens is not None and first.tokens.input == 9
    assert (first.attempt, second.attempt) == (None, 2)  # the resumed session id is its next attempt
    assert any("has no result record" in w for w in second.warnings)
    assert second.calls[1].agent == "t2" and second.calls[1].server == "github"
    assert second.tokens is not None and second.tokens.source == "assistant message usage"


def test_claude_stream_permission_denial_fails_its_call() -> None:
    data = lines(_init("a"), _use("a", "t1"), {"type": "result", "subtype": "success", "session_id": "a",
                                               "permission_denials": [{"tool_use_id": "t1", "tool_name": "Bash"}]})
    call = one("s.jsonl", data).calls[0]
    assert (call.ok, call.error) == (False, "permission denied")


def test_claude_streamed_usage_keeps_a_responses_last_record_and_the_result_bills_every_model() -> None:
    """A response is written once per content block, its output as far as streaming went: the last
    record counts. The result's modelUsage (subagents' models too) is the bill the cost graders read."""
    first, later = _use("a", "t1"), _use("a", "t2")
    later["message"]["id"] = first["message"]["id"]
    later["message"]["usage"] = {**first["message"]["usage"], "output_tokens": 40}
    sub = _use("a", "t3", parent="t1")
    sub["message"]["model"] = "claude-small"
    result = {"type": "result", "subtype": "success", "session_id": "a",
              "usage": {"input_tokens": 3, "output_tokens": 45, "cache_read_input_tokens": 100},
              "modelUsage": {"claude-x": {"inputTokens": 3, "outputTokens": 52, "cacheReadInputTokens": 100,
                                          "cacheCreationInputTokens": 7},
                             "claude-small": {"inputTokens": 4, "outputTokens": 9, "cacheReadInputTokens": 0,
                                              "cacheCreationInputTokens": 0}}}
    s = one("s.jsonl", lines(_init("a"), first, later, sub, result))
    assert [(u.model, u.output) for u in s.usage] == [("claude-x", 40), ("claude-small", 5)]
    assert [(b.model, b.input, b.output, b.cache_read, b.cache_write, b.requests) for b in s.billed] == [
        ("claude-small", 4, 9, 0, 0, 1), ("claude-x", 3, 52, 100, 7, 1)]
    assert s.tokens is not None and (s.tokens.input, s.tokens.output, s.tokens.source) == (7, 61, "result.modelUsage")
    transcript = one("t.jsonl", (REAL / "claude_code/spotter-tool-heavy/tool_heavy.jsonl").read_bytes())
    assert sum(u.output for u in transcript.usage) == 212  # each message id's last line (its first lines': 64)


# ---- Codex ----------------------------------------------------------------------------------------

@pytest.mark.parametrize(("output", "failed"), [
    ('{"output":"ok\\n","metadata":{"exit_code":0,"duration_seconds":0.1}}', False),
    ('{"output":"cat: x: No such file\\n","metadata":{"exit_code":1,"duration_seconds":0.1}}', True),
    ("Chunk ID: a\nWall time: 0.1 seconds\nProcess exited with code 0\nOutput:\nok", False),
    ("Chunk ID: a\nWall time: 0.1 seconds\nProcess exited with code 127\nOutput:\n", True),
    ("Exit code: 2\nWall time: 0.1 seconds\nOutput:\n", True),
    ("Chunk ID: a\nProcess running with session ID 4823\nOutput:\n", False),
    ("write_stdin failed: stdin is closed for this session; rerun exec_command with tty=true", True),
    ("exec_command failed for `/bin/zsh -lc 'rm -rf /tmp/x'`: CreateProcess { message: \"Rejected(\\\"approval "
     "required by policy, but AskForApproval is set to Never\\\")\" }", True),
    ("failed to parse function arguments: missing field `cmd`", True),
    ("execution error: Sandbox(Denied { output: ... })", True),
    ({"content": "boom", "success": False}, True),
    ("Success. Updated the following files:\nM a.py", False),
])
def test_codex_outputs_across_cli_generations(output: Any, failed: bool) -> None:
    assert (output_failure(output) is not None) == failed


def test_codex_exec_items_declined_and_unanswered() -> None:
    data = lines({"type": "thread.started", "thread_id": "th"},
                 {"type": "item.started", "item": {"id": "i1", "type": "command_execution", "command": "rm -rf /",
                                                   "status": "in_progress"}},
                 {"type": "item.completed", "item": {"id": "i1", "type": "command_execution", "command": "rm -rf /",
                                                     "status": "declined"}},
                 {"type": "item.completed", "item": {"id": "i2", "type": "mcp_tool_call", "server": "github",
                                                     "tool": "get_issue", "status": "failed",
                                                     "error": {"message": "403"}}},
                 {"type": "item.started", "item": {"id": "i3", "type": "web_search", "query": "x"}},
                 {"type": "item.completed", "item": {"id": "i4", "type": "todo_list", "items": []}},
                 {"type": "turn.completed", "usage": {"input_tokens": 100, "cached_input_tokens": 60,
                                                      "output_tokens": 5}})
    s = one("codex.jsonl", data)
    assert [(c.name, c.ok) for c in s.calls] == [("command_execution", False), ("get_issue", False),
                                                 ("web_search", None)]
    assert s.calls[1].server == "github"
    assert s.tokens is not None and (s.tokens.input, s.tokens.cache_read, s.tokens.input_includes_cache) == (100, 60, True)
    assert s.usage[0].input == 40


# ---- Gemini ---------------------------------------------------------------------------------------

def test_gemini_stream_json() -> None:
    data = lines({"type": "init", "timestamp": "2026-10-01T00:00:00Z", "session_id": "g", "model": "gemini-2.5-pro"},
                 {"type": "message", "role": "assistant", "content": " ", "delta": True},
                 {"type": "tool_use", "tool_name": "run_shell_command", "tool_id": "t1", "parameters": {"command": "ls"}},
                 {"type": "tool_result", "tool_id": "t1", "status": "success", "output": ""},
                 {"type": "tool_use", "tool_name": "read_file", "tool_id": "t2", "parameters": {}},
                 {"type": "tool_result", "tool_id": "t2", "status": "error", "output": "",
                  "error": {"type": "FILE_NOT_FOUND", "message": "no such file"}},
                 {"type": "result", "status": "success", "stats": {"input_tokens": 900, "output_tokens": 40,
                                                                  "cached": 600, "duration_ms": 1200, "tool_calls": 2}})
    s = one("gemini.jsonl", data)
    assert s.kind == "gemini-stream-json" and [c.ok for c in s.calls] == [True, False]
    assert s.calls[1].error == "no such file"
    assert s.tokens is not None and s.tokens.input_includes_cache is True and s.usage[0].input == 300


def test_gemini_chat_journal_last_record_of_an_id_wins_and_rewinds_keep_calls() -> None:
    call = {"id": "c1", "name": "write_file", "args": {"file_path": "a"}, "timestamp": "2026-10-01T00:00:01Z"}
    data = lines({"sessionId": "g", "projectHash": "h", "startTime": "2026-10-01T00:00:00Z", "kind": "main"},
                 {"id": "u1", "timestamp": "2026-10-01T00:00:00Z", "type": "user", "content": [{"text": "go"}]},
                 {"id": "m1", "timestamp": "2026-10-01T00:00:01Z", "type": "gemini", "content": "",
                  "toolCalls": [{**call, "status": "executing"}]},
                 {"$set": {"lastUpdated": "2026-10-01T00:00:02Z"}},
                 {"id": "m1", "timestamp": "2026-10-01T00:00:01Z", "type": "gemini", "content": "done",
                  "toolCalls": [{**call, "status": "error"}], "model": "gemini-2.5-pro",
                  "tokens": {"input": 50, "output": 5, "cached": 20, "total": 55}},
                 {"id": "m2", "timestamp": "2026-10-01T00:00:03Z", "type": "gemini", "content": "",
                  "toolCalls": [{"id": "c2", "name": "read_file", "args": {}, "status": "cancelled"}]},
                 {"$rewindTo": "m2"},
                 b'{"id": "m3", "timestamp": "2026-10-01T00:00:04Z", "type": "gem')  # a torn trailing write
    s = one("session-2026.jsonl", data)
    assert s.kind == "gemini-chat" and s.run_id == "g"
    assert [(c.call_id, c.ok) for c in s.calls] == [("c1", False), ("c2", False)]
    assert any("rewind" in w for w in s.warnings)
    assert s.tokens is not None and s.tokens.input == 50


# ---- Pi -------------------------------------------------------------------------------------------

PI_USAGE = {"input": 10, "output": 4, "cacheRead": 100, "cacheWrite": 7, "totalTokens": 121}


def test_pi_session_file_and_its_stream_read_the_same_calls_and_usage_once() -> None:
    assistant = {"role": "assistant", "content": [{"type": "toolCall", "id": "tc1", "name": "bash",
                                                   "arguments": {"command": "ls"}}],
                 "model": "claude-x", "usage": PI_USAGE, "stopReason": "toolUse", "timestamp": 1791000000000}
    result = {"role": "toolResult", "toolCallId": "tc1", "toolName": "bash",
              "content": [{"type": "text", "text": "nope"}], "isError": True, "timestamp": 1791000001000}
    header = {"type": "session", "version": 3, "id": "pi-1", "timestamp": "2026-10-01T00:00:00Z", "cwd": "/w"}
    session_file = lines(header, {"type": "message", "id": "a", "parentId": None, "message": assistant},
                         {"type": "message", "id": "b", "parentId": "a", "message": result})
    stream = lines(header, {"type": "agent_start"}, {"type": "message_end", "message": assistant},
                   {"type": "tool_execution_start", "toolCallId": "tc1", "toolName": "bash", "args": {"command": "ls"}},
                   {"type": "tool_execution_end", "toolCallId": "tc1", "toolName": "bash",
                    "result": {"content": [{"type": "text", "text": "nope"}]}, "isError": True},
                   {"type": "turn_end", "message": assistant, "toolResults": [result]})
    for name, data in (("pi-session.jsonl", session_file), ("pi-streaming.jsonl", stream)):
        s = one(name, data)
        assert s.kind == "pi" and [(c.call_id, c.ok) for c in s.calls] == [("tc1", False)], name
        assert len(s.usage) == 1 and s.tokens is not None and s.tokens.input_includes_cache is False, name


# ---- dates ----------------------------------------------------------------------------------------

HOOK_BAD_TS = lines({"ts": "2026-06-06T08:43:20.3NZ", "session_id": "s1", "hook": "PostToolUse", "tool": "Bash",
                     "command": "ls", "exit_code": 0})


def test_a_timestamp_that_does_not_parse_gives_its_date_part() -> None:
    s = one("audit.jsonl", HOOK_BAD_TS)
    assert (s.created_at, s.date_part) == (None, "2026-06-06")
    assert session_date(s, "hooks", "audit.jsonl", None) == "2026-06-06"
    assert any("is not ISO 8601" in w and "2026-06-06" in w for w in s.warnings)


def test_no_date_at_all_is_the_modification_time_with_a_warning_else_a_dead_letter() -> None:
    garbled = HOOK_BAD_TS.replace(b"2026-06-06T08:43:20.3NZ", b"June 6th, late")
    s = one("audit.jsonl", garbled)
    assert session_date(s, "hooks", "audit.jsonl", 1791000000.0) == "2026-10-03"
    assert any("modification time" in w for w in s.warnings)
    with pytest.raises(ValueError, match=r"cannot determine the session's date .*June 6th"):
        session_date(one("audit.jsonl", garbled), "hooks", "audit.jsonl", None)
    assert session_date(one("audit.jsonl", garbled), "hooks/2026-01-02", "audit.jsonl", 1791000000.0) == "2026-01-02"


# ---- a gh-aw run folder: the engine's stdout, the gateway, each call once -------------------------

RPC = lines(
    {"direction": "OUT", "type": "REQUEST", "server_id": "github", "method": "tools/call",
     "payload": {"jsonrpc": "2.0", "method": "tools/call", "params": {"name": "get_issue", "arguments": {}}}},
    {"direction": "IN", "type": "RESPONSE", "server_id": "github",
     "payload": {"jsonrpc": "2.0", "id": 1, "result": {"content": [{"type": "text", "text": "403"}], "isError": True}}},
    {"direction": "OUT", "type": "REQUEST", "server_id": "safeoutputs", "method": "tools/call",
     "payload": {"jsonrpc": "2.0", "method": "tools/call", "params": {"name": "noop", "arguments": {}}}},
)


def test_a_claude_run_folder_counts_stdout_and_gateway_calls_once() -> None:
    stdout = (b"[entrypoint] starting\n" + lines(_init("a"), _use("a", "t1", "mcp__github__get_issue"),
                                                 _result("a", "t1"), _use("a", "t2"), _result("a", "t2"))
              + b"Process exiting with code: 0\n")
    files = memory_run_files({"aw_info.json": json.dumps({"engine_id": "claude"}).encode(),
                              "agent-stdio.log": stdout, "mcp-logs/rpc-messages.jsonl": RPC})
    ev = read_evidence(files, {"engine_id": "claude"}, None, {"toolCalls": [], "nativeToolCalls": []})
    assert ev.calls_source == "agent-stdio.log (claude-stream-json)"
    # t1 is the gateway's github get_issue (one call, failed: the gateway saw isError); the
    # safeoutputs noop only the gateway saw (never answered). The trace rules read them all.
    assert [(c.name, c.ok) for c in ev.step_calls] == [("mcp__github__get_issue", False), ("Bash", True),
                                                       ("noop", None)]
    n = ev.call_counts
    assert (n.calls, n.errors, n.unanswered, n.native) == (3, 1, 1, 2)
    assert n.listed == (("mcp__github__get_issue", "github", None, "t1", "403"),)
    assert ev.gateway_file == "mcp-logs/rpc-messages.jsonl"


def test_a_run_prefers_its_unified_session_over_the_engine_log() -> None:
    unified = (REAL / "aw_session/ghaw-pi-claude-two-subagents/aw_session.jsonl").read_bytes()
    files = memory_run_files({"usage/aw_session.jsonl": unified, "agent-stdio.log": lines(_init("a"), _use("a", "t"))})
    ev = read_evidence(files, {"engine_id": "claude"}, None, {})
    assert ev.calls_source == "usage/aw_session.jsonl" and ev.call_counts.calls == len(ev.step_calls) == 5
    assert ev.engine_tokens is not None and ev.engine_tokens.input_includes_cache is False


def test_a_copilot_run_keeps_the_trace_for_the_trace_rules() -> None:
    native = [{"source": "agent", "name": "bash", "tool": "bash", "completed": True, "success": False,
               "status": "error", "error": {"message": "x"}, "toolCallId": "c1"},
              {"source": "agent", "name": "view", "tool": "view", "completed": False, "toolCallId": "c2"}]
    ev = read_evidence(memory_run_files({"aw_info.json": b"{}"}), {"engine_id": "copilot"}, None,
                       {"nativeToolCalls": native, "toolCalls": native})
    assert (ev.call_counts.calls, ev.call_counts.errors, ev.call_counts.unanswered) == (2, 1, 1)
    assert ev.step_calls == ()  # the trace rules keep reading the trace


def test_merge_gateway_spellings() -> None:
    agent = [Call("github-get_issue", server="github"), Call("safeoutputs_add_comment"), Call("Bash")]
    gateway = [Call("get_issue", ok=False, server="github"), Call("add_comment", ok=True, server="safeoutputs"),
               Call("get_issue", ok=True, server="github")]
    merged = merge_gateway(agent, gateway)
    assert [(c.name, c.ok) for c in merged] == [("github-get_issue", False), ("safeoutputs_add_comment", True),
                                                ("Bash", None), ("get_issue", True)]


def test_every_real_sample_is_claimed_by_its_format_alone() -> None:
    file_formats = [f for f in formats() if not f.folder]
    for path in sorted(REAL.rglob("*")):
        if path.suffix not in (".jsonl", ".json", ".log") or "gh_aw_logs" in path.parts[-4:-1] \
                or path.name in ("token-usage.jsonl", "agent_usage.json", "aw_info.json", "model-routing.jsonl", "summary.json"):
            continue
        rel = path.relative_to(REAL).as_posix()
        head = path.read_bytes()[:65536]
        claimed = [f.kind for f in file_formats if f.sniff(rel, head)]
        assert len(claimed) == 1, (rel, claimed)


def test_an_unrecognised_log_is_refused_by_every_reader() -> None:
    with pytest.raises(FormatError, match="not a recognised agent session"):
        read_file(Source("build.log", b"make: *** [all] Error 2\n{\"level\": \"info\"}\n"))


def test_a_first_line_longer_than_the_sniffed_head_still_names_its_format() -> None:
    meta = {"timestamp": "2026-10-01T00:00:00Z", "type": "session_meta",
            "payload": {"id": "s", "base_instructions": {"text": "x" * 70000}}}
    rollout = json.dumps(meta, separators=(",", ":")).encode()
    assert [f.kind for f in formats() if not f.folder and f.sniff("rollout-1.jsonl", rollout[:65536])] == ["codex-rollout"]
    init = json.dumps({"type": "system", "subtype": "init", "session_id": "s", "tools": ["t" * 100] * 700},
                      separators=(",", ":")).encode()
    assert [f.kind for f in formats() if not f.folder and f.sniff("out.jsonl", init[:65536])] == ["claude-stream-json"]
