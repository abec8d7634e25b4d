import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from mtlbench import DataValidationError, auc_score


def brute_force_auc(y, s):
    pos, neg = s[y > 0], s[y < 0]
    wins = (pos[:, None] > neg[None, :]).sum() + 0.5 * (pos[:, None] == neg[None, :]).sum()
    return wins / (len(pos) * len(neg))


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.booleans(), st.integers(-5, 5)), min_size=2, max_size=60))
def test_auc_equals_brute_force_pair_count_with_ties(pairs):
    y = np.array([1.0 if p else -1.0 for p, _ in pairs])
    s = np.array([float(v) for _, v in pairs])  # small integer range: many ties
    if len(set(y)) < 2:
        with pytest.raises(DataValidationError):
            auc_score(y, s)
        return
    assert auc_score(y, s) == pytest.approx(brute_force_auc(y, s), abs=1e-12)


def test_auc_extremes_and_constant_scores():
    y = np.array([1, 1, -1, -1.0])
    assert auc_score(y, np.array([4, 3, 2, 1.0])) == 1.0
    assert auc_score(y, np.array([1, 2, 3, 4.0])) == 0.0
    assert auc_score(y, np.zeros(4)) == 0.5


def test_auc_rejects_bad_scores():
    with pytest.raises(DataValidationError, match="NaN"):
        auc_score(np.array([1, -1.0]), np.array([np.nan, 0.0]))
    with pytest.raises(DataValidationError, match="shapes"):
        auc_score(np.array([1, -1.0]), np.array([0.0]))


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(-4, 4) | st.floats(-1e3, 1e3, allow_nan=False), min_size=1,
                max_size=80))
def test_average_ranks_reproduce_scipy_rankdata_exactly(values):
    from scipy.stats import rankdata

    from mtlbench.metrics import average_ranks

    s = np.array(values, dtype=np.float64)
    np.testing.assert_array_equal(average_ranks(s, rtol=0.0), rankdata(s))
