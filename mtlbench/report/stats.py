"""Statistics of the leaderboards: Holm correction, Wilcoxon signed-rank, Friedman, ranks.

Pure functions of arrays of scores (no store, no rendering)."""
from __future__ import annotations

import math
from typing import Sequence

import numpy as np

from .schema import FriedmanResult

TIE_TOL = 1e-12
#: Wilcoxon p-values are exact up to this many non-zero differences
EXACT_MAX_N = 25


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
    """Two-sided Wilcoxon signed-rank p-value of paired differences (None if no pairs).

    Convention: Wilcoxon's -- zero differences (|d| <= ``TIE_TOL``) are dropped; the others
    are ranked by |d| with tied |d| sharing their average rank (|d| equal to 1e-9 of the
    largest |d| count as tied, so that rounding of the scores does not split a tie).  The
    statistic is the sum of the ranks of the positive differences.  For n <= ``EXACT_MAX_N``
    non-zero differences the p-value is exact: the statistic's distribution over the 2^n
    equally likely sign assignments of these ranks (with ties), counted by
    :func:`signed_rank_null`, p = min(1, 2 min(P(T <= t), P(T >= t))).  Beyond, the normal
    approximation with the tie-corrected variance (no continuity correction).  All
    differences zero: p = 1."""
    d = np.asarray(diffs, dtype=np.float64)
    if d.shape[0] == 0:
        return None
    nz = d[np.abs(d) > TIE_TOL]
    if nz.shape[0] == 0:
        return 1.0
    ranks = signed_ranks(nz)
    t_plus = float(ranks[nz > 0].sum())
    if nz.shape[0] <= EXACT_MAX_N:
        counts = signed_rank_null(ranks)
        t2 = int(round(2 * t_plus))
        total = float(counts.sum())
        low, high = counts[:t2 + 1].sum() / total, counts[t2:].sum() / total
        return float(min(1.0, 2.0 * min(low, high)))
    from scipy.stats import norm

    n = nz.shape[0]
    _, tie_sizes = np.unique(ranks, return_counts=True)
    var = n * (n + 1) * (2 * n + 1) / 24.0 - float((tie_sizes ** 3 - tie_sizes).sum()) / 48.0
    z = (t_plus - n * (n + 1) / 4.0) / math.sqrt(var)
    return float(min(1.0, 2.0 * norm.sf(abs(z))))


def signed_ranks(nonzero: np.ndarray) -> np.ndarray:
    """Ranks of |d| (1 = smallest) with ties averaged; |d| within 1e-9 of max |d| of each
    other are ties."""
    from scipy.stats import rankdata

    a = np.abs(np.asarray(nonzero, dtype=np.float64))
    return rankdata(np.round(a / a.max(), 9), method="average")


def signed_rank_null(ranks: np.ndarray) -> np.ndarray:
    """Exact null distribution of the signed-rank statistic: ``counts[k]`` = number of the
    2^n sign assignments whose positive ranks sum to k / 2 (average ranks are multiples of
    1/2, so doubled ranks are integers; dynamic programming over the ranks, exact integer
    counts for n <= 62)."""
    doubled = np.rint(2 * np.asarray(ranks, dtype=np.float64)).astype(np.int64)
    counts = np.zeros(int(doubled.sum()) + 1, dtype=np.int64)
    counts[0] = 1
    for r in doubled:
        shifted = np.zeros_like(counts)
        shifted[r:] = counts[:counts.shape[0] - r]
        counts = counts + shifted
    return counts


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


__all__ = ["holm", "wilcoxon_p", "signed_ranks", "signed_rank_null", "EXACT_MAX_N",
           "min_attainable_p", "block_ranks", "friedman", "TIE_TOL"]
