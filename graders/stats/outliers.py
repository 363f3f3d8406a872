"""``cost_outliers``: runs that cost more than k× their workflow's rolling median (pure core).

A run is an outlier when its spend is above ``factor`` × the median spend of its workflow's runs
dated in the ``days`` days before its own date (its own day excluded: a day's runs do not judge
each other), with at least :data:`MIN_BASELINE` such runs. Spend is the run's AI Credits
(``runs.ai_credits``); a run without credits is judged on its tokens (every token each once,
``runs.tokens_*``) against the tokens of the same window. The rule is the one users asked of a
spend tracker: deterministic, a plain ratio, no model of the distribution.

Incremental (:func:`plan`): a run dated d is judged by the runs of [d − days, d − 1], so a run
graded or dropped on date t can change the verdicts of the runs dated t … t + days of its
workflow, and no others. Those partitions are recomputed whole (their stored rows dropped first),
reading the runs of [t − days, t + days]; every other partition of ``cost_outliers`` stays.
"""

from __future__ import annotations

import bisect
import datetime as dt
import statistics
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

DEFAULT_FACTOR: Final = 2.0
DEFAULT_DAYS: Final = 14
MIN_BASELINE: Final = 5  # runs a median needs before anything is judged against it
TOKEN_COLUMNS: Final = ("tokens_input", "tokens_output", "tokens_cache_read", "tokens_cache_write",
                        "tokens_reasoning")

Partition = tuple[str, str]  # (workflow, date)


@dataclass(frozen=True)
class Spend:
    """What one run cost (from its ``runs`` row)."""

    run_id: str
    attempt: int
    date: str
    repository: str | None
    credits: float | None
    tokens: int | None

    @property
    def identity(self) -> tuple[str, int]:
        return self.run_id, self.attempt


def spend_of(row: Mapping[str, Any]) -> Spend:
    """A ``runs`` row's spend: its AI Credits, and every token it counted (null when none)."""
    counts = [row.get(c) for c in TOKEN_COLUMNS]
    stated = [int(c) for c in counts if c is not None]
    credits = row.get("ai_credits")
    return Spend(str(row["run_id"]), int(row["attempt"]), str(row["date"]), row.get("repository"),
                 None if credits is None else float(credits), sum(stated) if stated else None)


def run_url(repository: str | None, run_id: str, attempt: int) -> str | None:
    """The run on GitHub (its attempt's page for a rerun), when the repository is known."""
    if not repository:
        return None
    url = f"https://github.com/{repository}/actions/runs/{run_id}"
    return f"{url}/attempts/{attempt}" if attempt > 1 else url


def _ordinal(date: str) -> int:
    return dt.date.fromisoformat(date).toordinal()


def _iso(ordinal: int) -> str:
    return dt.date.fromordinal(ordinal).isoformat()


def outlier_rows(workflow: str, runs: Iterable[Spend], dates: Iterable[str], factor: float = DEFAULT_FACTOR,
                 days: int = DEFAULT_DAYS) -> list[dict[str, Any]]:
    """The ``cost_outliers`` rows of ``workflow``'s runs dated in ``dates``, each judged against
    the workflow's ``runs`` of the ``days`` days before its date (``runs`` must hold them)."""
    by_day: dict[int, list[Spend]] = {}
    for r in runs:
        by_day.setdefault(_ordinal(r.date), []).append(r)
    days_sorted = sorted(by_day)
    out: list[dict[str, Any]] = []
    for date in sorted(set(dates)):
        day = _ordinal(date)
        window = [r for d in days_sorted[bisect.bisect_left(days_sorted, day - days):bisect.bisect_left(days_sorted, day)]
                  for r in by_day[d]]
        for run in sorted(by_day.get(day, ()), key=lambda r: r.identity):
            row = _judge(workflow, run, window, factor, days, day)
            if row is not None:
                out.append(row)
    return out


def _judge(workflow: str, run: Spend, window: Sequence[Spend], factor: float, days: int,
           day: int) -> dict[str, Any] | None:
    if run.credits is not None:
        metric, value, baseline = "ai-credits", run.credits, [r.credits for r in window if r.credits is not None]
    elif run.tokens is not None:
        metric, value, baseline = "tokens", float(run.tokens), [float(r.tokens) for r in window if r.tokens is not None]
    else:
        return None
    if len(baseline) < MIN_BASELINE:
        return None
    median = statistics.median(baseline)
    if median <= 0 or value <= factor * median:
        return None
    return {"workflow": workflow, "date": run.date, "run_id": run.run_id, "attempt": run.attempt, "metric": metric,
            "value": value, "baseline_median": median, "ratio": value / median, "baseline_runs": len(baseline),
            "baseline_start": _iso(day - days), "baseline_end": _iso(day - 1), "factor": factor, "window_days": days,
            "repository": run.repository, "run_url": run_url(run.repository, run.run_id, run.attempt)}


def plan(touched: Iterable[Partition], stored: Iterable[Partition], days: int = DEFAULT_DAYS,
         everything: bool = False) -> dict[str, dict[str, list[str]]]:
    """Per workflow with a touched partition: ``dates`` whose outliers to recompute (the touched
    dates and the ``days`` after them that hold runs) and ``read`` (the dates whose runs judge
    them). ``everything`` (the stored rows were made with another factor or window) recomputes
    every stored workflow's every date."""
    touched_by: dict[str, set[int]] = {}
    for wf, d in touched:
        touched_by.setdefault(wf, set()).add(_ordinal(d))
    dates_by: dict[str, set[int]] = {}
    for wf, d in stored:
        dates_by.setdefault(wf, set()).add(_ordinal(d))
    if everything:
        for wf, ds in dates_by.items():
            touched_by.setdefault(wf, set()).update(ds)
    out: dict[str, dict[str, list[str]]] = {}
    for wf, changed in sorted(touched_by.items()):
        have = sorted(dates_by.get(wf, set()) | changed)
        recompute = {d for t in changed for d in have[bisect.bisect_left(have, t):bisect.bisect_right(have, t + days)]}
        read = {d for r in recompute for d in have[bisect.bisect_left(have, r - days):bisect.bisect_right(have, r)]}
        out[wf] = {"dates": [_iso(d) for d in sorted(recompute)], "read": [_iso(d) for d in sorted(read)]}
    return out
