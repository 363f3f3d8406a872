"""Field-only record decoding (msgspec structs) agrees with the reference parse, line for line."""

from typing import Any

import msgspec
import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from graders.jsrt.jsonio import JsonlStats, iter_jsonl, parse_jsonl_items, parse_jsonl_records
from graders.jsrt.lazyjson import load_item
from graders.jsrt.records import (
    DIGIT_SAFE,
    EventData,
    EventRecord,
    GatewayPayload,
    GatewayRecord,
    TokenRecord,
    view,
)

RECORD_TYPES = (TokenRecord, GatewayRecord, EventRecord)

# Values a read field may hold, and lines whose *unread* fields carry what msgspec does not
# validate when it skips a value (floats beyond range, bad UTF-8) or validates differently
# from orjson (nesting depth, duplicate keys, lone surrogates).
scalars = st.none() | st.booleans() | st.integers(-(2**60), 2**60) | st.floats(allow_nan=False, allow_infinity=False) \
    | st.text(max_size=6)
values = st.recursive(scalars, lambda c: st.lists(c, max_size=3) | st.dictionaries(st.text(max_size=3), c, max_size=3),
                      max_leaves=6)
field_names = st.sampled_from([
    "input_tokens", "output_tokens", "duration_ms", "model", "type", "event", "method", "tool_name", "payload",
    "message", "retry", "level", "data", "timestamp", "toolName", "toolCallId", "success", "error", "x",
])
records = st.dictionaries(field_names, values | st.fixed_dictionaries({}, optional={
    "tool_name": values, "toolName": values, "toolCallId": values, "arguments": values, "command": values,
    "success": values, "error": values, "x": values,
}), max_size=5)
hostile_lines = st.sampled_from([
    b'{"x":1e400,"type":"log"}', b'{"x":-1e999}', b'{"x":"\xff","type":"tool_call"}', b'{"x":"\xed\xa0\x80"}',
    b'{"x":"\\ud800"}', b'{"type":"a","type":"request"}', b'{"payload":{"tool_name":"a"},"payload":7}',
    b'{"payload":7,"payload":{"tool_name":"a"}}', b'{"data":{"toolName":"v"},"data":{"success":true}}',
    b'{"x":' + b"[" * 1020 + b"]" * 1020 + b"}", b'{"x":' + b"[" * 2000 + b"]" * 2000 + b"}",
    b'{"input_tokens":1e400}', b'{"model":"\xff"}', b'{"n":12345678901234567890}', b"null", b"[1]", b"7",
    b"", b"  ", b"oops", b'{"data":"text","type":"tool.execution_start"}', b"\xc2\xa0{}", b'{"a":1}\r',
    b'{"type":"tool.execution_start","data":{"toolName":"view","input":{"p":1},"x":1e400}}',
])
lines = st.lists(st.builds(orjson.dumps, records) | hostile_lines, max_size=25)


def _as_read(value: Any) -> Any:
    """What a reader of a digit-safe struct can tell of a value: an integer beyond 2**53 reads
    as the double ``JSON.parse`` makes of it, since its fields are only compared with strings,
    ``true``, null and 0 (``records.DIGIT_SAFE``); msgspec keeps the exact integer."""
    if isinstance(value, msgspec.Struct):
        return type(value)(**{f: _as_read(getattr(value, f)) for f in value.__struct_fields__})
    if isinstance(value, dict):
        return {k: _as_read(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_as_read(v) for v in value]
    if type(value) is int and abs(value) > 2**53:
        return float(value)
    return value


@settings(max_examples=300, deadline=None)
@given(lines, st.sampled_from(RECORD_TYPES))
def test_records_match_the_reference_parse(batch, record_type):
    ref_stats = JsonlStats()
    ref_items, ref_values = parse_jsonl_items(batch, ref_stats)
    stats = JsonlStats()
    items, got = parse_jsonl_records(batch, stats, record_type)
    assert [load_item(i) for i in items] == [load_item(i) for i in ref_items] == ref_values
    expected = [view(record_type, v) for v in ref_values]
    if record_type in DIGIT_SAFE:  # not scanned for 16-digit runs: big integers stay exact
        got, expected = _as_read(got), _as_read(expected)
    assert got == expected
    assert vars(stats) == vars(ref_stats)


def test_a_big_integer_in_a_digit_safe_field_reads_as_the_reference_double():
    """The case hypothesis found: exact in the struct, a double in the reference, equal as read."""
    batch = [b'{"type":{"tool_name":null,"x":9007199254740993}}']
    _, ref_values = parse_jsonl_items(batch, JsonlStats())
    _, got = parse_jsonl_records(batch, JsonlStats(), GatewayRecord)
    assert got[0].type["x"] == 9007199254740993 and ref_values[0]["type"]["x"] == 9007199254740992.0
    assert _as_read(got) == _as_read([view(GatewayRecord, v) for v in ref_values])
    assert _as_read(got) != got  # the comparison does tell the two apart before reading


def test_fast_path_keeps_lines_and_reads_only_its_fields():
    batch = [b' {"type":"log","message":"Retrying","big":{"deep":[1,2,3]}} ', b'{"payload":null}\r']
    items, got = parse_jsonl_records(batch, JsonlStats(), GatewayRecord)
    assert items == [b'{"type":"log","message":"Retrying","big":{"deep":[1,2,3]}}', b'{"payload":null}']
    assert got == [GatewayRecord(type="log", message="Retrying"), GatewayRecord()]


@pytest.mark.parametrize("line", [b'{"x":1e400}', b'{"x":"\xff"}'])
def test_a_line_orjson_refuses_is_loaded_as_the_reference_loads_it(line):
    items, got = parse_jsonl_records([line], JsonlStats(), TokenRecord)
    assert items == [line] and got == [TokenRecord()]  # kept as its line: msgspec skipped "x"
    assert [load_item(items[0])] == list(iter_jsonl([line]))


def test_a_batch_with_a_non_record_is_viewed_from_the_reference_values():
    items, got = parse_jsonl_records([b'{"data":{"toolName":"v"}}', b"[1]", b"null"], JsonlStats(), EventRecord)
    assert got == [EventRecord(data=EventData(toolName="v")), None]
    assert load_item(items[1]) == [1]


def test_view_of_non_records():
    assert view(GatewayRecord, [1]) is None and view(GatewayRecord, "x") is None
    assert view(GatewayRecord, {"payload": "text"}) == GatewayRecord(payload=None)
    assert view(GatewayRecord, {"payload": {"tool_name": 1}}) == GatewayRecord(payload=GatewayPayload(tool_name=1))
