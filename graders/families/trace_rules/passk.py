"""pass^k: the reference's strict gate (spec §5) and the unbiased estimators (field notes §3.7).

* strict gate: every provided run of the task delivered (k = number of runs);
* pass^k = C(c, k) / C(n, k), unbiased for p^k (tau-bench), 0 when c < k;
* pass@k = 1 - C(n - c, k) / C(n, k) (Chen et al.), 1 when n - c < k.
Both estimators are undefined for k > n; they are reported as None there.

:class:`PassKAccumulator` holds only (n, c) per task, so merging is associative and
commutative and a Beam ``CombineFn`` can wrap it unchanged.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from math import comb
from typing import Any


def strict_gate(n: int, c: int) -> bool:
    return n > 0 and c == n


def pass_hat_k(n: int, c: int, k: int) -> float | None:
    if not 0 < k <= n or not 0 <= c <= n:
        return None
    return comb(c, k) / comb(n, k)


def pass_at_k(n: int, c: int, k: int) -> float | None:
    if not 0 < k <= n or not 0 <= c <= n:
        return None
    return 1.0 - comb(n - c, k) / comb(n, k)


def estimates(n: int, c: int, max_k: int) -> list[dict[str, Any]]:
    """One ``{k, pass_hat_k, pass_at_k}`` per k = 1..max_k."""
    return [{"k": k, "pass_hat_k": pass_hat_k(n, c, k), "pass_at_k": pass_at_k(n, c, k)}
            for k in range(1, max_k + 1)]


@dataclass(frozen=True)
class TaskCounts:
    n: int = 0
    c: int = 0

    def add(self, delivered: bool) -> TaskCounts:
        return TaskCounts(self.n + 1, self.c + (1 if delivered else 0))

    def merge(self, other: TaskCounts) -> TaskCounts:
        return TaskCounts(self.n + other.n, self.c + other.c)

    def row(self, max_k: int) -> dict[str, Any]:
        return {
            "n": self.n,
            "c": self.c,
            "pass_hat_k_strict": strict_gate(self.n, self.c),
            "pass_k": estimates(self.n, self.c, max_k),
        }


@dataclass
class PassKAccumulator:
    """(n, c) per task in first-seen order; ``merge`` keeps the left operand's order first."""

    tasks: dict[str, TaskCounts] = field(default_factory=dict)

    def add(self, task: str, delivered: bool) -> PassKAccumulator:
        self.tasks[task] = self.tasks.get(task, TaskCounts()).add(delivered)
        return self

    def add_all(self, outcomes: Iterable[tuple[str, bool]]) -> PassKAccumulator:
        for task, ok in outcomes:
            self.add(task, ok)
        return self

    def merge(self, other: PassKAccumulator) -> PassKAccumulator:
        for task, counts in other.tasks.items():
            self.tasks[task] = self.tasks.get(task, TaskCounts()).merge(counts)
        return self

    def rows(self, max_k: int) -> dict[str, dict[str, Any]]:
        return {task: counts.row(max_k) for task, counts in self.tasks.items()}
