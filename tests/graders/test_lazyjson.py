"""Lazy trace collections: the batch JSONL path, equality, pickling, JSON, and the token columns."""

import pickle
from unittest.mock import patch

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from graders.families.builtin import working_set_rebuild_factor
from graders.families.inline_js.sandbox import payload_json
from graders.formats.ghaw.preprocess import TOKEN_USAGE_PATHS, preprocess
from graders.grading.registry import GraderContext
from graders.jsrt.jscompat import js_number_or_zero, js_stringify, js_truthy
from graders.jsrt.jsonio import JsonlStats, Parsed, iter_jsonl, parse_jsonl_items
from graders.jsrt.lazyjson import JsonLines, count_column, load_item
from graders.jsrt.lazylist import TokenSteps
from graders.runs.runfiles import memory_run_files

# Lines that exercise every rule: records, scalars, blanks, invalid text, literal null,
# JavaScript-only whitespace, long digit runs (beyond 2**53), bad UTF-8, CRLF.
special_lines = st.sampled_from([
    b'{"a":1}', b"  ", b"", b"oops", b"null", b" null ", b"7", b"\xc2\xa0[1]\xc2\xa0", b'{"s":"\xff"}',
    b'{"n":12345678901234567890}', b'{"id":"1234567890123456789"}', b'[1,2]\r', b'"x"', b"{", b"1e400",
    b'{"input_tokens":"12","model":0}', b'{"input_tokens":1.5,"output_tokens":true,"duration_ms":null}',
])
json_lines = st.builds(orjson.dumps, st.recursive(
    st.none() | st.booleans() | st.integers(-(2**60), 2**60) | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=8),
    lambda c: st.lists(c, max_size=3) | st.dictionaries(st.sampled_from(
        ["input_tokens", "output_tokens", "duration_ms", "model", "type", "x"]), c, max_size=4),
    max_leaves=8,
))
batches = st.lists(special_lines | json_lines | st.binary(max_size=24), max_size=30)


@settings(max_examples=300, deadline=None)
@given(batches)
def test_batch_path_matches_line_by_line(lines):
    reference_stats = JsonlStats()
    reference = list(iter_jsonl(lines, reference_stats))
    stats = JsonlStats()
    items, values = parse_jsonl_items(lines, stats)
    assert values == reference
    assert [load_item(i) for i in items] == reference
    assert JsonLines(items) == reference
    assert (stats.lines, stats.blank, stats.unparsable, stats.null, stats.oversized) == (
        reference_stats.lines, reference_stats.blank, reference_stats.unparsable, reference_stats.null,
        reference_stats.oversized)


def test_clean_batch_keeps_lines_and_slow_lines_keep_values():
    items, _ = parse_jsonl_items([b' {"a":1} ', b"[2]"], JsonlStats())
    assert items == [b'{"a":1}', b"[2]"]
    items, values = parse_jsonl_items([b'{"a":1}', b"\xc2\xa0[2]", b'{"n":12345678901234567890}'], JsonlStats())
    assert items[0] == b'{"a":1}'
    assert isinstance(items[1], Parsed) and isinstance(items[2], Parsed)
    assert values == [{"a": 1}, [2], {"n": 12345678901234567890.0}]


def test_lazy_lists_behave_as_lists():
    lines = JsonLines([b'{"a":1}', Parsed([2]), b'"x"'], {"a": [1, None, None]})
    assert lines == [{"a": 1}, [2], "x"] and [{"a": 1}, [2], "x"] == lines
    assert lines != [{"a": 1}] and lines != "x"
    assert len(lines) == 3 and lines[1] == [2] and lines[-1] == "x" and lines[:2] == [{"a": 1}, [2]]
    assert lines[::-2] == ["x", {"a": 1}]
    for bad in (3, -4):
        with pytest.raises(IndexError):
            lines[bad]
    again = pickle.loads(pickle.dumps(lines))
    assert again == lines and again.columns == {"a": [1, None, None]}
    steps = TokenSteps([1, 2], [3, 4], [5, 6], ["m", None])
    assert steps == [
        {"index": 0, "inputTokens": 1, "outputTokens": 3, "durationMs": 5, "model": "m"},
        {"index": 1, "inputTokens": 2, "outputTokens": 4, "durationMs": 6, "model": None},
    ]
    assert steps[-1]["index"] == 1 and pickle.loads(pickle.dumps(steps)) == steps
    trace = {"steps": steps, "entries": lines, "nested": [lines]}
    plain = {"steps": list(steps), "entries": list(lines), "nested": [list(lines)]}
    assert js_stringify(trace) == js_stringify(plain)
    assert js_stringify(trace, indent=2) == js_stringify(plain, indent=2)
    assert payload_json(trace, None, 1) == payload_json(plain, None, 1)
    inf = JsonLines([Parsed({"x": float("inf")}), Parsed("\ud800")])  # the stdlib fallback path
    assert payload_json({"e": inf}, None, 0) == payload_json({"e": list(inf)}, None, 0)


def _reference_steps(entries):
    """gh-aw's steps and totals, record by record (docs/reference/graders.md §5)."""
    steps, totals = [], [0, 0, 0]
    for i, e in enumerate(entries):
        rec = e if isinstance(e, dict) else {}
        nums = [js_number_or_zero(rec.get(k)) for k in ("input_tokens", "output_tokens", "duration_ms")]
        model = rec.get("model")
        for j in range(3):
            totals[j] += nums[j]
        steps.append({"index": i, "inputTokens": nums[0], "outputTokens": nums[1], "durationMs": nums[2],
                      "model": model if js_truthy(model) else None})
    return steps, totals


@settings(max_examples=200, deadline=None)
@given(st.lists(special_lines | json_lines, max_size=40), st.integers(1, 4))
def test_token_columns_match_the_record_by_record_reference(lines, copies):
    data = b"\n".join(lines * copies)
    with patch("graders.runs.runfiles.READ_BLOCK", 97):  # many blocks, lines split across them
        trace = preprocess(memory_run_files({TOKEN_USAGE_PATHS[0]: data}))
    entries = list(iter_jsonl(data.split(b"\n")))
    steps, totals = _reference_steps(entries)
    assert trace["tokenUsageEntries"] == entries
    assert trace["steps"] == steps
    assert [trace["totalInputTokens"], trace["totalOutputTokens"], trace["totalDurationMs"]] == totals
    assert trace["totalRequests"] == len(entries)
    # A count read through the extracted column is the count read record by record (an absent
    # count may read as 0 or None, which every reader of a count treats alike).
    for name in ("input_tokens", "output_tokens", "x"):
        column, plain = count_column(trace["tokenUsageEntries"], name), count_column(entries, name)
        assert [0 if v is None else v for v in column] == [0 if v is None else v for v in plain]
    # The working-set grader reads the extracted column; a plain-list trace gives the same.
    ctx = GraderContext(config=None, grader_count=1)
    plain = dict(trace, tokenUsageEntries=entries)
    assert working_set_rebuild_factor(trace, ctx) == working_set_rebuild_factor(plain, ctx)


gateway_records = st.builds(orjson.dumps, st.fixed_dictionaries({}, optional={
    "type": st.sampled_from(["tool_call", "request", "response", "log", "error"]),
    "event": st.sampled_from(["tool_call", "retry", "error"]),
    "method": st.sampled_from(["tools/call", "", "ping", None]),
    "tool_name": st.sampled_from(["search", 3]),
    "name": st.sampled_from(["", "n"]),
    "tool": st.sampled_from(["t", None]),
    "arguments": st.sampled_from([{"q": 1}, None, []]),
    "payload": st.sampled_from([{"tool_name": "p", "arguments": {"a": 1}}, {"params": {"name": "rpc", "arguments": {}}}, 7]),
    "message": st.sampled_from(["Retrying now", "ok", "ſ retry"]),
    "retry": st.booleans(),
    "level": st.sampled_from(["error", "info"]),
    "server_id": st.sampled_from(["github", ""]),
}))


@settings(max_examples=200, deadline=None)
@given(st.lists(gateway_records | special_lines, max_size=30))
def test_gateway_calls_and_subsets_match_the_record_by_record_reference(lines):
    from graders.formats.ghaw.preprocess import GATEWAY_PATHS
    from graders.formats.ghaw.toolcalls import gateway_tool_call, is_gateway_tool_call

    data = b"\n".join(lines)
    with patch("graders.runs.runfiles.READ_BLOCK", 61):
        trace = preprocess(memory_run_files({GATEWAY_PATHS[0]: data}))
    entries = list(iter_jsonl(data.split(b"\n")))
    records = [e for e in entries if isinstance(e, dict)]
    assert trace["mcpGatewayEntries"] == entries  # building calls in place changed no record
    assert trace["toolCalls"] == [gateway_tool_call(e) for e in records if is_gateway_tool_call(e)]
    assert trace["gatewayRequests"] == [e for e in records if e.get("type") in ("request", "response")
                                        or js_truthy(e.get("method"))]
    assert trace["errorEvents"] == [e for e in records if "error" in (e.get("level"), e.get("type"), e.get("event"))]
    assert len(trace["retryEvents"]) == sum(
        1 for e in records if e.get("retry") is True or e.get("event") == "retry"
        or (isinstance(e.get("message"), str) and "retry" in e["message"].lower()))
