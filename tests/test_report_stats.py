"""Exact Wilcoxon signed-rank p-values, checked against brute force."""
from __future__ import annotations

import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.stats import rankdata, wilcoxon

from mtlbench.report.stats import EXACT_MAX_N, min_attainable_p, signed_rank_null, wilcoxon_p


def brute_force_p(diffs):
    """Two-sided p over all 2^n sign flips of the non-zero |d| (zeros dropped, ties averaged):
    the fraction of flips whose positive-rank sum is at least as extreme, each side."""
    d = np.asarray([x for x in diffs if x != 0], dtype=float)
    if d.size == 0:
        return 1.0
    ranks = rankdata(np.abs(d))
    t = ranks[d > 0].sum()
    sums = np.array([sum(r for r, s in zip(ranks, signs) if s)
                     for signs in itertools.product((0, 1), repeat=d.size)])
    low, high = np.mean(sums <= t + 1e-9), np.mean(sums >= t - 1e-9)
    return min(1.0, 2 * min(low, high))


# small integers: many tied |d| and zeros
@settings(max_examples=150, deadline=None)
@given(st.lists(st.integers(-4, 4), min_size=1, max_size=11))
def test_exact_p_equals_brute_force_enumeration_with_ties_and_zeros(ints):
    assert wilcoxon_p(ints) == pytest.approx(brute_force_p(ints), rel=1e-12, abs=1e-15)


@pytest.mark.parametrize("diffs", [
    [1, 1, 1, 2, 2, -3, 0, 0, 4],             # ties at both ends and zeros
    [0.5, -0.5, 0.5, -0.5, 1.0, 1.0, -2.0],    # half ranks everywhere
    [3, 3, 3, 3, 3, 3, 3],                     # one tie group, all positive
])
def test_hand_picked_cases_with_ties(diffs):
    assert wilcoxon_p(diffs) == pytest.approx(brute_force_p(diffs), rel=1e-12)


def test_all_positive_with_ties_reaches_the_smallest_attainable_p():
    """Lenk, best model against stl: 15 positive differences, two of equal size; scipy fell
    back to the normal approximation (0.00065), the exact p is 2 / 2^15."""
    d = [6.3559322, 6.3559322, 6.45, 9.18, 9.27, 10.2, 10.26, 10.83, 10.88, 11.16, 11.96,
         13.84, 15.16, 15.63, 17.0]
    assert wilcoxon_p(d) == pytest.approx(min_attainable_p(15), rel=1e-12)
    assert wilcoxon_p([-x for x in d]) == pytest.approx(min_attainable_p(15), rel=1e-12)


def test_differences_equal_up_to_rounding_are_tied():
    a = [0.1 + 0.2, 0.3, 0.7, -1.1, 1.3]      # 0.1 + 0.2 != 0.3 in floating point
    assert wilcoxon_p(a) == pytest.approx(brute_force_p([0.3, 0.3, 0.7, -1.1, 1.3]), rel=1e-12)


@settings(max_examples=40, deadline=None)
@given(st.lists(st.integers(-1000, 1000).filter(bool), min_size=1, max_size=EXACT_MAX_N,
                unique_by=abs))
def test_without_ties_or_zeros_it_is_scipys_exact_test(ints):
    d = [0.0137 * i for i in ints]
    assert wilcoxon_p(d) == pytest.approx(wilcoxon(d, method="exact").pvalue, rel=1e-9)


def test_beyond_the_exact_range_the_normal_approximation():
    rng = np.random.default_rng(3)
    d = rng.standard_normal(EXACT_MAX_N + 15) + 0.3
    assert wilcoxon_p(d) == pytest.approx(wilcoxon(d, method="approx").pvalue, rel=1e-9)


def test_null_distribution_counts_every_sign_assignment():
    counts = signed_rank_null(np.array([1.5, 1.5, 3.0, 4.0]))
    assert counts.sum() == 2 ** 4
    assert np.array_equal(counts, counts[::-1])  # symmetric about half the rank sum


def test_degenerate_inputs():
    assert wilcoxon_p([]) is None
    assert wilcoxon_p([0.0, 0.0]) == 1.0
    assert wilcoxon_p([1.0]) == 1.0
