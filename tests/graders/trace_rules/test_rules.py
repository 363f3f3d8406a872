from __future__ import annotations

from dataclasses import replace

from graders.families.trace_rules.config import default_config
from graders.families.trace_rules.rules import (
    edited_without_read,
    excessive_steps,
    forbidden_tool,
    out_of_order,
    retry_storm,
)
from graders.families.trace_rules.verdicts import check_run, registered_rules
from graders.formats.model import Flag, Run, Step

CFG = default_config()


def run(*steps: tuple[str, bool] | tuple[str, bool, dict]) -> Run:
    return Run("t", "r", True, [Step(i, s[0], s[2] if len(s) > 2 else {}, "", s[1]) for i, s in enumerate(steps, 1)])


def test_forbidden_every_occurrence_name_only_case_sensitive():
    cfg = replace(CFG, forbidden_tools=frozenset({"force_push"}))
    r = run(("force_push", True), ("Force_Push", True), ("bash", True, {"command": "git push --force"}),
            ("force_push", False))
    assert forbidden_tool(r, cfg) == [
        Flag("forbidden_tool", "high", 1, "force_push", "forbidden tool 'force_push' used at step 1"),
        Flag("forbidden_tool", "high", 4, "force_push", "forbidden tool 'force_push' used at step 4"),
    ]


def test_out_of_order_every_violation_and_failed_before_counts():
    cfg = replace(CFG, must_precede=(("read", "edit"),))
    assert [f.step for f in out_of_order(run(("edit", True), ("edit", True), ("read", False), ("edit", True)), cfg)] == [1, 2]
    assert out_of_order(run(("edit", True)), cfg)[0].detail == "'edit' at step 1 not preceded by 'read'"


def test_out_of_order_self_pair_and_non_string_before():
    assert [f.step for f in out_of_order(run(("x", True), ("x", True)), replace(CFG, must_precede=(("x", "x"),)))] == [1]
    # A non-string "before" can never have been seen (reference semantics, minus its crash on lists).
    flags = out_of_order(run(("edit", True)), replace(CFG, must_precede=((["a"], "edit"),)))
    assert flags[0].detail == "'edit' at step 1 not preceded by '['a']'"


def test_retry_storm_boundary_and_breaks():
    cfg = replace(CFG, retry_threshold=2)
    assert retry_storm(run(("x", False), ("x", False)), cfg) == []
    (f,) = retry_storm(run(("y", True), ("x", False), ("x", False), ("x", False), ("x", True)), cfg)
    assert (f.step, f.tool, f.detail) == (2, "x", "'x' failed 3x in a row (> threshold 2)")
    # a failure of another tool ends the stretch and starts its own
    assert retry_storm(run(("x", False), ("x", False), ("z", False), ("x", False)), cfg) == []
    assert len(retry_storm(run(("x", False), ("z", False)), replace(CFG, retry_threshold=0))) == 2
    assert len(retry_storm(run(("x", True)), replace(CFG, retry_threshold=-1))) == 0


def test_excessive_steps():
    cfg = replace(CFG, step_budget=2)
    assert excessive_steps(run(("a", True), ("a", True)), cfg) == []
    assert excessive_steps(run(*[("a", True)] * 3), cfg) == [
        Flag("excessive_steps", "low", 3, None, "3 steps > budget 2")
    ]


def test_grounding():
    r = run(("Edit", True, {"file_path": "./a/../x.py"}), ("Edit", True, {"file_path": "x.py"}),
            ("Grep", True, {"path": "src"}), ("Edit", True, {"file_path": "src/y.py"}),
            ("Read", False, {"file_path": "z.py"}), ("Edit", True, {"path": "z.py"}),
            ("edit", True, {"file_path": "q.py"}), ("NotebookEdit", True, {"file_path": "n.ipynb"}),
            ("MultiEdit", True, {"file_path": "/abs/x.py"}))
    flags = edited_without_read(r, CFG)
    assert [(f.step, f.tool) for f in flags] == [(1, "Edit"), (4, "Edit"), (9, "MultiEdit")]
    assert flags[0].detail == "'Edit' edited 'x.py' at step 1 without reading it first (ungrounded)"
    assert edited_without_read(r, replace(CFG, grounding_enabled=False)) == []


def test_rule_order():
    cfg = replace(CFG, forbidden_tools=frozenset({"Edit"}), must_precede=(("Read", "Edit"),), retry_threshold=0,
                  step_budget=0)
    checks = [f.check for f in check_run(run(("Edit", False, {"file_path": "a"})), cfg)]
    assert checks == ["forbidden_tool", "out_of_order", "retry_storm", "excessive_steps", "edited_without_read"]


def test_the_registered_rules_are_the_five_in_the_reference_order() -> None:
    assert registered_rules() == [forbidden_tool, out_of_order, retry_storm, excessive_steps, edited_without_read]
