"""``grader_stats`` and ``regressions`` (docs/statistics.md): Beam wrappers over graders/stats.

Incremental: only cells whose windows contain a run graded (or dropped) by this job are
recomputed, and only the partitions those windows span are read back.

1. *Plan*: the partitions this job touches (new rows or dropped rows) and a listing of the stored
   ``grader_results`` partitions give, per workflow, the window end dates to recompute (touched
   date d → every date with values in [d, d + 27]), whether its regression cell (the latest
   date L: [L − 34, L]) must be retested, and the partitions those windows span.
2. *Observations*: this job's runs arrive as observations (the Grade step joins a run's
   ``grader_results`` rows with its ``trace_verdicts`` task, graders.stats.cells.run_observations)
   and are combined where they are graded into partial daily cells, one ``SeriesCells`` per
   (workflow, grader), flushed to the shuffle whenever a bundle holds :data:`FLUSH_VALUES`
   observations (:class:`CombineInBundle`); the (run, attempt) identities they replace, and
   the dropped ones, the same way per partition. Per partition to read, the stored ``grader_results`` and
   ``trace_verdicts`` rows that survive (not in those sets) are joined for the task and combined
   into cells there. No per-row record crosses a shuffle, and no step holds more than a
   bounded share of the fleet's cells: only the runner's shuffle holds them all (compactly).
3. Daily cells: per (workflow, grader), the new and stored partial cells of each day merged,
   then the rolling windows and the regression test from those daily cells.
4. q-values: Benjamini–Hochberg over this job's regression tests and the stored rows of the
   workflows not retested (their p-values are unchanged), so the family is every cell. When the
   stored rows hold other windows than this job's, every workflow is retested instead.
"""

from __future__ import annotations

import bisect
import functools
import logging
from collections.abc import Iterable, Iterator
from typing import Any

import apache_beam as beam
from apache_beam.io.filesystems import FileSystems

from graders.stats.bounds import iso, ordinal
from graders.stats.cells import (
    DEFAULT_BASELINE,
    DEFAULT_WINDOW,
    WINDOWS,
    CellAcc,
    Observation,
    RunCells,
    SeriesCells,
    partition_observations,
    series_rows,
    with_q_values,
)
from graders.stats.series import SeriesJob
from graders.tables.paths import partition_glob, partition_values
from schemas.version import FLEETGRADE_VERSION
from transforms.ahead import Ahead, windowed
from transforms.beamfiles import READS_AHEAD, join, map_ahead, pool, read_if_exists, remote
from transforms.combine import CombineInBundle, in_global_window
from transforms.incremental import read_table_rows, stored_rows

Partition = tuple[str, str]  # (workflow, date)
STATS_TABLES = ("grader_results", "trace_verdicts")
# Observations a bundle combines before its partial series go to the shuffle: ~4 MiB of flat
# cells, two flushes per 10k runs (each adds one partial per series it holds, merged downstream).
FLUSH_VALUES = 200_000
FLUSH_RUNS = 10_000  # runs whose identities a bundle holds before its sets go to the shuffle
# A batch of series computed together: numpy's per-call cost is shared; memory stays bounded.
BATCH_VALUES, BATCH_SERIES = 50_000, 512
LOG = logging.getLogger("fleetgrade")


class SeriesCombineFn(beam.CombineFn):  # type: ignore[misc]
    """(date, observation) of one (workflow, grader) → its :class:`SeriesCells` (the
    accumulator is the output: windows are computed from the merged daily cells downstream)."""

    def create_accumulator(self) -> SeriesCells:
        return SeriesCells()

    def add_input(self, mutable_accumulator: SeriesCells, element: tuple[str, Observation]) -> SeriesCells:
        return mutable_accumulator.add(*element)

    def merge_accumulators(self, accumulators: Iterable[SeriesCells]) -> SeriesCells:
        # Into a new accumulator: none of the inputs is modified (a runner may reuse them).
        out = SeriesCells()
        for acc in accumulators:
            out.merge(acc)
        return out

    def extract_output(self, accumulator: SeriesCells) -> SeriesCells:
        return accumulator


def stored_partitions(output: str, table: str = "grader_results") -> list[Partition]:
    """(workflow, date) of every stored partition of ``table`` (one listing)."""
    try:
        metas = [m for r in FileSystems.match([join(output, partition_glob(table))]) for m in r.metadata_list]
    except Exception:  # nothing stored yet
        return []
    out = []
    for m in metas:
        # A hashed workflow's name is in its file, read only for those.
        workflow, date = partition_values(m.path, functools.partial(read_if_exists, m.path))
        if workflow is not None and date is not None and ordinal(date) is not None:  # graders/stats/bounds.py
            out.append((workflow, date))
    return sorted(set(out))


def plan(touched: Iterable[Partition], stored: Iterable[Partition], window: int, baseline: int,
         longest: int = max(WINDOWS), retest_all: bool = False) -> dict[str, dict[str, Any]]:
    """Per touched workflow: ``ends`` (window end dates to recompute), ``latest`` (the regression
    cell's end when it must be retested, else None) and ``read`` (dates whose partitions the
    windows span). ``retest_all`` (the stored ``regressions`` hold other windows) plans every
    stored workflow's regression cell too, so the rewritten table never mixes windows. Pure, so
    the incremental rule is tested without a pipeline."""
    # Dates outside what the windows span (graders/stats/bounds.py) are never planned: their runs
    # were left out of the statistics with a warning where they were graded.
    touched_by: dict[str, set[int]] = {}
    for wf, day in ((wf, ordinal(d)) for wf, d in touched):
        if day is not None:
            touched_by.setdefault(wf, set()).add(day)
    dates_by: dict[str, set[int]] = {}
    for wf, day in ((wf, ordinal(d)) for wf, d in stored):
        if day is not None:
            dates_by.setdefault(wf, set()).add(day)
    if retest_all:
        for wf in dates_by:
            touched_by.setdefault(wf, set())
    out: dict[str, dict[str, Any]] = {}
    for wf, days in sorted(touched_by.items()):
        dates = sorted(dates_by.get(wf, set()) | days)
        ends = {e for d in days for e in _between(dates, d, d + longest - 1)}
        read = {r for e in ends for r in _between(dates, e - longest + 1, e)}
        latest = dates[-1]
        first = latest - window - baseline + 1
        retest = retest_all or any(first <= d for d in days)
        if retest:
            read.update(_between(dates, first, latest))
        out[wf] = {"ends": _iso(ends), "latest": _iso([latest])[0] if retest else None, "read": _iso(read | days)}
    return out


def _iso(ordinals: Iterable[int]) -> list[str]:
    return [iso(o) for o in sorted(ordinals)]


def _between(dates: list[int], lo: int, hi: int) -> list[int]:
    """The sorted ``dates`` in [lo, hi]."""
    return dates[bisect.bisect_left(dates, lo):bisect.bisect_right(dates, hi)]


def _run_idents(cells: RunCells) -> Iterator[tuple[Partition, frozenset[tuple[Any, ...]]]]:
    part, idents, _ = cells
    yield part, frozenset(idents)


def _run_cells(cells: RunCells) -> Iterator[tuple[tuple[str, str], tuple[str, Observation]]]:
    (wf, date), _, observations = cells
    for grader, obs in observations:
        yield (wf, grader), (date, obs)


def _drop(drop: tuple[str, str | None, str | None, tuple[Any, ...]]) -> Iterator[tuple[Partition, frozenset[Any]]]:
    table, wf, date, ident = drop
    if table in STATS_TABLES and wf is not None and date is not None and ordinal(date) is not None:
        yield (wf, date), frozenset([tuple(ident)])


class IdentsCombineFn(beam.CombineFn):  # type: ignore[misc]
    """Sets of (run_id, attempt) of one partition → their union: the stored rows this job
    replaces or drops there. One small tuple per run crosses the shuffle, combined per bundle."""

    def create_accumulator(self) -> set[tuple[Any, ...]]:
        return set()

    def add_input(self, mutable_accumulator: set[tuple[Any, ...]], element: frozenset[tuple[Any, ...]]
                  ) -> set[tuple[Any, ...]]:
        mutable_accumulator |= element
        return mutable_accumulator

    def merge_accumulators(self, accumulators: Iterable[set[tuple[Any, ...]]]) -> set[tuple[Any, ...]]:
        return set().union(*accumulators)

    def extract_output(self, accumulator: set[tuple[Any, ...]]) -> frozenset[tuple[Any, ...]]:
        return frozenset(accumulator)


class _StoredCells(beam.DoFn):
    """A partition to read, with the identities this job replaces there → the cells of its
    surviving stored rows, ((workflow, grader), SeriesCells of that date) (this job's rows are
    combined apart)."""

    def __init__(self, output: str) -> None:
        self.output = output

    def setup(self) -> None:
        # On gs:// the next partitions' files are read while one is decoded (transforms/ahead.py).
        self._ahead: Ahead[tuple[Partition, Iterable[tuple[str, Any]]]] = Ahead(
            READS_AHEAD if remote(self.output) else 0, self._start)

    def _start(self, kv: tuple[Partition, Iterable[tuple[str, Any]]]) -> Any:
        return pool().submit(self._read, kv[0]) if self._ahead.depth else None

    def _read(self, part: Partition) -> list[list[dict[str, Any]] | None]:
        return [stored_rows(self.output, table, *part) for table in STATS_TABLES]

    def process(self, kv: tuple[Partition, Iterable[tuple[str, Any]]], timestamp: Any = beam.DoFn.TimestampParam,
                window: Any = beam.DoFn.WindowParam) -> Iterator[Any]:
        for ready, work in self._ahead.push(kv, timestamp, window):
            yield from self._cells(ready, work)

    def finish_bundle(self) -> Any:
        return [windowed(out, ts, window) for kv, work, ts, window in self._ahead.drain()
                for out in self._cells(kv, work)] or None

    def _cells(self, kv: tuple[Partition, Iterable[tuple[str, Any]]], work: Any) -> Iterator[Any]:
        (wf, date), items = kv
        gone: set[tuple[Any, ...]] = set()
        for tag, payload in items:
            if tag == "x":
                gone |= payload
        rows: dict[str, list[dict[str, Any]]] = {}
        stored_tables = work.result() if work is not None else self._read((wf, date))
        for table, stored in zip(STATS_TABLES, stored_tables, strict=True):
            # None: damaged, named (a warning)
            rows[table] = [r for r in stored or [] if (r.get("run_id"), r.get("attempt")) not in gone]
        cells: dict[str, CellAcc] = {}
        for grader, obs in partition_observations(wf, rows["grader_results"], rows["trace_verdicts"]):
            cells.setdefault(grader, CellAcc()).add(obs)
        for grader, acc in cells.items():
            yield (wf, grader), SeriesCells({date: acc})


def _keyed_requests(plans: dict[str, dict[str, Any]]) -> Iterator[tuple[Partition, tuple[str, None]]]:
    for wf, p in plans.items():
        for d in p["read"]:
            yield (wf, d), ("r", None)


def _stale_stats(plans: dict[str, dict[str, Any]], output: str) -> Iterator[tuple[str, str, str, tuple[Any, ...]]]:
    """Drops for every stored ``grader_stats`` row of the partitions being recomputed: each is
    rewritten whole (a grader gone from a window, or a date left without runs, leaves no row)."""
    parts = [(wf, end) for wf, p in sorted(plans.items()) for end in p["ends"]]
    for (wf, end), rows in map_ahead(lambda part: stored_rows(output, "grader_stats", *part), parts, remote(output)):
        for row in rows or []:
            yield "grader_stats", wf, end, (row["grader_id"], row["window_days"])


class _SeriesRows(beam.DoFn):
    """Daily accumulators of one (workflow, grader) → its recomputed ``grader_stats`` rows, and
    its regression test (tagged ``tests``). A day's new and stored partial cells are merged here
    rather than by another combine: one in-memory copy of the fleet's cells fewer. Series are
    computed in batches (:data:`BATCH_VALUES` values or :data:`BATCH_SERIES` series, ~3 MiB of
    arrays), so numpy's per-call cost is shared by many series' cells (graders/stats/series.py)."""

    TESTS = "tests"

    def __init__(self, window: int, baseline: int) -> None:
        self.window, self.baseline = window, baseline
        self._jobs: list[SeriesJob] = []
        self._held = 0

    def start_bundle(self) -> None:
        self._jobs, self._held = [], 0

    def process(self, kv: tuple[tuple[str, str], Iterable[SeriesCells]],
                plans: dict[str, dict[str, Any]]) -> Iterator[Any]:
        (wf, grader), series = kv
        p = plans.get(wf)
        if p is None:
            return
        # The partials were decoded for this step alone: a day's cells are merged into the
        # first partial's, not copied into new ones.
        daily: dict[str, CellAcc] = {}
        for part in series:
            for date, acc in part.days.items():
                mine = daily.get(date)
                if mine is None:
                    daily[date] = acc
                else:
                    mine.merge(acc)
        self._jobs.append(SeriesJob(wf, grader, daily, tuple(p["ends"]), p["latest"], self.window, self.baseline))
        self._held += sum(acc.n for acc in daily.values())
        if self._held >= BATCH_VALUES or len(self._jobs) >= BATCH_SERIES:
            yield from self._flush()

    def finish_bundle(self) -> Iterator[Any]:
        for out in self._flush():
            if isinstance(out, beam.pvalue.TaggedOutput):
                yield beam.pvalue.TaggedOutput(out.tag, in_global_window(out.value))
            else:
                yield in_global_window(out)

    def _flush(self) -> Iterator[Any]:
        jobs, self._jobs, self._held = self._jobs, [], 0
        if not jobs:
            return
        try:
            batches = [series_rows(jobs)]
        except (ArithmeticError, ValueError):
            # The values were validated where they were graded (graders/stats/bounds.py); should a
            # series still fail, it alone loses its statistics, never the batch or the job.
            batches = []
            for job in jobs:
                try:
                    batches.append(series_rows([job]))
                except (ArithmeticError, ValueError) as exc:
                    LOG.error("statistics of %r / %r not computed: %s: %s", job.workflow, job.grader_id,
                              type(exc).__name__, exc)
        tests = [test for _, some in batches for test in some]
        for rows, _ in batches:
            for row in rows:
                row["fleetgrade_version"] = FLEETGRADE_VERSION
                yield row
        for test in tests:
            yield beam.pvalue.TaggedOutput(self.TESTS, test)


def stored_windows(output: str) -> set[tuple[int, int]]:
    """The (window_days, baseline_days) pairs of the stored ``regressions`` rows."""
    return {(r["window_days"], r["baseline_days"]) for r in read_table_rows(output, "regressions")}


def _plan_all(_: Any, touched: list[Partition], output: str, window: int,
              baseline: int) -> dict[str, dict[str, Any]]:
    stored = stored_windows(output)
    return plan(touched, stored_partitions(output), window, baseline,
                retest_all=bool(stored - {(window, baseline)}))


def _all_regressions(_: Any, tests: list[dict[str, Any]], plans: dict[str, dict[str, Any]],
                     output: str, window: int, baseline: int) -> Iterator[dict[str, Any]]:
    """This job's tests plus the stored rows of workflows not retested, with q-values and
    verdicts across all of them. A stored row of other windows is never carried: when there are
    any, every workflow with grades was retested (_plan_all); one without grades left goes."""
    retested = {wf for wf, p in plans.items() if p["latest"] is not None}
    carried = [{k: v for k, v in r.items() if k not in ("q_value", "verdict")}
               for r in read_table_rows(output, "regressions") if r["workflow"] not in retested
               and (r["window_days"], r["baseline_days"]) == (window, baseline)]
    rows = sorted([*tests, *carried], key=lambda r: (r["workflow"], r["grader_id"]))
    for row in with_q_values(rows):
        yield {**row, "fleetgrade_version": FLEETGRADE_VERSION}


class FleetStats(beam.PTransform):
    """{observations: this job's runs (graders.stats.cells.run_observations of their
    grader_results and trace_verdicts rows); drops: (table, workflow, date, identity)}
    → {grader_stats, regressions: rows; drops: the stored grader_stats rows being recomputed}."""

    def __init__(self, output: str, window: int = DEFAULT_WINDOW, baseline: int = DEFAULT_BASELINE) -> None:
        super().__init__()
        self.output, self.window, self.baseline = output, window, baseline

    def expand(self, inputs: dict[str, Any]) -> dict[str, beam.PCollection]:
        runs = inputs["observations"]  # graders.stats.cells.RunCells, one per run and partition
        output, window, baseline = self.output, self.window, self.baseline
        # Per-run records never cross a shuffle: observations are combined into partial daily
        # cells, and the replaced identities into sets per partition, where the runs are graded.
        new_cells = runs | "NewCells" >> beam.ParDo(CombineInBundle(SeriesCombineFn(), FLUSH_VALUES, _run_cells))
        # Each side combined before the Flatten: the local runner materializes a Flatten's inputs.
        gone = (
            (runs | "NewIdents" >> beam.ParDo(CombineInBundle(IdentsCombineFn(), FLUSH_RUNS, _run_idents)),
             inputs["drops"] | "DroppedIdents" >> beam.ParDo(CombineInBundle(IdentsCombineFn(), FLUSH_RUNS, _drop)))
            | "FlattenGone" >> beam.Flatten()
        )
        touched = gone | "Touched" >> beam.Keys()  # a partition once per batch that holds it: plan takes sets
        plans = (
            touched.pipeline
            | "PlanTrigger" >> beam.Impulse()  # one element: a Create adds three steps
            | "Plan" >> beam.Map(_plan_all, beam.pvalue.AsList(touched), output, window, baseline)
        )
        requests = plans | "ReadRequests" >> beam.FlatMap(_keyed_requests)
        stored_cells = (
            (gone | "TagGone" >> beam.MapTuple(lambda part, ids: (part, ("x", ids))), requests)
            | "FlattenRequests" >> beam.Flatten()
            | "GroupByPartition" >> beam.GroupByKey()
            | "StoredCells" >> beam.ParDo(_StoredCells(output))
        )
        series = (
            (new_cells, stored_cells)
            | "FlattenCells" >> beam.Flatten()
            | "GroupBySeries" >> beam.GroupByKey()
            | "SeriesRows" >> beam.ParDo(_SeriesRows(window, baseline), beam.pvalue.AsSingleton(plans))
            .with_outputs(_SeriesRows.TESTS, main="stats")
        )
        regressions = (
            touched.pipeline
            | "RegressionsTrigger" >> beam.Impulse()
            | "Regressions" >> beam.FlatMap(_all_regressions, beam.pvalue.AsList(series[_SeriesRows.TESTS]),
                                            beam.pvalue.AsSingleton(plans), output, window, baseline)
        )
        stale = plans | "StaleStats" >> beam.FlatMap(_stale_stats, output)
        return {"grader_stats": series.stats, "regressions": regressions, "drops": stale}
