"""Every cell of many (workflow, grader) series at once (docs/statistics.md, "How the cells are computed").

The series' daily cells become one set of arrays: a *slot* per (series, day), the graded values
sorted by (slot, task, value), and the (slot, task) *pairs* with their counts, sums and
within-pair squared deviations. A window of one series' days is then a contiguous range of
slots, of values and of pairs, and every statistic of every window (the ``grader_stats`` rows and
the regression tests' two windows) comes from segment sums over those ranges, in numpy: no loop
over cells, values or replicates in Python, and numpy's per-call cost shared by a batch of series.

Every sum adds a window's own terms in an order that depends only on the window's contents
(days in date order, tasks in name order, values ascending), never on which other days or series
the batch holds: an incremental job, which reads only the days its windows span, computes each
window to the same bits as a job over all of history.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

from graders.stats.bounds import iso, ordinal
from graders.stats.changepoint import Day, amoc_split
from graders.stats.estimators import (
    Z80,
    Z95,
    Labels,
    cr1_se,
    fisher_exact_p,
    minimum_detectable_effect,
    pass_hat_k,
    quantiles_of_sorted,
    rng_for,
    stratified_permutation_p,
    t975,
    t_quantile,
    wilson_effective,
    wilson_interval,
)


class DailyCell(Protocol):
    """What a series reads of a daily cell (graders.stats.cells.CellAcc)."""

    unavailable: int
    error: int
    direction: str
    unit: str

    def columns(self) -> tuple[list[str], np.ndarray, np.ndarray]: ...

PASS_KS = (1, 2, 3)
QUANTILES = (0.1, 0.5, 0.9)
MIN_RUNS = 5  # per window: fewer graded runs and a cell is "insufficient-data"
MIN_TASKS = 2  # both windows together need more: a permutation of 2 tasks has one other order
PERMUTATION_REPS = 9999


def rounded(x: float | None) -> float | None:
    """Rounded to 12 significant digits: no float noise in stored columns."""
    return None if x is None or not math.isfinite(x) else float(f"{x:.12g}")


def _segment_sums(x: np.ndarray, offsets: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """Σ x[offsets[i] : offsets[i] + lengths[i]] per i (0 for an empty segment)."""
    out = np.zeros(len(offsets), dtype=x.dtype)
    full = lengths > 0
    if full.any():
        out[full] = np.add.reduceat(x, offsets[full])
    return out


def _ranges(starts: np.ndarray, lengths: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The concatenated ranges [starts[i], starts[i] + lengths[i]): (indices, owner of each, first
    position of each range in the concatenation)."""
    first = np.concatenate(([0], np.cumsum(lengths)[:-1])).astype(np.int64)
    owner = np.repeat(np.arange(len(lengths)), lengths)
    index = np.arange(int(lengths.sum()), dtype=np.int64) - first[owner] + starts[owner]
    return index, owner, first


@dataclass(frozen=True)
class Windows:
    """Per window (arrays, one entry each) of the statistics of its graded values."""

    n: np.ndarray
    unavailable: np.ndarray
    error: np.ndarray
    gated: np.ndarray
    passed: np.ndarray
    total: np.ndarray  # Σ value
    mean: np.ndarray  # NaN when n = 0
    sd: np.ndarray  # NaN below 2 values
    se: np.ndarray  # CR1; NaN below 2 tasks
    tasks: np.ndarray
    binary: np.ndarray  # every value 0 or 1 (and at least one)
    ci_low: np.ndarray
    ci_high: np.ndarray
    quantiles: list[np.ndarray]
    pass_k: list[tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]]  # per k: value, low, high, tasks
    first_slot: np.ndarray  # [first_slot, end_slot): the window's slots
    end_slot: np.ndarray
    # Per (window, task) group, windows in order and tasks by name: residual Σ(v − window mean).
    group_window: np.ndarray
    group_task: np.ndarray
    group_resid: np.ndarray


# Slots are keyed (series, ordinal) as series · 2²² + ordinal: every ordinal is below 2²² (year 9999).
_SLOT_KEY = 1 << 22
# Pairs and values listed at once for a run of windows: ~1 MiB per int64 array of them, so a batch
# of long histories holds a few MiB of transient arrays, not one per listed value of the batch.
MEMBERSHIPS = 1 << 17


def _concatenate(parts: list[Windows]) -> Windows:
    """One :class:`Windows` of consecutive runs of windows (their group windows renumbered)."""
    offsets = np.cumsum([0] + [len(p.n) for p in parts[:-1]])
    fields: dict[str, Any] = {}
    for name in Windows.__dataclass_fields__:
        values = [getattr(p, name) for p in parts]
        if name == "quantiles":
            fields[name] = [np.concatenate([v[i] for v in values]) for i in range(len(QUANTILES))]
        elif name == "pass_k":
            fields[name] = [tuple(np.concatenate([v[i][j] for v in values]) for j in range(4))
                            for i in range(len(PASS_KS))]
        elif name == "group_window":
            fields[name] = np.concatenate([v + o for v, o in zip(values, offsets, strict=True)])
        else:
            fields[name] = np.concatenate(values)
    return Windows(**fields)


class Series:
    """The daily cells of a batch of (workflow, grader) series as arrays; see the module's docstring."""

    def __init__(self, dailies: Sequence[Mapping[str, DailyCell]]) -> None:
        dates: list[str] = []
        keys: list[int] = []
        starts = [0]
        names: list[str] = []
        vals, gates, counts, unavailable, error = [], [], [], [], []
        directions, units = [], []
        for s, daily in enumerate(dailies):
            # Dates outside what the statistics' windows span never get here (graders/stats/bounds.py);
            # a stray one is left out rather than overflowing the date arithmetic.
            for day, date in sorted((day, d) for d in daily if (day := ordinal(d)) is not None):
                acc = daily[date]
                t, v, g = acc.columns()
                dates.append(date)
                keys.append(s * _SLOT_KEY + day)
                names.extend(t)
                vals.append(v)
                gates.append(g)
                counts.append(len(v))
                unavailable.append(acc.unavailable)
                error.append(acc.error)
                directions.append(acc.direction)
                units.append(acc.unit)
            starts.append(len(dates))
        self.dates, self.directions, self.units = dates, directions, units
        self.slot_key = np.array(keys, dtype=np.int64)
        # Per series: whether every day has the same direction and unit (one per grader in practice).
        self.uniform = [len(set(directions[a:b])) <= 1 and len(set(units[a:b])) <= 1
                        for a, b in itertools.pairwise(starts)]
        self.task_names = sorted(set(names))
        index = {t: i for i, t in enumerate(self.task_names)}
        slots = len(dates)
        tid = np.fromiter((index[t] for t in names), dtype=np.int64, count=len(names))
        # + 0.0 turns a negative zero into zero: the sign of a zero would otherwise depend on
        # the order of the additions that meet it.
        v = np.concatenate(vals) + 0.0 if vals else np.empty(0)
        g = np.concatenate(gates).astype(np.int64) if gates else np.empty(0, dtype=np.int64)
        slot = np.repeat(np.arange(slots), counts)
        order = np.lexsort((g, v, tid, slot))
        self.values, self.value_task, value_slot, gate = v[order], tid[order], slot[order], g[order]
        n_values = len(self.values)
        self.value_start = np.searchsorted(value_slot, np.arange(slots + 1))
        new_pair = np.ones(n_values, dtype=bool)
        new_pair[1:] = (value_slot[1:] != value_slot[:-1]) | (self.value_task[1:] != self.value_task[:-1])
        first = np.flatnonzero(new_pair)
        self.pair_task = self.value_task[first]
        self.pair_n = np.diff(np.append(first, n_values))
        if n_values:
            self.pair_sum = np.add.reduceat(self.values, first)
            self.pair_mean = self.pair_sum / self.pair_n
            spread = self.values - np.repeat(self.pair_mean, self.pair_n)
            self.pair_m2 = np.add.reduceat(spread * spread, first)
            self.pair_gated = np.add.reduceat((gate >= 0).astype(np.int64), first)
            self.pair_passed = np.add.reduceat((gate == 1).astype(np.int64), first)
        else:
            self.pair_sum = self.pair_mean = self.pair_m2 = np.empty(0)
            self.pair_gated = self.pair_passed = np.empty(0, dtype=np.int64)
        self.pair_start = np.searchsorted(value_slot[first], np.arange(slots + 1))
        zero = np.zeros(1, dtype=np.int64)
        self.cum_unavailable = np.concatenate((zero, np.cumsum(unavailable, dtype=np.int64)))
        self.cum_error = np.concatenate((zero, np.cumsum(error, dtype=np.int64)))
        self.cum_gated = np.concatenate((zero, np.cumsum(self.pair_gated)))
        self.cum_passed = np.concatenate((zero, np.cumsum(self.pair_passed)))
        self.cum_nonbinary = np.concatenate((zero, np.cumsum((self.values != 0) & (self.values != 1))))
        # Values ascending (ties by position), for the quantiles of any window.
        self.by_value = np.argsort(self.values, kind="stable")
        self.rank = np.empty(n_values, dtype=np.int64)
        self.rank[self.by_value] = np.arange(n_values)

    def slot_range(self, series: int, first: int, last: int) -> tuple[int, int]:
        """[a, b): the slots of ``series`` with ordinals in [first, last]."""
        base = series * _SLOT_KEY
        return (int(np.searchsorted(self.slot_key, base + first, "left")),
                int(np.searchsorted(self.slot_key, base + last, "right")))

    def windows(self, spans: Sequence[tuple[int, int, int]]) -> Windows:
        """The statistics of each window (series, first ordinal, last ordinal) of ``spans``,
        computed a run of windows at a time, so the arrays that list each window's pairs and
        values (a 28-day window lists 28 days of them) stay within :data:`MEMBERSHIPS`."""
        span = np.array(spans, dtype=np.int64).reshape(-1, 3)
        a = np.searchsorted(self.slot_key, span[:, 0] * _SLOT_KEY + span[:, 1], "left")
        b = np.searchsorted(self.slot_key, span[:, 0] * _SLOT_KEY + span[:, 2], "right")
        size = np.cumsum(self.value_start[b] - self.value_start[a] + self.pair_start[b] - self.pair_start[a])
        parts, lo = [], 0
        while lo < len(spans):
            # At least one window a run, however large.
            hi = max(lo + 1, int(np.searchsorted(size, (size[lo - 1] if lo else 0) + MEMBERSHIPS, "right")))
            parts.append(self._windows(a[lo:hi], b[lo:hi]))
            lo = hi
        if len(parts) == 1:
            return parts[0]
        return _concatenate(parts)

    def _windows(self, a: np.ndarray, b: np.ndarray) -> Windows:
        k = len(a)
        va, vb = self.value_start[a], self.value_start[b]
        pa, pb = self.pair_start[a], self.pair_start[b]
        n = vb - va
        full = n > 0
        # Pair memberships: the pairs of every window, window after window.
        pairs, owner, first = _ranges(pa, pb - pa)
        total = _segment_sums(self.pair_sum[pairs], first, pb - pa)
        with np.errstate(divide="ignore", invalid="ignore"):
            mean = np.where(full, total / n, np.nan)
        m = mean[owner]
        # Chan et al.'s pairwise update: Σ(v − m)² = Σ_pairs [M2_pair + n_pair·(mean_pair − m)²].
        dev = self.pair_mean[pairs] - m
        m2 = _segment_sums(self.pair_m2[pairs] + self.pair_n[pairs] * dev * dev, first, pb - pa)
        with np.errstate(divide="ignore", invalid="ignore"):
            sd = np.where(n >= 2, np.sqrt(m2 / (n - 1)), np.nan)
        # (window, task) groups, tasks by name within a window: a task's pairs on several days of
        # a window are one cluster.
        n_tasks_all = max(1, len(self.task_names))
        key = owner * n_tasks_all + self.pair_task[pairs]
        order = np.argsort(key, kind="stable")
        sorted_key = key[order]
        starts = np.flatnonzero(np.concatenate(([True], sorted_key[1:] != sorted_key[:-1]))) if len(key) else \
            np.empty(0, dtype=np.int64)
        group_window = sorted_key[starts] // n_tasks_all
        group_task = sorted_key[starts] % n_tasks_all
        resid_pairs = (self.pair_sum[pairs] - self.pair_n[pairs] * m)[order]
        group_resid = np.add.reduceat(resid_pairs, starts) if len(starts) else np.empty(0)
        g_gated = np.add.reduceat(self.pair_gated[pairs][order], starts) if len(starts) else np.empty(0, np.int64)
        g_passed = np.add.reduceat(self.pair_passed[pairs][order], starts) if len(starts) else np.empty(0, np.int64)
        g_bounds = np.searchsorted(group_window, np.arange(k + 1))
        g_first, tasks = g_bounds[:-1], np.diff(g_bounds)
        resid_sq = _segment_sums(group_resid * group_resid, g_first, tasks)
        se = cr1_se(resid_sq, n, tasks)
        binary = full & (self.cum_nonbinary[vb] == self.cum_nonbinary[va])
        # Means of 0/1 values are rates: Wilson at the effective size; others: mean ± t·SE.
        w_lo, w_hi = wilson_effective(mean, se * se, n.astype(np.float64), tasks, n.astype(np.float64))
        half = t975(tasks) * se
        ci_low = np.where(binary, w_lo, mean - half)
        ci_high = np.where(binary, w_hi, mean + half)
        # Quantiles: each window's values, sorted by their rank in the series.
        values, v_owner, v_first = _ranges(va, n)
        ranked = np.sort(v_owner * max(1, len(self.values)) + self.rank[values])
        in_order = self.values[self.by_value[ranked % max(1, len(self.values))]]
        qs = [np.full(k, np.nan) for _ in QUANTILES]
        if full.any():
            for out, q in zip(qs, quantiles_of_sorted(in_order, v_first[full], n[full], QUANTILES), strict=True):
                out[full] = q
        pass_k = []
        for kk in PASS_KS:
            ok = g_gated >= kk
            per_task = np.zeros(len(ok))
            per_task[ok] = pass_hat_k(g_gated[ok], g_passed[ok], kk)
            count = _segment_sums(ok.astype(np.int64), g_first, tasks)
            runs = _segment_sums(np.where(ok, g_gated, 0), g_first, tasks)
            with np.errstate(divide="ignore", invalid="ignore"):
                value = np.where(count > 0, _segment_sums(per_task, g_first, tasks) / count, np.nan)
                spread = np.where(ok, per_task - value[np.repeat(np.arange(k), tasks)], 0.0)
                # The unbiased variance of the tasks' mean, and no t (with one 0/1 estimate a task
                # this is Wilson's interval for a proportion of C − 1 trials): the t adjustment
                # over-covered here (docs/statistics.md).
                var = _segment_sums(spread * spread, g_first, tasks) / (count * (count - 1.0))
            lo, hi = wilson_effective(value, var, runs.astype(np.float64), count, count.astype(np.float64),
                                      df_adjust=False)
            pass_k.append((value, lo, hi, count))
        return Windows(
            n=n, unavailable=self.cum_unavailable[b] - self.cum_unavailable[a], error=self.cum_error[b] - self.cum_error[a],
            gated=self.cum_gated[pb] - self.cum_gated[pa], passed=self.cum_passed[pb] - self.cum_passed[pa],
            total=total, mean=mean, sd=sd, se=se, tasks=tasks, binary=binary, ci_low=ci_low, ci_high=ci_high,
            quantiles=qs, pass_k=pass_k, first_slot=a, end_slot=b, group_window=group_window, group_task=group_task, group_resid=group_resid,
        )

    def labels(self, spans: tuple[tuple[int, int], tuple[int, int]], means: tuple[float, float],
               totals: tuple[float, float]) -> Labels:
        """The two windows' values by task (slot ranges), as the permutation test exchanges them."""
        by_task = []
        for a, b in spans:
            lo, hi = int(self.value_start[a]), int(self.value_start[b])
            vals, tasks = self.values[lo:hi], self.value_task[lo:hi]
            order = np.lexsort((vals, tasks))
            vals, tasks = vals[order], tasks[order]
            cut = np.flatnonzero(np.diff(tasks)) + 1
            by_task.append(dict(zip(tasks[np.concatenate(([0], cut))].tolist(), np.split(vals, cut), strict=True))
                           if len(vals) else {})
        cur, base = by_task
        return Labels.of(cur, base, means[0] - means[1], totals[0] + totals[1])

    def direction_unit(self, series: int, a: int, b: int) -> tuple[str, str]:
        """The largest non-empty direction and unit of the slots [a, b) of ``series``."""
        if self.uniform[series] and a < b:
            return self.directions[a], self.units[a]
        return max(self.directions[a:b], default=""), max(self.units[a:b], default="")


def _rounded_all(x: np.ndarray) -> list[float | None]:
    """:func:`rounded` of every entry (one pass: most of a row's cost is its floats)."""
    text = "{:.12g}".format
    return [float(text(v)) if v - v == 0 else None for v in x.tolist()]  # v - v is NaN for NaN and ±inf


@dataclass(frozen=True)
class SeriesJob:
    """What to compute for one series: ``grader_stats`` windows ending on ``ends`` (those with
    values of their own) and, when ``latest`` is set, the regression test ending there."""

    workflow: str
    grader_id: str
    daily: Mapping[str, DailyCell]
    ends: Iterable[str] = ()
    latest: str | None = None
    window: int = 7
    baseline: int = 28
    windows: tuple[int, ...] = (1, 7, 28)


def grader_stats_rows(series: Series, jobs: Sequence[SeriesJob]) -> Iterator[dict[str, Any]]:
    """``grader_stats`` rows of every job's windows, job after job (``series`` holds their cells
    in the same order). The statistics are computed now; the rows are made as they are taken, so
    a batch never holds all of its rows (~8 KB each) at once."""
    spans, owners = [], []
    for s, job in enumerate(jobs):
        held = set(job.daily)
        for end in sorted(d for d in set(job.ends) if d in held):
            day = ordinal(end)
            if day is None:
                continue
            for width in job.windows:
                spans.append((s, day - width + 1, day))
                owners.append((s, end, width))
    if not spans:
        return iter(())
    w = series.windows(spans)
    two = (w.tasks >= 2).tolist()
    n, tasks, unavailable, error, gated, passed = (x.tolist() for x in (w.n, w.tasks, w.unavailable, w.error,
                                                                        w.gated, w.passed))
    mean, sd, se, ci_low, ci_high = (_rounded_all(x) for x in (w.mean, w.sd, w.se, w.ci_low, w.ci_high))
    qs = [_rounded_all(q) for q in w.quantiles]
    pk = [(_rounded_all(value), _rounded_all(lo), _rounded_all(hi), count.tolist()) for value, lo, hi, count in w.pass_k]
    first_slot, end_slot = w.first_slot.tolist(), w.end_slot.tolist()
    columns = (two, n, tasks, unavailable, error, gated, passed, mean, sd, se, ci_low, ci_high, qs, pk,
               first_slot, end_slot)
    return _stats_rows(series, jobs, spans, owners, columns)


def _stats_rows(series: Series, jobs: Sequence[SeriesJob], spans: list[tuple[int, int, int]],
                owners: list[tuple[int, str, int]], columns: tuple[Any, ...]) -> Iterator[dict[str, Any]]:
    two, n, tasks, unavailable, error, gated, passed, mean, sd, se, ci_low, ci_high, qs, pk, first_slot, end_slot = columns
    starts: dict[int, str] = {}
    for i, ((s, end, width), (_, first, _last)) in enumerate(zip(owners, spans, strict=True)):
        job = jobs[s]
        direction, unit = series.direction_unit(s, first_slot[i], end_slot[i])
        start = starts.get(first)
        if start is None:
            start = starts[first] = iso(first)
        g, p = gated[i], passed[i]
        wilson = wilson_interval(p, g)
        pass_k = []
        if g:
            for kk, (value, lo, hi, count) in zip(PASS_KS, pk, strict=True):
                c = count[i]
                if c > 0:
                    pass_k.append({"k": kk, "value": value[i], "low": lo[i] if c >= 2 else None,
                                   "high": hi[i] if c >= 2 else None, "tasks": c})
        ok = two[i]
        yield {
            "workflow": job.workflow, "date": end, "grader_id": job.grader_id,
            "window_days": width, "start_date": start,
            "unit": unit or None, "direction": direction or None,
            "n": n[i], "n_tasks": tasks[i], "n_unavailable": unavailable[i], "n_error": error[i],
            "mean": mean[i], "sd": sd[i], "se_clustered": se[i] if ok else None,
            "ci_low": ci_low[i] if ok else None, "ci_high": ci_high[i] if ok else None,
            "p10": qs[0][i], "p50": qs[1][i], "p90": qs[2][i],
            "pass_n": g, "pass_count": p,
            "pass_rate": rounded(p / g) if g else None,
            "pass_low": rounded(wilson[0]) if wilson else None, "pass_high": rounded(wilson[1]) if wilson else None,
            "pass_k": pass_k,
        }


def _runs_to_detect(diff: float, n_cur: int, se_cur: float | None, se_base: float | None) -> int | None:
    """Current-window runs at which the minimum detectable effect would reach |diff| (baseline
    fixed, the per-run variance unchanged); None when the baseline alone is too noisy."""
    if se_cur is None or se_base is None or diff == 0:
        return None
    room = (diff / (Z95 + Z80)) ** 2 - se_base * se_base
    if room <= 0:
        return None
    return math.ceil(n_cur * se_cur * se_cur / room)


def _finite(x: float) -> float | None:
    return x if math.isfinite(x) else None


def regression_rows(series: Series, jobs: Sequence[SeriesJob], permutations: int = PERMUTATION_REPS
                    ) -> list[dict[str, Any] | None]:
    """Per job, the test columns of its ``regressions`` row (everything but the q-value and
    verdict): the ``window`` days ending on ``latest`` against the ``baseline`` days before
    them; None for a job without ``latest``."""
    spans = []
    tested = [s for s, job in enumerate(jobs) if job.latest is not None and ordinal(job.latest) is not None]
    for s in tested:
        job = jobs[s]
        last = ordinal(job.latest)
        assert last is not None
        spans += [(s, last - job.window + 1, last), (s, last - job.window - job.baseline + 1, last - job.window)]
    out: list[dict[str, Any] | None] = [None] * len(jobs)
    if not spans:
        return out
    w = series.windows(spans)
    for i, s in enumerate(tested):
        out[s] = _regression(series, jobs[s], s, w, 2 * i, permutations)
    return out


def _regression(series: Series, job: SeriesJob, s: int, w: Windows, at: int, permutations: int) -> dict[str, Any]:
    """One job's regression columns from windows ``at`` (current) and ``at + 1`` (baseline) of ``w``."""
    c, b = at, at + 1
    n_c, n_b, t_c, t_b = int(w.n[c]), int(w.n[b]), int(w.tasks[c]), int(w.tasks[b])
    direction, unit = series.direction_unit(s, int(w.first_slot[b]), int(w.end_slot[c]))
    se_c, se_b = _finite(float(w.se[c])), _finite(float(w.se[b]))
    m_c, m_b = _finite(float(w.mean[c])), _finite(float(w.mean[b]))
    sd_b = _finite(float(w.sd[b]))
    row: dict[str, Any] = {
        "unit": unit or None, "direction": direction or None,
        "n_current": n_c, "n_baseline": n_b, "tasks_current": t_c, "tasks_baseline": t_b,
        "mean_current": rounded(m_c), "mean_baseline": rounded(m_b),
        "diff": None, "diff_low": None, "diff_high": None, "effect_size": None,
        "test": None, "p_value": None, "mde": rounded(minimum_detectable_effect(se_c, se_b)),
        "runs_needed": None, "change_date": None,
    }
    if n_c < MIN_RUNS or n_b < MIN_RUNS or t_c + t_b <= MIN_TASKS:
        # The runs still missing on both sides (a run of another task when only tasks are short).
        row["runs_needed"] = max(1, max(0, MIN_RUNS - n_c) + max(0, MIN_RUNS - n_b))
        return row
    assert m_c is not None and m_b is not None
    diff = m_c - m_b
    # The difference's interval: CR1 over every task of both windows, a task's runs in the two
    # windows one cluster (its own level cancels out, as in the permutation test).
    lo, hi = np.searchsorted(w.group_window, [c, b + 1])
    psi: dict[int, float] = {}
    for window, task, resid in zip(w.group_window[lo:hi].tolist(), w.group_task[lo:hi].tolist(),
                                   w.group_resid[lo:hi].tolist(), strict=True):
        psi[task] = psi.get(task, 0.0) + (resid / n_c if window == c else -resid / n_b)
    clusters = len(psi)
    var = clusters / (clusters - 1) * math.fsum(x * x for _, x in sorted(psi.items()))
    half = t_quantile(0.975, clusters - 1) * math.sqrt(var)
    totals = (float(w.total[c]), float(w.total[b]))
    if bool(w.binary[c] and w.binary[b]) and t_c == n_c and t_b == n_b:
        # Pass/fail values and no task rerun within a window: runs are independent Bernoulli
        # trials, so the exact test applies.
        row["test"] = "fisher-exact"
        p = fisher_exact_p(round(totals[0]), n_c, round(totals[1]), n_b)
    else:
        row["test"] = "permutation-tasks"
        slots = ((int(w.first_slot[c]), int(w.end_slot[c])), (int(w.first_slot[b]), int(w.end_slot[b])))
        key = (job.workflow, job.grader_id, job.window, job.baseline, job.latest)
        p = stratified_permutation_p(series.labels(slots, (m_c, m_b), totals), rng_for(*key, "permutation"),
                                     permutations)
    first, last = int(w.first_slot[b]), int(w.end_slot[c])
    vlo, vhi = int(series.value_start[first]), int(series.value_start[last])
    day_n = np.diff(series.value_start[first:last + 1])
    day_total = _segment_sums(series.values[vlo:vhi], series.value_start[first:last] - vlo, day_n).tolist()
    split = amoc_split([Day(series.dates[first + i], int(day_n[i]), day_total[i]) for i in range(last - first)])
    row.update({
        "diff": rounded(diff), "diff_low": rounded(diff - half), "diff_high": rounded(diff + half),
        "effect_size": rounded(diff / sd_b) if sd_b else None,
        "p_value": rounded(p),
        "runs_needed": _runs_to_detect(diff, n_c, se_c, se_b),
        "change_date": split[0] if split else None,
    })
    return row
