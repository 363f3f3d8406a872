"""Tool-output consumption, lineage, action provenance and grounding."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from graders.families.trajectory import provenance
from tests.graders.trajectory import naive
from tests.graders.trajectory.helpers import ir_trace, run


def test_tool_output_consumption() -> None:
    trace = ir_trace(
        toolCalls=[{"id": "t1"}, {"id": "t2"}],
        observations=[
            {"id": "o1", "sourceToolCallId": "t1", "consumedByActionIds": ["a1"]},
            {"sourceToolCallId": "t2", "consumedByActionIds": [None, ""]},  # not consumed here
            {"id": "o3", "sourceToolCallId": "t9", "consumedByActionIds": ["a1"]},  # not a tool observation
        ],
    )
    result = run("tool-output-consumption-rate", trace)
    assert result == {"value": 0.5, "details": "toolObservations=2 consumed=1; unconsumed: t2"}
    only_obs = ir_trace(observations=[{"id": "o1"}])
    assert run("tool-output-consumption-rate", only_obs)["message"] == (
        "not applicable: no tool-originated observations in the trace"
    )


def _lineage_ir(**extra: object) -> dict:
    return ir_trace(
        events=[{"kind": "safe_output", "ref": "out1"}, {"kind": "safe_output", "ref": "out2"},
                {"kind": "safe_output", "ref": "out1"}],
        toolCalls=[{"id": "t1"}],
        observations=[{"id": "o1"}],
        provenanceEdges=[{"from": "t1", "to": "a1"}, {"from": "a1", "to": "out1"}, {"from": "x", "to": "out2"},
                         {"from": "out2", "to": "x"}],
        **extra,
    )


def test_lineage_counts_duplicates_and_handles_cycles() -> None:
    result = run("end-to-end-lineage-completeness", _lineage_ir())
    assert result == {"value": 2 / 3, "details": "outputs=3 traceable=2; missing lineage: out2"}
    missing = ir_trace(events=[{"kind": "safe_output"}], toolCalls=[], observations=[], provenanceEdges=[])
    assert run("end-to-end-lineage-completeness", missing)["message"] == (
        "unavailable: safe output is missing a provenance reference"
    )


def test_action_provenance() -> None:
    trace = _lineage_ir(actions=[
        {"id": "a1", "consequential": True}, {"id": "out2", "consequential": True}, {"consequential": False},
    ])
    result = run("action-provenance-coverage", trace)
    assert result == {"value": 0.5, "details": "consequentialActions=2 covered=1; missing provenance: out2"}
    trace["trajectoryIR"]["actions"].append({"id": "z"})
    assert run("action-provenance-coverage", trace)["message"] == (
        "unavailable: action is missing the canonical consequential flag"
    )


def test_grounding_accuracy() -> None:
    trace = ir_trace(actions=[{"id": "a", "validAtIssueTime": True}, {"validAtIssueTime": False}])
    assert run("grounding-accuracy", trace) == {"value": 0.5, "details": "actions=2 valid=1; ungrounded: action-2"}
    trace["trajectoryIR"]["actions"].append({"validAtIssueTime": 1})
    assert run("grounding-accuracy", trace)["message"] == (
        "unavailable: every action requires a boolean validAtIssueTime"
    )


_nodes = st.sampled_from(["t1", "o1", "a1", "a2", "a3", "out1", "out2"])


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(_nodes, _nodes), max_size=12), st.sets(st.sampled_from(["t1", "o1", "a2"])))
def test_one_pass_reachability_equals_per_output_search(edges: list[tuple[str, str]], roots: set[str]) -> None:
    ir = {
        "toolCalls": [{"id": r} for r in sorted(roots) if r.startswith("t")] + [{"id": ""}, 3],
        "observations": [{"id": r} for r in sorted(roots) if not r.startswith("t")],
        "provenanceEdges": [{"from": a, "to": b} for a, b in edges] + [{"from": "", "to": "a1"}, None],
    }
    grounded = provenance._grounded_nodes(ir)
    for node in ["t1", "o1", "a1", "a2", "a3", "out1", "out2"]:
        assert (node in grounded) == naive.has_root(node, roots, edges)
