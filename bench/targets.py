"""The benchmark's targets (issues 10, 33 and 39, "Done when"), judged from the rows of one bench run.

Each target reads ratios the parts measured side by side in the same run, never absolute
times, so a slow or busy machine moves both sides. A target whose rows are absent (``--only``,
or a part that failed) is reported as not measured, never as met.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from bench.common import row

Row = dict[str, Any]


@dataclass(frozen=True)
class Target:
    key: str  # the rows whose ratio is judged: those the parts marked with this target
    name: str
    limit: float
    at_most: bool  # ratio <= limit (True) or ratio >= limit (False)
    # Judged only when a part marked a row for it: a comparison whose other side is optional
    # (the fixed cost against a base checkout's) is reported without a verdict otherwise.
    optional: bool = False
    # Two-sided: every ratio within [low, limit] (at_most) — the worst is the farthest outside,
    # or the nearest an edge when all are inside.
    low: float | None = None

    def judge(self, rows: list[Row]) -> Row:
        marked = [r for r in rows if r.get("target") == self.key]
        ratios = [(r["ratio"], r["name"]) for r in marked if isinstance(r.get("ratio"), (int, float))]
        # A row marked for the target without a ratio is a measurement that could not be made
        # (e.g. the reference on a machine without Node): the target is not measured, even if
        # other rows have ratios, since the worst case may be the one missing.
        missing = [r for r in marked if not isinstance(r.get("ratio"), (int, float))]
        sign = "<=" if self.at_most else ">="
        bound = f"{sign} {self.limit:g}" if self.low is None else f"within {self.low:g}–{self.limit:g}"
        if not ratios or missing:  # no value, rather than a number that could be read as a measurement
            why = "; ".join(f"{r['name']}: {r.get('note') or 'no value'}" for r in missing)
            return {"name": self.name, "value": None, "unit": "ratio", "met": False,
                    "note": f"not measured (target {bound})" + (f": {why}" if why else "")}
        if self.low is not None:
            low, high = self.low, self.limit
            worst, where = min(ratios, key=lambda r: min(r[0] - low, high - r[0]))
            met = all(low <= r <= high for r, _ in ratios)
        else:
            worst, where = max(ratios) if self.at_most else min(ratios)
            met = worst <= self.limit if self.at_most else worst >= self.limit
        verdict = "met" if met else "NOT met"
        judged = row(self.name, worst, "ratio", ratio=worst, note=f"{verdict} (target {bound}; worst: {where})")
        judged["met"] = met
        return judged


# "Flat": a fleet 10 times larger adds at most 5% to a process's peak. Repeat runs of the same
# code on these shared machines differ by a few MiB (1-2% of a ~200 MiB peak), so a tighter
# bound would judge the machine, not the code.
FLAT = 1.05

TARGETS = (
    Target("pipeline", "target: pipeline / plain loop, without start-up", 1.5, at_most=True),
    Target("core", "target: grading / orjson parse floor, large runs", 0.5, at_most=False),
    Target("memory", "target: peak RSS, largest fleet / smallest", FLAT, at_most=True),
    # Issue 33, per tier of fleet (bench/tiers.py): the grading core at least twice as fast as
    # gh-aw's own graders run warm in one Node process over the same runs, and at least half
    # the speed of orjson parsing the bytes it read, on every tier (not only on large runs).
    Target("tier-reference", "target: core / gh-aw reference (warm Node), every tier", 2.0, at_most=False),
    Target("tier-floor", "target: core / orjson parse floor, every tier", 0.5, at_most=False),
    # Issue 39, per tier: the whole one-core job at least as fast as gh-aw's warm reference, and
    # at most 1.3 times the plain core loop's time (the pipeline's own overhead ≤ 30%).
    Target("tier-pipeline-reference", "target: pipeline (1 core) / gh-aw reference, every tier", 1.0, at_most=False),
    Target("tier-pipeline-core", "target: pipeline (1 core) time / core loop time, every tier", 1.3, at_most=True),
    # Issue 33: a 200-run fleet's fixed cost (bench/fixedcost.py) at most half the base
    # checkout's measured in the same run; judged only when a base was given.
    Target("fixedcost", "target: fixed cost / base's, 200-run fleet", 0.5, at_most=True, optional=True),
    # Issue 39 (bench/stats.py): the statistics at most a quarter of a job's CPU at 1k and 10k
    # runs, and calibrated: false positives on null fleets at most the FDR under BH, every
    # interval's coverage within 0.94–0.96, power and change-point error no worse than before
    # the closed forms (bench/stats.py, BEFORE: main at ae1d6ca on the same simulated fleets).
    Target("stats-share", "target: statistics' share of the job's CPU, 1k and 10k runs", 0.25, at_most=True),
    Target("stats-fpr", "target: false-positive rate on null fleets (BH)", 0.05, at_most=True),
    Target("stats-coverage", "target: interval coverage, every interval", 0.96, at_most=True, low=0.94),
    Target("stats-power", "target: power / before, 0.5, 1 and 2 SD drops", 1.0, at_most=False),
    Target("stats-changepoint", "target: change-point error / before, every drop", 1.0, at_most=True),
    # Issue 39, object storage (bench/remote.py): a bucket 30 ms away costs at most 30% more wall
    # time than one on loopback, and reading a fleet takes at most 1.3 requests per file read.
    Target("remote-latency", "target: gs:// wall at 30 ms / at 0 ms", 1.3, at_most=True),
    Target("remote-requests", "target: gs:// input requests per file read", 1.3, at_most=True),
)


def judge(rows: list[Row], quick: bool = False) -> list[Row]:
    """One row per target: the worst ratio among its rows, and whether it meets the target.

    The targets are set for the default fleets; the quick ones are too small for them (a
    150-run fleet has a handful of large runs, and start-up weighs more), so a quick run's
    verdicts say they are indicative."""
    judged = [t.judge(rows) for t in TARGETS
              if not t.optional or any(r.get("target") == t.key for r in rows)]
    if quick:
        for r in judged:
            r["note"] += " [quick fleets: indicative only; the targets are judged by make bench]"
    return judged


def all_met(judged: list[Row]) -> bool:
    return all(r.get("met") is True for r in judged)
