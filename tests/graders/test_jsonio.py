import math

from hypothesis import given, settings
from hypothesis import strategies as st

from graders.jsonio import JsonError, JsonlStats, iter_jsonl, parse_json, parse_json_document


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

    import graders.jsonio
    from graders.jsonio import has_long_digit_run

    data = b"".join(parts)
    # Both scans: bytes.translate below graders.jsonio._NUMPY_FROM bytes, numpy words above.
    for numpy_from in (graders.jsonio._NUMPY_FROM, 16):
        with patch.object(graders.jsonio, "_NUMPY_FROM", numpy_from):
            for start in range(min(8, len(data) + 1)):  # every alignment of the 8-byte words
                assert has_long_digit_run(data[start:]) == (re.search(rb"[0-9]{16}", data[start:]) is not None)
