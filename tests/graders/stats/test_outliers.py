"""cost_outliers' pure core (graders/stats/outliers.py): the k× rolling-median rule, exact, and
the incremental plan: recomputing only the planned dates from only the planned reads gives the
rows a full recomputation gives."""

from __future__ import annotations

import datetime as dt
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from graders.stats.outliers import MIN_BASELINE, Spend, outlier_rows, plan, run_url, spend_of

DAY0 = dt.date(2026, 11, 1)


def day(n: int) -> str:
    return (DAY0 + dt.timedelta(days=n)).isoformat()


def spend(i: int, n: int, credits: float | None, tokens: int | None = None) -> Spend:
    return Spend(f"r{i}", 1, day(n), "octo/widgets", credits, tokens)


def test_a_run_above_k_times_the_median_of_the_days_before_is_listed() -> None:
    base = [spend(i, i % 7, 10.0 + i % 3) for i in range(14)]  # medians of 11 over days 0..6
    runs = [*base, spend(100, 7, 22.5), spend(101, 7, 21.0), spend(102, 7, 40.0)]
    rows = outlier_rows("wf", runs, [day(7)], factor=2.0, days=14)
    assert [(r["run_id"], r["value"], r["baseline_median"], r["baseline_runs"]) for r in rows] == [
        ("r100", 22.5, 11.0, 14), ("r102", 40.0, 11.0, 14)]  # 21 is not above 2 × 11 = 22
    r = rows[0]
    assert (r["metric"], r["ratio"], r["baseline_start"], r["baseline_end"]) == ("ai-credits", 22.5 / 11, day(-7), day(6))
    assert r["run_url"] == "https://github.com/octo/widgets/actions/runs/r100"


def test_the_days_own_runs_and_runs_outside_the_window_do_not_judge() -> None:
    runs = [spend(i, 0, 1.0) for i in range(MIN_BASELINE)] + [spend(50, 20, 100.0), spend(51, 20, 1.0)]
    assert outlier_rows("wf", runs, [day(20)], days=14) == []  # day 0 is outside [6, 19]; same-day runs never
    assert [r["run_id"] for r in outlier_rows("wf", runs, [day(20)], days=20)] == ["r50"]


def test_too_few_runs_judge_nothing_and_runs_without_credits_are_judged_on_tokens() -> None:
    few = [spend(i, 1, 1.0) for i in range(MIN_BASELINE - 1)] + [spend(9, 2, 50.0)]
    assert outlier_rows("wf", few, [day(2)]) == []
    mixed = [spend(i, 1, None, 1000) for i in range(6)] + [spend(9, 2, None, 5000), spend(10, 2, 3.0, 9000)]
    rows = outlier_rows("wf", mixed, [day(2)])
    assert [(r["run_id"], r["metric"], r["value"]) for r in rows] == [("r9", "tokens", 5000.0)]  # r10: no credit baseline


def test_a_runs_spend_comes_from_its_runs_row() -> None:
    row: dict[str, Any] = {"run_id": "7", "attempt": 2, "date": "2026-11-03", "repository": None, "ai_credits": None,
                           "tokens_input": 10, "tokens_output": 5, "tokens_cache_read": None, "tokens_cache_write": 0,
                           "tokens_reasoning": None}
    assert spend_of(row) == Spend("7", 2, "2026-11-03", None, None, 15)
    assert spend_of({**row, **dict.fromkeys(("tokens_input", "tokens_output", "tokens_cache_write"))}).tokens is None
    assert run_url("o/r", "7", 2) == "https://github.com/o/r/actions/runs/7/attempts/2"
    assert run_url(None, "7", 1) is None


RUNS = st.lists(st.tuples(st.integers(0, 40), st.one_of(st.none(), st.floats(0.1, 50)), st.integers(0, 3)),
                min_size=1, max_size=80)


@settings(max_examples=150, deadline=None)
@given(RUNS, st.lists(st.tuples(st.integers(0, 40), st.floats(0.1, 500)), min_size=1, max_size=6),
       st.integers(1, 20), st.sampled_from([1.5, 2.0, 3.0]))
def test_the_planned_dates_read_from_the_planned_days_give_the_full_recomputation(old: list[Any], added: list[Any],
                                                                                  days: int, factor: float) -> None:
    before = [Spend(f"o{i}", 1, day(d), None, c, t) for i, (d, c, t) in enumerate(old)]
    new = [Spend(f"n{i}", 1, day(d), None, c, None) for i, (d, c) in enumerate(added)]
    after = before + new
    all_dates = sorted({s.date for s in after})
    full_before = outlier_rows("wf", before, all_dates, factor, days)
    full_after = outlier_rows("wf", after, all_dates, factor, days)
    p = plan({("wf", s.date) for s in new}, {("wf", s.date) for s in before}, days)["wf"]
    # Rows outside the planned dates do not change, so the stored ones stay right…
    assert [r for r in full_before if r["date"] not in p["dates"]] == \
        [r for r in full_after if r["date"] not in p["dates"]]
    # …and the planned dates, recomputed from the planned reads alone, are the full recomputation's.
    read = [s for s in after if s.date in p["read"]]
    assert outlier_rows("wf", read, p["dates"], factor, days) == [r for r in full_after if r["date"] in p["dates"]]


def test_other_settings_replan_every_stored_date() -> None:
    stored = [("a", day(0)), ("a", day(30)), ("b", day(5))]
    assert plan([], stored) == {}
    everything = plan([], stored, everything=True)
    assert everything["a"]["dates"] == [day(0), day(30)] and everything["b"]["dates"] == [day(5)]


def test_a_run_judges_the_runs_of_the_last_day_of_its_window_too() -> None:
    # Runs on day 0 are the whole baseline of a run on day 14 (window [0, 13]).
    before = [spend(i, 0, 1.0) for i in range(MIN_BASELINE)] + [spend(9, 14, 3.0)]
    assert [r["run_id"] for r in outlier_rows("wf", before, [day(14)])] == ["r9"]
    after = before + [spend(i, 0, 2.0) for i in range(10, 16)]  # the median of day 0 becomes 2
    assert outlier_rows("wf", after, [day(14)]) == []
    assert day(14) in plan([("wf", day(0))], {("wf", day(0)), ("wf", day(14))})["wf"]["dates"]
