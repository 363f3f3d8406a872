"""Fan out to the grader families, one Beam step per family (design.md §2, "Fan out")."""

from __future__ import annotations

import pickle
import zlib
from collections.abc import Iterable, Iterator
from typing import Any

import apache_beam as beam
from apache_beam import typehints
from apache_beam.metrics import Metrics

from graders.engine import Executor, grade_trace
from graders.executors import SANDBOXED_SOURCES, close_executor, make_executor
from graders.plan import PlanSet, family_ids
from graders.prepare import PreparedRun, bind_executor
from graders.rows import dead_letter_row, result_rows, run_row, status_counts

RunKey = tuple[str, str, str, int]
SANDBOX_MIN_RAM = "4GB"


def run_key(prep: PreparedRun) -> RunKey:
    m = prep.meta
    return (m.workflow, m.date, m.run_id, m.attempt)


class GradeFamily(beam.DoFn):
    """Grades one family on every run; sandboxes live per worker, created in ``setup``."""

    def __init__(self, plans: PlanSet, family: str) -> None:
        self.plans = plans
        self.family = family
        self.executors: dict[str, Executor] = {}
        self.graded = Metrics.counter("fleetgrade", f"graded_{family}")
        self.errors = Metrics.counter("fleetgrade", f"grader_errors_{family}")

    def setup(self) -> None:
        if self.family in SANDBOXED_SOURCES:
            executor = make_executor(self.family, self.plans.allow_unsandboxed)
            if executor is not None:
                self.executors[self.family] = executor

    def process(self, prep: PreparedRun) -> Iterator[dict[str, Any] | beam.pvalue.TaggedOutput]:
        plan = prep.plan(self.plans.for_workflow(prep.meta.workflow))
        ids = family_ids(plan, self.family)
        if not ids:
            return
        executors = {source: bind_executor(ex, prep) for source, ex in self.executors.items()}
        results = grade_trace(prep.trace, plan, executors, only=ids, file_ir=prep.file_ir)
        self.graded.inc(len(results))
        self.errors.inc(sum(r["status"] == "error" for r in results))
        yield from result_rows(prep.meta, results, plan, prep.input_digest)
        # The run's status counts leave with its rows: a combine per run held one accumulator
        # per run of the fleet in the grading worker (lifted combines keep up to 100k keys).
        yield beam.pvalue.TaggedOutput(COUNTS, (run_key(prep), status_counts(results)))

    def teardown(self) -> None:
        for executor in self.executors.values():
            close_executor(executor)
        self.executors.clear()


COUNTS = "counts"  # GradeFamily's side output: (run key, status counts) per graded run


def _sum_counts(counts: Iterable[dict[str, int]]) -> dict[str, int]:
    """One run's status counts over its families (all zero when no family graded it)."""
    total = status_counts([])
    for c in counts:
        for k in total:
            total[k] += c[k]
    return total


def _run_stub(prep: PreparedRun, plans: PlanSet) -> tuple[RunKey, bytes]:
    """The run's ``runs`` row before its status counts are known, pickled and compressed.

    Only this small row crosses the join, never the preprocessed trace: shuffling whole
    traces made the pipeline several times slower than the plain loop, and the local runner
    holds joined values as Python objects (make bench).
    """
    plan = prep.plan(plans.for_workflow(prep.meta.workflow))
    stub = run_row(prep.meta, prep.trace, [], prep.report, plan, prep.input_digest)
    return run_key(prep), zlib.compress(pickle.dumps(stub, pickle.HIGHEST_PROTOCOL), 1)


def _run_row(kv: tuple[RunKey, dict[str, Iterable[Any]]]) -> Iterator[Any]:
    """The ``runs`` row of a run, or its dead-letter row when a grading step failed on it.

    A run is either graded or dead-lettered, never both, so inputs = graded + dead letters.
    """
    _, groups = kv
    failures = list(groups["failed"])
    counts = _sum_counts(groups["results"])  # one count per family
    for packed in groups["run"]:
        if failures:
            yield beam.pvalue.TaggedOutput("dead_letter", failures[0])
            continue
        stub = pickle.loads(zlib.decompress(packed))
        stub.update(counts)
        yield stub


class GradeRuns(beam.PTransform):
    """PreparedRun → {"grader_results": {family: rows}, "runs": rows, "dead_letter": rows}.

    Results stay per family: a Flatten of them would be materialized by the local runner, every
    result row of the fleet at once (make bench memory). Only their per-run counts are flattened.
    """

    def __init__(self, plans: PlanSet, resource_hints: bool = False) -> None:
        super().__init__()
        self.plans = plans
        self.resource_hints = resource_hints

    def expand(self, prepared: beam.PCollection) -> dict[str, Any]:
        per_family: dict[str, beam.PCollection] = {}
        counts = []
        failures = []
        for family in self.plans.families():
            # The side output is declared, so Beam does not warn that it has no type hint.
            grade: Any = beam.ParDo(GradeFamily(self.plans, family)).with_output_types(
                typehints.Dict[str, typehints.Any], **{COUNTS: typehints.Tuple[typehints.Any, typehints.Dict[str, int]]})
            # Only for distributed runners: a hint gives the step its own environment, which keeps
            # the local runner from fusing it with its siblings (every trace would be encoded).
            if self.resource_hints and family in SANDBOXED_SOURCES:
                # A V8 helper or bubblewrap evaluators per worker need headroom beyond the graders.
                grade = grade.with_resource_hints(min_ram=SANDBOX_MIN_RAM)
            graded = prepared | f"Grade[{family}]" >> grade.with_outputs(COUNTS, main="rows").with_exception_handling()
            per_family[family] = graded["rows"]
            counts.append(graded[COUNTS])
            failures.append(graded["bad"])
        failed = (
            tuple(failures)
            | "FlattenGradeFailures" >> beam.Flatten()
            | "GradeFailureRows" >> beam.Map(_failure_row)
            | "KeyFailures" >> beam.Map(lambda row: ((row["workflow"], row["date"], row["run_id"], row["attempt"]), row))
        )
        joined = (
            {
                "run": prepared | "KeyRuns" >> beam.Map(_run_stub, self.plans),
                "results": tuple(counts) | "FlattenCounts" >> beam.Flatten(),
                "failed": failed,
            }
            | "JoinRunResults" >> beam.CoGroupByKey()
            | "RunRows" >> beam.FlatMap(_run_row).with_outputs("dead_letter", main="runs")
        )
        return {"grader_results": per_family, "runs": joined.runs, "dead_letter": joined.dead_letter}


def _failure_row(bad: tuple[Any, Any]) -> dict[str, Any]:
    element, exc_info = bad
    exc = exc_info[1] if isinstance(exc_info, tuple) and len(exc_info) > 1 else exc_info
    meta = getattr(element, "meta", None)
    row = dead_letter_row(
        getattr(meta, "root", "?"), "grade", exc if isinstance(exc, BaseException) else str(exc),
        run_id=getattr(meta, "run_id", None), workflow=getattr(meta, "workflow", None),
        date=getattr(meta, "date", None),
    )
    row["attempt"] = getattr(meta, "attempt", None)
    return row
