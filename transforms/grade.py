"""The Grade step: each prepared run graded end to end by the one-run core (graders/one_run.py)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import apache_beam as beam
from apache_beam import typehints
from apache_beam.metrics import Metrics

from graders.families.observed import OBSERVED
from graders.families.trace_rules.config import TraceConfig
from graders.grading.engine import Executor
from graders.grading.plan import PlanSet
from graders.grading.registry import sandboxed_families
from graders.one_run import RunGrader, close_executors, failure_text, grade_failure_row, open_executors
from graders.prepare import PreparedRun
from graders.stats.cells import run_observations

SANDBOX_MIN_RAM = "4GB"
RUNS, VERDICTS, DEAD, DRIFT, STATS = "runs", "trace_verdicts", "dead_letter", "grader_drift", "stats"  # side outputs
# Runs prepared, then dead-lettered by grading: counted dead, not graded, in the job's summary.
DEAD_AT_GRADING = "runs_dead_lettered_grading"


class GradeRun(beam.DoFn):
    """PreparedRun → its ``grader_results`` rows, and tagged: its whole ``runs`` row, its
    ``trace_verdicts`` row, or its dead letter, and its statistics observations (``stats``,
    graders/stats/cells.run_observations). Sandboxes live per worker, made in ``setup``."""

    def __init__(self, plans: PlanSet, rules: TraceConfig) -> None:
        self.plans, self.rules = plans, rules
        self.executors: dict[str, Executor] = {}
        families = [*plans.families(), OBSERVED]  # the observed family is graded beside every plan
        self.graded = {f: Metrics.counter("fleetgrade", f"graded_{f}") for f in families}
        self.errors = {f: Metrics.counter("fleetgrade", f"grader_errors_{f}") for f in families}
        self.dead = Metrics.counter("fleetgrade", DEAD_AT_GRADING)

    def setup(self) -> None:
        self.executors = open_executors(self.plans.families(), self.plans.allow_unsandboxed, self.plans.timeout_limit)
        self.grader = RunGrader(self.plans, self.rules, self.executors)

    def process(self, prep: PreparedRun) -> Iterator[Any]:
        grades = self.grader.grade(prep)
        if grades.dead_letter is not None:
            self.dead.inc()
        for family, results in grades.by_family.items():
            self.graded[family].inc(len(results))
            self.errors[family].inc(sum(r["status"] == "error" for r in results))
        yield from grades.grader_results
        for tag, row in ((RUNS, grades.run), (VERDICTS, grades.trace_verdict), (DEAD, grades.dead_letter)):
            if row is not None:
                yield beam.pvalue.TaggedOutput(tag, row)
        for row in grades.grader_drift:
            yield beam.pvalue.TaggedOutput(DRIFT, row)
        # The run's rows are all here, so FleetStats needs no per-run join behind a shuffle.
        verdicts = [grades.trace_verdict] if grades.trace_verdict is not None else []
        for cells in run_observations(grades.grader_results, verdicts):
            yield beam.pvalue.TaggedOutput(STATS, cells)

    def teardown(self) -> None:
        close_executors(self.executors)


def failure_row(bad: tuple[Any, Any]) -> dict[str, Any]:
    """The dead letter of a record a step's ``with_exception_handling`` caught."""
    element, exc_info = bad
    Metrics.counter("fleetgrade", DEAD_AT_GRADING).inc()
    return grade_failure_row(getattr(element, "meta", None), failure_text(exc_info))


class Grade(beam.PTransform):
    """PreparedRun → {"grader_results", "runs", "trace_verdicts", "grader_drift", "dead_letter", "crashed"}
    rows, and "stats": each run's observations for FleetStats.

    A run's rows all leave its one grading call, the ``runs`` row whole, so nothing is joined per
    run downstream. "crashed" holds the dead letters of runs the step itself failed on (the core
    catches failures per family; this is the job's last guard).
    """

    def __init__(self, plans: PlanSet, rules: TraceConfig, resource_hints: bool = False) -> None:
        super().__init__()
        self.plans, self.rules, self.resource_hints = plans, rules, resource_hints

    def expand(self, prepared: beam.PCollection) -> dict[str, beam.PCollection]:
        row = typehints.Dict[str, typehints.Any]
        grade: Any = beam.ParDo(GradeRun(self.plans, self.rules)).with_output_types(
            row, **{RUNS: row, VERDICTS: row, DEAD: row, DRIFT: row, STATS: typehints.Any})
        # Distributed runners only: a V8 helper or bubblewrap evaluators per worker need headroom.
        if self.resource_hints and set(self.plans.families()) & set(sandboxed_families()):
            grade = grade.with_resource_hints(min_ram=SANDBOX_MIN_RAM)
        graded = prepared | "GradeRun" >> grade.with_outputs(
            RUNS, VERDICTS, DEAD, DRIFT, STATS, main="rows").with_exception_handling()
        return {"grader_results": graded["rows"], "runs": graded[RUNS], "trace_verdicts": graded[VERDICTS],
                "grader_drift": graded[DRIFT], "dead_letter": graded[DEAD], "stats": graded[STATS],
                "crashed": graded["bad"] | "CrashRows" >> beam.Map(failure_row)}
