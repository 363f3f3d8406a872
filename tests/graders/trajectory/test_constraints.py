"""skill-constraint-coverage (docs/reference/graders.md §8)."""

from __future__ import annotations

from tests.graders.trajectory.helpers import run


def _trace(**kw: object) -> dict:
    return {"toolCalls": [], **kw}


def test_coverage_counts_invalid_patterns_in_the_denominator() -> None:
    trace = _trace(toolCalls=[
        {"name": "bash", "arguments": {"command": "make test"}, "success": True},
        {"name": "bash", "arguments": {"command": "make lint"}, "completed": False},
        {"name": "create_issue", "arguments": {"title": "x"}},
    ])
    config = {"constraints": [
        {"id": "tests", "pattern": "MAKE TEST"},  # "i": case-insensitive
        {"id": "lint", "pattern": "make lint"},  # matched an unfinished call: unmet
        {"pattern": "deploy"},  # never exercised
        {"pattern": "(["},  # invalid
        {"pattern": "create_issue", "requireSuccess": False},
        "not a record",
    ]}
    result = run("skill-constraint-coverage", trace, config)
    assert result["value"] == 2 / 6
    assert result["details"] == "constraints=6 exercised=3 covered=2 invalidPattern=2; unmet: lint"


def test_actions_are_entries_too() -> None:
    trace = _trace(actions=[{"type": "push", "target": "issue#3", "validAtIssueTime": False}])
    result = run("skill-constraint-coverage", trace, {"constraints": [{"pattern": "^push issue#3$"}]})
    assert result["value"] == 0
    assert result["details"] == "constraints=1 exercised=1 covered=0; unmet: ^push issue#3$"


def test_not_applicable_messages() -> None:
    assert run("skill-constraint-coverage", _trace(), {"constraints": [{"pattern": "x"}]})["message"] == (
        "not applicable: trace lacks toolCalls/actions"
    )
    trace = _trace(toolCalls=[{"name": "x"}])
    assert run("skill-constraint-coverage", trace, {"constraints": [{"pattern": ""}, {"pattern": "(?<x>"}]})[
        "message"
    ] == "not applicable: no constraints with a valid pattern configured"


def test_text_is_cut_at_4096_utf16_units() -> None:
    # The emoji straddles the cut: JS keeps its high surrogate only.
    name = "a" * 4095 + "\U0001f600" + "tail"
    trace = _trace(toolCalls=[{"name": name}])
    config = {"constraints": [{"pattern": "tail"}, {"pattern": "a\ud83d$"}]}
    assert run("skill-constraint-coverage", trace, config)["details"] == "constraints=2 exercised=1 covered=1"
