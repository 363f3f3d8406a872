"""Candidate resolution, the global 5,000-item cap and the trajectory_ir.json candidate."""

from __future__ import annotations

from typing import Any

from graders.families.trajectory.ir import candidates, oversized_collection
from graders.formats.ghaw.preprocess import read_trajectory_ir_file
from graders.grading import registry
from graders.grading.registry import GraderContext
from graders.runs.runfiles import local_run_files
from tests.graders.trajectory.helpers import ir_trace, run, states

TRAJECTORY_IDS = registry.grader_ids("trajectory")


def test_registered_in_gh_aw_order_after_builtins() -> None:
    ids = [s.id for s in registry.all_specs()]
    assert ids[10:] == list(TRAJECTORY_IDS)
    assert len(TRAJECTORY_IDS) == 22
    assert all(s.threshold is None for s in registry.all_specs("trajectory"))


def test_candidate_priority_order() -> None:
    ao = {"trajectoryIR": {"n": 4}, "trajectoryIr": {"n": 5}, "trajectory": {"n": 6}}
    trace = {"trajectoryIR": {"n": 1}, "trajectoryIr": {"n": 2}, "ir": {"n": 3}, "agentOutput": ao}
    file_ir = {"n": 8}
    ctx = GraderContext(file_ir=file_ir)
    got = candidates(trace, ctx, include_trace=True)
    assert got[0] is trace
    assert [c.get("n") for c in got[1:]] == [1, 2, 3, 4, 5, 6, None, 8]
    assert candidates(trace, GraderContext(file_ir=[1]), include_trace=False)[-1] is ao


def test_cap_message_names_the_first_oversized_collection() -> None:
    big = list(range(5001))
    assert oversized_collection(ir_trace(states=big), None) == "states"
    assert oversized_collection(ir_trace(reference={"toolCalls": big}), None) == "reference.toolCalls"
    assert oversized_collection(ir_trace(reference={"patch": {"files": big}}), None) == "reference.patch.files"
    assert oversized_collection(ir_trace(states=big[:5000]), None) is None
    # The preprocessed trace.toolCalls is exempt; the same key inside an IR is not.
    assert oversized_collection({"toolCalls": big}, None) is None
    assert oversized_collection(ir_trace(toolCalls=big), None) == "toolCalls"


def test_cap_disables_every_trajectory_grader() -> None:
    trace = ir_trace(outputs=list(range(5001)), states=list("ABAB"))
    for grader_id in TRAJECTORY_IDS:
        assert run(grader_id, trace) == {
            "value": None, "passed": None, "message": "unavailable: outputs exceeds 5000 items",
        }


def test_file_ir_is_the_last_candidate() -> None:
    file_ir = {"states": list("AAAA")}
    assert run("recurrence-rate", {"toolCalls": []}, file_ir=file_ir)["value"] == 1
    # An embedded IR wins over the file.
    assert run("recurrence-rate", states("ABAB"), file_ir=file_ir)["value"] == 1 / 3
    assert run("recurrence-rate", {"toolCalls": []}, file_ir={"states": list(range(5001))})["message"] == (
        "unavailable: states exceeds 5000 items"
    )


def test_read_trajectory_ir_file(tmp_path) -> None:
    root = tmp_path / "run"
    (root / "agent" / "graders").mkdir(parents=True)
    assert read_trajectory_ir_file(local_run_files(root)) is None
    (root / "agent" / "graders" / "trajectory_ir.json").write_text('{"states": ["a"]}')
    assert read_trajectory_ir_file(local_run_files(root)) == {"states": ["a"]}
    (root / "agent" / "graders" / "trajectory_ir.json").write_text("{not json")
    assert read_trajectory_ir_file(local_run_files(root)) is None


def test_non_record_config_is_empty() -> None:
    trace = {"toolCalls": [{"name": "x"}]}
    assert run("skill-constraint-coverage", trace, config=[1])["message"] == "not applicable: no constraints configured"


def test_grade_trace_passes_file_ir_to_every_grader() -> None:
    from graders.grading.engine import grade_trace
    from graders.grading.plan import default_plan

    results = {r["id"]: r for r in grade_trace({"toolCalls": []} | _EMPTY_TRACE, default_plan(),
                                               file_ir={"states": list("AAAA")})}
    assert results["recurrence-rate"]["value"] == 1
    assert results["recurrence-rate"]["status"] == "pass" and results["recurrence-rate"]["passed"] is None
    without = {r["id"]: r for r in grade_trace({"toolCalls": []} | _EMPTY_TRACE, default_plan())}
    assert without["recurrence-rate"]["message"] == "not applicable: fewer than two canonical state visits"


_EMPTY_TRACE: dict[str, Any] = {
    "tokenUsageEntries": [], "agentUsage": None, "mcpGatewayEntries": [], "agentOutput": None,
    "nativeToolCalls": [], "gatewayRequests": [], "retryEvents": [], "errorEvents": [], "steps": [],
    "totalInputTokens": 0, "totalOutputTokens": 0, "totalDurationMs": 0, "totalRequests": 0,
    "files": [], "artifacts": [],
}


def test_a_runs_graders_search_its_candidates_once_and_another_run_afresh() -> None:
    from unittest.mock import patch

    from graders.families.trajectory import ir
    from graders.grading.engine import grade_trace
    from graders.grading.plan import default_plan

    trace = states("aba")
    other = states("c")
    with patch.object(ir, "_candidates", wraps=ir._candidates) as search, \
         patch.object(ir, "_oversized_collection", wraps=ir._oversized_collection) as cap:
        first = grade_trace(trace, default_plan())
        assert search.call_count == 2 and cap.call_count == 1  # with and without the trace itself
        assert grade_trace(trace, default_plan()) == first  # a second run gets its own memo
        assert search.call_count == 4 and cap.call_count == 2

    ctx = GraderContext()
    assert candidates(trace, ctx, include_trace=True)[0] is trace
    found = candidates(other, ctx, include_trace=True)  # same context, another trace: not reused
    assert found[0] is other
    found.append({})  # each caller gets its own list
    assert len(candidates(other, ctx, include_trace=True)) == len(found) - 1
