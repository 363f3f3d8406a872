import math

from hypothesis import given, settings
from hypothesis import strategies as st

from graders.jsrt.jsonio import JsonError, JsonlStats, iter_jsonl, parse_json, parse_json_document


def test_parse_follows_json_parse():
    assert parse_json("1e400") == math.inf
    assert parse_json("12345678901234567890") == 12345678901234567890.0
    assert parse_json('"\\ud800"') == "\ufffd"
    for bad in ("NaN", "Infinity", "{'a': 1}", "[1,]", "\ufeff{}"):
        try:
            parse_json(bad)
        except JsonError:
            continue
        raise AssertionError(bad)


def test_jsonl_skip_rules():
    stats = JsonlStats()
    lines = [b'{"a":1}\n', b"   \n", b"oops\n", b"null\n", b"7\n", b"\xc2\xa0[1]\xc2\xa0\n", b'{"s":"\xff"}\n']
    assert list(iter_jsonl(lines, stats)) == [{"a": 1}, 7, [1], {"s": "\ufffd"}]
    assert (stats.blank, stats.unparsable, stats.null) == (1, 1, 1)


def test_oversized_line_is_skipped():
    big = b'{"x":"' + b"a" * (1024 * 1024) + b'"}'
    stats = JsonlStats()
    assert list(iter_jsonl([big], stats)) == []
    assert stats.oversized == 1


def test_document_parse():
    assert parse_json_document(b"") is None
    assert parse_json_document(b"\xef\xbb\xbf{}") is None
    assert parse_json_document(b' {"a": [1, 2]} ') == {"a": [1, 2]}


@settings(max_examples=300)
@given(st.lists(st.binary(max_size=64), max_size=20))
def test_jsonl_never_raises_on_arbitrary_bytes(lines):
    stats = JsonlStats()
    out = list(iter_jsonl(lines, stats))
    assert stats.lines == len(lines)
    assert all(v is not None for v in out)
    assert len(out) + stats.blank + stats.unparsable + stats.null + stats.oversized == len(lines)


json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**53), 2**53) | st.floats(allow_nan=False, allow_infinity=False) | st.text(),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=5), children, max_size=4),
    max_leaves=12,
)


@given(json_values)
def test_jsonl_round_trips_values(value):
    import orjson

    line = orjson.dumps(value)
    assert list(iter_jsonl([line])) == ([] if value is None else [value])


@settings(max_examples=500)
@given(st.lists(st.sampled_from([b"0", b"9", b"12345678", b"1234567890123456", b"a", b"/", b":", b"\xff", b"\n", b" "]),
                max_size=60))
def test_long_digit_run_detection_matches_the_regex(parts):
    import re
    from unittest.mock import patch

    import graders.jsrt.digits
    from graders.jsrt.digits import has_long_digit_run

    data = b"".join(parts)
    # Both scans: bytes.translate below graders.jsrt.digits._NUMPY_FROM bytes, numpy words above.
    for numpy_from in (graders.jsrt.digits._NUMPY_FROM, 16):
        with patch.object(graders.jsrt.digits, "_NUMPY_FROM", numpy_from):
            for start in range(min(8, len(data) + 1)):  # every alignment of the 8-byte words
                expected = re.search(rb"[0-9]{16}", data[start:]) is not None
                assert has_long_digit_run(data[start:]) == expected
                assert has_long_digit_run(memoryview(data)[start:]) == expected


_BLOCK_PARTS = [b"0", b"9", b"12345678", b"12345678901234567", b"{}", b'{"a":1}', b" ", b"\t", b"\r", b"\n", b"\n\n",
                b"\xc2\xa0", b"x"]


@settings(max_examples=400, deadline=None)
@given(st.lists(st.sampled_from(_BLOCK_PARTS), max_size=80), st.integers(1, 40))
def test_a_blocks_screen_answers_are_those_of_its_lines(parts, block_size):
    """``iter_line_batches`` answers the screen from each block's bytes; a plain list of the
    same lines, screened line by line, gets the same answers, whatever the block boundaries."""
    from graders.jsrt.jsonio import LineBatch, _screen
    from graders.runs.runfiles import memory_run_files

    data = b"".join(parts)
    files = memory_run_files({"x.jsonl": data})
    batches = list(files.iter_line_batches("x.jsonl", block_size=block_size))
    assert all(type(b) is LineBatch for b in batches)
    expected = data.split(b"\n")
    if expected[-1] == b"":
        expected.pop()
    assert [line for b in batches for line in b] == expected
    for batch in batches:
        assert _screen(batch) == _screen(list(batch))


def test_a_line_carried_over_many_blocks_is_screened_for_its_length():
    from graders.jsrt.jsonio import MAX_LINE_LENGTH, _screen
    from graders.runs.runfiles import memory_run_files

    within = b"[" + b"0," * ((MAX_LINE_LENGTH - 3) // 2) + b"0]"
    long = within + b"  "  # still within the limit once trimmed
    too_long = b"[" + b"1," * (MAX_LINE_LENGTH // 2) + b"1]"
    for body, short in ((long + b"\n{}\n", True), (b"{}\n" + too_long + b"\n{}\n", False), (too_long, False)):
        files = memory_run_files({"x.jsonl": body})
        batches = list(files.iter_line_batches("x.jsonl"))
        assert [_screen(b) for b in batches] == [_screen(list(b)) for b in batches]
        assert all(b.short for b in batches) is short
