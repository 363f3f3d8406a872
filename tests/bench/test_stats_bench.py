"""bench/stats.py measures what it says on tiny sizes (the figures themselves come from `python -m bench`)."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench import stats
from bench.targets import judge


def test_rows_on_tiny_sizes() -> None:
    rows = [*stats.null_rate(2), *stats.power(2, (3.0,)), *stats.coverage(5), *stats.rate_coverage(5)]
    names = [r["name"] for r in rows]
    assert names[0].startswith("false-positive rate") and rows[0]["unit"] == "share"
    assert names[1] == "difference interval coverage (null fleets' regressions)"
    assert rows[2]["name"] == "power, 3 SD drop at 7 runs/day" and rows[2]["value"] == 1.0, "a 3 SD drop is always seen"
    assert rows[3]["unit"] == "days" and rows[3]["value"] <= 1.0
    assert all(0.0 <= r["value"] <= 1.0 for r in rows if r["unit"] == "share")
    assert names[4:6] == ["mean interval coverage (CR1, t on tasks − 1 df)",
                          "clustered CLT interval coverage (mean ± 1.96 SE)"]
    assert names[6] == "0/1 mean interval coverage (Wilson at the effective size)"
    assert [n.split(" interval")[0] for n in names[7:]] == ["pass^1", "pass^2", "pass^3"]


def test_the_share_is_the_statistics_part_of_the_job(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """(with − without) / with, from the best of alternating runs; judged by its target."""
    cpu = {True: [(10.0, 1.0), (9.0, 1.8), (9.5, 1.9)], False: [(8.0, 0.0), (7.5, 0.0), (7.8, 0.0)]}
    monkeypatch.setattr(stats, "share_fleets", lambda quick: {"1k runs": tmp_path})
    monkeypatch.setattr(stats, "job_cpu", lambda root, with_stats, checkout=stats.REPO: cpu[with_stats].pop())
    rows = stats.cpu_share(False)
    assert rows[0]["value"] == 9.0 and "without: 7.50 s" in rows[0]["note"]
    assert rows[1]["ratio"] == pytest.approx((9.0 - 7.5) / 9.0) and rows[1]["target"] == "stats-share"
    assert rows[2]["value"] == pytest.approx(0.1) and "target" not in rows[2]  # the least of 1.9/9.5, 1.8/9, 1/10
    verdict = next(r for r in judge(rows) if r["name"].startswith("target: statistics"))
    assert verdict["met"] is True and verdict["value"] == pytest.approx(1.5 / 9.0)


@pytest.mark.slow
def test_the_job_runs_with_and_without_the_statistics(tmp_path: Path) -> None:
    from bench.common import fleet

    root = fleet(3, 6, "stats-share-tiny", malformed_rate=0.0, days=3)
    (cpu, inside), (bare, none) = stats.job_cpu(root, True), stats.job_cpu(root, False)
    assert 0 < inside < cpu and bare > 0 and none == 0.0
