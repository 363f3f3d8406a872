"""Cells of grader values and the rows of ``grader_stats`` and ``regressions`` (pure, Beam-free).

A cell is (workflow, grader, window of dates). :class:`CellAcc` holds the cell's graded values
with their tasks, plus its unavailable and error counts; adding, merging and compacting are
associative and commutative, and every statistic is computed from the values grouped by task
and sorted, so the output never depends on how a runner bundled or ordered the inputs. The
values are held (rather than a sketch) so that quantiles and the clustered statistics stay
exact; they are held flat, 17 bytes a value in memory and deflated on a shuffle, with each
task's string shared, because a fleet's cells cross a shuffle whole (docs/performance.md).
"""

from __future__ import annotations

import pickle
import sys
import zlib
from array import array
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from graders.stats.bounds import date_problem, iso, ordinal, value_problem
from graders.stats.estimators import benjamini_hochberg
from graders.stats.series import MIN_RUNS as MIN_RUNS  # read by the report
from graders.stats.series import (
    PERMUTATION_REPS,
    Series,
    SeriesJob,
    grader_stats_rows,
    regression_rows,
    rounded,
)

HIGHER, LOWER = "higher_is_better", "lower_is_better"
VERDICTS = ("regressed", "improved", "no-change", "insufficient-data")
WINDOWS = (1, 7, 28)  # grader_stats: the day itself and the rolling 7 and 28 days ending on it
DEFAULT_FDR = 0.05
# Regression windows: the last 7 days against the 28 before (`run --regression-window/-baseline`).
DEFAULT_WINDOW, DEFAULT_BASELINE = 7, 28
# The grader whose value is the trace rules' `delivered` (1/0): the task_reliability outcome.
DELIVERED = "trace:delivered"


@dataclass(frozen=True)
class Observation:
    """One (run, grader) result reduced to what the statistics read."""

    task: str
    value: float | None
    passed: bool | None
    status: str
    direction: str = ""
    unit: str = ""


NOT_GATED = -1  # a graded value without a pass/fail gate


class CellAcc:
    """One cell's graded values: flat arrays (one entry per value: its task, value and gate)
    rather than per-task lists, since a cell of scheduled runs has one task per run. The
    per-task views (:attr:`values`, :attr:`passes`) are built when a statistic reads them."""

    __slots__ = ("_gates", "_packed", "_tasks", "_vals", "_views", "direction", "error", "unavailable", "unit")

    def __init__(self) -> None:
        self._tasks: list[str] = []  # the task of each value (one string per run, shared by its cells)
        self._vals = array("d")
        self._gates = array("b")  # 1/0 pass/fail, or NOT_GATED
        self.unavailable = 0
        self.error = 0
        self.direction = ""  # the largest non-empty one seen (one per grader in practice)
        self.unit = ""
        self._views: tuple[dict[str, list[float]], dict[str, list[int]]] | None = None
        # A cell that crossed a shuffle stays deflated until read: the local runner holds every
        # element of a shuffle decoded, so a decoded cell there would cost ~60 bytes a value.
        self._packed: bytes | None = None

    def _load(self) -> None:
        if self._packed is not None:
            state = pickle.loads(zlib.decompress(self._packed))
            self._packed = None
            self._restore(state)

    def _state(self) -> tuple[list[str], bytes, bytes, bytes]:
        """The values as bytes: each task's string once, then one index per value."""
        self._load()
        order: dict[str, int] = {}
        index = array("I", [order.setdefault(t, len(order)) for t in self._tasks])
        return list(order), index.tobytes(), self._vals.tobytes(), self._gates.tobytes()

    def _restore(self, state: tuple[list[str], bytes, bytes, bytes]) -> None:
        names, index, vals, gates = state
        idx = array("I")
        idx.frombytes(index)
        self._tasks = [names[i] for i in idx]
        self._vals, self._gates = array("d"), array("b")
        self._vals.frombytes(vals)
        self._gates.frombytes(gates)
        self._views = None

    def add(self, o: Observation) -> CellAcc:
        self._load()
        self.direction = max(self.direction, o.direction or "")
        self.unit = max(self.unit, o.unit or "")
        if o.status == "error":
            self.error += 1
        elif o.status == "unavailable" or o.value is None or value_problem(o.value) is not None:
            # No value, or one the statistics cannot add (graders/stats/bounds.py): counted, never averaged.
            self.unavailable += 1
        else:
            self._tasks.append(o.task)
            self._vals.append(float(o.value))
            self._gates.append(NOT_GATED if o.passed is None else int(bool(o.passed)))
            self._views = None
        return self

    def merge(self, other: CellAcc) -> CellAcc:
        self._load()
        other._load()
        self._tasks.extend(other._tasks)
        self._vals.extend(other._vals)
        self._gates.extend(other._gates)
        self.unavailable += other.unavailable
        self.error += other.error
        self.direction = max(self.direction, other.direction)
        self.unit = max(self.unit, other.unit)
        self._views = None
        return self

    def compact(self) -> CellAcc:
        """Drops the per-task views (rebuilt on demand): what is stored or shuffled is flat."""
        self._views = None
        return self

    def _grouped(self) -> tuple[dict[str, list[float]], dict[str, list[int]]]:
        self._load()
        if self._views is None:
            values: dict[str, list[float]] = {}
            passes: dict[str, list[int]] = {}
            for task, value, gate in zip(self._tasks, self._vals, self._gates, strict=True):
                values.setdefault(task, []).append(value)
                if gate != NOT_GATED:
                    passes.setdefault(task, []).append(gate)
            self._views = ({t: sorted(values[t]) for t in sorted(values)},
                           {t: sorted(passes[t]) for t in sorted(passes)})
        return self._views

    @property
    def values(self) -> dict[str, list[float]]:
        """Task → its graded values, tasks and values sorted (read only)."""
        return self._grouped()[0]

    @property
    def passes(self) -> dict[str, list[int]]:
        """Task → 1/0 per gated value, sorted (read only; tasks with no gated value absent)."""
        return self._grouped()[1]

    @property
    def n(self) -> int:
        self._load()
        return len(self._vals)

    def columns(self) -> tuple[list[str], np.ndarray, np.ndarray]:
        """(task of each value, values, gates: 1/0 pass/fail or NOT_GATED), in arrival order."""
        self._load()
        if not self._vals:
            return [], np.empty(0), np.empty(0, dtype=np.int8)
        return self._tasks, np.array(self._vals, dtype=np.float64), np.array(self._gates, dtype=np.int8)

    def __eq__(self, other: object) -> bool:
        """Equal contents, whatever the order values arrived in."""
        if not isinstance(other, CellAcc):
            return NotImplemented
        return (self.values, self.passes, self.unavailable, self.error, self.direction, self.unit) == (
            other.values, other.passes, other.unavailable, other.error, other.direction, other.unit)

    __hash__ = None  # type: ignore[assignment]  # mutable

    def __repr__(self) -> str:
        return (f"CellAcc(values={self.values!r}, passes={self.passes!r}, unavailable={self.unavailable}, "
                f"error={self.error}, direction={self.direction!r}, unit={self.unit!r})")

    def __reduce__(self) -> tuple[Any, tuple[Any, ...]]:
        # Deflated: task names like "run:<id>" and the 0/1 gates are most of a raw cell.
        packed = self._packed
        if packed is None:
            packed = zlib.compress(pickle.dumps(self._state(), protocol=pickle.HIGHEST_PROTOCOL), 1)
        return _unpack_cell, (packed, self.unavailable, self.error, self.direction, self.unit)


def _unpack_cell(packed: bytes | None, unavailable: int, error: int, direction: str, unit: str) -> CellAcc:
    # No arrays until the cell is read (_load): a shuffle holds many cells at once.
    acc = CellAcc.__new__(CellAcc)
    acc._packed, acc._views = packed, None
    acc.unavailable, acc.error, acc.direction, acc.unit = unavailable, error, sys.intern(direction), sys.intern(unit)
    return acc


class SeriesCells:
    """Daily cells of one (workflow, grader) series, date → :class:`CellAcc`: what the fleet
    statistics shuffle. One element per series and batch rather than per day, deflated as one
    blob and left so until read, since the local runner holds a shuffle's elements decoded
    (docs/performance.md: a cell per element cost ~500 bytes of framing there)."""

    __slots__ = ("_days", "_packed")

    def __init__(self, days: dict[str, CellAcc] | None = None) -> None:
        self._days: dict[str, CellAcc] = days if days is not None else {}
        self._packed: bytes | None = None

    @property
    def days(self) -> dict[str, CellAcc]:
        if self._packed is not None:
            packed, self._packed = self._packed, None
            for date, unavailable, error, direction, unit, state in pickle.loads(zlib.decompress(packed)):
                acc = _unpack_cell(None, unavailable, error, direction, unit)
                acc._restore(state)
                self._days[date] = acc
        return self._days

    def add(self, date: str, o: Observation) -> SeriesCells:
        days = self.days
        acc = days.get(date)
        if acc is None:
            acc = days[date] = CellAcc()
        acc.add(o)
        return self

    def merge(self, other: SeriesCells) -> SeriesCells:
        days = self.days
        for date, acc in other.days.items():
            mine = days.get(date)
            if mine is None:
                mine = days[date] = CellAcc()
            mine.merge(acc)
        return self

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, SeriesCells):
            return NotImplemented
        return self.days == other.days

    __hash__ = None  # type: ignore[assignment]  # mutable

    def __repr__(self) -> str:
        return f"SeriesCells({self.days!r})"

    def __reduce__(self) -> tuple[Any, tuple[bytes]]:
        packed = self._packed
        if packed is None:
            state = [(d, a.unavailable, a.error, a.direction, a.unit, a._state()) for d, a in sorted(self._days.items())]
            packed = zlib.compress(pickle.dumps(state, protocol=pickle.HIGHEST_PROTOCOL), 1)
        return _unpack_series, (packed,)


def _unpack_series(packed: bytes) -> SeriesCells:
    series = SeriesCells()
    series._packed = packed
    return series


def merged(accs: Iterable[CellAcc]) -> CellAcc:
    out = CellAcc()
    for a in accs:
        out.merge(a)
    return out


def worse(diff: float, direction: str) -> bool:
    """A change for the worse: down for higher-is-better (the default), up for lower-is-better."""
    return diff > 0 if direction == LOWER else diff < 0


def verdict(row: Mapping[str, Any], fdr: float = DEFAULT_FDR, min_effect: float = 0.0) -> str:
    """``regressed | improved | no-change | insufficient-data`` for a tested regressions row.

    Significant means q ≤ ``fdr``; ``min_effect`` (in baseline standard deviations) is the
    smallest |effect| worth a verdict other than no-change.
    """
    if row.get("p_value") is None or row.get("diff") is None:
        return "insufficient-data"
    q = row.get("q_value")
    if q is None or q > fdr:
        return "no-change"
    effect = row.get("effect_size")
    big = abs(effect) >= min_effect if effect is not None else row["diff"] != 0
    if not big or row["diff"] == 0:
        return "no-change"
    return "regressed" if worse(row["diff"], row.get("direction") or HIGHER) else "improved"


def with_q_values(rows: list[dict[str, Any]], fdr: float = DEFAULT_FDR, min_effect: float = 0.0
                  ) -> list[dict[str, Any]]:
    """Benjamini–Hochberg across every tested row, then each row's verdict (new dicts)."""
    qs = benjamini_hochberg([r.get("p_value") for r in rows])
    out = []
    for r, q in zip(rows, qs, strict=True):
        r2 = {**r, "q_value": rounded(q)}
        r2["verdict"] = verdict(r2, fdr, min_effect)
        out.append(r2)
    return out


def cluster_of(workflow: str, task: str | None, run_id: Any) -> str:
    """The cluster of a run: its task, or the run itself (all its attempts) when the task is
    only the workflow (a scheduled run has no issue or PR, and days of one schedule are not
    reruns of one trial)."""
    if not task or task == workflow:
        return f"run:{run_id}"
    return task


def partition_observations(
    workflow: str, grader_rows: Iterable[Mapping[str, Any]], verdict_rows: Iterable[Mapping[str, Any]]
) -> list[tuple[str, Observation]]:
    """(grader_id, observation) for one partition's ``grader_results`` rows, their tasks taken
    from the partition's ``trace_verdicts`` (same run and attempt), plus one :data:`DELIVERED`
    observation per verdict."""
    verdicts = list(verdict_rows)
    tasks = {(v.get("run_id"), v.get("attempt")): v.get("task") for v in verdicts}
    clusters: dict[tuple[Any, Any], str] = {}  # one string per run, shared by all its cells
    out = []
    for r in grader_rows:
        run = (r.get("run_id"), r.get("attempt"))
        task = clusters.get(run)
        if task is None:
            task = clusters[run] = cluster_of(workflow, tasks.get(run), r.get("run_id"))
        out.append((str(r["grader_id"]), Observation(task, r.get("value"), r.get("passed"), str(r.get("status") or ""),
                                                      r.get("direction") or "", r.get("unit") or "")))
    for v in verdicts:
        if v.get("delivered") is None:
            continue
        ok = bool(v["delivered"])
        task = cluster_of(workflow, v.get("task"), v.get("run_id"))
        out.append((DELIVERED, Observation(task, 1.0 if ok else 0.0, ok, "pass" if ok else "fail", HIGHER, "bool")))
    return out


RunCells = tuple[tuple[str, str], tuple[tuple[Any, Any], ...], list[tuple[str, Observation]]]
LEFT_OUT = "left out of grader_stats and regressions"


def stats_warnings(date: Any, grader_rows: Iterable[Mapping[str, Any]]) -> list[str]:
    """A run's warnings for what the statistics cannot take (graders/stats/bounds.py, the one
    validation): a date outside the windows' range leaves the whole run out of the statistics;
    a value beyond their range leaves that grader's value out. Called where the run is graded,
    so the warning is on its ``runs`` row; the statistics' own inputs apply the same rule."""
    problem = date_problem(date)
    if problem is not None:
        return [f"statistics: {problem}; the run is {LEFT_OUT}"]
    out = []
    for r in grader_rows:
        value = r.get("value")
        bad = value_problem(value) if isinstance(value, float) and r.get("status") not in ("error", "unavailable") else None
        if bad is not None:
            out.append(f"statistics: {r.get('grader_id')}: {bad}; {LEFT_OUT}")
    return out


def run_observations(grader_rows: Iterable[Mapping[str, Any]], verdict_rows: Iterable[Mapping[str, Any]]
                     ) -> list[RunCells]:
    """One graded run's rows → per (workflow, date) partition they fall in: the (run_id, attempt)
    identities they replace and their observations, as :func:`partition_observations` gives them
    for the partition. Computed where the run is graded, so the statistics combine observations
    into cells before any shuffle and no per-row record crosses one. A partition dated outside
    the windows' range is left out (its run was warned, :func:`stats_warnings`)."""
    by_part: dict[tuple[str, str], tuple[list[Mapping[str, Any]], list[Mapping[str, Any]]]] = {}
    for i, rows in enumerate((grader_rows, verdict_rows)):
        for r in rows:
            by_part.setdefault((r["workflow"], r["date"]), ([], []))[i].append(r)
    out = []
    for (wf, date), (g, v) in sorted(by_part.items(), key=lambda kv: (str(kv[0][0]), str(kv[0][1]))):
        if ordinal(date) is None:
            continue
        idents = tuple(sorted({(r.get("run_id"), r.get("attempt")) for r in (*g, *v)}, key=repr))
        out.append(((wf, date), idents, partition_observations(wf, g, v)))
    return out


def shift(date: str, days: int) -> str:
    """``date`` moved by ``days`` (a date graders/stats/bounds.py admits, by a window's length)."""
    day = ordinal(date)
    if day is None:
        raise ValueError(f"{date!r} is not a date the statistics take")
    return iso(day + days)


def stats_rows(workflow: str, grader_id: str, daily: Mapping[str, CellAcc], end_dates: Iterable[str],
               windows: Iterable[int] = WINDOWS) -> list[dict[str, Any]]:
    """``grader_stats`` rows of one (workflow, grader) for windows ending on ``end_dates``
    (each date that has values of its own)."""
    job = SeriesJob(workflow, grader_id, daily, tuple(end_dates), windows=tuple(windows))
    return list(grader_stats_rows(Series([daily]), [job]))


def _regression_row(job: SeriesJob, columns: dict[str, Any]) -> dict[str, Any]:
    assert job.latest is not None
    base_end = shift(job.latest, -job.window)
    return {"workflow": job.workflow, "date": job.latest, "grader_id": job.grader_id, "window_days": job.window,
            "baseline_days": job.baseline, "current_start": shift(job.latest, 1 - job.window),
            "baseline_start": shift(base_end, 1 - job.baseline), "baseline_end": base_end, **columns}


def regression_row(workflow: str, grader_id: str, daily: Mapping[str, CellAcc], end: str,
                   window: int = DEFAULT_WINDOW, baseline: int = DEFAULT_BASELINE,
                   permutations: int = PERMUTATION_REPS) -> dict[str, Any]:
    """The ``regressions`` row (before q-values) of the ``window`` days ending on ``end``
    against the ``baseline`` days before them."""
    if ordinal(end) is None:
        raise ValueError(f"{end!r} is not a date the statistics take")
    job = SeriesJob(workflow, grader_id, daily, latest=end, window=window, baseline=baseline)
    columns = regression_rows(Series([daily]), [job], permutations)[0]
    assert columns is not None
    return _regression_row(job, columns)


def series_rows(jobs: Sequence[SeriesJob]) -> tuple[Iterator[dict[str, Any]], list[dict[str, Any]]]:
    """The ``grader_stats`` rows (made as they are taken; the statistics are computed by the call)
    and the regression rows (before q-values) of a batch of series, over one set of arrays
    (graders/stats/series.py)."""
    series = Series([job.daily for job in jobs])
    tests = [_regression_row(job, columns) for job, columns in zip(jobs, regression_rows(series, jobs), strict=True)
             if columns is not None]
    return grader_stats_rows(series, jobs), tests
