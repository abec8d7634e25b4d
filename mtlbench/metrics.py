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
        raise DataValidationError(f"auc_score: labels {y.shape} and scores {s.shape} must be equal 1-d shapes")
    if not np.all(np.isfinite(s)):
        raise DataValidationError("auc_score: scores contain NaN/inf")
    pos = y > 0
    n_pos = int(pos.sum())
    n_neg = y.shape[0] - n_pos
    if n_pos == 0 or n_neg == 0:
        raise DataValidationError("auc_score: AUC needs both classes")
    from scipy.stats import rankdata  # lazy: keeps `import mtlbench` (and pytest startup) light

    ranks = rankdata(s)  # average ranks: ties share the mean rank, i.e. count half
    return float((ranks[pos].sum() - n_pos * (n_pos + 1) / 2.0) / (n_pos * n_neg))

