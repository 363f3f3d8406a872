"""transforms/stats.py: the daily-cell combiner, the incremental plan, and the Beam graph."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import apache_beam as beam
from apache_beam.testing.util import assert_that, equal_to
from hypothesis import given, settings
from hypothesis import strategies as st

from graders.stats.cells import DELIVERED, Observation, stats_rows
from tests.helpers.beam import local_test_pipeline
from tests.helpers.combiners import assert_combiner_equivalent
from transforms.stats import CellCombineFn, FleetStats, plan

OBS = st.builds(
    Observation,
    task=st.sampled_from(["a", "b", "c"]),
    value=st.one_of(st.none(), st.floats(-5, 5)),
    passed=st.one_of(st.none(), st.booleans()),
    status=st.sampled_from(["pass", "fail", "error", "unavailable"]),
    direction=st.sampled_from(["", "higher_is_better"]),
    unit=st.sampled_from(["", "ratio"]),
)


@settings(max_examples=60, deadline=None)
@given(st.lists(OBS, max_size=16))
def test_cell_combiner_plans_agree(observations: list[Observation]) -> None:
    out = assert_combiner_equivalent(CellCombineFn(), observations)
    # The rows derived from the accumulator agree too (they are what is written).
    rows = stats_rows("wf", "g", {"2026-11-01": out}, ["2026-11-01"], windows=(1,), reps=200)
    again = stats_rows("wf", "g", {"2026-11-01": assert_combiner_equivalent(CellCombineFn(), observations[::-1])},
                       ["2026-11-01"], windows=(1,), reps=200)
    assert rows == again


def test_plan_recomputes_only_windows_holding_touched_dates() -> None:
    stored = [("wf", f"2026-11-{d:02d}") for d in range(1, 31)] + [("other", "2026-11-01")]
    p = plan([("wf", "2026-11-10")], stored, window=7, baseline=28)
    assert set(p) == {"wf"}, "an untouched workflow is not recomputed"
    ends = p["wf"]["ends"]
    assert ends[0] == "2026-11-10" and ends[-1] == "2026-11-30" and len(ends) == 21
    assert p["wf"]["latest"] == "2026-11-30"  # 11-10 lies in [11-30 − 34, 11-30]
    assert p["wf"]["read"][0] == "2026-11-01" and p["wf"]["read"][-1] == "2026-11-30"


def test_plan_leaves_the_regression_cell_when_the_touched_date_is_older_than_its_windows() -> None:
    stored = [("wf", "2026-09-01"), ("wf", "2026-11-30")]
    p = plan([("wf", "2026-09-01")], stored, window=7, baseline=28)
    assert p["wf"] == {"ends": ["2026-09-01"], "latest": None, "read": ["2026-09-01"]}


def test_plan_of_a_first_run_covers_the_new_dates() -> None:
    p = plan([("wf", "2026-11-02"), ("wf", "2026-11-01")], [], window=7, baseline=28)
    assert p["wf"]["ends"] == ["2026-11-01", "2026-11-02"] and p["wf"]["latest"] == "2026-11-02"


def _result(run: int, date: str, value: float) -> dict[str, Any]:
    return {"workflow": "wf", "date": date, "run_id": str(run), "attempt": 1, "grader_id": "g", "value": value,
            "passed": value >= 0.5, "status": "pass", "direction": "higher_is_better", "unit": "ratio"}


def _verdict(run: int, date: str, task: str) -> dict[str, Any]:
    return {"workflow": "wf", "date": date, "run_id": str(run), "attempt": 1, "task": task, "delivered": True}


def test_fleet_stats_on_an_empty_output(tmp_path: Path) -> None:
    results = [_result(i, "2026-11-01", i / 10) for i in range(6)]
    verdicts = [_verdict(i, "2026-11-01", f"wf#{i % 3}") for i in range(6)]
    with local_test_pipeline() as p:
        out = {
            "grader_results": p | "R" >> beam.Create(results),
            "trace_verdicts": p | "V" >> beam.Create(verdicts),
            "drops": p | "D" >> beam.Create([]),
        } | FleetStats(str(tmp_path))
        summary = out["grader_stats"] | beam.Map(lambda r: (r["grader_id"], r["window_days"], r["n"], r["n_tasks"],
                                                            r["mean"], r["pass_count"]))
        assert_that(summary, equal_to([
            ("g", 1, 6, 3, 0.25, 1), ("g", 7, 6, 3, 0.25, 1), ("g", 28, 6, 3, 0.25, 1),
            (DELIVERED, 1, 6, 3, 1.0, 6), (DELIVERED, 7, 6, 3, 1.0, 6), (DELIVERED, 28, 6, 3, 1.0, 6)]),
            label="stats")
        verdict = out["regressions"] | beam.Map(lambda r: (r["grader_id"], r["verdict"], r["n_current"],
                                                           r["runs_needed"]))
        assert_that(verdict, equal_to([("g", "insufficient-data", 6, 5), (DELIVERED, "insufficient-data", 6, 5)]),
                    label="regressions")
        assert_that(out["drops"], equal_to([]), label="drops")


def test_plan_retests_every_workflow_when_the_stored_windows_differ() -> None:
    stored = [("wf", f"2026-11-{d:02d}") for d in range(1, 31)] + [("other", d) for d in ("2026-09-01", "2026-10-20", "2026-10-31")]
    touched = [("wf", "2026-11-30")]
    assert set(plan(touched, stored, window=7, baseline=28)) == {"wf"}
    p = plan(touched, stored, window=7, baseline=28, retest_all=True)
    # The untouched workflow's regression cell is retested from the partitions its windows span;
    # its grader_stats are left alone.
    assert p["other"] == {"ends": [], "latest": "2026-10-31", "read": ["2026-10-20", "2026-10-31"]}
    assert p["wf"]["latest"] == "2026-11-30"
    old = plan([("wf", "2026-09-01")], [("wf", "2026-09-01"), ("wf", "2026-11-30")], 7, 28, retest_all=True)
    assert old["wf"]["latest"] == "2026-11-30" and old["wf"]["read"] == ["2026-09-01", "2026-11-30"]
