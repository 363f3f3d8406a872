"""The report's headline on a graded planted-shift fleet (the issue's acceptance, at test size)."""

from __future__ import annotations

from pathlib import Path

import pytest

from pipeline.cli import main
from tests.pipeline.stats_fleet import SHIFT_DATE, shifted_output
from tests.pipeline.test_report import metrics

__all__ = ["shifted_output"]  # the fixture


def test_flags_the_planted_drop_and_not_the_rise(shifted_output: Path, tmp_path: Path) -> None:
    html_path = tmp_path / "r.html"
    assert main(["report", str(shifted_output), "--html", str(html_path)]) == 0
    html = html_path.read_text(encoding="utf-8")
    assert [w["data-workflow"] for w in metrics(html, "worse-workflow")] == ["ci-doctor"]
    cells = {(r["data-workflow"], r["data-grader"]): r for r in metrics(html, "regression")}
    assert cells[("ci-doctor", "tool-success-rate")]["data-verdict"] == "regressed"
    assert cells[("issue-triage", "tool-success-rate")]["data-verdict"] != "regressed"
    assert "from the regressions table" in html
    # the regressed cell's daily chart: an interval band and the change point on the planted date
    assert metrics(html, "mean-band") and metrics(html, "pass-rate-band")
    assert SHIFT_DATE in {m["data-date"] for m in metrics(html, "change-point")}
    dots = [m for m in metrics(html, "daily-mean") if m["data-grader"] == "tool-success-rate"]
    assert dots and all(m["data-workflow"] == "ci-doctor" for m in dots)


def test_cells_without_any_graded_value_are_counted_not_listed() -> None:
    """A grader unavailable on every run (no IR: the trajectory graders) has nothing to test."""
    from pipeline.report.headline import _lede, _never
    from pipeline.stats_read import graded

    empty = {"workflow": "wf", "grader_id": "trajectory-ndtw", "verdict": "insufficient-data",
             "n_current": 0, "n_baseline": 0}
    short = {"workflow": "wf", "grader_id": "retries", "verdict": "insufficient-data", "n_current": 3, "n_baseline": 0}
    text = _lede([empty, short], 0.05, {"wf": 3}, 35)
    assert 'data-state="untested"' in text and "Not enough history to test yet (3 days of 35)" in text
    assert "trajectory-ndtw" not in text
    never = _never([empty, short])
    assert "1 cell(s) were never graded" in never and "trajectory-ndtw" in never and "retries" not in never
    assert not graded(empty) and graded(short)


def test_the_daily_chart_scales_to_the_means_not_to_one_run_days_intervals() -> None:
    """A count's daily means 0.3 → 5.5 with t intervals at 1 df (±20): the scale follows the
    means, a series never below 0 is not drawn below it, and each point's title keeps its interval."""
    import datetime as dt
    import re

    from pipeline.report.svg import mean_chart

    first = dt.date(2026, 11, 17)
    points = [{"date": first + dt.timedelta(days=i), "mean": m, "ci_low": m - 20, "ci_high": m + 20, "n": 2}
              for i, m in enumerate([0.3, 0.2, 0.4, 5.5, 4.0])]
    svg = mean_chart("wf", "tool-error-count", points, first, first + dt.timedelta(days=4))
    ticks = [float(t) for t in re.findall(r'class="tick" text-anchor="end">(-?[0-9.]+(?:e[-+]?[0-9]+)?)<', svg)]
    assert ticks == [0.0, pytest.approx(5.5 + 0.25 * 5.3, abs=0.01)]  # shown to 3 figures
    ys = [float(v) for v in re.findall(r'<circle cx="[0-9.]+" cy="([0-9.]+)"', svg)]
    assert max(ys) - min(ys) > 60  # the jump spans most of the chart's 112-pixel height
    assert "[-14.5, 25.5]" in svg  # the 5.5 day's whole interval, in its title
