from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from graders.families.builtin import tool_failure_count
from graders.families.trace_rules.config import default_config
from graders.families.trace_rules.verdicts import grade
from graders.formats.ghaw.toolcalls import is_tool_failure
from graders.formats.ghaw.trace import run_from_ghaw_trace, task_key
from graders.grading.registry import GraderContext


def test_run_from_ghaw_trace():
    trace = {
        "toolCalls": [
            {"name": "github-get_issue", "arguments": {"issue_number": 3}},
            {"tool": "bash", "arguments": {"command": "make"}, "success": False},
            {"name": "bash", "status": "error"},
            {"name": "bash", "completed": False},
            {"name": "bash", "error": {"message": "boom"}},
            "not-a-call",
        ],
        "agentOutput": {"items": [{"type": "create_issue"}], "errors": []},
    }
    run = run_from_ghaw_trace(trace, "wf#3", "123")
    assert [(s.tool, s.ok) for s in run.steps] == [
        ("github-get_issue", True), ("bash", False), ("bash", False), ("bash", False), ("bash", False), ("", True)]
    assert run.steps[4].observation == "boom"
    assert (run.task, run.run_id, run.ok) == ("wf#3", "123", True)
    (report,) = grade([run], default_config()).runs
    assert [f.check for f in report.flags] == ["retry_storm"]  # 4 consecutive bash failures > 3


def test_delivered_unless_agent_output_errors():
    assert run_from_ghaw_trace({"toolCalls": [], "agentOutput": {"errors": ["bad item"]}}, "t", "r").ok is False
    assert run_from_ghaw_trace({"toolCalls": [], "agentOutput": None}, "t", "r").ok is True
    assert run_from_ghaw_trace({}, "t", "r").steps == []


def test_task_key():
    assert task_key(None, "triage") == "triage"
    assert task_key({"workflow_name": "triage"}, "triage") == "triage"
    assert task_key({"issue_number": 42}, "triage") == "triage#42"
    assert task_key({"pull_request_number": "7"}, "review") == "review#7"
    assert task_key({"context": {"issue": {"number": 9}}}, "w") == "w#9"
    assert task_key({"event": {"pull_request": {"number": 11}}}, "w") == "w#11"
    assert task_key({"issue_number": True, "pr_number": "x1"}, "w") == "w"


_call_values = st.one_of(st.none(), st.booleans(), st.sampled_from(["error", "failure", "success", "", "x"]), st.integers(0, 1),
                         st.fixed_dictionaries({}, optional={"message": st.sampled_from(["boom", 3])}))


@settings(max_examples=300, deadline=None)
@given(st.lists(st.one_of(
    st.dictionaries(st.sampled_from(["name", "tool", "success", "completed", "status", "error", "arguments"]),
                    _call_values, max_size=5),
    st.none(), st.integers(), st.lists(st.none(), max_size=1)), max_size=8))
def test_a_step_fails_by_the_tool_success_rate_rule(calls):
    trace = {"toolCalls": calls}
    run = run_from_ghaw_trace(trace, "t", "r")
    assert sum(not s.ok for s in run.steps) == tool_failure_count(trace, GraderContext())
    assert [s.ok for s in run.steps] == [not is_tool_failure(c) for c in calls]
