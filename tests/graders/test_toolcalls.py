"""The tool-call merge against its definition: keys tried in order, first unconsumed native wins."""

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from graders.formats.ghaw.toolcalls import dedupe_keys, merge_tool_calls


def reference_merge(native: list[dict[str, Any]], gateway: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """docs/reference/graders.md §5 as written: index every native call under every dedupe key."""
    index: dict[str, list[int]] = {}
    for i, call in enumerate(native):
        for key in dedupe_keys(call):
            index.setdefault(key, []).append(i)
    consumed: set[int] = set()
    merged = list(native)
    for call in gateway:
        hit = next((i for key in dedupe_keys(call) for i in index.get(key, []) if i not in consumed), None)
        if hit is None:
            merged.append(call)
        else:
            consumed.add(hit)
    return merged


# Few distinct spellings, so that names, aliases and arguments collide often; "|" and the
# separators the aliases use are in the alphabet on purpose.
_names = st.sampled_from(["view", "View ", "github-view", "mcp__github__view", "a|b", "a", "", "gh__x"])
_args = st.one_of(
    st.none(),
    st.sampled_from(["b|{}", "{}", "x", ""]),
    st.dictionaries(st.sampled_from(["a", "b", "b|"]), st.sampled_from([1, "1", "|", None]), max_size=2),
    st.lists(st.sampled_from([1, "|{}"]), max_size=2),
)


@st.composite
def _call(draw: Any) -> dict[str, Any]:
    call: dict[str, Any] = {}
    for key in ("name", "tool", "tool_name", "mcpToolName"):
        if draw(st.booleans()):
            call[key] = draw(st.one_of(_names, st.integers(0, 2)))
    if draw(st.booleans()):
        call["mcpServerName"] = draw(st.sampled_from(["github", "GitHub", "a", ""]))
    if draw(st.booleans()):
        call["arguments"] = draw(_args)
    return call


@settings(max_examples=400, deadline=None)
@given(st.lists(_call(), max_size=12), st.lists(_call(), max_size=12))
def test_merge_matches_its_definition(native: list[dict[str, Any]], gateway: list[dict[str, Any]]) -> None:
    merged = merge_tool_calls(native, gateway)
    expected = reference_merge(native, gateway)
    assert [id(c) for c in merged] == [id(c) for c in expected]


def test_a_gateway_call_consumes_one_native_namesake_each_time() -> None:
    native = [{"name": "view", "arguments": {"p": 1}}, {"name": "view", "arguments": {"p": 1}}]
    gateway = [{"tool_name": "view", "arguments": {"p": 1}} for _ in range(3)] + [{"name": "edit"}]
    merged = merge_tool_calls(native, gateway)
    assert merged[:2] == native
    assert merged[2:] == [gateway[2], gateway[3]]


def test_arguments_are_compared_key_sorted() -> None:
    native = [{"name": "view", "mcpServerName": "github", "arguments": {"a": 1, "b": 2}}]
    gateway = [{"name": "github-view", "arguments": {"b": 2, "a": 1}}]
    assert merge_tool_calls(native, gateway) == native


_falsy_or_not = st.one_of(st.none(), st.sampled_from(["", "view", 0, 1, False, True]))


@settings(max_examples=300, deadline=None)
@given(st.dictionaries(st.sampled_from(["name", "tool", "tool_name"]), _falsy_or_not))
def test_gateway_call_names_are_the_references_or_chains(fields: dict[str, Any]) -> None:
    from graders.formats.ghaw.toolcalls import gateway_tool_call
    from graders.jsrt.jscompat import UNDEFINED, js_truthy

    def js_or(*values: Any) -> Any:
        return next((v for v in values[:-1] if js_truthy(v)), values[-1])

    tool_name = fields.get("tool_name") if isinstance(fields.get("tool_name"), str) else UNDEFINED
    tool = js_or(fields.get("tool", UNDEFINED), tool_name)
    name = js_or(fields.get("name", UNDEFINED), fields.get("tool", UNDEFINED), tool_name)
    call = gateway_tool_call(dict(fields))
    assert call.get("tool", UNDEFINED) == tool and call.get("name", UNDEFINED) == name
