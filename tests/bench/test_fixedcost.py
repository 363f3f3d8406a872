"""bench/fixedcost.py: the fixed cost is the intercept of wall time over run count, judged against a
base only when one was measured (the figures themselves come from `python -m bench`)."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench import fixedcost
from bench.common import fleet
from bench.targets import judge


def test_fixed_cost_is_the_intercept() -> None:
    fixed, slope = fixedcost.fixed_and_slope(10, 2.1, 200, 4.0)
    assert slope == pytest.approx(0.01)
    assert fixed == pytest.approx(2.0)
    assert fixed + 200 * slope == pytest.approx(4.0)


def _fake_measure(walls: dict[str, dict[int, float]]):  # type: ignore[no-untyped-def]
    def measure(exes: dict[str, str], sizes: tuple[int, ...], repeats: int) -> fixedcost.Best:
        return {name: {n: (walls[name][n], walls[name][n] / 2) for n in sizes} for name in exes}
    return measure


def test_rows_with_a_base_carry_the_target(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    base = tmp_path / "fleetgrade"
    base.write_text("#!/bin/sh\n")
    base.chmod(0o755)
    monkeypatch.setenv(fixedcost.BASE_ENV, str(base))
    # This: 1.0 s + 10 ms a run; base: 2.5 s + 5 ms a run.
    monkeypatch.setattr(fixedcost, "measure", _fake_measure({"this": {10: 1.1, 200: 3.0}, "base": {10: 2.55, 200: 3.5}}))
    rows = {r["name"]: r for r in fixedcost.run(quick=True)}
    assert rows["fixed cost (200-run fleet)"]["value"] == pytest.approx(1.0)
    assert rows["base: fixed cost (200-run fleet)"]["value"] == pytest.approx(2.5)
    assert rows["per-run cost, 10 → 200 runs"]["value"] == pytest.approx(10.0)
    ratio = rows["fixed cost, this / base (200-run fleet)"]
    assert ratio["ratio"] == pytest.approx(0.4) and ratio["target"] == "fixedcost"
    assert ratio["note"] == "CPU time: 0.50 / 1.25 s = 0.40"  # the fake CPU times are half the wall times
    [verdict] = [r for r in judge(list(rows.values())) if "fixed cost" in r["name"]]
    assert verdict["met"] is True and verdict["note"].startswith("met (target <= 0.5")


def test_without_a_base_no_verdict(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(fixedcost.BASE_ENV, raising=False)
    monkeypatch.setattr(fixedcost, "measure", _fake_measure({"this": {10: 1.1, 200: 3.0}}))
    rows = fixedcost.run(quick=True)
    assert not any(r.get("target") for r in rows)
    assert "no verdict" in rows[-1]["note"]
    assert not any("fixed cost" in r["name"] for r in judge(rows)), "an optional target is not judged unmeasured"


def test_a_fixed_cost_above_half_the_base_is_not_met() -> None:
    rows = [{"name": "fixed cost, this / base (200-run fleet)", "value": 1.2, "unit": "s", "ratio": 0.6,
             "target": "fixedcost"}]
    [verdict] = [r for r in judge(rows) if "fixed cost" in r["name"]]
    assert verdict["met"] is False and verdict["note"].startswith("NOT met")


def test_phases_cover_the_whole_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The timers go in through an import hook of the measured interpreter; they must still find
    the functions they wrap (pipeline.graph.build, the local runner's bundles)."""
    monkeypatch.setattr(fixedcost, "BENCH_DIR", tmp_path)
    monkeypatch.setattr("bench.common.BENCH_DIR", tmp_path)
    root = fleet(5, 3, "tiny", malformed_rate=0.0)
    times, bundles = fixedcost.phases(fixedcost.this_exe(), root)
    assert bundles > 5
    walls = {name: w for name, (w, _) in times.items() if not name.startswith(" ")}
    parts = sum(w for name, w in walls.items() if name != "total")
    assert all(w >= 0 for w in walls.values())
    assert walls["graph construction"] > 0 and walls["bundles"] > 0
    assert parts == pytest.approx(walls["total"], rel=0.01)
