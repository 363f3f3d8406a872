"""transforms/cost.py: the cost_outliers composite over stored and new runs, with drops."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import apache_beam as beam
from apache_beam.testing.util import assert_that, equal_to

from graders.tables.parquet import encode_table
from graders.tables.paths import partition_file
from tests.helpers.beam import local_test_pipeline
from transforms.cost import CostOutliers


def run_row(run: int, date: str, credits: float | None, attempt: int = 1, tokens: int | None = None) -> dict[str, Any]:
    return {"workflow": "wf", "date": date, "run_id": str(run), "attempt": attempt, "repository": "o/r",
            "ai_credits": credits, "tokens_input": tokens, "tokens_output": None, "tokens_cache_read": None,
            "tokens_cache_write": None, "tokens_reasoning": None}


def store(output: Path, table: str, rows: list[dict[str, Any]]) -> None:
    for date in sorted({r["date"] for r in rows}):
        path = output / partition_file(table, "wf", date)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(encode_table(table, [r for r in rows if r["date"] == date], "wf"))


def check(output: Path, runs: list[dict[str, Any]], drops: list[tuple[Any, ...]], rows: list[tuple[Any, ...]],
          stale: list[tuple[Any, ...]]) -> None:
    """The composite's (date, run, value, median) rows and its drops are the expected ones."""
    with local_test_pipeline() as p:
        out = {"runs": p | "R" >> beam.Create(runs), "drops": p | "D" >> beam.Create(drops)} | CostOutliers(str(output))
        got = out["cost_outliers"] | beam.Map(lambda r: (r["date"], r["run_id"], r["value"], r["baseline_median"]))
        assert_that(got, equal_to(rows), label="rows")
        assert_that(out["drops"], equal_to(stale), label="drops")


def test_new_runs_are_judged_against_the_stored_days_before_them(tmp_path: Path) -> None:
    store(tmp_path, "runs", [run_row(i, f"2026-11-0{1 + i % 3}", 10.0) for i in range(9)])
    check(tmp_path, [run_row(50, "2026-11-05", 25.0), run_row(51, "2026-11-05", 15.0)], [],
          [("2026-11-05", "50", 25.0, 10.0)], [])


def test_a_new_run_changes_the_verdicts_of_the_days_after_it(tmp_path: Path) -> None:
    base = [run_row(i, "2026-11-01", 10.0) for i in range(6)]
    store(tmp_path, "runs", [*base, run_row(20, "2026-11-10", 25.0)])
    store(tmp_path, "cost_outliers", [{"date": "2026-11-10", "run_id": "20", "attempt": 1, "metric": "ai-credits",
                                       "value": 25.0, "baseline_median": 10.0, "ratio": 2.5, "baseline_runs": 6,
                                       "baseline_start": "2026-10-27", "baseline_end": "2026-11-09", "factor": 2.0,
                                       "window_days": 14, "repository": "o/r", "run_url": None,
                                       "fleetgrade_version": "x"}])
    # Runs arriving on 11-02 raise the median of 11-10's window to 14: run 20 is no outlier any more.
    new = [run_row(30 + i, "2026-11-02", 14.0) for i in range(8)]
    check(tmp_path, new, [], [], [("cost_outliers", "wf", "2026-11-10", ("20", 1))])


def test_a_dropped_or_regraded_run_leaves_the_baseline(tmp_path: Path) -> None:
    store(tmp_path, "runs", [*(run_row(i, "2026-11-01", 10.0) for i in range(5)), run_row(20, "2026-11-03", 25.0)])
    # Run 4 was regraded into a dead letter (its rows dropped, none new), run 20 with new credits:
    # 11-03's window keeps 4 runs, too few to judge run 20.
    drops = [("runs", "wf", "2026-11-01", ("4", 1)), ("runs", "wf", "2026-11-03", ("20", 1))]
    check(tmp_path, [run_row(20, "2026-11-03", 30.0)], drops, [], [])
    check(tmp_path, [run_row(20, "2026-11-03", 30.0)], drops[1:], [("2026-11-03", "20", 30.0, 10.0)], [])
