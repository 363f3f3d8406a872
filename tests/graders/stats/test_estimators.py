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
    Z95,
    Labels,
    benjamini_hochberg,
    cr1_se,
    fisher_exact_p,
    minimum_detectable_effect,
    pass_hat_k,
    quantiles_of_sorted,
    rng_for,
    stratified_permutation_p,
    t_quantile,
    wilson_effective,
    wilson_interval,
)


def _labels(cur: dict[int, list[float]], base: dict[int, list[float]]) -> Labels:
    c = {t: np.array(sorted(v)) for t, v in cur.items()}
    b = {t: np.array(sorted(v)) for t, v in base.items()}
    n_c, n_b = sum(map(len, cur.values())), sum(map(len, base.values()))
    s_c, s_b = math.fsum(x for v in cur.values() for x in v), math.fsum(x for v in base.values() for x in v)
    return Labels.of(c, b, s_c / n_c - s_b / n_b, s_c + s_b)


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


def _t_mass(t: float, df: int, steps: int = 20_000) -> float:
    """P(|T| ≤ t) by Simpson's rule over Student's density (independent of the code's series)."""
    log_c = math.lgamma((df + 1) / 2) - math.lgamma(df / 2) - 0.5 * math.log(df * math.pi)
    h = t / steps
    f = [math.exp(log_c - (df + 1) / 2 * math.log1p((i * h) ** 2 / df)) for i in range(steps + 1)]
    return 2 * h / 3 * (f[0] + f[-1] + 4 * sum(f[1:-1:2]) + 2 * sum(f[2:-1:2]))


def test_t_quantiles() -> None:
    # Closed forms for 1 and 2 degrees of freedom; beyond, the density integrated to 0.95.
    assert t_quantile(0.975, 1) == pytest.approx(math.tan(math.pi * 0.475), rel=1e-12)
    assert t_quantile(0.975, 2) == pytest.approx(0.95 / math.sqrt(2 * 0.975 * 0.025), rel=1e-12)
    for df in (3, 5, 19, 30, 100, 199, 200, 201, 1000):
        assert _t_mass(t_quantile(0.975, df), df) == pytest.approx(0.95, abs=1e-10), df


def test_cr1_is_the_clt_error_with_one_run_per_task_and_widens_when_reruns_agree() -> None:
    values = np.array([0.1, 0.4, 0.35, 0.8, 0.55])
    resid = float(((values - values.mean()) ** 2).sum())  # one run per task: S_c − n_c·x̄ = x − x̄
    se = cr1_se(np.array([resid]), np.array([5]), np.array([5]))[0]
    assert se == pytest.approx(float(np.std(values, ddof=1)) / math.sqrt(5), rel=1e-12)
    # Two tasks, each rerun 4 times with identical values (0 and 1): effectively 2 observations.
    clustered = cr1_se(np.array([(0 - 4 * 0.5) ** 2 + (4 - 4 * 0.5) ** 2]), np.array([8]), np.array([2]))[0]
    assert clustered == pytest.approx(0.5)  # 2/1 · (2² + 2²) / 8²
    assert math.isnan(cr1_se(np.array([1.0]), np.array([2]), np.array([1]))[0])  # one task: no between-task variance


def test_wilson_at_the_effective_size() -> None:
    # A binomial variance at n = 40 is an effective size of 40; with 40 clusters its t on 39 df
    # makes it 40·(z/t₃₉)², and the interval is Wilson's at that size (computed by hand here).
    p, n = 0.75, 40
    lo, hi = wilson_effective(np.array([p]), np.array([p * (1 - p) / n]), np.array([1000.0]), np.array([40]),
                              np.array([40.0]))
    size = n * (Z95 / t_quantile(0.975, 39)) ** 2
    centre = (p + Z95**2 / (2 * size)) / (1 + Z95**2 / size)
    half = Z95 * math.sqrt(p * (1 - p) / size + Z95**2 / (4 * size * size)) / (1 + Z95**2 / size)
    assert (lo[0], hi[0]) == pytest.approx((centre - half, centre + half), rel=1e-9)
    # Reruns that agree (a variance twice the binomial one) halve the effective size: wider.
    lo2, hi2 = wilson_effective(np.array([p]), np.array([2 * p * (1 - p) / n]), np.array([1000.0]), np.array([40]),
                                np.array([40.0]))
    assert lo2[0] < lo[0] and hi2[0] > hi[0]
    # Every value 1: no variance to size it; the fallback size gives [size/(size + z²), 1].
    lo3, hi3 = wilson_effective(np.array([1.0]), np.array([0.0]), np.array([20.0]), np.array([20]),
                                np.array([20.0]))
    size = 20 * (Z95 / t_quantile(0.975, 19)) ** 2
    assert hi3[0] == 1.0 and lo3[0] == pytest.approx(size / (size + Z95**2), rel=1e-12)


def test_fisher_exact_matches_r() -> None:
    # R: fisher.test(matrix(c(1, 9, 9, 1), 2))$p.value = 0.001093
    assert round(fisher_exact_p(1, 10, 9, 10), 6) == 0.001093
    # the "3/4 against 6/6": nowhere near significant
    assert fisher_exact_p(3, 4, 6, 6) == pytest.approx(0.4)
    assert fisher_exact_p(5, 10, 5, 10) == 1.0


@settings(max_examples=200, deadline=None)
@given(st.lists(st.lists(st.floats(-1e6, 1e6), min_size=1, max_size=12), min_size=1, max_size=5),
       st.sampled_from([0.0, 0.1, 0.25, 0.5, 0.9, 1.0]))
def test_quantiles_of_sorted_samples_are_numpys(samples: list[list[float]], q: float) -> None:
    flat = np.concatenate([np.sort(s) for s in samples])
    counts = np.array([len(s) for s in samples])
    offsets = np.concatenate(([0], np.cumsum(counts)[:-1]))
    got = quantiles_of_sorted(flat, offsets, counts, [q])[0]
    assert got.tolist() == [float(np.quantile(np.array(s), q)) for s in samples]


def test_pass_hat_k_is_the_ratio_of_binomials() -> None:
    n, c = np.array([4, 4, 2, 3]), np.array([3, 4, 2, 0])
    assert pass_hat_k(n, c, 2).tolist() == [math.comb(3, 2) / math.comb(4, 2), 1.0, 1.0, 0.0]
    big = np.array([200_000]), np.array([150_000])
    assert pass_hat_k(*big, 3)[0] == math.comb(150_000, 3) / math.comb(200_000, 3)


def test_permutation_p_is_the_share_of_labelings_as_extreme() -> None:
    # Six tasks a window, values far apart: exactly 2 of the C(12, 6) = 924 labelings are as
    # extreme as the observed one; too few hits to stop early, so every permutation is drawn.
    cur = {t: [0.0, 0.1] for t in range(6)}
    base = {t: [1.0, 0.9] for t in range(6, 12)}
    p = stratified_permutation_p(_labels(cur, base), rng_for("p"), 20000)
    assert p == pytest.approx(2 / 924, abs=7e-4)
    assert p == stratified_permutation_p(_labels(cur, base), rng_for("p"), 20000)
    same = {t: [0.5, 0.4] for t in range(6)}
    assert stratified_permutation_p(_labels(same, {t + 6: v for t, v in same.items()}), rng_for("p"), 999) == 1.0


def test_a_test_without_a_change_stops_after_its_hits() -> None:
    """Besag & Clifford: the test stops at the 100th permutation as extreme as the observed
    statistic, so p = 100 / permutations drawn, after a few hundred for a p near 0.5."""
    rng = np.random.default_rng(3)
    cur = {t: rng.normal(size=3).tolist() for t in range(20)}
    base = {t: rng.normal(size=3).tolist() for t in range(20, 60)}
    p = stratified_permutation_p(_labels(cur, base), rng_for("stop"), 9999)
    drawn = 100 / p
    assert 0.2 < p < 0.9 and abs(drawn - round(drawn)) < 1e-9 and drawn < 600


def test_stratified_permutation_cancels_a_task_level_and_reaches_below_one_over_reps() -> None:
    # One busy task rerun in both windows, its values 0.1 lower now: exchanging whole tasks
    # could never see it; shuffling within the task does, far below 1/reps.
    base = {1: [0.9 + 0.001 * i for i in range(40)], 2: [0.5, 0.52]}
    cur = {1: [0.8 + 0.001 * i for i in range(15)], 3: [0.51]}
    p = stratified_permutation_p(_labels(cur, base), rng_for("s"), 999)
    assert p < 1e-4 < 1 / 1000
    assert stratified_permutation_p(_labels({1: [0.5, 0.6]}, {1: [0.6, 0.5]}), rng_for("s"), 999) == 1.0


def test_small_strata_draw_their_subset_sums_uniformly() -> None:
    """A stratum of ≤ 12 runs draws one of its C(m, k) subset sums: each with probability
    1/C(m, k), as shuffling it gives (here C(4, 2) = 6 subsets of distinct sums)."""
    from graders.stats.estimators import _Shuffles

    values = np.array([1.0, 2.0, 4.0, 8.0])
    labels = Labels(strata=[(values, 2)], single_sums=np.empty(0), single_counts=np.empty(0, dtype=np.int64),
                    current_singles=0, observed=0.0, total_sum=15.0, total_n=4)
    sums, counts = _Shuffles(labels, rng_for("table")).draw(60_000)
    assert set(counts.tolist()) == {2}
    seen = dict(zip(*np.unique(sums, return_counts=True), strict=True))
    assert sorted(seen) == sorted(float(a + b) for a, b in itertools.combinations(values.tolist(), 2))
    assert all(abs(c / 60_000 - 1 / 6) < 0.01 for c in seen.values())


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
