"""The incremental decision (graders/state.py) and reading back what earlier runs wrote."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any
from urllib.parse import unquote

import apache_beam as beam
from apache_beam.io.filesystems import FileSystems
from apache_beam.metrics import Metrics

from graders.parquet import HIVE_NULL, decode_table
from graders.plan import PlanSet
from graders.state import GradingDigests, listing_digest, unchanged
from graders.trace_rules.config import TraceConfig
from schemas.state_table import STATE_TABLE
from transforms.beamfiles import join
from transforms.discover import ListRuns
from transforms.sink import table_globs

KEEP = "keep"


def _partition_values(path: str) -> tuple[str | None, str | None]:
    parts = {p.split("=", 1)[0]: p.split("=", 1)[1] for p in path.split("/") if "=" in p}
    values = []
    for key in ("workflow", "date"):
        raw = parts.get(key)
        values.append(None if raw is None or raw == HIVE_NULL else unquote(raw))
    return values[0], values[1]


def read_table_rows(output: str, table: str) -> Iterator[dict[str, Any]]:
    """Every row an earlier run wrote to ``table``, with its partition columns."""
    metas = []
    for pattern in table_globs(output, table):
        try:
            metas += [m for r in FileSystems.match([pattern]) for m in r.metadata_list]
        except Exception:  # nothing there yet (first run)
            continue
    for meta in sorted(metas, key=lambda m: m.path):
        with FileSystems.open(meta.path) as fh:
            data = fh.read()
        workflow, date = _partition_values(meta.path)
        for row in decode_table(table, data):
            if table != STATE_TABLE:  # the state's rows hold their partition's values
                row["workflow"], row["date"] = workflow, date
            yield row


LISTING, STATE = "listing", "state"  # the two sides of the state join


class _ListingsAndState(ListRuns):
    """Either side of the state join, keyed by the run folder's full path.

    A listing side carries the listing's digest, not the listing: that is all the decision
    needs, and ``PrepareRun`` lists again each run it reads. The listings were ~3x the bytes,
    and the local runner holds the whole join in one place (make bench memory).
    """

    def __init__(self, base: str, output: str) -> None:
        super().__init__()
        self.base = base.rstrip("/")
        self.output = output

    def process(self, side: str) -> Iterator[tuple[str, tuple[str, Any]]]:  # type: ignore[override]
        if side == LISTING:
            for root_rel, listing in super().process(self.base):
                yield join(self.base, root_rel), (LISTING, (root_rel, listing_digest(listing)))
        else:
            for row in read_table_rows(self.output, STATE_TABLE):
                yield row["root"], (STATE, row)


def _sides(root: str, values: Iterable[tuple[str, Any]]) -> tuple[str, dict[str, list[Any]]]:
    groups: dict[str, list[Any]] = {LISTING: [], STATE: []}
    for side, value in values:
        groups[side].append(value)
    return root, groups


class JoinListingsAndState(beam.PTransform):
    """PBegin → (run folder, {"listing": [(root, listing digest)], "state": [stored row]}) per folder
    that is listed now, has a stored state, or both.

    One step emits both sides and one GroupByKey joins them: a CoGroupByKey flattens two
    collections, and the local runner runs a Flatten of two steps' outputs as a stage of its
    own, which held every listing of the fleet in a worker (make bench memory).
    """

    def __init__(self, base: str, output: str) -> None:
        super().__init__()
        self.base = base
        self.output = output

    def expand(self, pbegin: beam.pvalue.PBegin) -> beam.PCollection:
        return (
            pbegin
            | "Sides" >> beam.Create([LISTING, STATE])
            | "Read" >> beam.ParDo(_ListingsAndState(self.base, self.output))
            | "Group" >> beam.GroupByKey()
            | "Split" >> beam.MapTuple(_sides)
        )


class ReadTable(beam.PTransform):
    def __init__(self, output: str, table: str) -> None:
        super().__init__()
        self.output = output
        self.table = table

    def expand(self, pbegin: beam.pvalue.PBegin) -> beam.PCollection:
        return (
            pbegin
            | "Start" >> beam.Create([self.table])
            | "Read" >> beam.FlatMap(lambda t, out: read_table_rows(out, t), self.output)
        )


class Decide(beam.DoFn):
    """Per run folder: carry its state (unchanged, or its input is gone) or send it to grading.

    Outputs (root, listing digest, previous state) to grade on the main output, and state rows
    to keep on ``keep``.
    """

    def __init__(self, base: str, plans: PlanSet, trace_config: TraceConfig, full: bool,
                 since: str | None, until: str | None) -> None:
        self.base = base.rstrip("/")
        self.plans = plans
        self.trace_config = trace_config
        self.full = full
        self.since = since
        self.until = until
        self.discovered = Metrics.counter("fleetgrade", "runs_discovered")
        self.unchanged = Metrics.counter("fleetgrade", "runs_unchanged")
        self.window = Metrics.counter("fleetgrade", "runs_out_of_window")

    def setup(self) -> None:
        self.digests = GradingDigests(self.plans, self.trace_config)

    def in_window(self, date: str | None) -> bool:
        if date is None:
            return True
        return (self.since is None or date >= self.since) and (self.until is None or date <= self.until)

    def process(self, kv: tuple[str, dict[str, Iterable[Any]]]) -> Iterator[Any]:
        _, groups = kv
        listings = list(groups["listing"])
        states = list(groups["state"])
        # Two rows for a folder only after a commit cut short while its run moved partitions:
        # either one heals (kept, or regraded with its rows dropped), but the same one each time.
        previous = states[0] if len(states) == 1 else min(
            states, key=lambda s: sorted((k, str(v)) for k, v in s.items()), default=None)
        if not listings:  # the input is gone: its rows stay (history), and so does its state
            if previous is not None:
                yield beam.pvalue.TaggedOutput(KEEP, previous)
            return
        self.discovered.inc()
        root_rel, digest = listings[0]
        if previous is not None and not self.in_window(previous.get("date")):
            self.window.inc()
            yield beam.pvalue.TaggedOutput(KEEP, previous)
            return
        if not self.full and unchanged(previous, digest, self.digests.for_workflow(
                previous.get("workflow") if previous else None)):
            self.unchanged.inc()
            yield beam.pvalue.TaggedOutput(KEEP, previous)
            return
        yield root_rel, digest, previous
