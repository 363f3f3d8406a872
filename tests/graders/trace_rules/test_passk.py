from __future__ import annotations

from itertools import combinations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from graders.families.trace_rules.passk import (
    PassKAccumulator,
    TaskCounts,
    estimates,
    pass_at_k,
    pass_hat_k,
    strict_gate,
)


def test_worked_example():
    # n = 4, c = 3, k = 2 -> pass^2 = 3/6, pass@2 = 1.
    assert pass_hat_k(4, 3, 2) == 0.5
    assert pass_at_k(4, 3, 2) == 1.0


def test_edges():
    assert pass_hat_k(4, 1, 2) == 0.0  # c < k
    assert pass_at_k(4, 0, 2) == 0.0
    assert pass_at_k(5, 4, 2) == 1.0  # n - c < k
    assert pass_hat_k(3, 3, 3) == 1.0
    assert pass_hat_k(2, 2, 3) is None and pass_at_k(2, 2, 3) is None  # k > n: undefined
    assert pass_hat_k(0, 0, 1) is None
    assert estimates(2, 1, 3) == [
        {"k": 1, "pass_hat_k": 0.5, "pass_at_k": 0.5},
        {"k": 2, "pass_hat_k": 0.0, "pass_at_k": 1.0},
        {"k": 3, "pass_hat_k": None, "pass_at_k": None},
    ]


def test_strict_gate():
    assert strict_gate(3, 3) and not strict_gate(3, 2) and not strict_gate(0, 0)


@given(st.lists(st.booleans(), min_size=1, max_size=9), st.integers(1, 9))
def test_estimators_match_brute_force_over_subsets(outcomes, k):
    n, c = len(outcomes), sum(outcomes)
    if k > n:
        assert pass_hat_k(n, c, k) is None
        return
    subsets = list(combinations(outcomes, k))
    assert pass_hat_k(n, c, k) == pytest.approx(sum(all(s) for s in subsets) / len(subsets))
    assert pass_at_k(n, c, k) == pytest.approx(sum(any(s) for s in subsets) / len(subsets))


outcome = st.tuples(st.sampled_from(["a", "b", "c"]), st.booleans())


@given(st.lists(outcome), st.lists(outcome), st.lists(outcome))
def test_accumulator_associative_and_commutative(x, y, z):
    def acc(items):
        return PassKAccumulator().add_all(items)

    left = acc(x).merge(acc(y)).merge(acc(z))
    right = acc(x).merge(acc(y).merge(acc(z)))
    swapped = acc(z).merge(acc(y)).merge(acc(x))
    flat = acc(x + y + z)
    assert left.tasks == right.tasks == flat.tasks
    assert dict(swapped.tasks) == dict(flat.tasks)  # same counts, order may differ
    assert left.rows(3) == flat.rows(3)


def test_task_counts_row():
    assert TaskCounts(4, 3).row(2) == {
        "n": 4,
        "c": 3,
        "pass_hat_k_strict": False,
        "pass_k": [{"k": 1, "pass_hat_k": 0.75, "pass_at_k": 0.75}, {"k": 2, "pass_hat_k": 0.5, "pass_at_k": 1.0}],
    }
