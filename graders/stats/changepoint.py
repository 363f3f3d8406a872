"""Where a daily series shifted: the at-most-one-change (AMOC) least-squares estimator.

For a split before day t the statistic is the between-segment sum of squares of the run-level
values, n₁n₂/(n₁+n₂)·(m₁−m₂)², i.e. the squared weighted CUSUM (Hinkley 1970; the "AMOC" method of
Killick & Eckley's R package changepoint). The split maximizing it is the least-squares (and,
for normal errors, maximum-likelihood) location of a single shift in mean.

Why this one (docs/statistics.md): the regression test already decides *whether* the window
changed; what is left is *where*, over ≤ 35 days. AMOC answers exactly that in O(days), has no
penalty to tune (PELT's penalty decides how many changes there are, which we do not ask) and no
resampling (E-divisive's significance is a permutation test), so it is deterministic and cheap.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class Day:
    date: str
    n: int
    total: float  # sum of the day's values


def amoc_split(days: Sequence[Day], min_days: int = 2) -> tuple[str, float] | None:
    """The first date of the second segment and the statistic, for the best split leaving at
    least ``min_days`` days with values on each side; None when the series is too short.
    Ties go to the earliest split (deterministic)."""
    series = [d for d in sorted(days, key=lambda d: d.date) if d.n > 0]
    if len(series) < 2 * min_days:
        return None
    n_all = sum(d.n for d in series)
    s_all = sum(d.total for d in series)
    best: tuple[str, float] | None = None
    n1, s1 = 0, 0.0
    for i in range(len(series) - 1):
        n1 += series[i].n
        s1 += series[i].total
        if i + 1 < min_days or len(series) - (i + 1) < min_days:
            continue
        n2, s2 = n_all - n1, s_all - s1
        diff = s1 / n1 - s2 / n2
        stat = n1 * n2 / n_all * diff * diff
        if best is None or stat > best[1] * (1 + 1e-12):
            best = (series[i + 1].date, stat)
    return best
