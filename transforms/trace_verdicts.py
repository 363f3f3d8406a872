"""Trace rules over every graded run: ``trace_verdicts`` rows and ``task_reliability`` aggregates.

A gh-aw run's steps are its preprocessed ``toolCalls`` (graders/formats/ghaw/trace.py). Reruns are
grouped by (workflow, task) with ``CombinePerKey(PassKCombineFn)``; a task's row lands in the
partition of its latest run date.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import apache_beam as beam
from apache_beam.transforms.combiners import TupleCombineFn

from graders.families.trace_rules.config import TraceConfig
from graders.families.trace_rules.verdicts import grade_run
from graders.formats.ghaw.trace import run_from_ghaw_trace, task_key
from graders.prepare import PreparedRun
from schemas.version import FLEETGRADE_VERSION
from transforms.grade import failure_row, failure_row_part
from transforms.reliability import DEFAULT_MAX_K, MergePartials, Partial, PassKCombineFn, task_reliability_row


def verdict_row(prep: PreparedRun, cfg: TraceConfig) -> dict[str, Any]:
    m = prep.meta
    run = prep.steps_run or run_from_ghaw_trace(prep.trace, task_key(prep.aw_info, m.workflow), m.run_id)
    report = grade_run(run, cfg)
    return {
        "workflow": m.workflow,
        "date": m.date,
        "run_id": m.run_id,
        "attempt": m.attempt,
        "task": report.task,
        "verdict": report.verdict,
        "delivered": report.delivered,
        "step_count": report.step_count,
        "corrupt_success": report.corrupt_success,
        "flags": [f.to_dict() for f in report.flags],
        "fleetgrade_version": FLEETGRADE_VERSION,
    }


def _reliability_row(kv: tuple[tuple[str, str], tuple[dict[str, Any], str]]) -> Iterator[dict[str, Any]]:
    key, (output, last_date) = kv
    yield task_reliability_row(key, output, last_date)


def _task_outcome(row: dict[str, Any]) -> tuple[tuple[str, str], tuple[Any, str]]:
    return (row["workflow"], row["task"]), (row["delivered"], row["date"])


class TaskReliability(beam.PTransform):
    """``trace_verdicts`` rows (one collection, or several) → ``task_reliability`` rows, one per
    (workflow, task)."""

    def __init__(self, max_k: int = DEFAULT_MAX_K) -> None:
        super().__init__()
        self.max_k = max_k

    def expand(self, verdicts: beam.PCollection | tuple[beam.PCollection, ...]) -> beam.PCollection:
        parts = verdicts if isinstance(verdicts, tuple) else (verdicts,)
        fn = TupleCombineFn(PassKCombineFn(self.max_k), max)
        # Each part is combined into one partial per task before they are flattened: the local
        # runner materializes a Flatten, and a (task, outcome) pair per run held one per run.
        # A workflow with one busy task would put every run on one worker: fan the combine out.
        partials = tuple(
            part
            | f"KeyByTask[{i}]" >> beam.Map(_task_outcome)
            | f"PartialPassK[{i}]" >> beam.CombinePerKey(Partial(fn)).with_hot_key_fanout(8)
            for i, part in enumerate(parts)
        )
        flat = partials[0] if len(partials) == 1 else partials | "FlattenPartials" >> beam.Flatten()
        return (
            flat
            | "PassK" >> beam.CombinePerKey(MergePartials(fn))
            | "ReliabilityRows" >> beam.FlatMap(_reliability_row)
        )


class GradeTraceRules(beam.PTransform):
    """PreparedRun → {"verdicts": ``trace_verdicts`` rows for these runs (``TaskReliability``
    aggregates them), "dead_letter": a row per run the rules failed on, "failed": its ``runs``
    failure part}: a run the rules fail on is a dead letter, as when a grader family fails."""

    def __init__(self, cfg: TraceConfig) -> None:
        super().__init__()
        self.cfg = cfg

    def expand(self, prepared: beam.PCollection) -> dict[str, beam.PCollection]:
        good, bad = prepared | "Grade[trace-rules]" >> beam.Map(verdict_row, self.cfg).with_exception_handling()
        dead = bad | "TraceRulesFailureRows" >> beam.Map(failure_row)
        return {"verdicts": good, "dead_letter": dead,
                "failed": dead | "TraceRulesFailureParts" >> beam.Map(failure_row_part)}
