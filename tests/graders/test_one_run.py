"""One run graded end to end by the core (graders/one_run.py): every family's rows, the whole
``runs`` row, the trace verdict, or one dead letter when a family or the rules fail on it."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import graders.one_run as one_run
from graders.families.observed import OBSERVED, observed_plan
from graders.families.trace_rules.config import default_config
from graders.grading.plan import PlanSet, default_plan
from graders.one_run import RunGrader
from graders.prepare import prepare_run
from graders.runs.runfiles import local_run_files
from graders.tables.rows import status_counts

FLEET = Path(__file__).resolve().parents[2] / "examples" / "fleet"
RUN = "ci-doctor/run-7100403"
PLANS = PlanSet(default_plan())


@pytest.fixture(scope="module")
def prep():
    return prepare_run(local_run_files(FLEET / RUN), RUN)


def test_a_graded_run_has_every_family_s_rows_a_whole_runs_row_and_its_verdict(prep):
    grades = RunGrader(PLANS, default_config()).grade(prep)
    plan = PLANS.default
    assert [r["id"] for r in grades.results] == [e.id for e in plan.enabled]  # manifest order
    # The observed graders are graded beside the plan: rows after the plan's, counted in the runs row.
    observed = observed_plan().enabled
    assert sorted(r["grader_id"] for r in grades.grader_results) == sorted(e.id for e in (*plan.enabled, *observed))
    assert [r["grader_index"] for r in grades.grader_results if r["source"] == "fleetgrade"] == [
        len(plan.enabled) + i for i in range(len(observed))]
    assert grades.run is not None and grades.dead_letter is None
    assert {k: grades.run[k] for k in status_counts([])} == status_counts([*grades.results, *grades.by_family[OBSERVED]])
    assert grades.run["graders"] == len(plan.enabled) + len(observed) > len(observed)
    assert (grades.run["run_id"], grades.run["root"]) == (prep.meta.run_id, prep.meta.root)
    assert grades.trace_verdict is not None and grades.trace_verdict["run_id"] == prep.meta.run_id
    assert sum(len(v) for f, v in grades.by_family.items() if f != OBSERVED) == len(grades.results)
    assert grades.grader_drift == []  # the demo run carries no archived grader_results.json


def test_without_trace_rules_there_is_no_verdict(prep):
    grades = RunGrader(PLANS).grade(prep)
    assert grades.trace_verdict is None and grades.run is not None


@settings(max_examples=15, deadline=None)
@given(st.sets(st.sampled_from(["builtin", "trajectory", "trace-rules"]), min_size=1),
       st.permutations(["builtin", "trajectory", "operational-value"]))
def test_a_failure_makes_one_dead_letter_and_no_other_row(prep, failing, order):
    grader = RunGrader(PLANS, default_config())
    grader.families = list(order)  # the dead letter must not depend on the order families run in
    real_family, real_verdict = RunGrader._grade_family, one_run.verdict_row
    messages = {"builtin": ValueError("builtin broke"), "trajectory": RecursionError("deep"),
                "trace-rules": KeyError("rules")}

    def family(self, p, plan, name, ids):
        if name in failing:
            raise messages[name]
        return real_family(self, p, plan, name, ids)

    def verdict(p, cfg):
        if "trace-rules" in failing:
            raise messages["trace-rules"]
        return real_verdict(p, cfg)

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(RunGrader, "_grade_family", family)
        mp.setattr(one_run, "verdict_row", verdict)
        grades = grader.grade(prep)
    assert grades.run is None
    dead = grades.dead_letter
    assert dead is not None and (dead["stage"], dead["input"], dead["run_id"]) == ("grade", prep.meta.root, prep.meta.run_id)
    expected = min((type(messages[f]).__name__, one_run.failure_text(messages[f])[1]) for f in failing)
    assert (dead["error_class"], dead["message"]) == expected
    # A run is graded or dead-lettered, never both (issue 40): the other families' rows go too.
    assert (grades.grader_results, grades.results, grades.by_family, grades.grader_drift) == ([], [], {}, [])
    assert grades.trace_verdict is None


def test_strict_grading_raises_the_failure(prep, monkeypatch):
    def broken(p, cfg):
        raise RecursionError("deep")

    monkeypatch.setattr(one_run, "verdict_row", broken)
    with pytest.raises(RecursionError):
        RunGrader(PLANS, default_config()).grade(prep, strict=True)


def test_a_failure_s_message_is_as_beam_reported_it():
    import sys
    import traceback

    try:
        raise KeyError("first line\nsecond: line")
    except KeyError as exc:
        record = (type(exc), repr(exc), traceback.format_exception(*sys.exc_info()))
    assert one_run.failure_text(record) == ("KeyError", "'first line\\nsecond: line'")
    assert one_run.failure_text(ValueError("v")) == ("ValueError", "v")
    assert one_run.failure_text("text") == ("Error", "text")


def test_a_run_folder_is_graded_end_to_end_as_from_its_prepared_run(prep):
    grader = RunGrader(PLANS, default_config())
    whole = grader.grade_files(local_run_files(FLEET / RUN), RUN)
    assert whole.run == grader.grade(prep).run
    assert whole.grader_results == grader.grade(prep).grader_results
