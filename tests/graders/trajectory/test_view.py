"""The per-run view: each derived structure built once per run, results unchanged, no cycles."""

from __future__ import annotations

import gc
import weakref
from typing import Any
from unittest.mock import patch

from hypothesis import given, settings
from hypothesis import strategies as st

from graders.families.trajectory import ir, provenance, rqa
from graders.grading import registry
from graders.grading.engine import grade_trace
from graders.grading.plan import default_plan
from graders.grading.registry import GraderContext
from tests.graders.trajectory import naive

TRAJECTORY_IDS = registry.grader_ids("trajectory")


def _ir(states: list[str], kinds: list[str]) -> dict[str, Any]:
    events = [{"index": i, "kind": k, "ref": f"t{i % 3}" if k == "tool_call" else f"o{i}"} for i, k in enumerate(kinds)]
    events.append({"index": len(kinds), "kind": "safe_output", "ref": "out"})
    return {
        "events": events,
        "states": [{"id": s, "firstEventIndex": i} for i, s in enumerate(states)],
        "toolCalls": [{"id": "t0", "name": "view"}],
        "observations": [{"id": "o0", "sourceToolCallId": "t0", "consumedByActionIds": ["a0"]}],
        "actions": [{"id": "a0", "consequential": True, "validAtIssueTime": True}],
        "provenanceEdges": [{"from": "o0", "to": "a0"}, {"from": "a0", "to": "out"}],
        "objectives": [{"id": "g0", "description": "verify", "satisfiedAtEventIndex": 0, "dependsOn": []}],
        "reference": {"states": states[:3] or ["x"]},
    }


def _trajectory(trace: dict[str, Any]) -> list[dict[str, Any]]:
    return grade_trace(trace, default_plan(), only=frozenset(TRAJECTORY_IDS))


def test_each_structure_is_derived_once_per_run_and_afresh_for_the_next() -> None:
    first = {"toolCalls": [], "trajectoryIR": _ir(list("ABABCCCA"), ["tool_call", "observation"] * 4)}
    second = {"toolCalls": [], "agentOutput": {"trajectoryIr": _ir(list("ABCD"), ["message"] * 3)}}
    with patch.object(ir, "state_visits", wraps=ir.state_visits) as visits, \
         patch.object(ir, "event_symbols", wraps=ir.event_symbols) as symbols, \
         patch.object(rqa, "vertical_stats", wraps=rqa.vertical_stats) as vertical, \
         patch.object(provenance, "_grounded_nodes", wraps=provenance._grounded_nodes) as grounded:
        results = _trajectory(first)
        # REP + 4 RQA graders, entropy + LZ76, LAM + TT, lineage + provenance: once each.
        assert (visits.call_count, symbols.call_count, vertical.call_count, grounded.call_count) == (1, 1, 1, 1)
        _trajectory(second)
        assert (visits.call_count, symbols.call_count, vertical.call_count, grounded.call_count) == (2, 2, 2, 2)
    by_id = {r["id"]: r for r in results}
    assert by_id["recurrence-rate"]["details"].startswith("visits=8 recurrentPoints=14")
    assert by_id["recurrence-laminarity"]["value"] == 4 / 14


def test_the_view_is_freed_by_refcounting_when_the_run_is_done() -> None:
    made: list[weakref.ref[ir.RunView]] = []

    class Tracked(ir.RunView):
        __slots__ = ("__weakref__",)

        def __init__(self, trace: Any, file_ir: Any) -> None:
            super().__init__(trace, file_ir)
            made.append(weakref.ref(self))

    trace = {"toolCalls": [], "trajectoryIR": _ir(list("ABAB"), ["tool_call"] * 3)}
    gc.disable()  # a reference cycle would keep the view alive until a collection
    try:
        with patch.object(ir, "RunView", Tracked):
            _trajectory(trace)
        assert len(made) == 1 and made[0]() is None
    finally:
        gc.enable()


def _one_by_one(trace: dict[str, Any]) -> dict[str, Any]:
    """Each grader alone, with a fresh context: nothing shared with any other grader."""
    out = {}
    for gid in TRAJECTORY_IDS:
        spec = registry.get(gid)
        assert spec is not None
        out[gid] = spec.fn(trace, GraderContext())
    return out


ids = st.sampled_from("ABCDE")
kinds = st.sampled_from(["tool_call", "observation", "state_change", "message", ""])


@settings(max_examples=80, deadline=None)
@given(st.lists(ids, max_size=30), st.lists(kinds, max_size=30), st.booleans())
def test_sharing_the_view_changes_no_result(states: list[str], event_kinds: list[str], in_file: bool) -> None:
    ir_doc = _ir(states, event_kinds)
    trace: dict[str, Any] = {"toolCalls": [], "agentOutput": {} if in_file else {"trajectoryIR": ir_doc}}
    shared = {r["id"]: r for r in grade_trace(trace, default_plan(), only=frozenset(TRAJECTORY_IDS),
                                               file_ir=ir_doc if in_file else None)}
    if in_file:  # the IR file is only reachable through the context; compare through it
        alone = {gid: registry.get(gid).fn(trace, GraderContext(file_ir=ir_doc)) for gid in TRAJECTORY_IDS}  # type: ignore[union-attr]
    else:
        alone = _one_by_one(trace)
    for gid in TRAJECTORY_IDS:
        raw = alone[gid]
        got = shared[gid]
        value = raw.get("value") if isinstance(raw, dict) else raw
        assert got["value"] == value, gid
        if isinstance(raw, dict) and raw.get("details"):
            assert got["details"] == raw["details"], gid


index = st.integers(min_value=-3, max_value=12)
state_records = st.one_of(
    ids,
    st.fixed_dictionaries({"id": ids}, optional={"firstEventIndex": index}),
    st.fixed_dictionaries({"id": st.just("")}),
)


@settings(max_examples=300, deadline=None)
@given(st.lists(state_records, max_size=25),
       st.lists(st.fixed_dictionaries({}, optional={"index": index}), max_size=15))
def test_state_visits_equal_the_reference_ordering(states: list[Any], events: list[Any]) -> None:
    got = [v.id for v in ir.state_visits([{"states": states, "events": events}])]
    assert got == naive.state_visit_ids(states, events)
