"""``cost_outliers``: a thin Beam wrapper over graders/stats/outliers.py.

Incremental as the statistics are: the partitions this job touches (runs graded, or dropped)
plan which dates' verdicts can change (a run judges the runs of the ``days`` days after it), only
the ``runs`` partitions those verdicts read are read back, and the recomputed partitions' stored
rows are dropped before the new ones are written. Per-run records cross one shuffle, keyed by
workflow: a spend record is five numbers and a name.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

import apache_beam as beam

from graders.stats.outliers import DEFAULT_DAYS, DEFAULT_FACTOR, Spend, outlier_rows, plan, spend_of
from schemas.version import FLEETGRADE_VERSION
from transforms.beamfiles import map_ahead, remote
from transforms.incremental import read_table_rows, stored_rows
from transforms.stats import stored_partitions

Partition = tuple[str, str]
TABLE = "cost_outliers"


def _new(row: dict[str, Any]) -> tuple[str, tuple[str, Any]]:
    return row["workflow"], ("new", spend_of(row))


def _touched(row: dict[str, Any]) -> Partition:
    return row["workflow"], str(row["date"])


def _dropped(drop: tuple[str, str | None, str | None, tuple[Any, ...]]) -> Iterator[tuple[str, tuple[str, Any]]]:
    table, wf, date, ident = drop
    if table == "runs" and wf is not None and date is not None:
        yield wf, ("gone", (date, tuple(ident)))


def _plan(_: Any, touched: list[Partition], dropped: list[tuple[str, tuple[str, Any]]], output: str, factor: float,
          days: int) -> dict[str, dict[str, list[str]]]:
    """The plan of graders/stats/outliers.py over the partitions this job's runs and drops
    touch; every date when the stored rows used other settings."""
    parts = {*touched, *((wf, date) for wf, (_, (date, _)) in dropped)}
    stored = {(r["factor"], r["window_days"]) for r in read_table_rows(output, TABLE)}
    return plan(parts, stored_partitions(output, "runs"), days, everything=bool(stored - {(factor, days)}))


def _stored(plans: dict[str, dict[str, list[str]]], output: str) -> Iterator[tuple[str, tuple[str, Any]]]:
    """The spend of the stored runs of the partitions the plan reads (the replaced and dropped ones
    are set aside downstream, where this job's runs of the workflow are)."""
    parts = [(wf, date) for wf, p in sorted(plans.items()) for date in p["read"]]
    for (wf, date), rows in map_ahead(lambda part: stored_rows(output, "runs", *part), parts, remote(output)):
        for row in rows or []:  # None: damaged, named (a warning)
            yield wf, ("stored", spend_of({**row, "workflow": wf, "date": date}))


def _stale(plans: dict[str, dict[str, list[str]]], output: str) -> Iterator[tuple[str, str, str, tuple[Any, ...]]]:
    """Drops for every stored row of the partitions being recomputed: each is rewritten whole."""
    parts = [(wf, date) for wf, p in sorted(plans.items()) for date in p["dates"]]
    for (wf, date), rows in map_ahead(lambda part: stored_rows(output, TABLE, *part), parts, remote(output)):
        for row in rows or []:
            yield TABLE, wf, date, (row["run_id"], row["attempt"])


class _Outliers(beam.DoFn):
    """One workflow's stored and new spend → its recomputed rows: a new row of a run replaces the
    stored one of its identity, and a dropped run's stored row goes."""

    def __init__(self, factor: float, days: int) -> None:
        self.factor, self.days = factor, days

    def process(self, kv: tuple[str, Iterable[tuple[str, Any]]], plans: dict[str, dict[str, list[str]]]
                ) -> Iterator[dict[str, Any]]:
        wf, items = kv
        p = plans.get(wf)
        if p is None:
            return
        stored: dict[tuple[str, int], Spend] = {}
        new: dict[tuple[str, int], Spend] = {}
        gone: set[tuple[str, tuple[Any, ...]]] = set()
        for tag, payload in items:
            if tag == "new":
                new[payload.identity] = payload
            elif tag == "stored":
                stored[payload.identity] = payload
            else:
                gone.add(payload)
        kept = {k: s for k, s in stored.items() if (s.date, k) not in gone and k not in new}
        for row in outlier_rows(wf, [*kept.values(), *new.values()], p["dates"], self.factor, self.days):
            yield {**row, "fleetgrade_version": FLEETGRADE_VERSION}


class CostOutliers(beam.PTransform):
    """{runs: this job's ``runs`` rows; drops: (table, workflow, date, identity)} →
    {cost_outliers: recomputed rows; drops: the stored rows they replace}. Few steps: every job
    pays for each (docs/performance.md, "Fixed cost"); the plan and the stored reads are one
    element's work each."""

    def __init__(self, output: str, factor: float = DEFAULT_FACTOR, days: int = DEFAULT_DAYS) -> None:
        super().__init__()
        self.output, self.factor, self.days = output, factor, days

    def expand(self, inputs: dict[str, Any]) -> dict[str, beam.PCollection]:
        runs, drops = inputs["runs"], inputs["drops"]
        dropped = drops | "Dropped" >> beam.FlatMap(_dropped)
        plans = (runs.pipeline | "PlanTrigger" >> beam.Impulse()
                 | "Plan" >> beam.Map(_plan, beam.pvalue.AsList(runs | "Touched" >> beam.Map(_touched)),
                                      beam.pvalue.AsList(dropped), self.output, self.factor, self.days))
        stored = plans | "StoredSpend" >> beam.FlatMap(_stored, self.output)
        rows = ((runs | "NewSpend" >> beam.Map(_new), dropped, stored) | "FlattenSpend" >> beam.Flatten()
                | "ByWorkflow" >> beam.GroupByKey()
                | "Outliers" >> beam.ParDo(_Outliers(self.factor, self.days), beam.pvalue.AsSingleton(plans)))
        return {TABLE: rows, "drops": plans | "Stale" >> beam.FlatMap(_stale, self.output)}
