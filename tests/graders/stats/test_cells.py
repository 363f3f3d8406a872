"""Cells, grader_stats rows and regressions rows from the pure core (fixed seeds)."""

from __future__ import annotations

import random

import pytest

from graders.stats.cells import (
    DELIVERED,
    CellAcc,
    Observation,
    cluster_of,
    partition_observations,
    regression_row,
    shift,
    stats_rows,
    verdict,
    with_q_values,
)


def _daily(means: dict[int, float], per_day: int = 7, tasks: int = 15, seed: int = 0,
           direction: str = "higher_is_better") -> dict[str, CellAcc]:
    rng = random.Random(seed)
    out = {}
    for day, mean in means.items():
        acc = CellAcc()
        for _ in range(per_day):
            acc.add(Observation(f"t{rng.randrange(tasks)}", rng.gauss(mean, 1.0), None, "pass", direction, "x"))
        out[shift("2026-11-01", day)] = acc
    return out


def test_add_order_and_bundling_do_not_change_a_row() -> None:
    obs = [Observation(f"t{i % 4}", float(i) / 3, i % 2 == 0, "pass", "higher_is_better", "ratio") for i in range(20)]
    one = CellAcc()
    for o in obs:
        one.add(o)
    halves = CellAcc()
    for o in reversed(obs[10:]):
        halves.add(o)
    other = CellAcc()
    for o in obs[:10]:
        other.add(o)
    halves.merge(other)
    key = ("wf", "g", 1, "2026-11-01")
    a = stats_rows("wf", "g", {"2026-11-01": one}, ["2026-11-01"], windows=(1,))
    b = stats_rows("wf", "g", {"2026-11-01": halves}, ["2026-11-01"], windows=(1,))
    assert a == b and a[0]["n"] == 20 and a[0]["n_tasks"] == 4 and key[0] == "wf"


def test_errors_and_unavailable_are_counted_not_averaged() -> None:
    acc = CellAcc()
    for o in (Observation("t", 1.0, True, "pass"), Observation("t", 0.0, False, "fail"),
              Observation("t", None, None, "unavailable"), Observation("t", 0.0, None, "error")):
        acc.add(o)
    row = stats_rows("wf", "g", {"2026-11-01": acc}, ["2026-11-01"], windows=(1,))[0]
    assert (row["n"], row["n_unavailable"], row["n_error"], row["mean"]) == (2, 1, 1, 0.5)
    assert (row["pass_n"], row["pass_count"], row["pass_rate"]) == (2, 1, 0.5)
    assert row["se_clustered"] is None and row["ci_low"] is None  # one task


def test_windows_end_on_dates_with_values() -> None:
    daily = _daily({d: 0.0 for d in range(10)})
    rows = stats_rows("wf", "g", daily, [shift("2026-11-01", 9), "2030-01-01"])
    assert [(r["date"], r["window_days"], r["n"]) for r in rows] == [
        ("2026-11-10", 1, 7), ("2026-11-10", 7, 49), ("2026-11-10", 28, 70)]
    assert rows[2]["start_date"] == "2026-10-14"


def test_planted_drop_regresses_and_a_rise_improves() -> None:
    down = _daily({d: (0.0 if d < 28 else -1.0) for d in range(35)})
    row = with_q_values([regression_row("wf", "g", down, shift("2026-11-01", 34))])[0]
    assert row["verdict"] == "regressed" and row["test"] == "permutation-tasks"
    assert row["change_date"] == shift("2026-11-01", 28)
    assert row["diff_low"] < row["diff"] < row["diff_high"] < 0
    up = _daily({d: (0.0 if d < 28 else 1.0) for d in range(35)})
    assert with_q_values([regression_row("wf", "g", up, shift("2026-11-01", 34))])[0]["verdict"] == "improved"


def test_lower_is_better_regresses_upwards() -> None:
    up = _daily({d: (0.0 if d < 28 else 1.0) for d in range(35)}, direction="lower_is_better")
    assert with_q_values([regression_row("wf", "g", up, shift("2026-11-01", 34))])[0]["verdict"] == "regressed"


def test_no_shift_is_no_change_and_reruns_are_byte_identical() -> None:
    flat = _daily({d: 0.0 for d in range(35)}, seed=3)
    a = regression_row("wf", "g", flat, shift("2026-11-01", 34))
    assert a == regression_row("wf", "g", flat, shift("2026-11-01", 34))
    assert with_q_values([a])[0]["verdict"] == "no-change"


def test_three_of_four_against_six_of_six_is_not_a_regression() -> None:
    cur = {"2026-11-29": CellAcc()}
    base = {"2026-11-01": CellAcc()}
    for i, ok in enumerate([True, True, True, False]):
        cur["2026-11-29"].add(Observation(f"c{i}", float(ok), ok, "pass"))
    for i in range(6):
        base["2026-11-01"].add(Observation(f"b{i}", 1.0, True, "pass"))
    row = with_q_values([regression_row("wf", DELIVERED, {**cur, **base}, "2026-11-29")])[0]
    assert row["verdict"] == "insufficient-data" and row["runs_needed"] == 1  # 4 of the 5 current runs
    cur["2026-11-29"].add(Observation("c4", 1.0, True, "pass"))
    row = with_q_values([regression_row("wf", DELIVERED, {**cur, **base}, "2026-11-29")])[0]
    assert row["test"] == "fisher-exact" and row["p_value"] == 0.454545454545 and row["verdict"] == "no-change"


def test_verdict_thresholds() -> None:
    row = {"p_value": 0.001, "q_value": 0.01, "diff": -0.2, "effect_size": -0.4, "direction": "higher_is_better"}
    assert verdict(row) == "regressed"
    assert verdict(row, fdr=0.005) == "no-change"
    assert verdict(row, min_effect=0.5) == "no-change"
    assert verdict({**row, "direction": "lower_is_better"}) == "improved"
    assert verdict({**row, "p_value": None}) == "insufficient-data"


def test_q_values_are_benjamini_hochberg_across_rows() -> None:
    rows = with_q_values([{"p_value": 0.01, "diff": -1.0}, {"p_value": 0.04, "diff": -1.0}, {"p_value": None}])
    assert [r["q_value"] for r in rows] == [0.02, 0.04, None]
    assert [r["verdict"] for r in rows] == ["regressed", "regressed", "insufficient-data"]


def test_partition_observations_join_tasks_and_add_delivered() -> None:
    graders = [{"run_id": "1", "attempt": 1, "grader_id": "g", "value": 0.5, "passed": None, "status": "pass",
                "direction": "higher_is_better", "unit": "ratio"},
               {"run_id": "2", "attempt": 1, "grader_id": "g", "value": None, "status": "unavailable"}]
    verdicts = [{"run_id": "1", "attempt": 1, "task": "wf#7", "delivered": True},
                {"run_id": "2", "attempt": 1, "task": "wf", "delivered": False}]
    obs = partition_observations("wf", graders, verdicts)
    assert [(g, o.task, o.value) for g, o in obs] == [
        ("g", "wf#7", 0.5), ("g", "run:2", None), (DELIVERED, "wf#7", 1.0), (DELIVERED, "run:2", 0.0)]
    assert cluster_of("wf", None, 9) == "run:9"


@pytest.mark.parametrize("days", [1, 7, 28])
def test_shift(days: int) -> None:
    assert shift(shift("2026-12-31", days), -days) == "2026-12-31"


def test_rows_do_not_depend_on_how_many_draws_are_held_at_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """Permutation draws are chunked to bound memory; a chunk of a few rows gives the same draws
    in the same order, so the same bytes, as one chunk of all."""
    import graders.stats.estimators as est

    rng = random.Random(7)
    daily = {}
    for day in range(35):
        acc = CellAcc()
        for i in range(30):
            task = f"t{rng.randrange(40)}" if i % 2 else f"run:{day}-{i}"
            acc.add(Observation(task, rng.gauss(0.0 if day < 28 else 0.4, 1.0), rng.random() < 0.6, "pass"))
        daily[shift("2026-10-01", day)] = acc
    end = shift("2026-10-01", 34)

    def rows() -> list[dict[str, object]]:
        return [*stats_rows("wf", "g", daily, [end]), regression_row("wf", "g", daily, end, permutations=999)]

    monkeypatch.setattr(est, "CHUNK", 10**9)
    whole = rows()
    monkeypatch.setattr(est, "CHUNK", 1000)  # a few rows of draws at a time
    assert rows() == whole
    assert whole[-1]["p_value"] is not None and whole[2]["pass_k"] and whole[2]["ci_low"] is not None


def test_pass_k_of_one_run_per_task_is_wilsons_interval_of_the_tasks() -> None:
    """Each task's estimate 0 or 1: the unbiased variance of the mean is p(1−p)/(C−1), so the
    effective size is C − 1 and the interval is Wilson's for a rate of 0.7 over 9 trials
    (by hand: centre (0.7 + z²/18)/(1 + z²/9) = 0.64017, half-width 0.25769)."""
    acc = CellAcc()
    for i in range(10):
        acc.add(Observation(f"t{i}", float(i < 7), i < 7, "pass" if i < 7 else "fail"))
    (entry,) = stats_rows("wf", "g", {"2026-11-01": acc}, ["2026-11-01"], windows=(1,))[0]["pass_k"]
    assert (entry["k"], entry["value"], entry["tasks"]) == (1, 0.7, 10)
    assert (round(entry["low"], 4), round(entry["high"], 4)) == (0.3825, 0.8979)
