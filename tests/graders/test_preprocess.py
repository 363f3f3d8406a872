import orjson
from hypothesis import given, settings
from hypothesis import strategies as st

from graders.formats.ghaw.preprocess import (
    GATEWAY_PATHS,
    TOKEN_USAGE_PATHS,
    PreprocessReport,
    preprocess,
    read_evals,
)
from graders.runs.runfiles import memory_run_files


def jl(*rows):
    return b"".join(orjson.dumps(r) + b"\n" for r in rows)


def test_first_candidate_wins_even_when_empty():
    files = memory_run_files({TOKEN_USAGE_PATHS[0]: b"", TOKEN_USAGE_PATHS[1]: jl({"input_tokens": 5})})
    assert preprocess(files)["tokenUsageEntries"] == []


def test_oversized_file_falls_back_with_warning():
    files = memory_run_files({GATEWAY_PATHS[1]: jl({"type": "tool_call", "tool_name": "x"})})
    files.sizes[GATEWAY_PATHS[0]] = 60 * 1024 * 1024
    report = PreprocessReport()
    trace = preprocess(files, report)
    assert [c["name"] for c in trace["toolCalls"]] == ["x"]
    assert any("skipping oversized file mcp-logs/gateway.jsonl" in w for w in report.warnings)


def test_null_line_is_dropped_and_reported():
    files = memory_run_files({GATEWAY_PATHS[0]: b'null\n{"retry": true}\n'})
    report = PreprocessReport()
    trace = preprocess(files, report)
    assert trace["retryEvents"] == [{"retry": True}]
    assert report.warnings == ["mcp-logs/gateway.jsonl: skipped 1 literal null line(s)"]


def test_gateway_classification_and_rpc_arguments():
    files = memory_run_files({GATEWAY_PATHS[2]: jl(
        {"method": "tools/call", "payload": {"params": {"name": "click", "arguments": {"s": 1}}}},
        {"type": "request", "message": "retryable"},
        {"level": "error"},
        {"event": "tool_call", "payload": {"params": {"x": 1}}, "server_id": "srv"},
    )})
    trace = preprocess(files)
    assert [c.get("name") for c in trace["toolCalls"]] == ["click", None] or trace["toolCalls"][0]["arguments"] == {"s": 1}
    assert trace["toolCalls"][0]["arguments"] == {"s": 1}
    assert trace["toolCalls"][1]["arguments"] == {"x": 1}
    assert trace["toolCalls"][1]["mcpServerName"] == "srv"
    assert len(trace["gatewayRequests"]) == 2
    assert len(trace["retryEvents"]) == 1
    assert len(trace["errorEvents"]) == 1


def test_native_fifo_and_dedupe():
    events = jl(
        {"type": "tool.execution_start", "data": {"toolName": "view", "toolCallId": "a", "input": {"p": 1}}},
        {"type": "tool.execution_start", "data": {"toolName": "view", "input": {"p": 2}}},
        {"type": "tool.execution_complete", "data": {"toolName": "view", "success": True}},
        {"type": "tool.execution_complete", "data": {"toolName": "bash", "success": False, "error": {"m": 1}}},
    )
    files = memory_run_files({
        "sandbox/agent/logs/copilot-session-state/s1/events.jsonl": events,
        GATEWAY_PATHS[0]: jl({"type": "tool_call", "tool_name": "VIEW", "payload": {"arguments": {"p": 1}}}),
    })
    trace = preprocess(files)
    native = trace["nativeToolCalls"]
    assert native[0]["completed"] is True and native[0]["success"] is True  # FIFO by name, even with an id
    assert native[1]["completed"] is False
    assert native[2] == {"source": "agent", "name": "bash", "tool": "bash", "completed": True, "success": False,
                         "status": "error", "error": {"m": 1}}
    assert len(trace["toolCalls"]) == 3  # the gateway duplicate of view {p:1} is absorbed


def test_evals_summary():
    files = memory_run_files({"evals.jsonl": jl({"id": "q1", "answer": "yes"}, {"id": "q2", "answer": "maybe"}, [1])})
    assert read_evals(files) == {"total": 3, "yes": 1, "no": 0, "unknown": 2, "byQuestion": {"q1": "YES", "q2": "UNKNOWN"}}
    assert read_evals(memory_run_files({"evals.jsonl": b""})) is None


artifact_paths = st.sampled_from([*TOKEN_USAGE_PATHS, *GATEWAY_PATHS, "agent_output.json", "agent_usage.json",
                                  "evals.jsonl", "sandbox/agent/logs/copilot-session-state/events.jsonl"])


@settings(max_examples=150, deadline=None)
@given(st.dictionaries(artifact_paths, st.binary(max_size=200), max_size=5))
def test_preprocess_never_raises_on_arbitrary_files(contents):
    files = memory_run_files(contents)
    trace = preprocess(files)
    assert list(trace)[:3] == ["tokenUsageEntries", "agentUsage", "mcpGatewayEntries"]
    assert trace["totalRequests"] == len(trace["steps"])
    read_evals(files)


# Token-usage columns: the block-wise conversions against their per-value definitions.
_MAX_SAFE = 2**53
_column_values = st.lists(
    st.one_of(
        st.integers(-(2**60), 2**60), st.integers(0, 50_000), st.integers(0, 50_000), st.floats(allow_nan=False),
        st.booleans(), st.none(), st.sampled_from(["", "12", "1e3", "x", " 7 ", "Infinity", "gpt-4", "0"]),
        st.lists(st.integers(0, 3), max_size=2), st.dictionaries(st.just("a"), st.integers(0, 3), max_size=1),
    ),
    max_size=40,
)


@settings(max_examples=400, deadline=None)
@given(_column_values)
def test_token_columns_match_their_per_value_definitions(raw):
    from graders.formats.ghaw.preprocess import _models, _numbers, _total
    from graders.jsrt.jscompat import js_number_or_zero, js_truthy

    numbers, safe = _numbers(list(raw))
    expected = [x if type(x) is int and -_MAX_SAFE <= x <= _MAX_SAFE else js_number_or_zero(x) for x in raw]
    assert [(type(v), v) for v in numbers] == [(type(v), v) for v in expected]
    assert safe == all(type(v) is int and -_MAX_SAFE <= v <= _MAX_SAFE for v in expected)
    total = 0
    for v in expected:
        total += v
    got = _total(0, numbers, safe)
    assert type(got) is type(total) and (got == total or (got != got and total != total))
    models = _models(list(raw))
    assert models == [(m or None) if type(m) is str else (m if js_truthy(m) else None) for m in raw]


def test_a_local_run_lists_regular_files_only_and_never_follows_a_symlink(tmp_path):
    import os

    from graders.runs.runfiles import local_run_files

    run = tmp_path / "run"
    (run / "mcp-logs" / "deep").mkdir(parents=True)
    (run / "aw_info.json").write_bytes(b"{}")
    (run / "mcp-logs" / "gateway.jsonl").write_bytes(b"{}\n{}\n")
    (run / "mcp-logs" / "deep" / "x.json").write_bytes(b"[]")
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.json").write_bytes(b"{}")
    os.symlink(outside / "secret.json", run / "agent_output.json")
    os.symlink(outside, run / "sandbox")
    os.mkfifo(run / "fifo")
    files = local_run_files(run)
    assert files.sizes == {"aw_info.json": 2, "mcp-logs/deep/x.json": 2, "mcp-logs/gateway.jsonl": 6}
    assert files.read("mcp-logs/gateway.jsonl") == b"{}\n{}\n"



@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.text(st.characters(blacklist_characters="/\0", blacklist_categories=("Cs",)), min_size=1),
                          st.sampled_from("dlfo")), unique_by=lambda e: e[0]))
def test_listing_items_sort_as_their_names(entries):
    """A folder listing is held as "<name>\0<kind>" strings: sorted, they come in name order
    (a name before its extensions: "run-1" < "run-1-attempt-2"), and split back exactly."""
    from graders.runs.runfiles import entry_item, split_entry

    items = sorted(entry_item(name, kind) for name, kind in entries)
    assert [split_entry(item) for item in items] == sorted(entries)


def test_a_listing_holds_each_entrys_kind_without_a_stat(tmp_path):
    import os

    from graders.runs.runfiles import DIR, FILE, LINK, OTHER, sorted_entries, split_entry

    (tmp_path / "run-1").mkdir()
    (tmp_path / "run-1-attempt-2").write_bytes(b"")
    os.symlink(tmp_path / "run-1", tmp_path / "run-1.link")
    os.symlink(tmp_path / "nowhere", tmp_path / "broken")
    os.mkfifo(tmp_path / "fifo")
    assert [split_entry(item) for item in sorted_entries(str(tmp_path))] == [
        ("broken", LINK), ("fifo", OTHER), ("run-1", DIR), ("run-1-attempt-2", FILE), ("run-1.link", LINK)]
    assert sorted_entries(str(tmp_path / "missing")) == []

_gateway_values = st.one_of(st.none(), st.booleans(), st.integers(0, 2), st.sampled_from(
    ["", "log", "tool_call", "tools/call", "request", "response", "retry", "error", "debug", "Retrying now", "ok",
     "RETRY", "réessayer retry", "x"]))


@settings(max_examples=300, deadline=None)
@given(st.lists(st.dictionaries(
    st.sampled_from(["type", "event", "method", "tool_name", "message", "retry", "level", "payload"]),
    st.one_of(_gateway_values, st.fixed_dictionaries({}, optional={"tool_name": _gateway_values})),
    max_size=5), max_size=12))
def test_gateway_subsets_match_the_reference_filters(records):
    import re

    from graders.formats.ghaw.toolcalls import is_gateway_tool_call
    from graders.jsrt.jscompat import js_truthy

    data = b"".join(orjson.dumps(r) + b"\n" for r in records)
    trace = preprocess(memory_run_files({GATEWAY_PATHS[0]: data}))
    retry = re.compile(r"retry|retrying", re.IGNORECASE)
    requests = [r for r in records if r.get("type") in ("request", "response") or js_truthy(r.get("method"))]
    retries = [r for r in records if r.get("retry") is True or r.get("event") == "retry"
               or (isinstance(r.get("message"), str) and retry.search(r["message"]))]
    errors = [r for r in records if "error" in (r.get("level"), r.get("type"), r.get("event"))]
    assert list(trace["gatewayRequests"]) == requests
    assert list(trace["retryEvents"]) == retries
    assert list(trace["errorEvents"]) == errors
    assert len(trace["toolCalls"]) == sum(map(is_gateway_tool_call, records))


_big_ints = st.sampled_from([12345678901234567890, -(2**60) - 1, 2**53 + 1, 9007199254740993, 10**15])


@settings(max_examples=200, deadline=None)
@given(st.lists(st.fixed_dictionaries(
    {"type": st.sampled_from(["tool_call", "log", "request"])},
    optional={"method": _big_ints | _gateway_values, "arguments": st.dictionaries(st.sampled_from(["id", "n"]), _big_ints),
              "tool_name": st.sampled_from(["t", None]), "level": _big_ints | st.just("error")}),
    max_size=10), st.sampled_from([40, 1 << 16]))
def test_gateway_lines_with_big_integers_read_as_json_parse_reads_them(records, block):
    """Gateway blocks are not scanned for 16-digit runs (records.DIGIT_SAFE): a kept line that
    holds an integer beyond 2**53 still loads as JSON.parse's record, the integer a double."""
    from unittest.mock import patch

    import graders.runs.runfiles
    from graders.formats.ghaw.toolcalls import is_gateway_tool_call
    from graders.jsrt.jsonio import JsonlStats, iter_jsonl

    lines = [orjson.dumps(r) for r in records]
    with patch.object(graders.runs.runfiles, "READ_BLOCK", block):
        trace = preprocess(memory_run_files({GATEWAY_PATHS[0]: b"\n".join(lines) + b"\n"}))
    reference = list(iter_jsonl(lines, JsonlStats()))  # the reference path: big ints are doubles
    entries = list(trace["mcpGatewayEntries"])
    assert repr(entries) == repr(reference)
    calls = [c for c in trace["toolCalls"] if "arguments" in c]
    assert repr([c["arguments"] for c in calls]) == repr(
        [r["arguments"] for r in reference if is_gateway_tool_call(r) and "arguments" in r])
    errors = [r for r in reference if r.get("level") == "error"]
    assert repr(list(trace["errorEvents"])) == repr(errors)


_token_counts = st.one_of(
    st.integers(0, 50_000), st.integers(0, 50_000), st.integers(0, 50_000), st.integers(-(2**53 - 1), 2**53 - 1),
    st.sampled_from([2**53 - 1, -(2**53 - 1), 2**53, -(2**53), 2**60, 0, -1]), st.none(), st.booleans(),
    st.floats(allow_nan=False, allow_infinity=False), st.sampled_from(["12", "", "x", "1e3"]),
)
_token_lines = st.lists(st.one_of(
    st.fixed_dictionaries({}, optional={"input_tokens": _token_counts, "output_tokens": _token_counts,
                                        "duration_ms": _token_counts, "model": st.sampled_from(["m", "", None, 3, 2**60, {"v": 2**60}])}),
    # The shape of real logs (both counts, mostly ints): whole blocks decode as TokenUsageLine.
    st.fixed_dictionaries({"input_tokens": st.integers(0, 50_000), "output_tokens": _token_counts},
                          optional={"duration_ms": _token_counts, "model": st.sampled_from(["m", "", "gpt-5"])}),
    st.just([1])), max_size=30)


@settings(max_examples=300, deadline=None)
@given(_token_lines, st.sampled_from([48, 200, 1 << 16]),
       st.sampled_from(["default", "usage-lines", "token-ints"]))
def test_strict_token_blocks_read_as_the_general_path_does(records, block, strict):
    """Blocks decoded as ``TokenUsageLine`` (both counts present, safe non-negative ints or
    strings) or ``TokenInts`` (safe-int counts, absent as 0) give the steps, totals, records and
    working-set factor that the general ``TokenRecord`` path gives."""
    from unittest.mock import patch

    import graders.formats.ghaw.preprocess
    import graders.runs.runfiles
    from graders.families.builtin import working_set_rebuild_factor
    from graders.formats.evidence import TokenUsageLine
    from graders.jsrt.lazylist import SafeInts
    from graders.jsrt.records import TokenInts

    files = {TOKEN_USAGE_PATHS[0]: jl(*records)}

    def read(strict_types):
        with (patch.object(graders.runs.runfiles, "READ_BLOCK", block),
              patch.object(graders.formats.ghaw.preprocess, "_STRICT_TOKENS", strict_types)):
            trace = preprocess(memory_run_files(files))
        return trace, working_set_rebuild_factor(trace, None)

    types = {"default": (TokenUsageLine, TokenInts), "usage-lines": (TokenUsageLine,), "token-ints": (TokenInts,)}
    (fast, fast_ws), (general, general_ws) = read(types[strict]), read(())
    assert list(fast["steps"]) == list(general["steps"])
    assert list(fast["tokenUsageEntries"]) == list(general["tokenUsageEntries"]) == records
    for key in ("totalInputTokens", "totalOutputTokens", "totalDurationMs", "totalRequests"):
        assert (type(fast[key]), fast[key]) == (type(general[key]), general[key])
    assert fast_ws == general_ws
    if strict == "usage-lines":
        return
    column = fast["tokenUsageEntries"].columns["input_tokens"]
    # A SafeInts when every block decodes as TokenInts (safe-int or string counts, a string or
    # null model; 16-digit runs included: TokenInts is digit-safe) and no input count is a string.
    counts = [r.get(k, 0) if isinstance(r, dict) else None for r in records
              for k in ("input_tokens", "output_tokens", "duration_ms")]
    safe = (all(type(v) is str or (type(v) is int and abs(v) < 2**53) for v in counts)
            and all(type(r.get("model")) in (str, type(None)) for r in records if isinstance(r, dict))
            and not any(type(r.get("input_tokens")) is str for r in records if isinstance(r, dict)))
    assert (type(column) is SafeInts) == safe
