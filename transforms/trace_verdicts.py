"""``task_reliability`` aggregates of the ``trace_verdicts`` rows (graders/one_run.py makes each).

Reruns are combined per (workflow, task) with ``PassKCombineFn``, in bounded batches where the
rows are and merged after the shuffle; a task's row lands in the partition of its latest run date.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import apache_beam as beam
from apache_beam.transforms.combiners import TupleCombineFn

from transforms.combine import CombineInBundle, MergeBundles
from transforms.reliability import DEFAULT_MAX_K, PassKCombineFn, task_reliability_row

FLUSH_RUNS = 10_000  # verdicts a bundle combines before its partials go to the shuffle


def _reliability_row(kv: tuple[tuple[str, str], tuple[dict[str, Any], str]]) -> Iterator[dict[str, Any]]:
    key, (output, last_date) = kv
    yield task_reliability_row(key, output, last_date)


def _task_outcome(row: dict[str, Any]) -> tuple[tuple[tuple[str, str], tuple[Any, str]]]:
    return (((row["workflow"], row["task"]), (row["delivered"], row["date"])),)


class TaskReliability(beam.PTransform):
    """``trace_verdicts`` rows (one collection, or several) → ``task_reliability`` rows, one per
    (workflow, task)."""

    def __init__(self, max_k: int = DEFAULT_MAX_K) -> None:
        super().__init__()
        self.max_k = max_k

    def expand(self, verdicts: beam.PCollection | tuple[beam.PCollection, ...]) -> beam.PCollection:
        parts = verdicts if isinstance(verdicts, tuple) else (verdicts,)
        fn = TupleCombineFn(PassKCombineFn(self.max_k), max)
        # Each part is combined into partials per task where its rows are, in batches of
        # FLUSH_RUNS, before the parts are flattened: the local runner materializes a Flatten, and
        # a scheduled workflow has a task per run, so neither a row per run nor a lifted table of
        # every task is held. A hot-key fanout added two shuffles per part, a fifth of the local
        # runner's stages (docs/performance.md, "Fixed cost").
        partials = tuple(
            part | f"PartialPassK[{i}]" >> beam.ParDo(CombineInBundle(fn, FLUSH_RUNS, _task_outcome))
            for i, part in enumerate(parts)
        )
        flat = partials[0] if len(partials) == 1 else partials | "FlattenPartials" >> beam.Flatten()
        return (
            flat
            | "PassK" >> MergeBundles(fn)
            | "ReliabilityRows" >> beam.FlatMap(_reliability_row)
        )
