"""Calibration of the fleet statistics (``python -m bench --only stats``; docs/statistics.md).

Simulated fleets go straight into the pure core, the same ``regression_row`` / ``with_q_values``
/ ``bootstrap_interval`` functions ``fleetgrade run`` calls per cell; the pipeline around them
only reads and writes rows, so it adds nothing to what is measured here, and thousands of
fleets take minutes instead of days.

A fleet: 8 workflows, 35 days (28 of baseline, then 7 current), 7 runs a day each. A run's value
is its task's level (SD 0.5) plus noise (SD √0.75), so values have SD 1 and reruns of a task
are correlated; a workflow draws each run's task from 20 tasks. Measured:

- false-positive rate: fleets with no shift; the share with any ``regressed`` cell (BH at
  q ≤ 0.05 over the 8 cells), with its Monte Carlo standard error;
- power: one workflow drops by 0.5, 1 or 2 SD from a day drawn from the 3 days before the current
  window to its second day (so the change point is not the window's edge); the share of
  fleets where that cell is ``regressed``, and the mean |change date − planted date| in days;
- coverage: the 95% bootstrap interval over tasks of a 7-day cell (49 runs) contains the
  population mean (0), over ≥ 500 replicates; the clustered CLT interval alongside.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from bench.common import row
from graders.stats.cells import CellAcc, Observation, regression_row, shift, with_q_values
from graders.stats.estimators import Clusters, bootstrap_interval, clustered_se, rng_for

START = "2026-10-01"
DAYS, CURRENT, PER_DAY, WORKFLOWS, TASKS = 35, 7, 7, 8, 20
TASK_SD = 0.5
NOISE_SD = math.sqrt(1 - TASK_SD**2)
FDR = 0.05


def _series(rng: np.random.Generator, drop: float = 0.0, from_day: int = DAYS) -> dict[str, CellAcc]:
    """One workflow's daily cells; values fall by ``drop`` SD from ``from_day`` on."""
    levels = rng.normal(0.0, TASK_SD, TASKS)
    daily = {}
    for day in range(DAYS):
        acc = CellAcc()
        tasks = rng.integers(0, TASKS, PER_DAY)
        noise = rng.normal(0.0, NOISE_SD, PER_DAY)
        for t, e in zip(tasks, noise, strict=True):
            value = levels[t] + e - (drop if day >= from_day else 0.0)
            acc.add(Observation(f"task-{t}", float(value), None, "pass", "higher_is_better", "score"))
        daily[shift(START, day)] = acc
    return daily


def _fleet(seed: int, drop: float = 0.0) -> tuple[list[dict[str, Any]], int]:
    """The fleet's regressions rows (with q-values); workflow 0 carries the planted drop."""
    rng = np.random.default_rng(seed)
    planted = DAYS - CURRENT + int(rng.integers(-3, 2))  # 3 days before the current window … its 2nd day
    end = shift(START, DAYS - 1)
    rows = [regression_row(f"wf{w}", "g", _series(rng, drop if w == 0 else 0.0, planted), end, CURRENT, DAYS - CURRENT)
            for w in range(WORKFLOWS)]
    return with_q_values(rows, FDR), planted


def _days_between(a: str, b: str) -> int:
    return abs((np.datetime64(a) - np.datetime64(b)).astype(int))


def null_rate(fleets: int) -> list[dict[str, Any]]:
    flagged = sum(any(r["verdict"] == "regressed" for r in _fleet(10_000 + i)[0]) for i in range(fleets))
    rate = flagged / fleets
    se = math.sqrt(FDR * (1 - FDR) / fleets)  # the estimate's Monte Carlo SE were the true rate the FDR
    ok = rate <= FDR + 2 * se
    return [row("false-positive rate (null fleets, any regressed cell)", rate, "share",
                note=f"{flagged}/{fleets} fleets; Monte Carlo SE {se:.3f}; FDR {FDR:g}: "
                f"{'within' if ok else 'ABOVE'} FDR + 2 SE")]


def power(fleets: int, drops: tuple[float, ...] = (0.5, 1.0, 2.0)) -> list[dict[str, Any]]:
    out = []
    for drop in drops:
        hits, errors = 0, []
        for i in range(fleets):
            rows, planted = _fleet(20_000 + i, drop)
            cell = rows[0]
            if cell["verdict"] == "regressed":
                hits += 1
                if cell["change_date"]:
                    errors.append(_days_between(cell["change_date"], shift(START, planted)))
        share = hits / fleets
        se = math.sqrt(max(share * (1 - share), 1 / fleets) / fleets)
        out.append(row(f"power, {drop:g} SD drop at {PER_DAY} runs/day", share, "share",
                       note=f"{hits}/{fleets} fleets; Monte Carlo SE {se:.3f}"))
        if errors:
            exact = sum(e == 0 for e in errors) / len(errors)
            out.append(row(f"change-point date error, {drop:g} SD drop", float(np.mean(errors)), "days",
                           note=f"mean |found − planted| over {len(errors)} detections; median "
                           f"{float(np.median(errors)):g}; exact in {100 * exact:.0f}%"))
    return out


def coverage(replicates: int) -> list[dict[str, Any]]:
    boot = clt = 0
    for i in range(replicates):
        daily = _series(np.random.default_rng(30_000 + i))
        window = [daily[shift(START, d)] for d in range(DAYS - CURRENT, DAYS)]
        acc = CellAcc()
        for a in window:
            acc.merge(a)
        c: Clusters = acc.clusters()
        interval = bootstrap_interval(c, rng_for("bench", i))
        boot += interval is not None and interval[0] <= 0.0 <= interval[1]
        se, mean = clustered_se(c), c.mean()
        clt += se is not None and mean is not None and abs(mean) <= 1.959963984540054 * se
    note = f"{replicates} replicates of a 7-day cell ({CURRENT * PER_DAY} runs, ≤ {TASKS} tasks); nominal 95%"
    return [row("bootstrap interval coverage (tasks resampled)", boot / replicates, "share",
                note=note + ("; meets ≥ 0.93" if boot / replicates >= 0.93 else "; BELOW 0.93")),
            row("clustered CLT interval coverage (mean ± 1.96 SE)", clt / replicates, "share", note=note)]


def run(quick: bool) -> list[dict[str, Any]]:
    nulls, fleets, reps = (60, 30, 500) if quick else (300, 150, 1000)
    return [*null_rate(nulls), *power(fleets), *coverage(reps)]
