"""Statistics of the leaderboards: Holm correction, Wilcoxon signed-rank, Friedman, ranks.

Pure functions of arrays of scores (no store, no rendering)."""
from __future__ import annotations

import math
from typing import Sequence

import numpy as np

from .schema import FriedmanResult

TIE_TOL = 1e-12


def holm(pvalues: Sequence[float]) -> list[float]:
    """Holm-adjusted p-values (same order as given).

    Sorted ascending p_(1) <= ... <= p_(m): adj_(i) = max_{j <= i} min(1, (m - j + 1) p_(j)).
    """
    p = np.asarray(pvalues, dtype=np.float64)
    m = p.shape[0]
    if m == 0:
        return []
    order = np.argsort(p, kind="stable")
    adj = np.empty(m)
    running = 0.0
    for rank, idx in enumerate(order):
        running = max(running, min(1.0, (m - rank) * p[idx]))
        adj[idx] = running
    return adj.tolist()


def wilcoxon_p(diffs: Sequence[float]) -> float | None:
    """Two-sided Wilcoxon signed-rank p-value of paired differences (None if no pairs)."""
    from scipy.stats import wilcoxon

    d = np.asarray(diffs, dtype=np.float64)
    if d.shape[0] == 0:
        return None
    if np.all(np.abs(d) <= TIE_TOL):
        return 1.0
    res = wilcoxon(d, alternative="two-sided", zero_method="wilcox")
    p = float(res.pvalue)
    return p if math.isfinite(p) else None


def min_attainable_p(n: int) -> float:
    """Smallest two-sided exact Wilcoxon signed-rank p-value with n non-zero pairs."""
    return min(1.0, 2.0 / 2.0 ** n) if n > 0 else 1.0


def block_ranks(scores: np.ndarray) -> np.ndarray:
    """Ranks (1 = highest score, ties averaged) along axis 1 of a (blocks x models) array."""
    from scipy.stats import rankdata

    return np.vstack([rankdata(-row, method="average") for row in scores]) if len(scores) \
        else np.empty((0, scores.shape[1] if scores.ndim == 2 else 0))


def friedman(scores: np.ndarray) -> FriedmanResult:
    """Friedman test on a (blocks x models) array of scores."""
    from scipy.stats import friedmanchisquare

    n_blocks, k = scores.shape if scores.ndim == 2 else (0, 0)
    out = FriedmanResult(blocks=int(n_blocks), models=int(k), statistic=None, p_value=None)
    if k < 3:
        out.reason = f"needs >= 3 models, got {k}"
    elif n_blocks < 2:
        out.reason = f"needs >= 2 complete blocks, got {n_blocks}"
    else:
        res = friedmanchisquare(*[scores[:, j] for j in range(k)])
        stat, p = float(res.statistic), float(res.pvalue)
        out.statistic = stat if math.isfinite(stat) else None
        out.p_value = p if math.isfinite(p) else None
        if out.p_value is None:
            out.reason = "undefined (every block ranks all models equally)"
    return out


__all__ = ["holm", "wilcoxon_p", "min_attainable_p", "block_ranks", "friedman", "TIE_TOL"]
