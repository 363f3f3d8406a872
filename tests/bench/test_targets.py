"""The benchmark's targets are judged from the rows of one run, worst case first."""

from __future__ import annotations

import json

from bench.__main__ import main
from bench.targets import FLAT, all_met, judge


def _tier_rows(reference: tuple[float | None, ...], floor: tuple[float, ...]) -> list[dict]:
    """Per tier, the core / reference row (none measured: value None and a reason) and the core /
    parse floor row, as bench/tiers.py and bench/reference.py write them."""
    rows = []
    for tier, ref, fl in zip(("mixed", "ir-heavy", "tool-call-heavy"), reference, floor, strict=True):
        if ref is None:
            for name, key in (("core", "tier-reference"), ("pipeline (1 core)", "tier-pipeline-reference")):
                rows.append({"part": "tiers", "name": f"tier {tier}: {name} / reference", "value": None,
                             "unit": "ratio", "target": key, "note": "reference not measured: node is not installed"})
        else:
            rows.append({"part": "tiers", "name": f"tier {tier}: core / reference", "value": ref, "unit": "ratio",
                         "ratio": ref, "target": "tier-reference"})
            rows.append({"part": "tiers", "name": f"tier {tier}: pipeline (1 core) / reference", "value": ref / 2,
                         "unit": "ratio", "ratio": ref / 2, "target": "tier-pipeline-reference"})
        rows.append({"part": "tiers", "name": f"tier {tier}: pipeline time / core loop time", "value": 1.2,
                     "unit": "ratio", "ratio": 1.2, "target": "tier-pipeline-core"})
        rows.append({"part": "tiers", "name": f"tier {tier}: core / parse floor", "value": fl, "unit": "ratio",
                     "ratio": fl, "target": "tier-floor"})
    return rows


def _rows(pipeline: tuple[float, float], large_core: float, peaks: tuple[float, ...],
          reference: tuple[float | None, ...] = (2.5, 2.1, 3.0), floor: tuple[float, ...] = (0.6, 0.55, 0.7)) -> list[dict]:
    rows = [
        *_tier_rows(reference, floor),
        {"part": "pipeline", "name": "pipeline in-process: excluding start-up", "value": 1.0, "unit": "s",
         "ratio": pipeline[0], "target": "pipeline"},
        {"part": "pipeline", "name": "pipeline multi-process x2: excluding start-up", "value": 1.0, "unit": "s",
         "ratio": pipeline[1], "target": "pipeline"},
        {"part": "pipeline", "name": "pipeline in-process: wall time", "value": 1.0, "unit": "s", "ratio": 9.0},
        {"part": "core", "name": "grading speed / parse-floor speed (large runs)", "value": large_core,
         "unit": "ratio", "ratio": large_core, "target": "core"},
        {"part": "core", "name": "grading speed / parse-floor speed (all runs)", "value": 0.1, "unit": "ratio",
         "ratio": 0.1},
        # Unmarked rows are references, not targets: a growing floor or loop is not the pipeline's growth.
        {"part": "memory", "name": "Beam floor in-process: peak RSS at 10000 runs", "value": 1.0, "unit": "MiB",
         "ratio": 2.0},
        {"part": "memory", "name": "plain loop: peak RSS at 10000 runs", "value": 1.0, "unit": "MiB", "ratio": 2.0},
        {"part": "memory", "name": "pipeline in-process: runs/s at 10000 runs (scaling)", "value": 1.0,
         "unit": "runs/s", "ratio": 0.5},
    ]
    names = ("pipeline in-process", "pipeline multi-process x2, largest worker", "pipeline multi-process x2, coordinator")
    rows += [{"part": "memory", "name": f"{name}: peak RSS at 1000 runs", "value": 200.0, "unit": "MiB"}
             for name in names]
    rows += [{"part": "memory", "name": f"{name}: peak RSS at 10000 runs", "value": 200.0 * p, "unit": "MiB",
              "ratio": p, "target": "memory"} for name, p in zip(names, peaks, strict=True)]
    rows += [{"part": "stats", "name": name, "value": v, "unit": "share", "ratio": v, "target": key}
             for name, v, key in (("statistics' share, 1k runs", 0.2, "stats-share"),
                                  ("statistics' share, 10k runs", 0.1, "stats-share"),
                                  ("false-positive rate", 0.04, "stats-fpr"),
                                  ("mean interval coverage", 0.945, "stats-coverage"),
                                  ("pass^1 interval coverage", 0.955, "stats-coverage"),
                                  ("power, 0.5 SD", 1.02, "stats-power"),
                                  ("change-point error, 0.5 SD", 0.98, "stats-changepoint"),
                                  ("gs:// wall at 30 ms / 0 ms", 1.1, "remote-latency"),
                                  ("gs:// requests per file", 1.0, "remote-requests"))]
    return rows


def test_every_target_met():
    judged = judge(_rows((1.4, 0.8), 0.52, (1.01, 1.02, FLAT)))
    assert [r["ratio"] for r in judged] == [1.4, 0.52, FLAT, 2.1, 0.55, 1.05, 1.2, 0.2, 0.04, 0.945, 1.02, 0.98,
                                               1.1, 1.0]
    assert all(r["note"].startswith("met (") and r["met"] is True for r in judged)
    assert all_met(judged)


def test_the_worst_row_decides_and_is_named():
    judged = judge(_rows((1.2, 1.6), 0.49, (1.01, 1.06, 1.02), (2.5, 1.9, 3.0), (0.6, 0.7, 0.45)))[:5]
    assert [r["ratio"] for r in judged] == [1.6, 0.49, 1.06, 1.9, 0.45]
    assert all(r["note"].startswith("NOT met") and r["met"] is False for r in judged)
    assert "worst: pipeline multi-process x2: excluding start-up" in judged[0]["note"]
    assert "worst: pipeline multi-process x2, largest worker: peak RSS at 10000 runs" in judged[2]["note"]
    assert "worst: tier ir-heavy: core / reference" in judged[3]["note"]
    assert "worst: tier tool-call-heavy: core / parse floor" in judged[4]["note"]
    assert not all_met(judged)


def test_a_tier_whose_reference_was_not_measured_leaves_the_target_not_measured():
    # The other tiers' ratios meet the target, but the missing one could be the worst.
    judged = judge(_rows((1.4, 0.8), 0.52, (1.01, 1.02, 1.0), (2.5, None, 3.0)))
    ref = judged[3]
    assert ref["value"] is None and "ratio" not in ref and ref["met"] is False
    assert ref["note"].startswith("not measured (target >= 2)")
    assert "tier ir-heavy: core / reference: reference not measured: node is not installed" in ref["note"]
    assert all_met(judged[:3] + judged[4:5] + judged[6:])
    assert not all_met(judged)


def test_coverage_is_judged_on_both_sides():
    rows = [{"name": f"interval {i}", "value": v, "unit": "share", "ratio": v, "target": "stats-coverage"}
            for i, v in enumerate((0.95, 0.962, 0.941))]
    (judged,) = [r for r in judge(rows) if r["name"] == "target: interval coverage, every interval"]
    assert judged["met"] is False and judged["ratio"] == 0.962 and "within 0.94–0.96" in judged["note"]
    rows[1]["ratio"] = 0.955
    (judged,) = [r for r in judge(rows) if r["name"] == "target: interval coverage, every interval"]
    assert judged["met"] is True and judged["ratio"] == 0.941 and "worst: interval 2" in judged["note"]


def test_a_target_without_rows_is_not_measured_never_met():
    rows = [r for r in _rows((1.0, 1.0), 0.9, (1.0, 1.0, 1.0)) if r["part"] != "memory"]
    judged = judge(rows)
    assert judged[2]["value"] is None and judged[2]["note"].startswith("not measured") and not judged[2]["met"]
    assert all_met(judged[:2] + judged[3:])
    assert not all_met(judged)


def test_check_fails_when_a_target_is_not_measured(tmp_path, capsys):
    out = tmp_path / "r.json"
    assert main(["--only", "nothing", "--json", str(out)]) == 0  # reporting alone never fails
    assert main(["--only", "nothing", "--json", str(out), "--check"]) == 1
    def no_constants(name: str) -> None:
        raise AssertionError(f"{name} in the results: not JSON")

    rows = json.loads(out.read_text(), parse_constant=no_constants)  # no NaN for what was not measured
    assert [r["part"] for r in rows] == ["targets"] * 14
    assert "not measured" in capsys.readouterr().out


def test_a_quick_run_says_its_verdicts_are_indicative():
    rows = _rows((1.6, 0.8), 0.45, (1.01, 1.02, 1.0))
    judged = judge(rows, quick=True)
    assert [r["met"] for r in judged] == [False, False] + [True] * 12  # judged all the same
    assert all(r["note"].endswith("[quick fleets: indicative only; the targets are judged by make bench]")
               for r in judged)
    assert not any("indicative" in r["note"] for r in judge(rows))
