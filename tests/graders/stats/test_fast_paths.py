"""The statistics' fast paths give the same floats, bit for bit, as the plain computations they
replace (the stored tables must not change by a bit): numpy's quantile, the bootstrap by task
multiplicities, math.comb's pass^k, the stratified shuffles along the last axis of a 3-d array."""

from __future__ import annotations

import math

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from numpy.random import Generator

from graders.stats.estimators import (
    CHUNK,
    Clusters,
    _resample_counts,
    _strata_sums,
    bootstrap_means,
    fast_quantiles,
    pass_hat_k_tasks,
    sums_exact,
)

# Values that exercise the special cases: signed zeros, infinities, NaN, ties, 0/1 grades.
SPECIAL = st.sampled_from([0.0, -0.0, 1.0, -1.0, 0.5, 2.0, math.inf, -math.inf, math.nan])
FLOATS = st.one_of(SPECIAL, st.floats(allow_nan=False, allow_infinity=False, width=64),
                   st.integers(-1000, 1000).map(float))


def bits(xs: list[float] | np.ndarray) -> bytes:
    return np.asarray(xs, dtype=np.float64).tobytes()


@settings(max_examples=400, deadline=None)
@given(st.lists(FLOATS, min_size=1, max_size=40),
       st.lists(st.floats(0.0, 1.0), min_size=1, max_size=4))
def test_fast_quantiles_are_numpys_bit_for_bit(values: list[float], qs: list[float]) -> None:
    x = np.array(values, dtype=np.float64)
    with np.errstate(invalid="ignore"):  # inf - inf in numpy's lerp
        want = [float(v) for v in np.quantile(x, qs)]
        got = fast_quantiles(x, qs)
    assert bits(got) == bits(want)


def test_fast_quantiles_keep_numpys_zero_sign() -> None:
    # numpy's sort drops a zero's sign where its partition keeps it: the median here is -0.0.
    x = np.array([1.0, -1.0, 0.0, -0.0, 0.5, -0.0, 1.0, 0.0, -0.0, 0.0, -1.0, 0.0])
    assert bits(fast_quantiles(x, [0.1, 0.5, 0.9])) == bits(np.quantile(x, [0.1, 0.5, 0.9]))


def _means_by_multiplicity(c: Clusters, rng: Generator, reps: int) -> np.ndarray:
    """The bootstrap as it was: per resample, Σ multiplicity·sum over tasks in task order."""
    out = np.empty(reps)
    step = max(1, CHUNK // max(c.n_tasks, 1))
    for lo in range(0, reps, step):
        k = _resample_counts(rng, c.n_tasks, min(step, reps - lo))
        out[lo:lo + len(k)] = (k * c.sums).sum(axis=1) / (k * c.counts).sum(axis=1)
    return out


TASK_VALUES = st.one_of(
    st.lists(st.integers(-50, 50).map(float), min_size=1, max_size=3),  # counts, scores: exact
    st.lists(st.sampled_from([0.0, 1.0]), min_size=1, max_size=3),  # pass/fail: exact
    st.lists(st.integers(0, 400).map(lambda v: v / 16), min_size=1, max_size=2),  # dyadic: exact
    st.lists(st.floats(-1e6, 1e6, allow_nan=False), min_size=1, max_size=3),  # mostly not exact
)


@settings(max_examples=300, deadline=None)
@given(st.lists(TASK_VALUES, min_size=2, max_size=60), st.integers(1, 400), st.integers(0, 2**32))
def test_bootstrap_means_are_the_multiplicity_means(tasks: list[list[float]], reps: int, seed: int) -> None:
    c = Clusters.of(tasks)
    got = bootstrap_means(c, np.random.default_rng(seed), reps)
    assert got.tobytes() == _means_by_multiplicity(c, np.random.default_rng(seed), reps).tobytes()


def test_bootstrap_means_take_the_exact_path_on_integer_grades() -> None:
    c = Clusters.of([[float(v)] for v in range(40)])
    assert sums_exact(c.sums, c.n_tasks)
    a = bootstrap_means(c, np.random.default_rng(7), 500)
    assert a.tobytes() == _means_by_multiplicity(c, np.random.default_rng(7), 500).tobytes()


def test_sums_exact() -> None:
    assert sums_exact(np.array([1.0, 3.0, 0.0]), 10)
    assert sums_exact(np.array([0.5, 0.25]), 1000)
    assert sums_exact(np.array([1.0, 2.0**-30]), 10)
    assert not sums_exact(np.array([0.1]), 2)  # not a multiple of a power of two that fits
    assert not sums_exact(np.array([2.0**51 + 1]), 4)  # the sum outgrows the significand
    assert not sums_exact(np.array([-0.0, 1.0]), 2)  # an order could keep or lose the sign
    assert not sums_exact(np.array([math.inf]), 1)
    assert sums_exact(np.array([], dtype=np.float64), 3)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 120_000), st.integers(0, 120_000)), max_size=30), st.integers(0, 5))
def test_pass_hat_k_tasks_are_math_comb_quotients(pairs: list[tuple[int, int]], k: int) -> None:
    n = np.array([max(a, b) for a, b in pairs], dtype=np.int64)
    c = np.array([min(a, b) for a, b in pairs], dtype=np.int64)
    keep = n >= k
    want = np.array([math.comb(int(ci), k) / math.comb(int(ni), k) for ni, ci in zip(n[keep], c[keep], strict=True)],
                    dtype=np.float64)
    got = pass_hat_k_tasks(n, c, k)
    assert got.dtype == np.float64 and got.tobytes() == want.tobytes()


def _strata_sums_3d(strata: list[tuple[np.ndarray, int]], rng: Generator, reps: int) -> np.ndarray:
    """The exact strata as they were shuffled: along the last axis of a (reps, strata, m) array
    (all strata here are within the exact budget)."""
    exact: dict[tuple[int, int], list[np.ndarray]] = {}
    for values, k in sorted(strata, key=lambda s: (min(s[1], len(s[0]) - s[1]), len(s[0]))):
        exact.setdefault((len(values), k), []).append(values)
    out = np.full(reps, 0.0)
    for (_m, k), group in sorted(exact.items()):
        block = np.stack(group)
        step = max(1, CHUNK // block.size)
        for lo in range(0, reps, step):
            hi = min(reps, lo + step)
            shuffled = rng.permuted(np.broadcast_to(block, (hi - lo, *block.shape)).copy(), axis=-1)
            out[lo:hi] += shuffled[:, :, :k].sum(axis=(1, 2))
    return out


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.integers(2, 12), st.integers(0, 2**16)), min_size=1, max_size=6),
       st.integers(1, 300), st.integers(0, 2**32))
def test_strata_are_shuffled_as_along_the_last_axis(shapes: list[tuple[int, int]], reps: int, seed: int) -> None:
    strata = []
    for i, (m, salt) in enumerate(shapes):
        values = np.random.default_rng(salt).normal(size=m).round(2)
        strata.append((values, 1 + (salt + i) % (m - 1)))
    got = _strata_sums(strata, np.random.default_rng(seed), reps)
    assert got.tobytes() == _strata_sums_3d(strata, np.random.default_rng(seed), reps).tobytes()
