"""The observed layer's reader (graders/formats/evidence.py): conclusions, MCP pairing, safe-output
errors, cached token usage and archived grades, on the real samples and on synthetic edge cases.

The real corpus has no licensed ``rpc-messages.jsonl``, ``run_summary.json`` or ``agent-stdio.log``
(docs/formats.md §7), so those cases rebuild the shapes §1.4 describes from the unlicensed runs
21986494867 (two GitHub MCP calls answered 403 with ``isError``) and 21823619609 (agent exit 1,
``conclusion: failure``): synthetic, and said so.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from graders.formats.evidence import pair_rpc_records, read_evidence, response_error
from graders.runs.runfiles import local_run_files, memory_run_files

REAL = Path(__file__).resolve().parents[1] / "data" / "real" / "gh_aw_logs"


def jsonl(*records: Any) -> bytes:
    return b"".join(json.dumps(r).encode() + b"\n" for r in records)


def request(server: str, method: str = "tools/call", tool: str = "", rpc_id: Any = None) -> dict[str, Any]:
    payload: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
    if tool:
        payload["params"] = {"name": tool, "arguments": {}}
    if rpc_id is not None:
        payload["id"] = rpc_id
    return {"timestamp": "2026-02-17T10:00:00.123456789Z", "direction": "OUT", "type": "REQUEST",
            "server_id": server, "method": method, "payload": payload}


def response(server: str, result: Any = None, rpc_id: Any = 1, error: Any = None) -> dict[str, Any]:
    payload: dict[str, Any] = {"jsonrpc": "2.0", "id": rpc_id}
    if error is not None:
        payload["error"] = error
    else:
        payload["result"] = result
    return {"timestamp": "2026-02-17T10:00:01.5Z", "direction": "IN", "type": "RESPONSE",
            "server_id": server, "payload": payload}


def text_result(text: str, is_error: bool = False) -> dict[str, Any]:
    return {"content": [{"type": "text", "text": text}], "isError": is_error}


FORBIDDEN = "failed to get user: GET https://api.github.com/user: 403 Resource not accessible by integration []"
PR_ERROR = json.dumps({"result": "error", "error": "create_pull_request: no changes to commit"})

# The 403 run's gateway log, as run 21986494867 wrote it (ids repeat; requests carry none),
# plus two errored create_pull_request calls and one successful safe output.
RPC_403 = jsonl(
    request("github", "tools/list"),
    request("safeoutputs", "tools/list"),
    response("safeoutputs", {"tools": [{"name": "create_pull_request"}]}, 2),
    response("github", {"tools": [{"name": "get_me"}]}, 1),
    request("github", tool="get_me"),
    response("github", text_result(FORBIDDEN, True), 1),
    request("github", tool="list_starred_repositories"),
    response("github", text_result(FORBIDDEN.replace("/user", "/user/starred"), True), 1),
    request("safeoutputs", tool="create_pull_request"),
    response("safeoutputs", text_result(PR_ERROR), 3),
    request("safeoutputs", tool="create_pull_request"),
    response("safeoutputs", text_result(PR_ERROR), 4),
    request("safeoutputs", tool="missing_tool"),
    response("safeoutputs", text_result('{"result":"success"}'), 5),
)
STDIO_FAILED = (b"[INFO] Starting agent container\n[entrypoint] running copilot\n"
                b"[WARN] Command completed with exit code: 1\nProcess exiting with code: 1\n")
RUN_SUMMARY_FAILED = json.dumps({"cli_version": "v0.43.18", "run_id": 21823619609,
                                 "run": {"databaseId": 21823619609, "status": "completed", "conclusion": "failure"},
                                 "job_details": [{"name": "agent", "conclusion": "failure"}]}).encode()


def test_the_403_run_pairs_every_call_and_counts_its_errors():
    ev = read_evidence(memory_run_files({"mcp-logs/rpc-messages.jsonl": RPC_403}))
    calls = ev.tool_calls
    assert [(c.server, c.tool, c.outcome) for c in calls] == [
        ("github", "get_me", "error"), ("github", "list_starred_repositories", "error"),
        ("safeoutputs", "create_pull_request", "error"), ("safeoutputs", "create_pull_request", "error"),
        ("safeoutputs", "missing_tool", "ok")]
    assert "403 Resource not accessible" in calls[0].error
    assert calls[2].error == "create_pull_request: no changes to commit"
    # tools/list requests are paired with tools/list-shaped responses, not the calls' answers.
    assert [c.response_line for c in ev.mcp_calls if c.method == "tools/list"] == [4, 3]
    assert ev.mcp_orphan_responses == ()
    assert [(e.type, e.source) for e in ev.safe_output_errors] == [
        ("create_pull_request", "mcp-logs/rpc-messages.jsonl")] * 2


def test_the_failed_run_concludes_failure_from_every_source():
    ev = read_evidence(memory_run_files({"run_summary.json": RUN_SUMMARY_FAILED, "agent-stdio.log": STDIO_FAILED}),
                       {"workflow_run_conclusion": "failure"})
    assert [(c.source, c.value, c.outcome) for c in ev.conclusions] == [
        ("run_summary.json", "failure", "failure"), ("aw_info.json", "failure", "failure"),
        ("agent-stdio.log", "exit code 1", "failure")]
    assert ev.conclusion == "failure" and ev.conclusion_source is not None
    assert ev.conclusion_source.source == "run_summary.json"


def test_any_failing_source_fails_the_run_and_neutral_ones_say_nothing():
    ev = read_evidence(memory_run_files({
        "run_summary.json": json.dumps({"run": {"conclusion": "success"}}).encode(),
        "agent-stdio.log": b"Process exiting with code: 2\n"}))
    assert ev.conclusion == "failure" and ev.conclusion_source.source == "agent-stdio.log"
    assert read_evidence(memory_run_files({"run_summary.json": b'{"run": {"conclusion": "skipped"}}'})).conclusion is None
    assert read_evidence(memory_run_files({"agent-stdio.log": b"no exit line here\n"})).conclusions == ()


def test_the_real_unified_sessions_conclude_success():
    claude = read_evidence(local_run_files(REAL / "ghaw-claude-awf-steering-notices"))
    assert [(c.source, c.value) for c in claude.conclusions] == [
        ("session.result", "success"), ("agent.execution", "exit code 0")]
    copilot = read_evidence(local_run_files(REAL / "ghaw-copilot-routed-gpt-responses"))
    assert [(c.source, c.outcome) for c in copilot.conclusions] == [("agent.execution", "success")]
    # A subagent's failing session.result (agentId) is not the run's conclusion.
    failed_child = read_evidence(local_run_files(REAL / "ghaw-copilot-subagent-failed-and-alias"))
    assert failed_child.conclusion is None


def test_a_session_result_of_the_detection_phase_or_a_subagent_is_ignored():
    session = jsonl(
        {"type": "session.result", "data": {"status": "error"}, "agentId": "child-1"},
        {"type": "session.result", "data": {"status": "error"}, "provenance": {"phase": "detection"}},
        {"type": "session.result", "data": {"status": "error_max_turns"}, "provenance": {"phase": "agent"}},
    )
    ev = read_evidence(memory_run_files({"usage/aw_session.jsonl": session}))
    assert [(c.value, c.outcome) for c in ev.conclusions] == [("error_max_turns", "failure")]


def test_real_token_usage_keeps_cache_counts_and_purpose():
    ev = read_evidence(local_run_files(REAL / "ghaw-copilot-subagent-failed-and-alias"))
    assert ev.token_file == "sandbox/firewall/logs/api-proxy-logs/token-usage.jsonl"
    assert len(ev.token_records) == 11
    assert ev.token_records[0].purpose == "routing_classification"
    assert any(r.cache_read for r in ev.token_records)


def test_token_usage_of_a_usage_only_download_is_read_from_the_usage_artifact():
    record = {"input_tokens": 2, "output_tokens": 5, "cache_read_tokens": 100, "cache_write_tokens": 7,
              "purpose": "", "model": "claude-opus-5"}
    ev = read_evidence(memory_run_files({"usage/agent/token_usage.jsonl": jsonl(record)}))
    # download_layout maps the usage copy to the sandbox path the job had it at.
    assert ev.token_file == "sandbox/firewall/logs/api-proxy-logs/token-usage.jsonl"
    assert [(r.input, r.cache_read, r.cache_write) for r in ev.token_records] == [(2, 100, 7)]


def test_safe_output_errors_json_counts_each_failure():
    report = {"timestamp": "2026-10-02T00:00:00Z", "status": "failure", "errorCode": "ERR_SAFE_OUTPUT",
              "failures": [{"type": "create_pull_request", "error": "rejected"}, {"type": "add_comment"}]}
    ev = read_evidence(memory_run_files({"safe-output-errors.json": json.dumps(report).encode()}))
    assert [(e.type, e.message) for e in ev.safe_output_errors] == [("create_pull_request", "rejected"),
                                                                    ("add_comment", "")]
    assert ev.safe_output_sources == ("safe-output-errors.json",)


def test_the_archived_grader_results_are_read_from_every_archive_folder():
    doc = {"version": 1, "results": [{"id": "tool-success-rate", "value": 0.5, "status": "fail", "message": "m"},
                                     {"id": 7}, "junk"]}
    for folder in ("agent/graders", "graders", "usage/graders"):
        ev = read_evidence(memory_run_files({f"{folder}/grader_results.json": json.dumps(doc).encode()}))
        assert ev.archived_results is not None
        assert [(a.id, a.value, a.status) for a in ev.archived_results] == [("tool-success-rate", 0.5, "fail")]
        assert dict(ev.malformed)[ev.archived_file] == 2


def test_malformed_lines_are_skipped_and_counted():
    rpc = RPC_403 + b"{not json\n[1, 2]\n" + b"null\n" + b'{"type": "RESPONSE", "server_id": "nobody"}\n'
    ev = read_evidence(memory_run_files({"mcp-logs/rpc-messages.jsonl": rpc,
                                         "run_summary.json": b"\xff\xfe not json"}))
    assert len(ev.tool_calls) == 5
    assert dict(ev.malformed) == {"mcp-logs/rpc-messages.jsonl": 3, "run_summary.json": 1}
    assert ev.mcp_orphan_responses == (18,)


def test_jsonrpc_errors_transport_failures_and_unanswered_requests_are_errors():
    rpc = jsonl(
        request("a", tool="x", rpc_id=7),
        request("a", tool="y", rpc_id=8),
        response("a", rpc_id=8, error={"code": -32603, "message": "internal"}),
        {"type": "RESPONSE", "server_id": "a", "error": "connection reset", "payload": {"id": 7}},
        request("b", tool="z"),
        {"event": "rpc_request", "server_id": "c", "payload": {"method": "tools/call", "params": {"name": "w"}}},
        {"event": "rpc_response", "server_id": "c", "payload": {"id": 1, "result": text_result("fine")}},
    )
    calls = read_evidence(memory_run_files({"mcp-logs/rpc-messages.jsonl": rpc})).tool_calls
    assert [(c.server, c.tool, c.outcome) for c in calls] == [
        ("a", "x", "error"), ("a", "y", "error"), ("b", "z", "unanswered"), ("c", "w", "ok")]
    assert calls[0].error == "transport: connection reset"
    assert calls[1].error == "JSON-RPC error -32603: internal"


def test_response_error_reads_each_error_shape():
    assert response_error(response("s", text_result("ok"))) is None
    assert response_error(response("s", text_result("boom", True))) == "boom"
    assert response_error(response("s", text_result('{"result":"error","message":"no"}'))) == "no"
    assert response_error(response("s", text_result('{"result":"success"}'))) is None


# --- pairing properties ------------------------------------------------------------------------

SERVERS = st.sampled_from(["github", "safeoutputs", "playwright"])
METHODS = st.sampled_from(["tools/call", "tools/list"])


@st.composite
def server_logs(draw: st.DrawFn) -> dict[str, list[dict[str, Any]]]:
    """Per server, a request/response sequence in the gateway's order: responses only answer
    earlier requests (some never answered), ids present or absent, some responses unasked for."""
    logs: dict[str, list[dict[str, Any]]] = {}
    for server in draw(st.lists(SERVERS, min_size=1, max_size=3, unique=True)):
        records: list[dict[str, Any]] = []
        open_requests: list[tuple[str, Any]] = []
        with_ids = draw(st.booleans())
        for n in range(draw(st.integers(0, 12))):
            step = draw(st.sampled_from(["request", "request", "response", "orphan"]))
            if step == "request" or (step == "response" and not open_requests):
                method = draw(METHODS)
                rid = n if with_ids else None
                records.append(request(server, method, "t" if method == "tools/call" else "", rid))
                open_requests.append((method, rid))
            elif step == "response":
                method, rid = open_requests.pop(0)
                result = {"tools": []} if method == "tools/list" else text_result("x", draw(st.booleans()))
                records.append(response(server, result, rid if rid is not None else 1))
            else:  # a response of a method nothing asked for on this server
                records.append(response(server, {"protocolVersion": "2025-06-18"}, 999))
        logs[server] = records
    return logs


def interleave(logs: dict[str, list[dict[str, Any]]], order: list[int]) -> list[tuple[int, dict[str, Any]]]:
    """The servers' records merged in one order that keeps each server's own order."""
    queues = {s: list(r) for s, r in logs.items() if r}
    out: list[dict[str, Any]] = []
    i = 0
    while queues:
        servers = sorted(queues)
        s = servers[order[i % len(order)] % len(servers)] if order else servers[0]
        i += 1
        out.append(queues[s].pop(0))
        if not queues[s]:
            del queues[s]
    return list(enumerate(out, start=1))


@settings(max_examples=300, deadline=None)
@given(server_logs(), st.lists(st.integers(0, 5), max_size=40))
def test_pairing_never_invents_or_loses_a_request_or_a_response(logs, order):
    records = interleave(logs, order)
    calls, orphans, _ = pair_rpc_records(records)
    requests = [n for n, r in records if r["type"] == "REQUEST"]
    responses = [n for n, r in records if r["type"] == "RESPONSE"]
    assert sorted(c.request_line for c in calls) == requests  # every request once
    answered = [c.response_line for c in calls if c.response_line is not None]
    assert len(answered) == len(set(answered))  # no response answers two requests
    assert sorted(answered + orphans) == responses  # every response paired or an orphan
    by_line = dict(records)
    for c in calls:
        assert c.response_line is None or c.response_line > c.request_line  # answers come after
        if c.response_line is not None:
            assert by_line[c.response_line]["server_id"] == c.server  # within its server
    assert all(by_line[n]["payload"]["id"] == 999 for n in orphans)  # only unasked-for answers are orphans


@settings(max_examples=300, deadline=None)
@given(server_logs(), st.lists(st.integers(0, 5), max_size=40), st.lists(st.integers(0, 5), max_size=40))
def test_pairing_is_invariant_to_interleaving_across_servers(logs, first, second):
    def summary(order: list[int]) -> list[tuple[str, str, str, str]]:
        calls, orphans, _ = pair_rpc_records(interleave(logs, order))
        return [*sorted((c.server, c.method, c.outcome, c.error) for c in calls), ("orphans", "", "", str(len(orphans)))]

    assert summary(first) == summary(second)


# Copilot CLI 0.0.4xx debug log (docs/formats.md §1.4): timestamped lines, multi-line JSON bodies after
# "[DEBUG] data:", model responses as chat completions. Synthetic, in the shape §1.4 describes.
def _completion(n_calls: int) -> list[str]:
    body = {"choices": [{"message": {"role": "assistant", "tool_calls": [
        {"id": f"call_{i}", "type": "function", "function": {"name": "github-get_issue", "arguments": "{}"}}
        for i in range(n_calls)]}}], "usage": {"prompt_tokens": 10}}
    return json.dumps(body, indent=2).splitlines()


DEBUG_LOG = "\n".join([
    "2026-02-17T10:00:00.000Z [INFO] Starting Copilot CLI: 0.0.409",
    "2026-02-17T10:00:01.000Z [DEBUG] Adding tool: github-get_issue",
    "2026-02-17T10:00:02.000Z [DEBUG] data:", *_completion(2),
    "2026-02-17T10:00:03.000Z [DEBUG] data: {not json",
    "  still not json",
    "2026-02-17T10:00:04.000Z [DEBUG] data:", *_completion(1),
    "2026-02-17T10:00:05.000Z [DEBUG] data: {\"choices\": [{\"message\": {\"content\": \"done\"}}]}",
]).encode()
LOG = "sandbox/agent/logs/process-1739786400000-42.log"


def test_a_copilot_run_whose_tool_calls_are_only_in_its_debug_log_is_marked():
    evidence = read_evidence(memory_run_files({"agent_output.json": b"{}", LOG: DEBUG_LOG}))
    [warning] = [w for w in evidence.warnings if w.startswith(LOG)]
    assert "3 tool call(s)" in warning and "graders see none" in warning
    assert dict(evidence.malformed)[LOG] == 1  # the body that is not JSON, counted


def test_a_copilot_run_with_session_events_is_not_marked():
    events = "sandbox/agent/logs/copilot-session-state/s1/events.jsonl"
    evidence = read_evidence(memory_run_files({LOG: DEBUG_LOG, events: b"{}\n"}))
    assert not [w for w in evidence.warnings if w.startswith(LOG)]


# --- token usage: the block decode against the per-line rule ----------------------------------

_COUNT_VALUES = st.one_of(
    st.integers(min_value=-3, max_value=2**60), st.floats(allow_nan=False), st.booleans(), st.none(),
    st.text(max_size=3), st.just(2**53 + 1), st.lists(st.integers(), max_size=2),
)
_TOKEN_FIELDS = ("input_tokens", "output_tokens", "cache_read_tokens", "cache_write_tokens", "purpose", "model",
                 "reasoning_tokens", "ai_credits_this_response", "ai_credits_total", "input_tokens_include_cache",
                 "request_id", "event", "timestamp")


def fields(record: Any) -> tuple[Any, ...]:
    """Every field of a token record (the cost fields too), for comparing two readings."""
    from graders.formats.evidence import TokenRecord

    return tuple(getattr(record, f) for f in TokenRecord.__struct_fields__)


@st.composite
def token_lines(draw: st.DrawFn) -> bytes:
    """A token-usage line: mostly records of the real shape, with odd values, duplicate keys,
    non-records, broken JSON, blanks and padding mixed in."""
    kind = draw(st.sampled_from(["record", "record", "record", "dup", "other", "raw"]))
    if kind == "raw":
        return draw(st.sampled_from([b"", b"  ", b"null", b"[1]", b'"x"', b"{not json", b'{"input_tokens": 1}{}',
                                     b'{"input_tokens": 1, "x": "\\ud800"}', b'{"input_tokens": 1e400}',
                                     b'{"output_tokens": 2, "x": 1e400}', b'{"output_tokens": 3, "x": "\xff"}',
                                     b'{"input_tokens": 12345678901234567890}', b"\x0b{}\x0c",
                                     b'{"output_tokens": 2, "x": 123456789012345678901234567890}',
                                     b'{"input_tokens": 9007199254740993, "output_tokens": 1}']))
    if kind == "other":
        return json.dumps(draw(st.one_of(st.integers(), st.lists(st.integers(), max_size=2), st.none()))).encode()
    record = {}
    for key in draw(st.lists(st.sampled_from(_TOKEN_FIELDS), unique=True)):
        record[key] = draw(st.one_of(_COUNT_VALUES, st.sampled_from(["", "router", "gpt-5", "Claude-x", 0.25, 1e-7,
                                                                     "2026-01-02T00:00:00Z", {"a": 1}])))
    text = json.dumps(record)
    if kind == "dup" and record:
        text = text[:-1] + f', "{next(iter(record))}": {draw(st.integers(min_value=0, max_value=9))}' + "}"
    pad = draw(st.sampled_from(["", " ", "\t", "\r"]))
    return (pad + text + pad).encode()


def _token_records_per_line(data: bytes) -> tuple[list[tuple[Any, ...]], int]:
    """The per-line rule alone: every line parsed with parse_json, as the reference reads it."""
    from graders.formats.evidence import _Reading, _record, _token_record

    reading = _Reading()
    records: list[Any] = []
    for raw in data.split(b"\n"):
        rec = _record(raw, "t", reading)
        if rec is not None:
            _token_record(rec, "t", reading, records)
    return [fields(r) for r in records], reading.malformed["t"]


@settings(max_examples=300, deadline=None)
@given(st.lists(token_lines(), max_size=30))
def test_token_usage_reads_every_line_as_the_per_line_rule_does(lines):
    data = b"\n".join(lines)
    ev = read_evidence(memory_run_files({"token-usage.jsonl": data}))
    want, malformed = _token_records_per_line(data)
    assert [fields(r) for r in ev.token_records] == want
    assert dict(ev.malformed).get("token-usage.jsonl", 0) == malformed


def test_a_block_of_real_shaped_token_lines_is_decoded_whole():
    from graders.formats.evidence import _Reading, _token_batch
    from graders.jsrt.jsonio import LineBatch

    lines = [json.dumps({"model": "gpt-5", "input_tokens": 10 + i, "output_tokens": "7", "cache_read_tokens": i,
                         "purpose": "agent", "request_id": f"r{i}"}).encode() for i in range(3)]
    lines.append(b'{"model": "claude", "input_tokens": "12"}')  # no numeric count: not a record
    reading, records = _Reading(), []
    assert _token_batch(LineBatch(lines, (b"\n".join(lines),), True), "t", reading, records)
    assert [(r.input, r.output, r.cache_read, r.model) for r in records] == [(10, 0, 0, "gpt-5"), (11, 0, 1, "gpt-5"),
                                                                            (12, 0, 2, "gpt-5")]
    assert reading.malformed["t"] == 1
    # A count beyond 2**53 is a double in JavaScript: the block is left to the line rule. One that
    # is not read (request_id) changes nothing.
    for line, decoded in ((b'{"input_tokens": 9007199254740993}', False), (b'{"input_tokens": 9007199254740992}', True),
                          (b'{"input_tokens": 1, "request_id": 90071992547409930}', True)):
        assert _token_batch(LineBatch([line], (line,), True), "t", _Reading(), []) is decoded


_SANDBOX_TOKENS = "sandbox/firewall/logs/api-proxy-logs/token-usage.jsonl"


@settings(max_examples=100, deadline=None)
@given(st.lists(token_lines(), max_size=20), st.sampled_from([_SANDBOX_TOKENS, "token-usage.jsonl"]))
def test_token_records_read_from_preprocessings_blocks_are_the_ones_read_apart(lines, rel):
    from graders.formats.evidence import TokenLines
    from graders.formats.ghaw.preprocess import PreprocessReport, preprocess

    data = b"\n".join(lines)
    alone = read_evidence(memory_run_files({rel: data}))
    files = memory_run_files({rel: data})
    report, tokens = PreprocessReport(), TokenLines()
    preprocess(files, report, tokens.feed)
    tokens.finish(report.sources.get("tokenUsage"))
    shared = read_evidence(files, None, tokens)
    assert (shared.token_file, shared.token_records, shared.malformed) == (alone.token_file, alone.token_records,
                                                                          alone.malformed)


_REAL_COUNT = st.one_of(st.integers(0, 60_000), st.integers(0, 60_000), st.integers(0, 60_000),
                        st.sampled_from(["12", "", "x", 2**53 - 1, 2**53, -1, 1.5, None]))


@st.composite
def real_token_lines(draw: st.DrawFn) -> bytes:
    """A token-usage line of the shape real logs write (both counts, cache counts, a duration,
    purpose, model, fields no reader reads), now and then a string, odd or absent count."""
    record: dict[str, Any] = {"timestamp": "2026-01-02T00:00:00Z", "request_id": draw(st.sampled_from(["r1", 12345678901234567890])),
                              "model": draw(st.sampled_from(["gpt-5", "claude-x", "", None]))}
    for key in ("input_tokens", "output_tokens", "cache_read_tokens", "cache_write_tokens", "duration_ms"):
        if draw(st.integers(0, 9)):  # mostly present
            record[key] = draw(_REAL_COUNT)
    if draw(st.booleans()):
        record["purpose"] = draw(st.sampled_from(["agent", "routing_classification", 3]))
    if draw(st.booleans()):  # AWF's AI Credits and cache semantics (a string or bool now and then)
        for key in ("ai_credits_this_response", "ai_credits_total"):
            record[key] = draw(st.one_of(st.floats(0, 50), st.floats(0, 50), st.sampled_from([-1, "0.5", True, None, 0])))
        record["event"] = "token_usage"
        if draw(st.booleans()):
            record["input_tokens_include_cache"] = draw(st.sampled_from([True, False, "yes", None]))
        if draw(st.booleans()):
            record["reasoning_tokens"] = draw(_REAL_COUNT)
    return json.dumps(record).encode()


@settings(max_examples=200, deadline=None)
@given(st.lists(st.one_of(real_token_lines(), real_token_lines(), real_token_lines(), token_lines()), max_size=40),
       st.sampled_from([120, 400, 1 << 16]))
def test_real_shaped_token_blocks_shared_with_preprocessing_read_as_the_per_line_rule(lines, block):
    """Blocks decoded whole as ``TokenUsageLine`` (once, by preprocessing, and handed over) and
    every other block give the per-line rule's records and malformed count."""
    from unittest.mock import patch

    import graders.runs.runfiles
    from graders.formats.evidence import TokenLines
    from graders.formats.ghaw.preprocess import PreprocessReport, preprocess

    data = b"\n".join(lines)
    want, malformed = _token_records_per_line(data)
    with patch.object(graders.runs.runfiles, "READ_BLOCK", block):
        alone = read_evidence(memory_run_files({_SANDBOX_TOKENS: data}))
        files = memory_run_files({_SANDBOX_TOKENS: data})
        report, tokens = PreprocessReport(), TokenLines()
        preprocess(files, report, tokens.feed)
        tokens.finish(report.sources.get("tokenUsage"))
        shared = read_evidence(files, None, tokens)
    for ev in (alone, shared):
        assert [fields(r) for r in ev.token_records] == want
        assert dict(ev.malformed).get(_SANDBOX_TOKENS, 0) == malformed
    assert shared.token_records == alone.token_records


def test_a_runs_token_log_is_read_once_for_preprocessing_and_the_observed_layer():
    from unittest.mock import patch

    from graders.prepare import prepare_run
    from graders.runs.runfiles import RunFiles

    record = {"input_tokens": 2, "output_tokens": 5, "cache_read_tokens": 100, "purpose": "", "model": "gpt-5"}
    files = memory_run_files({_SANDBOX_TOKENS: jsonl(record, record),
                              "aw_info.json": json.dumps({"workflow_name": "w", "run_id": 1,
                                                          "created_at": "2026-01-02T00:00:00Z"}).encode()})
    with patch.object(RunFiles, "iter_line_batches", autospec=True, side_effect=RunFiles.iter_line_batches) as reads:
        prep = prepare_run(files, "w/run-1")
    assert [call.args[1] for call in reads.call_args_list].count(_SANDBOX_TOKENS) == 1
    assert prep.evidence is not None and [r.cache_read for r in prep.evidence.token_records] == [100, 100]


def test_a_token_log_over_several_blocks_reads_as_the_per_line_rule_does():
    # Several 64 KiB blocks, lines split across them, and odd lines in some blocks only.
    lines = []
    for i in range(3000):
        record = {"timestamp": "2026-01-02T00:00:00Z", "model": "claude-x" if i % 7 else "gpt-5",
                  "input_tokens": i, "output_tokens": str(i) if i % 500 == 3 else i % 13, "request_id": f"r{i:06d}",
                  "cache_read_tokens": i // 2, "purpose": "router" if i % 11 == 0 else "agent"}
        lines.append(json.dumps(record).encode())
    lines[1700] = b"{broken"
    lines[2900] = b'{"input_tokens": 9007199254740993, "output_tokens": 1}'
    data = b"\n".join(lines) + b"\n"
    ev = read_evidence(memory_run_files({"token-usage.jsonl": data}))
    want, malformed = _token_records_per_line(data)
    assert [fields(r) for r in ev.token_records] == want
    assert dict(ev.malformed).get("token-usage.jsonl", 0) == malformed == 1
    assert len(data) > 4 * 64 * 1024
