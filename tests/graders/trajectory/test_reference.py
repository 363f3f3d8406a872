"""tool-wise-score, trajectory-ndtw and code-search-recall."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from graders.families.trajectory import reference
from tests.graders.trajectory import naive
from tests.graders.trajectory.helpers import ir_trace, run


def _ndtw_trace(ref: list[str], path: list[str]) -> dict:
    return ir_trace(
        reference={"states": ref},
        events=[{"index": i, "kind": "state_change", "ref": s} for i, s in enumerate(path)],
    )


def test_ndtw_is_exp_of_minus_distance_over_reference_length() -> None:
    result = run("trajectory-ndtw", _ndtw_trace(["a", "b", "c"], ["a", "x", "x", "c"]))
    assert result["details"] == "referenceStates=3 observedStates=4 dtwDistance=2"
    assert result["value"] == pytest.approx(math.exp(-2 / 3))
    assert run("trajectory-ndtw", _ndtw_trace(["a", "b"], ["a", "b"]))["value"] == 1


def test_ndtw_keeps_event_array_order() -> None:
    trace = ir_trace(reference={"states": ["a", "b"]}, events=[
        {"index": 5, "kind": "state_change", "ref": "b"},
        {"index": 1, "kind": "state_change", "ref": "a"},
    ])
    assert run("trajectory-ndtw", trace)["details"].endswith("dtwDistance=2")


def test_ndtw_messages() -> None:
    assert run("trajectory-ndtw", ir_trace(reference={"states": []}))["message"] == (
        "not applicable: no reference state trajectory"
    )
    assert run("trajectory-ndtw", ir_trace(reference={"states": ["a", ""]}, events=[]))["message"] == (
        "unavailable: reference states must be non-empty state ids"
    )
    assert run("trajectory-ndtw", ir_trace(reference={"states": ["a"]}, events=[1]))["message"] == (
        "unavailable: trace lacks well-formed events"
    )
    bad = ir_trace(reference={"states": ["a"]}, events=[{"kind": "state_change"}])
    assert run("trajectory-ndtw", bad)["message"] == "unavailable: state_change event is missing a state id"


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from("abc"), min_size=1, max_size=25), st.lists(st.sampled_from("abcd"), min_size=1, max_size=25))
def test_vectorized_dtw_equals_textbook_dp(ref: list[str], path: list[str]) -> None:
    assert reference.dtw_distance(ref, path) == naive.dtw(ref, path)


def test_tool_wise_score_prefix_and_argument_credit() -> None:
    trace = ir_trace(
        reference={"toolCalls": [
            {"name": "search", "arguments": {"q": "x", "n": {"a": 1, "b": [1, 2]}}},
            {"name": "edit", "arguments": {"path": "a.py", "line": 3}},
            {"name": "test"},
        ]},
        toolCalls=[
            {"name": "edit", "arguments": {"path": "a.py", "line": 4, "extra": True}, "eventIndex": 7},
            {"name": "search", "arguments": {"n": {"b": [1, 2], "a": 1}, "q": "x"}, "eventIndex": 2},
            {"name": "lint", "eventIndex": 9},
        ],
    )
    result = run("tool-wise-score", trace)
    # step 1: 1.0 (key order ignored), step 2: (1 + 1/2) / 2 = 0.75, then "lint" != "test".
    assert result["value"] == pytest.approx(1.75 / 3)
    assert result["details"] == (
        "referenceSteps=3 observedSteps=3 correctPrefix=2 credit=1.75; diverged at step 3: expected test, got lint"
    )


def test_tool_wise_score_credit_rounds_half_up() -> None:
    trace = ir_trace(
        reference={"toolCalls": [{"name": "a", "arguments": {"k1": 1, "k2": 2, "k3": 3, "k4": 4}}]},
        toolCalls=[{"name": "a", "arguments": {"k1": 1}}],
    )
    # credit = (1 + 1/4) / 2 = 0.625: JS toFixed(2) gives "0.63" where Python's format gives "0.62".
    assert "credit=0.63" in run("tool-wise-score", trace)["details"]


def test_tool_wise_score_messages() -> None:
    mixed = ir_trace(reference={"toolCalls": [{"name": "a"}]}, toolCalls=[{"name": "a", "eventIndex": 1}, {"name": "b"}])
    assert run("tool-wise-score", mixed)["message"] == "unavailable: toolCalls mix indexed and unindexed entries"
    empty = ir_trace(reference={"toolCalls": [{"name": "a"}]}, toolCalls=[])
    assert run("tool-wise-score", empty)["details"].endswith("expected a, got end of trace")
    malformed = ir_trace(reference={"toolCalls": [{"name": "a", "arguments": []}]}, toolCalls=[])
    assert run("tool-wise-score", malformed)["message"] == "unavailable: malformed reference tool call"


def test_code_search_recall_normalises_paths() -> None:
    trace = ir_trace(
        reference={"patch": {"files": ["./src/a.py", {"path": "/src/b.py"}, " src/a.py "]}},
        resources=[{"kind": "file", "uri": "src/a.py"}, {"kind": "url", "uri": "src/b.py"}],
    )
    result = run("code-search-recall", trace)
    assert result["value"] == 0.5
    assert result["details"] == "referenceFiles=2 located=1; never located: src/b.py"
    missing = ir_trace(reference={"patch": {"files": [{"path": "./"}]}}, resources=[])
    assert run("code-search-recall", missing)["message"] == "unavailable: reference patch file is missing a path"
