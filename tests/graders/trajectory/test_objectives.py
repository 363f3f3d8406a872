"""Objective graders: policy near-miss, exploration/exploitation, termination, lag, order, coverage."""

from __future__ import annotations

from tests.graders.trajectory.helpers import ir_trace, run


def _obj(oid: str, at: object = None, **kw: object) -> dict:
    return {"id": oid, "satisfiedAtEventIndex": at, **kw}


def test_policy_near_miss() -> None:
    trace = ir_trace(
        events=[{"kind": "safe_output", "ref": "o1"}],
        objectives=[
            _obj("g1", None, description="Verify the approval"),
            _obj("g2", -1, description="policy check"),  # any set value, even -1, counts as met
            {"satisfiedAtEventIndex": None, "description": "CONFIRM deploy"},
            _obj("x", None, description="checks"),  # \b: "checks" is not "check"
        ],
    )
    result = run("policy-near-miss", trace)
    assert result["value"] == 2 / 3
    assert result["details"] == "guardObjectives=3 unmet=2; unmet guards: g1, CONFIRM deploy"


def test_policy_near_miss_ascii_case_folding() -> None:
    # JS /i without u never folds the Kelvin sign (U+212A) into "k".
    trace = ir_trace(events=[{"kind": "safe_output"}], objectives=[_obj("a", description="chec\u212a")])
    assert run("policy-near-miss", trace)["message"] == (
        "not applicable: no guard/policy-shaped objectives in the trace"
    )


def test_exploration_and_exploitation() -> None:
    trace = ir_trace(
        objectives=[_obj("o1"), _obj("o2", 3)],
        events=[{"kind": "state_change", "ref": r} for r in ("s1", "s2", "s2", None)],
        observations=[{"id": "ob1", "consumedByActionIds": [None]}, {"id": "ob2", "consumedByActionIds": []},
                      {"id": "ob3"}],
    )
    exploration = run("exploration-error", trace)
    assert exploration["value"] == 0
    assert exploration["details"] == (
        "objectives=2 unmet=1 observations=3 distinctStatesVisited=3 (from state_change events); unmet objectives: o1"
    )
    exploitation = run("exploitation-error", trace)
    assert exploitation["value"] == 2 / 3  # [null] counts as consumed here
    trace["trajectoryIR"]["observations"] = trace["trajectoryIR"]["observations"][:1]
    assert run("exploitation-error", trace)["message"] == (
        "not applicable: exploration was insufficient (observations=1 < distinctStatesVisited=3); see exploration-error"
    )


def test_exploration_states_fallback_counts_records() -> None:
    trace = ir_trace(objectives=[_obj("o1")], states=[{"id": "a"}, {"id": "a"}, "s"], observations=[{}])
    assert run("exploration-error", trace)["value"] == 0.5


def test_premature_termination_and_coverage_labels() -> None:
    trace = ir_trace(objectives=[_obj("a", 1), {"satisfiedAtEventIndex": None}, {}, _obj("d")])
    gap = run("premature-termination-gap", trace)
    assert gap["value"] == 3
    assert gap["details"] == "objectives=4 unsatisfied=3; unsatisfied: objective-1, objective-2, d"
    coverage = run("objective-coverage", trace)
    assert coverage["value"] == 0.25
    assert coverage["details"] == "objectives=4 completed=1; incomplete: objective-2, objective-3, d"
    bad = ir_trace(objectives=[_obj("a", 1.5)])
    assert run("objective-coverage", bad)["message"] == "unavailable: invalid objective satisfaction index"
    assert run("premature-termination-gap", ir_trace(objectives=[1]))["message"] == (
        "unavailable: malformed objective metadata"
    )


def test_evidence_saturation_stopping_lag() -> None:
    trace = ir_trace(objectives=[_obj("a", 1), _obj("b", 2.0)], events=[{"index": i} for i in range(5)])
    result = run("evidence-saturation-stopping-lag", trace)
    assert result == {"value": 2, "details": "objectives=2 saturationEventIndex=2 eventsAfterSaturation=2"}
    trace["trajectoryIR"]["events"].append({"index": True})
    assert run("evidence-saturation-stopping-lag", trace)["message"] == "unavailable: invalid event index"
    absent = ir_trace(objectives=[_obj("a", 9)], events=[{"index": 0}])
    assert run("evidence-saturation-stopping-lag", absent)["message"] == (
        "unavailable: an objective's satisfaction event is absent from the trace"
    )


def test_dependency_order() -> None:
    trace = ir_trace(objectives=[
        _obj("a", 3), _obj("b", 3, dependsOn=["a"]), _obj("c", 2, dependsOn=["a"]), _obj("d", None, dependsOn=["a"]),
    ])
    result = run("dependency-order-violation-rate", trace)
    assert result["value"] == 0.5  # equal index is fine; c precedes its prerequisite
    assert result["details"] == "completedDependentObjectives=2 violations=1; out of order: c"
    dup = ir_trace(objectives=[_obj("a"), _obj("a")])
    assert run("dependency-order-violation-rate", dup)["message"] == "unavailable: objective ids are not unique"
    unknown = ir_trace(objectives=[_obj("a", 1, dependsOn=["z"])])
    assert run("dependency-order-violation-rate", unknown)["message"] == (
        "unavailable: dependency references an unknown objective"
    )
