from __future__ import annotations

from dataclasses import replace

from graders.families.trace_rules.config import default_config
from graders.families.trace_rules.verdicts import grade, verdict
from graders.formats.model import Flag, Run, Step

HIGH = Flag("forbidden_tool", "high", 1, "x", "")
LOW = Flag("excessive_steps", "low", 1, None, "")


def test_verdict_table():
    assert verdict(False, [HIGH]) == "fail"
    assert verdict(True, []) == "clean-pass"
    assert verdict(True, [LOW, HIGH]) == "corrupt-success"
    assert verdict(True, [LOW]) == "pass-with-warnings"


def test_grade_summary_and_exit_codes():
    cfg = replace(default_config(), forbidden_tools=frozenset({"x"}))
    runs = [
        Run("a", "a1", True, [Step(1, "x")]),
        Run("a", "a2", True, []),
        Run("b", "b1", False, [Step(1, "y")]),
    ]
    report = grade(runs, cfg)
    assert [r.verdict for r in report.runs] == ["corrupt-success", "clean-pass", "fail"]
    assert report.runs[0].corrupt_success and not report.runs[2].corrupt_success
    assert report.pass_k() == {
        "a": {"k": 2, "n_success": 2, "n_fail": 0, "pass_hat_k": True},  # flags do not matter
        "b": {"k": 1, "n_success": 0, "n_fail": 1, "pass_hat_k": False},
    }
    s = report.summary()
    assert (s["tasks_repeatable"], s["tasks_flaky"]) == (1, 1)
    assert report.exit_code() == 3
    assert grade([], cfg).exit_code() == 0
    assert grade([Run("a", "a", True, [Step(1, "x")])], default_config()).exit_code() == 0


def test_judge_axis():
    assert grade([], default_config()).summary()["judge_axis"] == "disabled (adapter, verified:false)"
    active = replace(default_config(), verified=True, judge_enabled=True)
    assert grade([], active).summary()["judge_axis"] == "active"
