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


# The other built-ins' per-call passes against their plain transcriptions.
_name_values = st.one_of(_names, st.sampled_from([0, 1, 1.0, -0.0, True, False, None, float("nan"), "x", "1", "true"]),
                         st.lists(st.sampled_from([1, "a"]), max_size=2), st.dictionaries(st.just("a"), st.just(1)))


@st.composite
def _named_call(draw: Any) -> Any:
    if draw(st.integers(0, 9)) == 0:
        return draw(st.sampled_from([None, "view", 3, []]))  # not a record
    call: dict[str, Any] = {}
    for key in ("name", "tool"):
        if draw(st.booleans()):
            call[key] = draw(_name_values)
    for key, values in (("success", [True, False, None, 0]), ("completed", [True, False, 0]),
                        ("status", ["success", "error", "failure", "Error", 200, None]), ("error", [None, "boom", {}])):
        if draw(st.integers(0, 3)) == 0:
            call[key] = draw(st.sampled_from(values))
    return call


def reference_efficiency(calls: list[Any]) -> float:
    """``new Set(calls.map(c => c.name || c.tool || "")).size / calls.length``, capped at 1."""
    if not calls:
        return 1
    records = [c if isinstance(c, dict) else {} for c in calls]
    names = {js_string(_or(c.get("name", UNDEFINED), c.get("tool", UNDEFINED), "")) for c in records}
    return min(1, len(names) / len(calls))


@settings(max_examples=500, deadline=None)
@given(st.lists(_named_call(), max_size=12))
def test_names_failures_and_efficiency_match_their_definitions(calls: list[Any]) -> None:
    from graders.families.builtin import _call_names, _count_failures, trajectory_efficiency
    from graders.formats.ghaw.toolcalls import is_tool_failure

    names = _call_names(calls)
    records = [c if isinstance(c, dict) else {} for c in calls]
    want = [_or(c.get("name", UNDEFINED), c.get("tool", UNDEFINED)) for c in records]
    assert len(names) == len(want)
    for got, expected in zip(names, want, strict=True):  # the same values (NaN is not equal to itself)
        assert got is expected or (type(got) is type(expected) and got == expected)
    assert _count_failures(calls) == sum(map(is_tool_failure, calls))
    assert trajectory_efficiency({"toolCalls": calls}, None) == reference_efficiency(calls)  # type: ignore[arg-type]


def test_efficiency_counts_true_and_1_as_two_names() -> None:
    from graders.families.builtin import trajectory_efficiency

    calls = [{"name": True}, {"name": 1}, {"name": 1.0}, {}, {"tool": ""}]  # "true", "1", "1", "", ""
    assert trajectory_efficiency({"toolCalls": calls}, None) == 3 / 5  # type: ignore[arg-type]
