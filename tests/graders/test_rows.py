"""The ``runs`` row assembled from its parts (graders/tables/rows.py), and one dead letter per run
(the ``dead_letter`` spec's ``one_per_identity``, graders/tables/merge.py)."""

from __future__ import annotations

import random

import pytest
from hypothesis import given
from hypothesis import strategies as st

from graders.tables.merge import one_per_identity
from graders.tables.rows import RUN_PART, assemble_runs, failure_part, status_counts
from schemas.tables import SPECS


def stub(run_id: str, attempt: int = 1) -> dict:
    return {"workflow": "wf", "date": "2026-05-01", "run_id": run_id, "attempt": attempt, "root": f"wf/run-{run_id}",
            **status_counts([])}


def counts(run_id: str, statuses: list[str], attempt: int = 1) -> dict:
    return {RUN_PART: "counts", "workflow": "wf", "date": "2026-05-01", "run_id": run_id, "attempt": attempt,
            **status_counts([{"status": s} for s in statuses])}


def test_counts_of_every_family_are_summed_into_the_stub():
    parts = [counts("1", ["pass", "fail"]), stub("1"), counts("1", ["error", "unavailable", "pass"]), stub("2")]
    rows = assemble_runs(parts)
    assert rows == [
        {**stub("1"), "graders": 5, "passed": 2, "failed": 1, "errors": 1, "unavailable": 1},
        stub("2"),  # no family graded it: zero counts, still a row
    ]
    assert all(RUN_PART not in r for r in rows)


def test_attempts_of_a_run_are_kept_apart():
    rows = assemble_runs([stub("1", 1), stub("1", 2), counts("1", ["pass"], 2)])
    assert [(r["attempt"], r["graders"]) for r in rows] == [(1, 0), (2, 1)]


def test_a_run_a_family_failed_on_has_no_runs_row():
    parts = [stub("1"), counts("1", ["pass"]), failure_part("wf", "2026-05-01", "1", 1), stub("2")]
    assert [r["run_id"] for r in assemble_runs(parts)] == ["2"]
    # Another attempt of the same run is not affected.
    assert [r["attempt"] for r in assemble_runs([stub("1", 2), failure_part("wf", "2026-05-01", "1", 1)])] == [2]


def test_an_unknown_part_is_an_error_not_a_silent_drop():
    with pytest.raises(ValueError, match="unknown runs part 'totals'"):
        assemble_runs([stub("1"), {**counts("1", []), RUN_PART: "totals"}])


@given(st.lists(st.sampled_from(["pass", "fail", "error", "unavailable"]), max_size=12), st.randoms())
def test_assembly_does_not_depend_on_the_order_parts_arrive_in(statuses, rnd):
    parts = [stub("1"), *(counts("1", [s]) for s in statuses), stub("2")]
    shuffled = list(parts)
    rnd.shuffle(shuffled)
    assert sorted(assemble_runs(shuffled), key=lambda r: r["run_id"]) == assemble_runs(parts)
    assert assemble_runs(parts)[0]["graders"] == len(statuses)


def dead(input_path: str, stage: str, error_class: str, message: str) -> dict:
    return {"input": input_path, "stage": stage, "error_class": error_class, "message": message}


def test_one_dead_letter_per_input_and_stage_whatever_the_order():
    rows = [
        dead("wf/run-1", "grade", "ValueError", "b"),
        dead("wf/run-1", "grade", "KeyError", "z"),
        dead("wf/run-1", "grade", "ValueError", "a"),
        dead("wf/run-1", "prepare", "MetadataError", "m"),
        dead("wf/run-2", "grade", "ValueError", "c"),
    ]
    expected = [dead("wf/run-1", "grade", "KeyError", "z"), dead("wf/run-1", "prepare", "MetadataError", "m"),
                dead("wf/run-2", "grade", "ValueError", "c")]
    for seed in range(10):
        shuffled = list(rows)
        random.Random(seed).shuffle(shuffled)
        assert sorted(one_per_identity(SPECS["dead_letter"], shuffled), key=lambda r: (r["input"], r["stage"])) == expected
