"""Numbers and depth as JSON.parse reads them (issue 40), in every reader: integers of any size,
numbers past the doubles, one documented depth at any stack depth, identity fields in plain words."""

from __future__ import annotations

import json
import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from graders.formats.ghaw.trace import task_key
from graders.formats.session import Source, json_lines
from graders.jsrt.jscompat import _stable_stringify, _stable_stringify_nested, stable_stringify
from graders.jsrt.jsonio import MAX_DEPTH, JsonTooDeep, nesting_depth, parse_json
from graders.runs.runfiles import memory_run_files
from graders.runs.runmeta import MetadataError, determine_run_meta, id_value, parse_attempt


def _nearest_double(digits: str) -> float:
    """The double nearest an integer's text (Python rounds int to float exactly, ties to even):
    what JSON.parse gives; Infinity past the doubles."""
    value = int(digits[:400])
    return float(value) if len(digits) <= 309 and value < 2**1024 - 2**970 else math.inf


@settings(max_examples=300)
@given(st.integers(1, 5000), st.booleans(), st.integers(1, 9))
def test_an_integer_of_any_length_is_the_double_json_parse_reads(length, negative, first):
    digits = str(first) + "7" * (length - 1)
    text = ("-" if negative else "") + digits
    value = parse_json(f"[{text}]")[0]
    if length <= 15:
        assert value == int(text) and type(value) is int
    else:
        expected = _nearest_double(digits)
        assert value == (-expected if negative else expected)


@given(st.integers(-(2**64), 2**64))
def test_integers_within_64_bits_read_as_the_reference_reads_them(n):
    value = parse_json(str(n))
    assert value == (n if abs(n) <= 2**53 else float(n))
    assert type(value) is (int if abs(n) <= 2**53 else float)


json_text = st.recursive(
    st.sampled_from(["1", '"[{"', '"\\\\"', '"\\""', "12345678901234567890", "1e400", "null"]),
    lambda inner: st.lists(inner, max_size=3).map(lambda xs: "[" + ",".join(xs) + "]")
    | st.lists(inner, max_size=3).map(lambda xs: "{" + ",".join(f'"k{i}":{x}' for i, x in enumerate(xs)) + "}"),
    max_leaves=20,
)


def _reference_depth(value: object) -> int:
    if isinstance(value, list):
        return 1 + max(map(_reference_depth, value), default=0)
    if isinstance(value, dict):
        return 1 + max(map(_reference_depth, value.values()), default=0)
    return 0


@given(json_text)
def test_nesting_depth_is_the_parsed_depth(text):
    assert nesting_depth(text.encode()) == _reference_depth(json.loads(text))


@pytest.mark.parametrize("depth", [MAX_DEPTH, MAX_DEPTH + 1])
@pytest.mark.parametrize("leaf", ["1", "1e400", "12345678901234567890", '"\\ud800"'])
def test_one_depth_for_every_parse_path(depth, leaf):
    """orjson's path, the digit path and the reference path all stop at the same depth."""
    text = "[" * depth + leaf + "]" * depth
    if depth > MAX_DEPTH:
        with pytest.raises(JsonTooDeep, match=f"nested deeper than {MAX_DEPTH} levels"):
            parse_json(text)
    else:
        assert nesting_depth(text.encode()) == depth
        parse_json(text)


def test_session_lines_are_read_as_json_parse_reads_them():
    lines = [b'{"n": ' + b"9" * 5000 + b', "m": 12345678901234567890, "s": "\\ud800"}',
             b'{"d": ' + b"[" * 1000 + b"1" + b"]" * 1000 + b"}",
             b'{"d": ' + b"[" * 1100 + b"]" * 1100 + b"}", b"NaN"]
    warnings: list[str] = []
    out = list(json_lines(Source("s.jsonl", b"\n".join(lines)), warnings))
    assert [n for n, _ in out] == [1, 2]
    assert out[0][1] == {"n": math.inf, "m": 12345678901234567890.0, "s": "\ufffd"}
    assert warnings == ["s.jsonl:3: skipped: nested deeper than 1024 levels, which is more than fleetgrade reads",
                        "s.jsonl:4: skipped: not valid JSON"]


@given(st.recursive(st.none() | st.booleans() | st.integers() | st.text(max_size=3) | st.floats(),
                    lambda c: st.lists(c, max_size=3) | st.dictionaries(st.text(max_size=3), c, max_size=3),
                    max_leaves=15))
def test_stable_stringify_without_recursion_is_the_same_text(value):
    assert _stable_stringify_nested(value) == _stable_stringify(value)


def test_stable_stringify_writes_data_as_deep_as_it_was_read():
    depth = MAX_DEPTH - 1  # and the object
    text = "[" * depth + '{"b":1,"a":2}' + "]" * depth
    assert stable_stringify(parse_json(text)) == "[" * depth + '{"a":2,"b":1}' + "]" * depth


def test_a_task_key_takes_an_issue_number_of_any_length():
    assert task_key({"issue_number": "7" * 5000}, "wf") == "wf#" + "7" * 5000
    assert task_key({"issue_number": "0042"}, "wf") == "wf#42"
    assert task_key({"issue_number": math.inf}, "wf") == "wf"


def _meta(info: str):
    return determine_run_meta(memory_run_files({"aw_info.json": info.encode()}, root="fleet/wf/run-5"), "wf/run-5")


@pytest.mark.parametrize("field, value, words", [
    ("run_attempt", '"²"', "run_attempt must be a whole number from 1 to 2147483647, got '²'"),
    ("run_attempt", '"٣"', "run_attempt must be a whole number from 1 to 2147483647, got '٣'"),
    ("run_attempt", "0", "run_attempt must be a whole number from 1 to 2147483647, got 0"),
    ("run_attempt", "2.5", "run_attempt must be a whole number from 1 to 2147483647, got 2.5"),
    ("run_attempt", "true", "run_attempt must be a whole number from 1 to 2147483647, got true"),
    ("run_attempt", "1" * 5000, "run_attempt must be a whole number from 1 to 2147483647, got a number beyond "
                                "the range of a double (JSON.parse reads it as Infinity)"),
    ("run_attempt", '"' + "1" * 5000 + '"', "run_attempt '" + "1" * 60 + "…' is out of range"),
    ("run_id", "9" * 400, "run_id must be text or a whole number up to 2^53, got a number beyond the range of a "
                          "double (JSON.parse reads it as Infinity) (write a larger id as text)"),
    ("run_id", "12345678901234567890", "run_id must be text or a whole number up to 2^53, got 12345678901234567000 (write a larger id as text)"),
    ("run_id", "1.5", "run_id must be text or a whole number up to 2^53, got 1.5"),
    ("run_id", "[1]", "run_id must be text or a whole number, got a JSON array"),
    ("workflow_name", "{}", "workflow_name must be text or a whole number, got a JSON object"),
    ("created_at", "1700000000", "created_at must be an ISO 8601 timestamp (text), got 1700000000"),
    ("repository", "7", "repository must be text (owner/name), got 7"),
])
def test_an_identity_field_that_cannot_be_one_is_named_in_plain_words(field, value, words):
    info = {"workflow_name": '"wf"', "run_id": "5", "created_at": '"2026-05-01T00:00:00Z"', field: value}
    with pytest.raises(MetadataError) as err:
        _meta("{" + ",".join(f'"{k}": {v}' for k, v in info.items()) + "}")
    assert str(err.value).startswith(f"fleet/wf/run-5/aw_info.json: {words}")


def test_identity_numbers_read_exactly_are_ids():
    meta = _meta('{"workflow_name": 12, "run_id": 9007199254740992, "run_attempt": "0002", '
                 '"created_at": "2026-05-01T00:00:00Z"}')
    assert (meta.workflow, meta.run_id, meta.attempt) == ("12", "9007199254740992", 2)
    assert id_value(None, "run_id", "w") is None and id_value("  ", "run_id", "w") is None
    assert parse_attempt(None, "w") == 1 and parse_attempt(3.0, "w") == 3
