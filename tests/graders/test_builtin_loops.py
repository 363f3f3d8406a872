"""The ``loops`` grader against its definition: consecutive equal ``name:JSON(args)`` keys."""

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from graders.families.builtin import _call_name, _or, loops
from graders.jsrt.jscompat import UNDEFINED, js_string, js_stringify


def reference_loops(calls: list[Any]) -> int:
    """docs/reference/graders.md §14.10 as written: build every call's key, count repeats of the previous one."""
    count = 0
    prev = ""
    for call in calls:
        c = call if isinstance(call, dict) else {}
        name = _call_name(c)
        args = c.get("arguments", UNDEFINED)
        if not isinstance(args, (dict, list)):
            args = _or(args, c.get("params", UNDEFINED), "")
        key = f"{name if isinstance(name, str) else js_string(name)}:{js_stringify(args)}"
        if key == prev:
            count += 1
        prev = key
    return count


# Names and arguments chosen to collide: ":" in names and in argument text, numbers and
# their string spellings, key order, missing and falsy values.
_names = st.sampled_from(["view", "view:", 'view:"x"', "view:{}", "1", "", "a:b"])
_values = st.one_of(
    st.none(),
    st.booleans(),
    st.sampled_from([0, 1, 1.5, "", "x", ":", '"x"', "{}"]),
    st.dictionaries(st.sampled_from(["a", "b", "1", ":"]), st.sampled_from([1, "1", None, ":"]), max_size=3),
    st.lists(st.sampled_from([1, ":", None]), max_size=2),
)


@st.composite
def _call(draw: Any) -> Any:
    if draw(st.integers(0, 9)) == 0:
        return draw(st.sampled_from([None, "view", 3, []]))  # not a record
    call: dict[str, Any] = {}
    for key in ("name", "tool"):
        if draw(st.booleans()):
            call[key] = draw(st.one_of(_names, st.sampled_from([1, None, True])))
    for key in ("arguments", "params"):
        if draw(st.booleans()):
            call[key] = draw(_values)
    return call


@settings(max_examples=500, deadline=None)
@given(st.lists(_call(), max_size=10))
def test_loops_matches_its_definition(calls: list[Any]) -> None:
    assert loops({"toolCalls": calls}, None) == reference_loops(calls)  # type: ignore[arg-type]


def test_only_identical_consecutive_calls_count() -> None:
    same = {"name": "view", "arguments": {"a": 1, "b": 2}}
    reordered = {"name": "view", "arguments": {"b": 2, "a": 1}}  # JSON.stringify keeps key order
    calls = [same, dict(same), reordered, {"name": "edit", "arguments": {"a": 1, "b": 2}}, {"name": "edit"}]
    assert loops({"toolCalls": calls}, None) == 1  # type: ignore[arg-type]
