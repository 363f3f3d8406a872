"""Per-task reliability over reruns: a Beam ``CombineFn`` around the pure pass^k accumulator.

Keyed by (workflow, task), fed one ``delivered`` bool per run. The accumulator is just the
counts (n, c), so adds and merges are associative and commutative and the output does not
depend on bundling or order. Output fields are the ``task_reliability`` row's (schemas/trace_tables.py).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import apache_beam as beam

from graders.families.trace_rules.passk import TaskCounts
from graders.families.trace_rules.verdicts import GradeReport
from schemas.version import FLEETGRADE_VERSION

DEFAULT_MAX_K = 5


class PassKCombineFn(beam.CombineFn):  # type: ignore[misc]
    def __init__(self, max_k: int = DEFAULT_MAX_K) -> None:
        super().__init__()
        if max_k < 1:
            raise ValueError("max_k must be >= 1")
        self.max_k = max_k

    def create_accumulator(self) -> TaskCounts:
        return TaskCounts()

    def add_input(self, mutable_accumulator: TaskCounts, element: bool) -> TaskCounts:
        return mutable_accumulator.add(bool(element))

    def merge_accumulators(self, accumulators: Iterable[TaskCounts]) -> TaskCounts:
        total = TaskCounts()
        for acc in accumulators:
            total = total.merge(acc)
        return total

    def compact(self, accumulator: TaskCounts) -> TaskCounts:
        return accumulator

    def extract_output(self, accumulator: TaskCounts) -> dict[str, Any]:
        return accumulator.row(self.max_k)


def task_reliability_row(key: tuple[str, str], output: dict[str, Any], date: str) -> dict[str, Any]:
    """A ``task_reliability`` row from a ``CombinePerKey(PassKCombineFn)`` element."""
    workflow, task = key
    return {"workflow": workflow, "date": date, "task": task, **output, "fleetgrade_version": FLEETGRADE_VERSION}


def trace_verdict_rows(
    report: GradeReport, workflow: str, date: str, attempt: int | None = None
) -> list[dict[str, Any]]:
    """``trace_verdicts`` rows, one per graded run."""
    return [
        {
            "workflow": workflow,
            "date": date,
            "run_id": r.run_id,
            "attempt": attempt,
            "task": r.task,
            "verdict": r.verdict,
            "delivered": r.delivered,
            "step_count": r.step_count,
            "corrupt_success": r.corrupt_success,
            "flags": [f.to_dict() for f in r.flags],
            "fleetgrade_version": FLEETGRADE_VERSION,
        }
        for r in report.runs
    ]
