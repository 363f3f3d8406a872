"""Estimators and tests over clustered grader values (docs/statistics.md).

A *cluster* is a task (``task_reliability``'s key: ``workflow#issue`` or the run): reruns of one
task are not independent, so every standard error, interval and test here treats whole tasks as
the unit (Miller 2024, "Adding Error Bars to Evals", arXiv:2411.00640).

Intervals are closed forms, computed for many cells at once (arrays, one entry per cell): the
cluster-robust (CR1) standard error with Student's t on C − 1 degrees of freedom for means and
differences, and Wilson's score interval at the Korn–Graubard effective sample size for rates.
The one resampling left is the regression test's permutation, drawn as matrices from a
``numpy.random.Generator`` whose seed comes from the cell's key (:func:`rng_for`), so a rerun
gives byte-identical numbers. numpy only: the t and normal quantiles and the hypergeometric
terms need no scipy.
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
# Besag & Clifford's sequential stop: a permutation test ends once this many permutations were
# as extreme as the observed statistic, with p = hits / permutations drawn (a valid p-value;
# its relative Monte Carlo error is ~1/√hits, 10%). A p-value below hits / reps draws them all.
STOP_HITS = 100
FIRST_DRAWS = 256  # permutations of the first round; each later round draws twice as many
EXACT_RUNS = 2000  # runs of rerun tasks shuffled exactly per cell; beyond, their normal limit
TABLE_RUNS = 12  # strata of at most this many runs draw from their listed subset sums (≤ 924 each)
# Values drawn at once: 32 KiB arrays, so the few a round holds at once stay under glibc's mmap
# and trim thresholds (128 KiB, fixed by transforms/heap.py) and are reused from the heap, where
# larger ones are mapped, page-faulted and unmapped on every round (docs/performance.md).
CHUNK = 4096
# Runs of a task below which C(runs, k ≤ 3) is an exact int64 and float64 (pass_hat_k_tasks).
_EXACT_COMBS = 100_000
_T_SERIES_DF = 200  # degrees of freedom up to which t quantiles come from the exact series


def rng_for(*key: object) -> Generator:
    """A generator seeded from a cell's key by SHA-256 (stable across processes and machines)."""
    text = "\x1f".join(str(k) for k in key)
    seed = int.from_bytes(hashlib.sha256(f"fleetgrade-stats\x1e{text}".encode()).digest()[:8], "big")
    return Generator(PCG64(seed))


# --- quantiles of the normal and t distributions ------------------------------------------------


def _normal_quantile(p: float) -> float:
    """Φ⁻¹(p) by bisection on erfc."""
    lo, hi = -40.0, 40.0
    for _ in range(200):
        mid = (lo + hi) / 2
        if 0.5 * math.erfc(-mid / math.sqrt(2)) < p:
            lo = mid
        else:
            hi = mid
    return (lo + hi) / 2


def _t_two_sided(t: float, df: int) -> float:
    """P(|T| ≤ t) for Student's t with ``df`` (integer) degrees of freedom: the finite series of
    Abramowitz & Stegun 26.7.3 (even df) and 26.7.4 (odd df), θ = atan(t/√df)."""
    theta = math.atan(t / math.sqrt(df))
    s, c2 = math.sin(theta), math.cos(theta) ** 2
    if df % 2 == 0:
        term = total = 1.0
        for j in range(1, df // 2):
            term *= c2 * (2 * j - 1) / (2 * j)
            total += term
        return s * total
    if df == 1:
        return 2 * theta / math.pi
    term = total = math.cos(theta)
    for j in range(1, (df - 1) // 2):
        term *= c2 * (2 * j) / (2 * j + 1)
        total += term
    return 2 / math.pi * (theta + s * total)


def _cornish_fisher(p: float, df: int) -> float:
    """Hill's (1970) expansion of the t quantile around the normal one (error below 10⁻¹¹ from
    200 degrees of freedom on)."""
    z = _normal_quantile(p)
    g1 = (z**3 + z) / 4
    g2 = (5 * z**5 + 16 * z**3 + 3 * z) / 96
    g3 = (3 * z**7 + 19 * z**5 + 17 * z**3 - 15 * z) / 384
    g4 = (79 * z**9 + 776 * z**7 + 1482 * z**5 - 1920 * z**3 - 945 * z) / 92160
    return z + g1 / df + g2 / df**2 + g3 / df**3 + g4 / df**4


@functools.lru_cache(maxsize=4096)
def t_quantile(p: float, df: int) -> float:
    """Student's t quantile for p > 0.5 on ``df`` (integer) degrees of freedom: up to
    :data:`_T_SERIES_DF`, the exact distribution function (:func:`_t_two_sided`) inverted by
    Newton's method from Hill's expansion; beyond, the expansion itself."""
    start = _cornish_fisher(p, df)
    if df > _T_SERIES_DF:
        return start
    target = 2 * p - 1
    log_c = math.lgamma((df + 1) / 2) - math.lgamma(df / 2) - 0.5 * math.log(df * math.pi)
    t = max(start, 1e-3)
    for _ in range(60):
        density = math.exp(log_c - (df + 1) / 2 * math.log1p(t * t / df))
        step = (_t_two_sided(t, df) - target) / (2 * density)
        t = max(t - step, t / 2)
        if abs(step) <= 1e-13 * t:
            break
    return t


def t975(clusters: np.ndarray) -> np.ndarray:
    """t₀.₉₇₅ on C − 1 degrees of freedom per entry of ``clusters`` (C ≥ 2; NaN below)."""
    out = np.full(len(clusters), np.nan)
    for c in np.unique(clusters[clusters >= 2]).tolist():
        out[clusters == c] = t_quantile(0.975, c - 1)
    return out


# --- closed-form intervals, vectorized over cells ----------------------------------------------


def cr1_se(resid_sq: np.ndarray, n: np.ndarray, clusters: np.ndarray) -> np.ndarray:
    """Cluster-robust standard error of a mean (CR1: the C/(C−1) small-sample factor), per cell:
    SE² = C/(C−1) · Σ_c (S_c − n_c·x̄)² / n², from ``resid_sq`` = Σ_c (S_c − n_c·x̄)². With one
    value per task this is exactly s/√n; reruns of a task that agree with each other widen it.
    NaN below two clusters."""
    with np.errstate(divide="ignore", invalid="ignore"):
        var = clusters / (clusters - 1) * resid_sq / (n.astype(np.float64) ** 2)
    return np.where(clusters >= 2, np.sqrt(var), np.nan)


def wilson_interval(successes: int, n: int, z: float = Z95) -> tuple[float, float] | None:
    """Wilson score interval of a binomial proportion (Wilson 1927)."""
    if n <= 0:
        return None
    p = successes / n
    denom = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    return max(0.0, centre - half), min(1.0, centre + half)


def wilson_effective(p: np.ndarray, var: np.ndarray, cap: np.ndarray, clusters: np.ndarray,
                     if_constant: np.ndarray, df_adjust: bool = True) -> tuple[np.ndarray, np.ndarray]:
    """Wilson's interval of a clustered proportion at its effective sample size (Korn & Graubard
    1998), per cell: n_eff = p(1−p)/var (the binomial size giving that variance), at most
    ``cap``; ``if_constant`` where var is 0 or p is 0 or 1 (nothing to estimate it from); with
    ``df_adjust``, scaled by (z/t_{C−1})² for the clusters' degrees of freedom. NaN below two
    clusters."""
    with np.errstate(divide="ignore", invalid="ignore"):
        neff = np.where((var > 0) & (p > 0) & (p < 1), np.minimum(cap, p * (1 - p) / var), if_constant)
        neff = np.where(clusters >= 2, neff, np.nan)
        if df_adjust:
            neff = neff * (Z95 / t975(clusters)) ** 2
        z2 = Z95 * Z95
        denom = 1 + z2 / neff
        centre = (p + z2 / (2 * neff)) / denom
        half = Z95 * np.sqrt(np.maximum(0.0, p * (1 - p) / neff + z2 / (4 * neff * neff))) / denom
    return np.maximum(0.0, centre - half), np.minimum(1.0, centre + half)


def quantiles_of_sorted(values: np.ndarray, offsets: np.ndarray, counts: np.ndarray,
                        qs: Sequence[float]) -> list[np.ndarray]:
    """Exact quantiles (linear interpolation, Hyndman & Fan type 7, term for term as numpy's
    ``quantile``) of many samples held sorted in ``values``: sample i is
    ``values[offsets[i]:offsets[i] + counts[i]]`` (counts ≥ 1)."""
    out = []
    last = counts - 1
    for q in qs:
        v = last * q
        lo = np.floor(v).astype(np.int64)
        hi = np.minimum(lo + 1, last)
        top = v >= last
        lo = np.where(top, last, lo)
        g = v - lo
        a, b = values[offsets + lo], values[offsets + hi]
        diff = b - a
        out.append(np.where(g >= 0.5, b - diff * (1 - g), a + diff * g))
    return out


def pass_hat_k_tasks(n: np.ndarray, c: np.ndarray, k: int) -> np.ndarray:
    """Per-task unbiased pass^k = C(c,k)/C(n,k) for tasks with n ≥ k (tau-bench)."""
    keep = n >= k
    nk, ck = n[keep], c[keep]
    return pass_hat_k(nk, ck, k)


def pass_hat_k(n: np.ndarray, c: np.ndarray, k: int) -> np.ndarray:
    """C(c,k)/C(n,k) elementwise, every n ≥ k."""
    if k <= 3 and (len(n) == 0 or int(n.max()) < _EXACT_COMBS):
        # C(x, k) as int64 products: exact below 2**53, so each quotient is the correctly rounded
        # one, as math.comb's int / int is.
        num, den = np.ones(len(n), dtype=np.int64), np.ones(len(n), dtype=np.int64)
        for i in range(k):
            num, den = num * (c - i), den * (n - i)
        fact = math.factorial(k)
        return (num // fact) / (den // fact)
    return np.array([math.comb(int(ci), k) / math.comb(int(ni), k) for ni, ci in zip(n, c, strict=True)],
                    dtype=np.float64)


# --- tests --------------------------------------------------------------------------------------


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


@dataclass(frozen=True)
class Labels:
    """The two windows of a regression test, as the permutation test exchanges them.

    ``strata``: per task with runs in both windows, its values (current window's first) and how
    many are current's; ``singles``: per task seen in one window only, the sum and count of its
    values, the current window's tasks first (``current_singles`` of them)."""

    strata: list[tuple[np.ndarray, int]]
    single_sums: np.ndarray
    single_counts: np.ndarray
    current_singles: int
    observed: float  # mean(current) − mean(baseline)
    total_sum: float
    total_n: int

    @staticmethod
    def of(cur: dict[int, np.ndarray], base: dict[int, np.ndarray], observed: float, total_sum: float) -> Labels:
        """From each window's values by task (sorted values; tasks ordered by their keys)."""
        strata = [(np.concatenate((cur[t], base[t])), len(cur[t])) for t in sorted(cur.keys() & base.keys())]
        singles = [cur[t] for t in sorted(cur.keys() - base.keys())] + [base[t] for t in sorted(base.keys() - cur.keys())]
        return Labels(strata=strata,
                      single_sums=np.array([float(s.sum()) for s in singles]),
                      single_counts=np.array([len(s) for s in singles], dtype=np.int64),
                      current_singles=len(cur.keys() - base.keys()),
                      observed=observed, total_sum=total_sum,
                      total_n=sum(len(v) for v in cur.values()) + sum(len(v) for v in base.values()))


class _Shuffles:
    """Draws of Σ (the current window's share) over the strata and the singles, one round of
    replicates at a time, always in the same order from one generator (so the draws do not
    depend on how many rounds a test takes)."""

    def __init__(self, labels: Labels, rng: Generator) -> None:
        self.labels, self.rng = labels, rng
        strata = labels.strata
        # Strata shuffled exactly, the least normal first (smallest min(k, m−k)), while their runs
        # total at most EXACT_RUNS; strata of equal (m, k) are shuffled in one array. The rest (a
        # cell with thousands of rerun tasks) contribute through the normal limit of their total:
        # each stratum's subset sum has mean k·v̄ and variance k(m−k)/(m(m−1))·Σ(v−v̄)², and they
        # are independent, so their sum over many strata is normal.
        order = sorted(range(len(strata)), key=lambda i: (min(strata[i][1], len(strata[i][0]) - strata[i][1]),
                                                          len(strata[i][0]), i))
        exact: dict[tuple[int, int], list[np.ndarray]] = {}
        budget, self.mean, var = EXACT_RUNS, 0.0, 0.0
        for i in order:
            values, k = strata[i]
            m = len(values)
            if m <= budget:
                budget -= m
                exact.setdefault((m, k), []).append(values)
            else:
                v = float(values.mean())
                self.mean += k * v
                var += k * (m - k) / (m * (m - 1)) * float(((values - v) ** 2).sum())
        self.sd = math.sqrt(var)
        # A small stratum draws one of its C(m, k) subset sums, listed once (exactly the same
        # distribution as shuffling it, for one integer per replicate); larger ones are shuffled.
        self.tables = [(len(group), _subset_sums(np.stack(group), k)) for (m, k), group in sorted(exact.items())
                       if m <= TABLE_RUNS]
        self.blocks = [(k, np.stack(group)) for (m, k), group in sorted(exact.items()) if m > TABLE_RUNS]
        self.fixed_n = sum(k for _, k in strata)

    def draw(self, rows: int) -> tuple[np.ndarray, np.ndarray]:
        """(current sum, current count) of ``rows`` replicates."""
        rng, lab = self.rng, self.labels
        s1 = self.mean + self.sd * rng.standard_normal(rows) if self.sd > 0 else np.full(rows, self.mean)
        n1 = np.full(rows, self.fixed_n, dtype=np.int64)
        for count, table in self.tables:
            picks = rng.integers(0, table.shape[1], size=(rows, count))
            s1 += table[np.arange(count), picks].sum(axis=1)
        for k, block in self.blocks:
            step = max(1, CHUNK // block.size)
            for lo in range(0, rows, step):
                hi = min(rows, lo + step)
                # Rows of a 2-d array, C-contiguous: the sum below adds in memory order.
                tiled = np.ascontiguousarray(np.broadcast_to(block, (hi - lo, *block.shape)).reshape(-1, block.shape[-1]))
                shuffled = rng.permuted(tiled, axis=1).reshape(hi - lo, *block.shape)
                s1[lo:hi] += shuffled[:, :, :k].sum(axis=(1, 2))
        if len(lab.single_counts):
            for lo, order in _subsets(len(lab.single_counts), lab.current_singles, rng, rows):
                s1[lo:lo + len(order)] += lab.single_sums[order].sum(axis=1)
                n1[lo:lo + len(order)] += lab.single_counts[order].sum(axis=1)
        return s1, n1


@functools.lru_cache(maxsize=64)
def _masks(m: int, k: int) -> np.ndarray:
    """Every k-subset of range(m) as a row of 0/1 (rows in increasing binary order)."""
    bits = (np.arange(1 << m)[:, None] >> np.arange(m)) & 1
    return bits[bits.sum(axis=1) == k].astype(np.float64)


def _subset_sums(block: np.ndarray, k: int) -> np.ndarray:
    """(strata, C(m, k)): every k-subset sum of each row of ``block``, added column by column."""
    masks = _masks(block.shape[1], k)
    out = np.zeros((block.shape[0], masks.shape[0]))
    for j in range(block.shape[1]):
        out += block[:, j:j + 1] * masks[:, j]
    return out


def _subsets(n: int, k: int, rng: Generator, reps: int) -> Iterator[tuple[int, np.ndarray]]:
    """(offset, rows of k indices): the first k of ``reps`` random permutations of range(n), at
    most :data:`CHUNK` values at a time so memory stays bounded for cells of many tasks."""
    step = max(1, CHUNK // max(n, 1))
    for lo in range(0, reps, step):
        rows = min(step, reps - lo)
        yield lo, rng.permuted(np.tile(np.arange(n), (rows, 1)), axis=1)[:, :k]


def stratified_permutation_p(labels: Labels, rng: Generator, reps: int = 9999,
                             stop_hits: int = STOP_HITS) -> float:
    """Two-sided p of mean(current) ≠ mean(baseline) by a permutation that respects tasks.

    A task with runs in both windows is a stratum: its runs' window labels are shuffled within
    it (its share of each window kept), so a task's own level cancels out, as in a blocked
    design. Tasks seen in one window only are exchanged whole between the windows. Under no
    change both moves leave the joint distribution unchanged.

    Permutations are drawn in rounds (:data:`FIRST_DRAWS`, then twice as many each round, up to
    ``reps``) and the test stops at the ``stop_hits``-th permutation as extreme as the observed
    statistic, with p = stop_hits / permutations drawn (Besag & Clifford 1991): a cell with no
    change stops after a few hundred. Otherwise p = (1 + hits) / (1 + reps); when fewer than
    :data:`TAIL_HITS` were as extreme, p comes from the normal approximation of the same
    permutation distribution (its mean and SD), since a p floored at ~1/reps could never pass
    Benjamini–Hochberg over hundreds of cells.
    """
    shuffles = _Shuffles(labels, rng)
    observed, total_s, total_n = labels.observed, labels.total_sum, labels.total_n
    # A relative tolerance: ties (common with 0/1 values) must count as "as extreme".
    cut = abs(observed) - 1e-12 * max(1.0, abs(observed))
    hits, drawn, kept = 0, 0, []
    rows = FIRST_DRAWS
    done = 0
    while done < reps:
        rows = min(rows, reps - done)
        s1, n1 = shuffles.draw(rows)
        done += rows
        valid = (n1 > 0) & (n1 < total_n)  # a labelling with an empty window has no statistic
        s1, n1 = s1[valid], n1[valid]
        stat = s1 / n1 - (total_s - s1) / (total_n - n1)
        extreme = np.abs(stat) >= cut
        found = int(extreme.sum())
        if hits + found >= stop_hits:
            at = int(np.flatnonzero(extreme)[stop_hits - hits - 1])
            return stop_hits / (drawn + at + 1)
        hits += found
        drawn += len(stat)
        kept.append(stat)
        rows *= 2
    monte_carlo = (1 + hits) / (1 + drawn)
    every = np.concatenate(kept) if kept else np.empty(0)
    sd = float(every.std()) if len(every) else 0.0
    if hits >= TAIL_HITS or sd == 0:
        return float(monte_carlo)
    z = abs(observed - float(every.mean())) / sd
    return float(min(monte_carlo, math.erfc(z / math.sqrt(2))))
