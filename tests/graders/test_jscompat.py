import math

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from graders.jsrt.jscompat import (
    UNDEFINED,
    js_number,
    js_number_or_zero,
    js_number_to_string,
    js_string,
    js_stringify,
    js_trim,
    stable_stringify,
    utf16_len,
)


def test_number_to_string_matches_javascript_rules():
    cases = {
        1.0: "1", 0.1: "0.1", 1e21: "1e+21", 1e-7: "1e-7", 1.5e-7: "1.5e-7", 123456789012345680000.0: "123456789012345680000",
        0.000001: "0.000001", -2.5: "-2.5", 100.0: "100", 1.7976931348623157e308: "1.7976931348623157e+308",
        5e-324: "5e-324", math.inf: "Infinity", -math.inf: "-Infinity", math.nan: "NaN", -0.0: "0", 4200.5: "4200.5",
    }
    for value, text in cases.items():
        assert js_number_to_string(value) == text, value


@given(st.floats(allow_nan=False, allow_infinity=False))
def test_number_to_string_round_trips(x):
    assert float(js_number_to_string(x)) == x or x == 0


def test_number_conversion():
    assert js_number("  12  ") == 12
    assert js_number("0x10") == 16
    assert js_number("") == 0
    assert math.isnan(js_number("1_0"))
    assert math.isnan(js_number("nan"))
    assert js_number("Infinity") == math.inf
    assert js_number("-Infinity") == -math.inf
    assert math.isnan(js_number("infinity"))
    assert js_number(None) == 0
    assert math.isnan(js_number(UNDEFINED))
    assert js_number(True) == 1
    assert js_number([]) == 0
    assert js_number([7]) == 7
    assert math.isnan(js_number([1, 2]))
    assert math.isnan(js_number({}))
    assert js_number_or_zero("NaN") == 0
    assert js_number_or_zero("1e3") == 1000


def test_string_and_stringify():
    assert js_string([1, None, "a"]) == "1,,a"
    assert js_string({"a": 1}) == "[object Object]"
    assert js_string(None) == "null"
    assert js_stringify({"b": 1, "2": 2, "1": 3, "a": [1.0, math.nan]}) == '{"1":3,"2":2,"b":1,"a":[1,null]}'
    assert js_stringify(UNDEFINED) is None
    assert stable_stringify({"b": [1, {"d": 1, "c": 2}], "a": "x"}) == '{"a":"x","b":[1,{"c":2,"d":1}]}'
    assert stable_stringify(UNDEFINED) == ""


def test_trim_and_length():
    assert js_trim("\ufeff x \u00a0") == "x"
    assert js_trim("\x1c x") == "\x1c x"  # Python's isspace() would strip it; JavaScript does not
    assert utf16_len("a😀") == 3


_awkward_text = st.text(alphabet=st.sampled_from(
    ["a", "0", "1", ".", "e", ":", ",", "[", '"', "\\", "\n", "\x1f", "\x7f", "é", "\u2028", "\ue000", "\uffff",
     "😀", "\ud800"]), max_size=6)
_awkward_json = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**53), 2**53) | st.sampled_from([0.0, -0.0, 1.0, 1.5, 1e-7, 1e21, 2.5e16])
    | st.floats(allow_nan=False) | _awkward_text,
    lambda c: st.lists(c, max_size=3) | st.dictionaries(
        _awkward_text | st.sampled_from(["0", "12", "01", "b", "a"]), c, max_size=4),
    max_leaves=10,
)


@settings(max_examples=400, deadline=None)
@given(_awkward_json)
def test_orjson_fast_path_writes_exactly_the_reference_text(value):
    from graders.jsrt.jscompat import _stable_stringify, _stringify, js_stringify, stable_stringify

    assert stable_stringify(value) == _stable_stringify(value)
    assert js_stringify(value) == _stringify(value)


@settings(max_examples=500, deadline=None)
@given(st.lists(st.sampled_from([b"0", b"7", b".", b"e", b"E", b'"', b":", b",", b"{", b"[", b"-", b"a", b"\xc3\xa9"]),
                max_size=30).map(b"".join))
def test_the_shape_precheck_never_hides_a_pattern_match(text):
    from graders.jsrt.jscompat import _FLOAT_TOKEN, _INDEX_KEY, _SHAPE, _SHAPE_DELETE, _may_have_float_token

    shape = text.translate(_SHAPE, _SHAPE_DELETE)
    assert _may_have_float_token(shape) or not _FLOAT_TOKEN.search(text)
    assert shape.find(b'"":') >= 0 or not _INDEX_KEY.search(text)


@pytest.mark.parametrize("value", [{"path": "src/module_15.py"}, {"n": 100, "xs": [1, -2]}, {"a": "1.5e3"}])
def test_the_shape_screen_lets_integers_and_digits_in_strings_through(value):
    from graders.jsrt.jscompat import _SHAPE, _SHAPE_DELETE, _may_have_float_token

    shape = orjson.dumps(value).translate(_SHAPE, _SHAPE_DELETE)
    assert not _may_have_float_token(shape) and shape.find(b'"":') < 0


@pytest.mark.parametrize("value", [{"x": 1.5}, [0.5], {"a": [1, -2e-07]}])
def test_the_shape_screen_sees_every_float(value):
    from graders.jsrt.jscompat import _SHAPE, _SHAPE_DELETE, _may_have_float_token

    assert _may_have_float_token(orjson.dumps(value).translate(_SHAPE, _SHAPE_DELETE))
