"""Per-run values shared by the built-in graders of one run, and never across runs."""

from unittest.mock import patch

from graders.families import builtin
from graders.grading.engine import grade_trace
from graders.grading.plan import default_plan
from graders.grading.registry import GraderContext


def _trace(calls):
    return {"toolCalls": calls, "tokenUsageEntries": [], "retryEvents": [], "totalRequests": 0, "totalDurationMs": 0,
            "totalInputTokens": 0, "totalOutputTokens": 0}


def test_failures_are_counted_once_per_run_and_afresh_for_the_next() -> None:
    failing = _trace([{"name": "a", "success": False}, {"name": "b"}])
    clean = _trace([{"name": "a"}, {"name": "b"}])
    with patch.object(builtin, "_count_failures", wraps=builtin._count_failures) as test:
        first = {r["id"]: r["value"] for r in grade_trace(failing, default_plan())}
        assert test.call_count == 1  # once: both failure graders share the count
        second = {r["id"]: r["value"] for r in grade_trace(clean, default_plan())}
    assert (first["tool-failure-count"], first["tool-success-rate"]) == (1, 0.5)
    assert (second["tool-failure-count"], second["tool-success-rate"]) == (0, 1)

    ctx = GraderContext()  # one context reused for another trace: recounted, not reused
    assert builtin.tool_failure_count(failing, ctx) == 1
    assert builtin.tool_failure_count(clean, ctx) == 0


def test_names_are_shared_by_loops_and_efficiency_within_a_run() -> None:
    calls = [{"name": "a"}, {"name": "a"}, {"tool": "b"}, {"name": 0, "tool": "b"}, {"name": 1}, "not a record", {}]
    ctx = GraderContext()
    with patch.object(builtin, "_call_names", wraps=builtin._call_names) as name_of:
        # a,a and b,b (name 0 falls back to tool), and the two unnamed calls without arguments
        assert builtin.loops(_trace(calls), ctx) == 3
        # distinct: "a", "b", "1" and "" (a non-record's and an empty call's undefined name)
        assert builtin.trajectory_efficiency(_trace(calls), ctx) == 4 / 7
        assert name_of.call_count == 2  # the two graders got separate traces: named twice
        trace = _trace(calls)
        builtin.loops(trace, ctx)
        builtin.trajectory_efficiency(trace, ctx)
        assert name_of.call_count == 3  # one trace: named once for both


def test_results_built_from_the_plan_templates_are_the_normalized_results_and_share_nothing() -> None:
    from graders.grading.engine import grade_one

    plan = default_plan()
    trace = _trace([{"name": "a", "success": False}, {"name": "b"}, {"name": "b"}])
    results = grade_trace(trace, plan)
    count = len(plan.enabled)
    want = [grade_one(e, trace, GraderContext(config=e.config or {}, grader_count=count)) for e in plan.enabled]
    assert results == want
    assert [list(r) for r in results] == [list(w) for w in want]  # the same keys in the same order
    for template, result in zip(plan.result_templates, results, strict=True):
        result["implementation"]["version"] = -1
        result["status"] = "changed"
        assert template["implementation"]["version"] != -1 and template["status"] != "changed"
    assert all(r["implementation"]["version"] != -1 for r in grade_trace(trace, plan))
