"""The statistics core with fixed seeds and exact expectations (calibration lives in bench/stats.py)."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from graders.stats.changepoint import Day, amoc_split
from graders.stats.estimators import (
    Clusters,
    benjamini_hochberg,
    bootstrap_interval,
    clustered_se,
    fisher_exact_p,
    minimum_detectable_effect,
    pass_hat_k_interval,
    permutation_p,
    quantiles,
    rng_for,
    wilson_interval,
)


def test_seed_is_derived_from_the_key_and_stable() -> None:
    assert rng_for("a", 1).integers(0, 10**9) == 620054642
    assert rng_for("a", 1).integers(0, 10**9) == rng_for("a", "1").integers(0, 10**9)
    assert rng_for("a", 2).integers(0, 10**9) != 620054642


def test_wilson_interval_known_values() -> None:
    lo, hi = wilson_interval(3, 4)  # type: ignore[misc]
    assert (round(lo, 6), round(hi, 6)) == (0.300642, 0.954413)
    lo, hi = wilson_interval(0, 10)  # type: ignore[misc]
    assert lo == 0.0 and round(hi, 6) == 0.277533
    assert wilson_interval(0, 0) is None


def test_fisher_exact_matches_r() -> None:
    # R: fisher.test(matrix(c(1, 9, 9, 1), 2))$p.value = 0.001093
    assert round(fisher_exact_p(1, 10, 9, 10), 6) == 0.001093
    # the "3/4 against 6/6": nowhere near significant
    assert fisher_exact_p(3, 4, 6, 6) == pytest.approx(0.4)
    assert fisher_exact_p(5, 10, 5, 10) == 1.0


def test_clustered_se_reduces_to_clt_with_one_run_per_task() -> None:
    values = [0.1, 0.4, 0.35, 0.8, 0.55]
    c = Clusters.of([[v] for v in values])
    assert clustered_se(c) == pytest.approx(float(np.std(values, ddof=1)) / math.sqrt(5), rel=1e-12)


def test_clustered_se_widens_when_reruns_agree() -> None:
    # two tasks, each rerun 4 times with identical values: effectively 2 observations, not 8
    clustered = Clusters.of([[0.0] * 4, [1.0] * 4])
    naive = Clusters.of([[0.0]] * 4 + [[1.0]] * 4)
    assert clustered_se(clustered) == pytest.approx(0.5)  # CR1: 2/1 · (2² + 2²)/8²
    assert clustered_se(naive) == pytest.approx(math.sqrt(2 / 7) / math.sqrt(8) * 1.0)
    assert clustered_se(Clusters.of([[1.0, 2.0]])) is None  # one task: no between-task variance


def test_quantiles_are_exact() -> None:
    assert quantiles(np.arange(11, dtype=float)) == [1.0, 5.0, 9.0]
    assert quantiles(np.array([])) is None


def test_bootstrap_interval_is_seeded_and_covers_the_mean() -> None:
    c = Clusters.of([[float(i % 7), float(i % 3)] for i in range(30)])
    a = bootstrap_interval(c, rng_for("cell"), 2000)
    b = bootstrap_interval(c, rng_for("cell"), 2000)
    assert a == b and a is not None
    mean = c.mean()
    assert mean is not None and a[0] < mean < a[1]
    assert bootstrap_interval(Clusters.of([[1.0, 2.0]]), rng_for("x")) is None


def test_pass_hat_k_interval() -> None:
    n, c = np.array([4, 4, 2, 1]), np.array([3, 4, 2, 1])
    value, lo, hi, tasks = pass_hat_k_interval(n, c, 2, rng_for("k"))
    assert tasks == 3  # the task with one run cannot estimate pass^2
    assert value == pytest.approx((0.5 + 1 + 1) / 3)
    assert lo is not None and hi is not None and 0.5 <= lo <= value <= hi <= 1.0
    assert pass_hat_k_interval(np.array([1]), np.array([1]), 2, rng_for("k"))[0] is None


def test_permutation_p_detects_a_clear_shift_and_not_noise() -> None:
    cur = Clusters.of([[0.0, 0.1]] * 6)
    base = Clusters.of([[1.0, 0.9]] * 6)
    # exactly 2 of the C(12, 6) = 924 labelings are as extreme as the observed one
    assert permutation_p(cur, base, rng_for("p"), 20000) == pytest.approx(2 / 924, abs=7e-4)
    same = Clusters.of([[0.5, 0.4]] * 6)
    assert permutation_p(same, same, rng_for("p"), 999) == 1.0
    assert permutation_p(cur, base, rng_for("p"), 999) == permutation_p(cur, base, rng_for("p"), 999)


def test_benjamini_hochberg_known_values() -> None:
    qs = benjamini_hochberg([0.01, 0.04, 0.03, None, 0.2])
    assert qs[3] is None
    assert [qs[i] for i in (0, 1, 2, 4)] == pytest.approx([0.04, 0.16 / 3, 0.16 / 3, 0.2])
    assert benjamini_hochberg([]) == []


@settings(max_examples=60, deadline=None)
@given(st.lists(st.floats(0, 1), min_size=1, max_size=30))
def test_bh_q_values_are_monotone_and_at_least_p(ps: list[float]) -> None:
    qs = benjamini_hochberg(ps)
    for p, q in zip(ps, qs, strict=True):
        assert q is not None and p <= q + 1e-15 and q <= 1.0
    order = sorted(range(len(ps)), key=lambda i: ps[i])
    assert all(qs[a] <= qs[b] for a, b in itertools.pairwise(order))  # type: ignore[operator]


def test_minimum_detectable_effect() -> None:
    assert minimum_detectable_effect(0.3, 0.4) == pytest.approx((1.959964 + 0.841621) * 0.5, rel=1e-6)
    assert minimum_detectable_effect(None, 0.4) is None


def test_amoc_places_a_step_at_its_first_day() -> None:
    days = [Day(f"2026-11-{d:02d}", 5, 5 * (1.0 if d < 15 else 0.0)) for d in range(1, 22)]
    split = amoc_split(days)
    assert split is not None and split[0] == "2026-11-15"
    assert amoc_split(days[:3]) is None
    flat = [Day(f"2026-11-{d:02d}", 3, 3.0) for d in range(1, 8)]
    assert amoc_split(flat) == ("2026-11-03", 0.0)  # no shift: earliest admissible split, statistic 0


def test_stratified_permutation_cancels_a_task_level_and_reaches_below_one_over_reps() -> None:
    from graders.stats.estimators import stratified_permutation_p

    # One busy task rerun in both windows, its values 0.1 lower now: exchanging whole tasks
    # could never see it; shuffling within the task does, far below 1/reps.
    base = {"t#1": [0.9 + 0.001 * i for i in range(40)], "t#2": [0.5, 0.52]}
    cur = {"t#1": [0.8 + 0.001 * i for i in range(15)], "t#3": [0.51]}
    p = stratified_permutation_p(cur, base, rng_for("s"), 999)
    assert p is not None and p < 1e-4 < 1 / 1000
    same = stratified_permutation_p({"t#1": [0.5, 0.6]}, {"t#1": [0.6, 0.5]}, rng_for("s"), 999)
    assert same == 1.0
    assert stratified_permutation_p({"a": [1.0]}, {"b": [0.0]}, rng_for("s"), 99) is None  # two tasks only


def test_t_quantiles_and_the_expanded_level() -> None:
    from graders.stats.estimators import expanded_level, t_quantile

    # R: qt(0.975, c(1, 2, 3, 19, 100))
    for df, want in ((1, 12.706205), (2, 4.302653), (3, 3.182446), (19, 2.093024), (100, 1.983972)):
        assert t_quantile(0.975, df) == pytest.approx(want, rel=2e-3)
    assert expanded_level(0.95, 20) == pytest.approx(0.96824, abs=1e-4)
    assert expanded_level(0.95, 1) == 0.95 and expanded_level(0.95, 10_000) == pytest.approx(0.95, abs=1e-3)
