"""Estimators and tests over clustered grader values (docs/statistics.md).

A *cluster* is a task (``task_reliability``'s key: ``workflow#issue`` or the workflow): reruns of
one task are not independent, so every standard error, interval and test here resamples or
permutes whole tasks (Miller 2024, "Adding Error Bars to Evals", arXiv:2411.00640).

Inputs are per-task arrays in a fixed (sorted) order and a ``numpy.random.Generator``; the
caller derives the generator's seed from the cell's key (:func:`rng_for`), so a rerun gives
byte-identical numbers. numpy only: the normal quantiles and the hypergeometric terms need no scipy.
"""

from __future__ import annotations

import functools
import hashlib
import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import numpy as np
from numpy.random import PCG64, Generator

Z95 = 1.959963984540054  # standard normal 0.975 quantile
Z80 = 0.8416212335729143  # standard normal 0.80 quantile (power of the minimum detectable effect)
TAIL_HITS = 10  # permutations as extreme as observed below which the tail is approximated
EXACT_RUNS = 2000  # runs of rerun tasks shuffled exactly per cell; beyond, their normal limit
# Values drawn at once (chunked draws are the same draws in the same order, so results do not
# depend on it): 32 KiB arrays, so the few a chunk holds at once stay under glibc's mmap and
# trim thresholds (128 KiB, fixed by transforms/heap.py) and are reused from the heap, where
# larger ones are mapped, page-faulted and unmapped on every chunk (docs/performance.md).
CHUNK = 4096
# Runs of a task below which C(runs, k ≤ 3) is an exact int64 and float64 (pass_hat_k_tasks).
_EXACT_COMBS = 100_000


def rng_for(*key: object) -> Generator:
    """A generator seeded from a cell's key by SHA-256 (stable across processes and machines)."""
    text = "\x1f".join(str(k) for k in key)
    seed = int.from_bytes(hashlib.sha256(f"fleetgrade-stats\x1e{text}".encode()).digest()[:8], "big")
    return Generator(PCG64(seed))


@dataclass(frozen=True)
class Clusters:
    """Per-task sums and counts of one cell's graded values (tasks in sorted order)."""

    sums: np.ndarray  # float64, one per task
    counts: np.ndarray  # int64, one per task (> 0)
    values: np.ndarray  # every value, sorted (quantiles, standard deviation)

    @staticmethod
    def of(per_task: Sequence[Sequence[float]]) -> Clusters:
        """``per_task``: each task's values; empty tasks are ignored. Sums use ``math.fsum``,
        so they do not depend on the order values arrived in."""
        tasks = [sorted(v) for v in per_task if len(v) > 0]
        sums = np.array([math.fsum(v) for v in tasks], dtype=np.float64)
        counts = np.array([len(v) for v in tasks], dtype=np.int64)
        values = np.array(sorted(x for v in tasks for x in v), dtype=np.float64)
        return Clusters(sums, counts, values)

    @property
    def n(self) -> int:
        return int(self.counts.sum())

    @property
    def n_tasks(self) -> int:
        return len(self.counts)

    def mean(self) -> float | None:
        return math.fsum(self.values.tolist()) / self.n if self.n else None


def sample_sd(values: np.ndarray) -> float | None:
    if len(values) < 2:
        return None
    mean = math.fsum(values.tolist()) / len(values)
    return math.sqrt(math.fsum(((values - mean) ** 2).tolist()) / (len(values) - 1))


def clustered_se(c: Clusters) -> float | None:
    """Cluster-robust standard error of the mean (CR1: the C/(C-1) small-sample factor).

    SE² = C/(C-1) · Σ_c (S_c - n_c·x̄)² / n². With one value per task this is exactly s/√n,
    the CLT standard error; reruns of a task that agree with each other widen it.
    """
    m = c.mean()
    if m is None or c.n_tasks < 2:
        return None
    resid = c.sums - c.counts * m
    var = c.n_tasks / (c.n_tasks - 1) * math.fsum((resid * resid).tolist()) / (c.n * c.n)
    return math.sqrt(var)


def _chunked_subsets(n: int, k: int, rng: Generator, reps: int) -> Iterator[tuple[int, np.ndarray]]:
    """(offset, rows of k indices): the first k of ``reps`` random permutations of range(n), in
    chunks of at most :data:`CHUNK` values so memory stays bounded for cells of many tasks."""
    step = max(1, CHUNK // max(n, 1))
    for lo in range(0, reps, step):
        rows = min(step, reps - lo)
        yield lo, rng.permuted(np.tile(np.arange(n), (rows, 1)), axis=1)[:, :k]


def _resample_counts(rng: Generator, n_tasks: int, reps: int) -> np.ndarray:
    """(reps, n_tasks) multiplicities of a with-replacement resample of the tasks."""
    draws = rng.integers(0, n_tasks, size=(reps, n_tasks))
    draws += (np.arange(reps) * n_tasks)[:, None]
    return np.bincount(draws.ravel(), minlength=reps * n_tasks).reshape(reps, n_tasks).astype(np.int64, copy=False)


def bootstrap_means(c: Clusters, rng: Generator, reps: int) -> np.ndarray:
    """Means of ``reps`` task-resamples (a resampled task brings all its runs)."""
    out = np.empty(reps)
    step = max(1, CHUNK // max(c.n_tasks, 1))
    # One run a task (scheduled runs): every resample holds n_tasks runs, the same divisor.
    singles = bool((c.counts == 1).all())
    # Where every sum of the resampled tasks is exact (integer grades, counts, pass/fail), the
    # drawn tasks' sums are added as drawn: the same float as Σ multiplicity·sum in task order
    # without building the multiplicities.
    exact = sums_exact(c.sums, c.n_tasks)
    for lo in range(0, reps, step):
        rows = min(step, reps - lo)
        if exact:
            draws = rng.integers(0, c.n_tasks, size=(rows, c.n_tasks))
            out[lo:lo + rows] = c.sums[draws].sum(axis=1) / (c.n_tasks if singles else c.counts[draws].sum(axis=1))
        else:
            k = _resample_counts(rng, c.n_tasks, rows)
            out[lo:lo + rows] = (k * c.sums).sum(axis=1) / (c.n_tasks if singles else (k * c.counts).sum(axis=1))
    return out


def sums_exact(x: np.ndarray, terms: int) -> bool:
    """Whether every sum of at most ``terms`` of ``x``'s values (repeats allowed) is exact in
    float64, added in any order: the values are finite multiples of one power of two 2^e, none
    is a negative zero (whose sign an order could keep or lose), and ``terms`` times the largest
    stays below 2^(52+e), so every partial sum is a representable multiple of 2^e."""
    nz = x[x != 0]
    if bool(np.signbit(x[x == 0]).any()):
        return False
    if len(nz) == 0:
        return True
    if not bool(np.isfinite(nz).all()):
        return False
    mant, ex = np.frexp(nz)
    m = (mant * 2.0**53).astype(np.int64)  # exact: the 53-bit significand as an integer
    _, low = np.frexp((m & -m).astype(np.float64))  # its lowest set bit, 2^(low - 1)
    e = int((ex - 54 + low).min())  # every value is a multiple of 2^e
    return float(np.abs(nz).max()) * terms < math.ldexp(1.0, 52 + e)


def t_quantile(p: float, df: int) -> float:
    """Student's t quantile: exact for 1 and 2 degrees of freedom, else the Cornish–Fisher
    expansion of Hill (1970) around the normal quantile (within 0.2% from 3 df on)."""
    if df == 1:
        return math.tan(math.pi * (p - 0.5))
    if df == 2:
        return (2 * p - 1) / math.sqrt(2 * p * (1 - p))
    z = _normal_quantile(p)
    g1 = (z**3 + z) / 4
    g2 = (5 * z**5 + 16 * z**3 + 3 * z) / 96
    g3 = (3 * z**7 + 19 * z**5 + 17 * z**3 - 15 * z) / 384
    g4 = (79 * z**9 + 776 * z**7 + 1482 * z**5 - 1920 * z**3 - 945 * z) / 92160
    return z + g1 / df + g2 / df**2 + g3 / df**3 + g4 / df**4


def _normal_quantile(p: float) -> float:
    """Φ⁻¹(p) by bisection on erfc (only a handful of calls per cell)."""
    lo, hi = -40.0, 40.0
    for _ in range(200):
        mid = (lo + hi) / 2
        if 0.5 * math.erfc(-mid / math.sqrt(2)) < p:
            lo = mid
        else:
            hi = mid
    return (lo + hi) / 2


@functools.lru_cache(maxsize=4096)
def expanded_level(level: float, clusters: int) -> float:
    """The expanded percentile bootstrap's level (Hesterberg 2015): the percentile interval is
    too narrow in small samples (it ignores the C/(C−1) bias of the plug-in variance and uses z
    where t belongs), so it is read at the level whose normal quantile is √(C/(C−1))·t_{C−1}."""
    if clusters < 2:
        return level
    z = math.sqrt(clusters / (clusters - 1)) * t_quantile((1 + level) / 2, clusters - 1)
    return math.erf(z / math.sqrt(2))


def fast_quantiles(x: np.ndarray, qs: Sequence[float]) -> list[float]:
    """``np.quantile(x, qs)`` (linear, type 7) of a 1-d float array, computed term for term as
    numpy does (virtual index, floor, bounds, gamma, its two-sided lerp) in Python floats, which
    round as numpy's float64 does, on a sorted copy, without numpy's per-call set-up. NaN,
    infinities and a zero picked from an array holding a negative zero go to numpy itself:
    numpy's sort may drop a zero's sign, and the others are numpy's special cases."""
    n = len(x)
    s = np.sort(x)
    if n == 0 or math.isnan(s[-1]):  # numpy's answer for a slice with a NaN is NaN
        return [float(v) for v in np.quantile(x, list(qs))]
    picks = []
    for q in qs:
        v = (n - 1) * q
        i = math.floor(v)
        j = i + 1
        if v >= n - 1:
            i = j = -1
        a, b = float(s[i]), float(s[j])
        if not (math.isfinite(a) and math.isfinite(b)) or ((a == 0.0 or b == 0.0) and _negative_zero(x)):
            return [float(v) for v in np.quantile(x, list(qs))]
        picks.append((a, b, v - i))
    out = []
    for a, b, t in picks:
        diff = b - a
        out.append(b - diff * (1 - t) if t >= 0.5 else a + diff * t)
    return out


def _negative_zero(s: np.ndarray) -> bool:
    return bool(np.any(np.signbit(s[s == 0])))


def percentile_interval(samples: np.ndarray, level: float = 0.95) -> tuple[float, float]:
    lo, hi = fast_quantiles(samples, [(1 - level) / 2, (1 + level) / 2])
    return lo, hi


def bootstrap_interval(c: Clusters, rng: Generator, reps: int = 2000, level: float = 0.95
                       ) -> tuple[float, float] | None:
    """Percentile interval of the mean from a bootstrap over tasks; None below two tasks."""
    if c.n_tasks < 2:
        return None
    return percentile_interval(bootstrap_means(c, rng, reps), expanded_level(level, c.n_tasks))


def wilson_interval(successes: int, n: int, z: float = Z95) -> tuple[float, float] | None:
    """Wilson score interval of a binomial proportion (Wilson 1927)."""
    if n <= 0:
        return None
    p = successes / n
    denom = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    return max(0.0, centre - half), min(1.0, centre + half)


def quantiles(values: np.ndarray, qs: Sequence[float] = (0.1, 0.5, 0.9)) -> list[float] | None:
    """Exact sample quantiles (linear interpolation, Hyndman & Fan type 7) of every value held."""
    if len(values) == 0:
        return None
    return fast_quantiles(values, qs)


def pass_hat_k_tasks(n: np.ndarray, c: np.ndarray, k: int) -> np.ndarray:
    """Per-task unbiased pass^k = C(c,k)/C(n,k) for tasks with n ≥ k (tau-bench)."""
    keep = n >= k
    nk, ck = n[keep], c[keep]
    if k <= 3 and len(nk) and int(nk.max()) < _EXACT_COMBS:
        # C(x, k) as int64 products: exact below 2**53, so each quotient is the correctly rounded
        # one, as math.comb's int / int is.
        num, den = np.ones(len(nk), dtype=np.int64), np.ones(len(nk), dtype=np.int64)
        for i in range(k):
            num, den = num * (ck - i), den * (nk - i)
        fact = math.factorial(k)
        return (num // fact) / (den // fact)
    return np.array([math.comb(int(ci), k) / math.comb(int(ni), k) for ni, ci in zip(nk, ck, strict=True)],
                    dtype=np.float64)


def pass_hat_k_interval(n: np.ndarray, c: np.ndarray, k: int, rng: Generator, reps: int = 2000
                        ) -> tuple[float | None, float | None, float | None, int]:
    """pass^k (mean over tasks with ≥ k runs) and a bootstrap-over-tasks interval; (value, low, high, tasks)."""
    per_task = pass_hat_k_tasks(n, c, k)
    if len(per_task) == 0:
        return None, None, None, 0
    value = math.fsum(per_task.tolist()) / len(per_task)
    if len(per_task) < 2:
        return value, None, None, len(per_task)
    means = np.empty(reps)
    step = max(1, CHUNK // len(per_task))
    for at in range(0, reps, step):
        rows = min(step, reps - at)
        means[at:at + rows] = per_task[rng.integers(0, len(per_task), size=(rows, len(per_task)))].mean(axis=1)
    lo, hi = percentile_interval(means, expanded_level(0.95, len(per_task)))
    return value, lo, hi, len(per_task)


def bootstrap_diff_interval(cur: Clusters, base: Clusters, rng: Generator, reps: int = 2000
                            ) -> tuple[float, float] | None:
    """Interval of mean(cur) - mean(base), resampling tasks within each window independently."""
    if cur.n_tasks < 2 or base.n_tasks < 2:
        return None
    return percentile_interval(bootstrap_means(cur, rng, reps) - bootstrap_means(base, rng, reps),
                               expanded_level(0.95, min(cur.n_tasks, base.n_tasks)))


def permutation_p(cur: Clusters, base: Clusters, rng: Generator, reps: int = 9999) -> float | None:
    """Two-sided p of mean(cur) ≠ mean(base) by permuting whole tasks between the windows.

    The window labels of task clusters are exchangeable under no change; the statistic is the
    difference of run-weighted means. p = (1 + #{|T*| ≥ |T|}) / (1 + reps) (never 0). In the far
    tail (fewer than :data:`TAIL_HITS` permutations as extreme) that estimate is floored at
    ~1/reps, which Benjamini–Hochberg over hundreds of cells can never call significant; there p
    comes from the normal approximation of the same permutation distribution (its mean and SD).
    """
    if cur.n_tasks < 1 or base.n_tasks < 1 or cur.n_tasks + base.n_tasks < 3:
        return None
    sums = np.concatenate([cur.sums, base.sums])
    counts = np.concatenate([cur.counts, base.counts])
    total_s, total_n = math.fsum(sums.tolist()), int(counts.sum())
    observed = cur.sums.sum() / cur.counts.sum() - base.sums.sum() / base.counts.sum()
    s1, n1 = np.empty(reps), np.empty(reps, dtype=np.int64)
    for lo, order in _chunked_subsets(len(sums), cur.n_tasks, rng, reps):
        s1[lo:lo + len(order)] = sums[order].sum(axis=1)
        n1[lo:lo + len(order)] = counts[order].sum(axis=1)
    stat = s1 / n1 - (total_s - s1) / (total_n - n1)
    # A relative tolerance: ties (common with 0/1 values) must count as "as extreme".
    extreme = int((np.abs(stat) >= abs(observed) - 1e-12 * max(1.0, abs(observed))).sum())
    monte_carlo = (1 + extreme) / (1 + reps)
    if extreme >= TAIL_HITS:
        return float(monte_carlo)
    sd = float(stat.std())
    if sd == 0:
        return float(monte_carlo)
    z = abs(observed - float(stat.mean())) / sd
    return float(min(monte_carlo, math.erfc(z / math.sqrt(2))))


def fisher_exact_p(a: int, n1: int, b: int, n2: int) -> float:
    """Two-sided Fisher exact p for a/n1 vs b/n2 successes: the sum of hypergeometric table
    probabilities no larger than the observed one's."""
    total, succ = n1 + n2, a + b
    lo, hi = max(0, succ - n2), min(succ, n1)
    denom = math.comb(total, succ)
    probs = {x: math.comb(n1, x) * math.comb(n2, succ - x) / denom for x in range(lo, hi + 1)}
    cut = probs[a] * (1 + 1e-9)
    return min(1.0, math.fsum(p for p in probs.values() if p <= cut))


def benjamini_hochberg(ps: Sequence[float | None]) -> list[float | None]:
    """q-values (BH step-up adjusted p-values); None p-values stay None and do not count in m."""
    idx = [i for i, p in enumerate(ps) if p is not None]
    m = len(idx)
    out: list[float | None] = [None] * len(ps)
    running = 1.0
    for rank, i in reversed(list(enumerate(sorted(idx, key=lambda j: (ps[j], j)), start=1))):
        p = ps[i]
        assert p is not None
        running = min(running, p * m / rank)
        out[i] = running
    return out


def minimum_detectable_effect(se_cur: float | None, se_base: float | None) -> float | None:
    """Smallest |difference| a two-sided 5% test detects with 80% power: (z₀.₉₇₅ + z₀.₈)·SE(diff)."""
    if se_cur is None or se_base is None:
        return None
    return (Z95 + Z80) * math.sqrt(se_cur * se_cur + se_base * se_base)


def _strata_sums(strata: list[tuple[np.ndarray, int]], rng: Generator, reps: int) -> np.ndarray:
    """``reps`` draws of Σ_t (sum of a uniformly random k_t-subset of stratum t's values): the
    shuffled labels of every stratum together.

    Strata are shuffled exactly, the least normal first (smallest min(k, m−k)), while their runs
    total at most :data:`EXACT_RUNS`; strata of equal (m, k) are shuffled in one array. The rest
    (a cell with thousands of rerun tasks) contribute through the normal limit of their total:
    each stratum's subset sum has mean k·v̄ and variance k(m−k)/(m(m−1))·Σ(v−v̄)², and they are
    independent, so their sum over many strata is normal.
    """
    order = sorted(range(len(strata)), key=lambda i: (min(strata[i][1], len(strata[i][0]) - strata[i][1]),
                                                      len(strata[i][0]), i))
    exact: dict[tuple[int, int], list[np.ndarray]] = {}
    budget, mean, var = EXACT_RUNS, 0.0, 0.0
    for i in order:
        values, k = strata[i]
        m = len(values)
        if m <= budget:
            budget -= m
            exact.setdefault((m, k), []).append(values)
        else:
            v = float(values.mean())
            mean += k * v
            var += k * (m - k) / (m * (m - 1)) * float(((values - v) ** 2).sum())
    out = mean + math.sqrt(var) * rng.standard_normal(reps) if var > 0 else np.full(reps, mean)
    for (_m, k), group in sorted(exact.items()):
        block = np.stack(group)  # (strata, m)
        step = max(1, CHUNK // block.size)
        for lo in range(0, reps, step):
            hi = min(reps, lo + step)
            # Shuffled as rows of a 2-d array: the same shuffles in the same order as along the
            # last axis of the 3-d one, without numpy's much slower iteration over 3-d slices.
            # C-contiguous, as the 3-d copy was: the sum below adds in memory order.
            rows = np.ascontiguousarray(np.broadcast_to(block, (hi - lo, *block.shape)).reshape(-1, block.shape[-1]))
            shuffled = rng.permuted(rows, axis=1).reshape(hi - lo, *block.shape)
            out[lo:hi] += shuffled[:, :, :k].sum(axis=(1, 2))
    return out


def stratified_permutation_p(cur: dict[str, list[float]], base: dict[str, list[float]], rng: Generator,
                             reps: int = 9999) -> float | None:
    """Two-sided p of mean(cur) ≠ mean(base) by a permutation that respects tasks.

    A task with runs in both windows is a stratum: its runs' window labels are shuffled within
    it (its share of each window kept), so a task's own level cancels out, as in a blocked
    design. Tasks seen in one window only are exchanged whole between the windows, as in
    :func:`permutation_p`. Under no change both moves leave the joint distribution unchanged.
    The tail is handled as in :func:`permutation_p`.
    """
    shared = sorted(set(cur) & set(base))
    only_cur = [sorted(cur[t]) for t in sorted(set(cur) - set(base))]
    only_base = [sorted(base[t]) for t in sorted(set(base) - set(cur))]
    n_cur = sum(len(v) for v in cur.values())
    n_base = sum(len(v) for v in base.values())
    if n_cur == 0 or n_base == 0 or (not shared and len(only_cur) + len(only_base) < 3):
        return None
    total_s = math.fsum([*(x for v in cur.values() for x in v), *(x for v in base.values() for x in v)])
    total_n = n_cur + n_base
    observed = math.fsum(x for v in cur.values() for x in v) / n_cur - math.fsum(
        x for v in base.values() for x in v) / n_base
    s1 = np.zeros(reps)
    n1 = np.zeros(reps, dtype=np.int64)
    strata = [(np.array(sorted(cur[t]) + sorted(base[t]), dtype=np.float64), len(cur[t])) for t in shared]
    n1 += sum(k for _, k in strata)
    s1 += _strata_sums(strata, rng, reps)
    singles = only_cur + only_base
    if singles:
        sums = np.array([math.fsum(v) for v in singles])
        counts = np.array([len(v) for v in singles], dtype=np.int64)
        for lo, order in _chunked_subsets(len(singles), len(only_cur), rng, reps):
            s1[lo:lo + len(order)] += sums[order].sum(axis=1)
            n1[lo:lo + len(order)] += counts[order].sum(axis=1)
    valid = (n1 > 0) & (n1 < total_n)
    stat = s1[valid] / n1[valid] - (total_s - s1[valid]) / (total_n - n1[valid])
    extreme = int((np.abs(stat) >= abs(observed) - 1e-12 * max(1.0, abs(observed))).sum())
    monte_carlo = (1 + extreme) / (1 + len(stat))
    sd = float(stat.std()) if len(stat) else 0.0
    if extreme >= TAIL_HITS or sd == 0:
        return float(monte_carlo)
    z = abs(observed - float(stat.mean())) / sd
    return float(min(monte_carlo, math.erfc(z / math.sqrt(2))))
