"""Per-task AUC, the score of the protocol.

AUC is the Mann-Whitney statistic: the share of (positive, negative) pairs ranked correctly,
ties counted half.  Computed from average ranks in O(n log n), never from the n+ x n- pairs.
"""
from __future__ import annotations

import numpy as np

from .errors import DataValidationError


def auc_score(y: np.ndarray, scores: np.ndarray) -> float:
    """Rank-based AUC of ``scores`` for labels ``y`` in {-1, +1} (ties count 1/2).

    Parameters
    ----------
    y : array of shape (n,), values in {-1, +1}
    scores : array of shape (n,)
    """
    y = np.asarray(y)
    s = np.asarray(scores, dtype=np.float64)
    if y.shape != s.shape or y.ndim != 1:
        raise DataValidationError(
            f"auc_score: labels {y.shape} and scores {s.shape} must be equal 1-d shapes")
    if not np.all(np.isfinite(s)):
        raise DataValidationError("auc_score: scores contain NaN/inf")
    pos = y > 0
    n_pos = int(pos.sum())
    n_neg = y.shape[0] - n_pos
    if n_pos == 0 or n_neg == 0:
        raise DataValidationError("auc_score: AUC needs both classes")
    ranks = average_ranks(s)  # ties share the mean rank, i.e. count half
    return float((ranks[pos].sum() - n_pos * (n_pos + 1) / 2.0) / (n_pos * n_neg))


def average_ranks(s: np.ndarray) -> np.ndarray:
    """1-based ranks of ``s`` (n,), tied values sharing the mean of their ranks (the
    ``average`` method of ``scipy.stats.rankdata``, whose values it reproduces exactly: every
    rank is a whole or half number).  Plain numpy: the protocol scores every task of every
    fit, and scipy's per-call overhead was most of a LASSO unit's time at the paper's scale."""
    n = s.shape[0]
    order = np.argsort(s, kind="mergesort")
    sorted_s = s[order]
    first = np.empty(n, dtype=bool)
    first[:1] = True
    np.not_equal(sorted_s[1:], sorted_s[:-1], out=first[1:])
    starts = np.flatnonzero(first)
    counts = np.diff(np.append(starts, n))
    ranks = np.empty(n)
    ranks[order] = np.repeat(starts + (counts + 1) / 2.0, counts)
    return ranks

