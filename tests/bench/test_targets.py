"""The benchmark's targets are judged from the rows of one run, worst case first."""

from __future__ import annotations

import json

from bench.__main__ import main
from bench.targets import FLAT, all_met, judge


def _rows(pipeline: tuple[float, float], large_core: float, peaks: tuple[float, ...]) -> list[dict]:
    rows = [
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
    return rows


def test_every_target_met():
    judged = judge(_rows((1.4, 0.8), 0.52, (1.01, 1.02, FLAT)))
    assert [r["ratio"] for r in judged] == [1.4, 0.52, FLAT]
    assert all(r["note"].startswith("met (") and r["met"] is True for r in judged)
    assert all_met(judged)


def test_the_worst_row_decides_and_is_named():
    judged = judge(_rows((1.2, 1.6), 0.49, (1.01, 1.06, 1.02)))
    assert [r["ratio"] for r in judged] == [1.6, 0.49, 1.06]
    assert all(r["note"].startswith("NOT met") and r["met"] is False for r in judged)
    assert "worst: pipeline multi-process x2: excluding start-up" in judged[0]["note"]
    assert "worst: pipeline multi-process x2, largest worker: peak RSS at 10000 runs" in judged[2]["note"]
    assert not all_met(judged)


def test_a_target_without_rows_is_not_measured_never_met():
    rows = [r for r in _rows((1.0, 1.0), 0.9, (1.0, 1.0, 1.0)) if r["part"] != "memory"]
    judged = judge(rows)
    assert judged[2]["value"] is None and judged[2]["note"].startswith("not measured") and not judged[2]["met"]
    assert all_met(judged[:2])
    assert not all_met(judged)


def test_check_fails_when_a_target_is_not_measured(tmp_path, capsys):
    out = tmp_path / "r.json"
    assert main(["--only", "nothing", "--json", str(out)]) == 0  # reporting alone never fails
    assert main(["--only", "nothing", "--json", str(out), "--check"]) == 1
    def no_constants(name: str) -> None:
        raise AssertionError(f"{name} in the results: not JSON")

    rows = json.loads(out.read_text(), parse_constant=no_constants)  # no NaN for what was not measured
    assert [r["part"] for r in rows] == ["targets"] * 3
    assert "not measured" in capsys.readouterr().out


def test_a_quick_run_says_its_verdicts_are_indicative():
    rows = _rows((1.6, 0.8), 0.45, (1.01, 1.02, 1.0))
    judged = judge(rows, quick=True)
    assert [r["met"] for r in judged] == [False, False, True]  # judged all the same
    assert all(r["note"].endswith("[quick fleets: indicative only; the targets are judged by make bench]")
               for r in judged)
    assert not any("indicative" in r["note"] for r in judge(rows))
