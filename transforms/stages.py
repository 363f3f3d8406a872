"""The fleet graph's named stages (pipeline/graph.py lists them), each a few lines of wiring.

ReadRuns → Prepare → Grade (graders/one_run.py, a run end to end) → TraceVerdicts (task
reliability), TrackState (``_state`` rows and the rows to drop), FleetStats → WriteTables.

Per-run collections travel as a table's named parts rather than flattened: the local runner
materializes a Flatten whole, which would hold a row per run of the fleet (docs/performance.md).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import apache_beam as beam
from apache_beam.metrics import Metrics

from graders.families.trace_rules.config import TraceConfig
from graders.grading.plan import PlanSet
from graders.prepare import PreparedRun
from graders.tables.state import GradingDigests, dead_state, drops_for, graded_state
from transforms.duplicates import STAGE as DUPLICATE
from transforms.duplicates import PrepareOwned, ResolveDuplicates
from transforms.incremental import DAMAGED, KEEP, DiscoverAndDecide, kept_identity, stored_rows_of
from transforms.prepare import DEAD, DEAD_STATE
from transforms.progress import LATE, Tally
from transforms.trace_verdicts import TaskReliability


class ReadRuns(beam.PTransform):
    """PBegin → {"runs": runs to read, one folder per identity; "kept": stored state rows of the
    runs not graded now; "dead"/"dead_state": the extra copies of a run, as dead letters;
    "drops": stored rows to drop, partitions the sink must rewrite (every stored one, on --full)}."""

    def __init__(self, base: str, output: str, plans: PlanSet, cfg: TraceConfig, full: bool,
                 since: str | None, until: str | None) -> None:
        super().__init__()
        self.decide = DiscoverAndDecide(base, output, plans, cfg, full, since, until)
        self.duplicates = ResolveDuplicates(base)

    def expand(self, pbegin: beam.pvalue.PBegin) -> dict[str, beam.PCollection]:
        # Listed and decided against the stored state in one step.
        todo, kept, drops = pbegin | "Discover" >> self.decide
        unique = (todo, kept) | "Identity" >> self.duplicates
        return {"runs": unique["runs"], "kept": kept, "dead": unique[DEAD], "dead_state": unique[DEAD_STATE],
                "drops": drops}


class _Window(beam.DoFn):
    """Runs dated outside --since/--until are not graded now; their earlier state is kept."""

    def __init__(self, since: str | None, until: str | None) -> None:
        self.since, self.until = since, until
        self.skipped = Metrics.counter("fleetgrade", "runs_prepared_out_of_window")

    def setup(self) -> None:
        self._tally = Tally("window")  # the job's progress line (transforms/progress.py)

    def finish_bundle(self) -> None:
        self._tally.flush()

    def process(self, prep: PreparedRun) -> Any:
        date = prep.meta.date
        if (self.since is not None and date < self.since) or (self.until is not None and date > self.until):
            self.skipped.inc()
            self._tally.add(LATE)
            if prep.previous is not None:
                yield beam.pvalue.TaggedOutput(KEEP, prep.previous)
            return
        yield prep


class Prepare(beam.PTransform):
    """Runs to read → {"runs": PreparedRuns dated in the window; "dead"/"dead_state": runs that
    cannot be prepared, and sessions whose identity another input holds; "kept": the stored
    state of runs found dated outside the window}."""

    def __init__(self, base: str, since: str | None, until: str | None) -> None:
        super().__init__()
        self.base, self.since, self.until = base, since, until

    def expand(self, runs: beam.PCollection) -> dict[str, beam.PCollection]:
        prepared = runs | "Read" >> beam.ParDo(PrepareOwned(self.base)).with_output_types(
            PreparedRun).with_outputs(DEAD, DEAD_STATE, main="runs")
        windowed = prepared.runs | "Window" >> beam.ParDo(_Window(self.since, self.until)).with_output_types(
            PreparedRun).with_outputs(KEEP, main="runs")
        return {"runs": windowed.runs, "kept": windowed[KEEP], "dead": prepared[DEAD],
                "dead_state": prepared[DEAD_STATE]}


DROPS = "drops"  # _StateRows's side output


class _StateRows(beam.DoFn):
    """The new ``_state`` row of a graded run or of a dead-lettered one, and tagged ``drops``: the
    rows its earlier grading wrote (one step for both, not two: issue 33, fixed cost)."""

    def __init__(self, plans: PlanSet, cfg: TraceConfig) -> None:
        self.plans, self.cfg = plans, cfg

    def setup(self) -> None:
        self.digests = GradingDigests(self.plans, self.cfg)

    def process(self, item: PreparedRun | tuple[dict[str, Any], str, Any]) -> Iterator[Any]:
        if isinstance(item, PreparedRun):
            m = item.meta
            yield graded_state(m.root, item.listing_digest, self.digests.for_workflow(m.workflow), m.workflow,
                               m.date, m.run_id, m.attempt)
            previous = item.previous
        else:
            row, digest, previous = item
            yield dead_state(row["input"], digest, self.digests.for_workflow(row.get("workflow")),
                             row.get("workflow"), row.get("date"),
                             "duplicate" if row.get("stage") == DUPLICATE else "dead")
        for drop in drops_for(previous):
            yield beam.pvalue.TaggedOutput(DROPS, drop)


class TrackState(beam.PTransform):
    """{"graded": PreparedRuns, "dead": {name: dead_state items}} → {"state": the new ``_state``
    rows' parts, "drops": the earlier rows of every run graded or dead-lettered now}."""

    def __init__(self, plans: PlanSet, cfg: TraceConfig) -> None:
        super().__init__()
        self.plans, self.cfg = plans, cfg

    def expand(self, runs: dict[str, Any]) -> dict[str, Any]:
        parts = {"graded": ("GradedState", runs["graded"]),
                 **{name: (f"DeadState[{name}]", items) for name, items in runs["dead"].items()}}
        state, drops = {}, []
        for name, (label, items) in parts.items():
            out = items | label >> beam.ParDo(_StateRows(self.plans, self.cfg)).with_outputs(DROPS, main="state")
            state[name] = out.state
            drops.append(out[DROPS])
        return {"state": state, "drops": tuple(drops) | "FlattenDrops" >> beam.Flatten()}


def _graded_identity(state: dict[str, Any]) -> Iterator[tuple[Any, Any]]:
    """A kept run's partition and identity, if it was graded (a dead letter has no verdicts)."""
    if state.get("outcome") == "graded":
        yield kept_identity(state)


class TraceVerdicts(beam.PTransform):
    """{"verdicts": this job's ``trace_verdicts`` rows, "kept": {name: state rows of runs not
    regraded}} → {"rows": ``task_reliability`` rows over every run of each task, the kept ones'
    stored verdicts included; "damaged": touches of stored partitions that cannot be read back}."""

    def __init__(self, output: str) -> None:
        super().__init__()
        self.output = output

    def expand(self, inputs: dict[str, Any]) -> dict[str, beam.PCollection]:
        # Only the kept runs' identities are shuffled, grouped by partition; each partition's
        # stored verdicts are read where they are carried, so they never cross a shuffle.
        carried = (
            tuple(
                part | f"KeyKept[{name}]" >> beam.FlatMap(_graded_identity)
                for name, part in inputs["kept"].items()
            )
            | "FlattenKeptKeys" >> beam.Flatten()
            | "GroupKeptByPartition" >> beam.GroupByKey()
            | "CarriedVerdicts" >> beam.FlatMap(
                lambda kv, out: stored_rows_of(out, "trace_verdicts", kv), self.output).with_outputs(
                DAMAGED, main="rows")
        )
        rows = (inputs["verdicts"], carried.rows) | "Reliability" >> TaskReliability()
        return {"rows": rows, "damaged": carried[DAMAGED]}
