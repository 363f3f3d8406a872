"""Fan out to the grader families, one Beam step per family (design.md §2, "Fan out")."""

from __future__ import annotations

import pickle
import zlib
from collections.abc import Iterable, Iterator
from typing import Any

import apache_beam as beam
from apache_beam.metrics import Metrics

from graders.engine import Executor, grade_trace
from graders.executors import SANDBOXED_SOURCES, close_executor, make_executor
from graders.plan import PlanSet, family_ids
from graders.prepare import PreparedRun, bind_executor
from graders.rows import dead_letter_row, result_rows, run_row

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

    def process(self, prep: PreparedRun) -> Iterator[dict[str, Any]]:
        plan = prep.plan(self.plans.for_workflow(prep.meta.workflow))
        ids = family_ids(plan, self.family)
        if not ids:
            return
        executors = {source: bind_executor(ex, prep) for source, ex in self.executors.items()}
        results = grade_trace(prep.trace, plan, executors, only=ids, file_ir=prep.file_ir)
        self.graded.inc(len(results))
        self.errors.inc(sum(r["status"] == "error" for r in results))
        yield from result_rows(prep.meta, results, plan, prep.input_digest)

    def teardown(self) -> None:
        for executor in self.executors.values():
            close_executor(executor)
        self.executors.clear()


_STATUSES = ("pass", "fail", "error", "unavailable")
Counts = list[int]  # [graders, pass, fail, error, unavailable]


def _status_key(row: dict[str, Any]) -> tuple[RunKey, str]:
    return (row["workflow"], row["date"], row["run_id"], row["attempt"]), row["status"]


class CountStatuses(beam.CombineFn):  # type: ignore[misc]
    """Per run: how many results, and how many of each status (all the ``runs`` row needs).

    Lifted, so one small counter per run reaches the join instead of one element per result.
    """

    def create_accumulator(self) -> Counts:
        return [0, 0, 0, 0, 0]

    def add_input(self, acc: Counts, status: str) -> Counts:
        acc[0] += 1
        if status in _STATUSES:
            acc[1 + _STATUSES.index(status)] += 1
        return acc

    def merge_accumulators(self, accs: Iterable[Counts]) -> Counts:
        merged = self.create_accumulator()
        for acc in accs:
            merged = [a + b for a, b in zip(merged, acc, strict=True)]
        return merged

    def extract_output(self, acc: Counts) -> Counts:
        return acc


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
    counts = CountStatuses().merge_accumulators(groups["results"])  # one count per family
    for packed in groups["run"]:
        if failures:
            yield beam.pvalue.TaggedOutput("dead_letter", failures[0])
            continue
        stub = pickle.loads(zlib.decompress(packed))
        stub.update(zip(("graders", "passed", "failed", "errors", "unavailable"), counts, strict=True))
        yield stub


class GradeRuns(beam.PTransform):
    """PreparedRun → {"grader_results": {family: rows}, "runs": rows, "dead_letter": rows}.

    Results stay per family: a Flatten of them would be materialized by the local runner, every
    result row of the fleet at once (make bench memory). Count and pack them before any Flatten.
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
            grade: Any = beam.ParDo(GradeFamily(self.plans, family))
            # Only for distributed runners: a hint gives the step its own environment, which keeps
            # the local runner from fusing it with its siblings (every trace would be encoded).
            if self.resource_hints and family in SANDBOXED_SOURCES:
                # A V8 helper or bubblewrap evaluators per worker need headroom beyond the graders.
                grade = grade.with_resource_hints(min_ram=SANDBOX_MIN_RAM)
            good, bad = prepared | f"Grade[{family}]" >> grade.with_exception_handling()
            per_family[family] = good
            counts.append(good | f"KeyStatuses[{family}]" >> beam.Map(_status_key)
                          | f"CountStatuses[{family}]" >> beam.CombinePerKey(CountStatuses()))
            failures.append(bad)
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
