"""Every synthetic data generator of mtlbench, once.

* :func:`make_simulated` — the TFCL paper's simulated data set (Experiments, "Simulated
  Dataset"), exactly as the paper states it: 100 users, 200 samples each (rows ~ N(0, I_80)),
  W (80 x 100) block diagonal with 5 blocks of (20, 20, 10, 20, 10) features x 20 users whose
  entries are N(C_b, 2.5^2) with C_b ~ U(0, K_b), K = (5, 5, 10, 15, 20); scores
  s_i = X_i w_i + N(0, 0.1^2); the 50 highest scores of each user labelled +1.  The true W and
  the feature/task groups are kept in ``meta`` for structure-recovery metrics.
* :func:`make_low_rank_tasks` — low-rank tasks at "SUN scale" for speed benchmarks and oracle
  tests (not a paper recipe).

The ``simulated`` dataset plugin and the conformance kit's test problems both use these, so the
core never imports a plugin to make data.
"""
from __future__ import annotations

import numpy as np

from .data import TaskSet

__all__ = ["make_simulated", "make_low_rank_tasks", "BLOCK_FEATURES", "USERS_PER_BLOCK",
           "CENTROID_UPPER"]

BLOCK_FEATURES = (20, 20, 10, 20, 10)
USERS_PER_BLOCK = 20
CENTROID_UPPER = (5.0, 5.0, 10.0, 15.0, 20.0)


def make_simulated(seed: int = 0, n_samples: int = 200, n_positive: int = 50,
                   block_features=BLOCK_FEATURES, users_per_block: int = USERS_PER_BLOCK,
                   centroid_upper=CENTROID_UPPER, entry_std: float = 2.5,
                   noise_std: float = 0.1) -> TaskSet:
    """Generate the simulated problem.  Returns a TaskSet with ``meta`` holding
    ``true_W`` (d x T), ``feature_groups`` (d,) and ``task_groups`` (T,)."""
    rng = np.random.default_rng(seed)
    n_blocks = len(block_features)
    d = int(sum(block_features))
    T = n_blocks * users_per_block
    W = np.zeros((d, T))
    feature_groups = np.repeat(np.arange(n_blocks), block_features)
    task_groups = np.repeat(np.arange(n_blocks), users_per_block)
    centroids = rng.uniform(0.0, np.asarray(centroid_upper, dtype=np.float64))
    r0 = 0
    for b, nf in enumerate(block_features):
        c0 = b * users_per_block
        W[r0:r0 + nf, c0:c0 + users_per_block] = rng.normal(
            centroids[b], entry_std, size=(nf, users_per_block))
        r0 += nf
    Xs, ys = [], []
    for t in range(T):
        X = rng.standard_normal((n_samples, d))
        s = X @ W[:, t] + rng.normal(0.0, noise_std, size=n_samples)
        y = -np.ones(n_samples)
        y[np.argsort(-s, kind="stable")[:n_positive]] = 1.0
        Xs.append(X)
        ys.append(y)
    return TaskSet.from_arrays(
        "simulated", Xs, ys, task_names=[f"user{t:03d}" for t in range(T)],
        meta={"true_W": W, "feature_groups": feature_groups, "task_groups": task_groups,
              "centroids": centroids, "generator_seed": seed},
    )


def make_low_rank_tasks(seed: int = 0, T: int = 250, d: int = 2048, n: int = 50, rank: int = 5,
                        noise: float = 0.1, scale: float | None = None,
                        name: str = "low-rank") -> TaskSet:
    """Synthetic tasks for scale benchmarks and oracle tests (not a paper recipe).

    W = A B (d x T, rank ``rank``) times ``scale`` (default 1/sqrt(d)); each task has its own
    X_t (n x d) ~ N(0, I); scores X_t w_t + N(0, noise^2); labels +1 above the task's median.
    With the defaults this is the "SUN scale" of the issues: T = 250 users, 50 labels each,
    d = 2048 features.
    """
    rng = np.random.default_rng(seed)
    W = rng.standard_normal((d, rank)) @ rng.standard_normal((rank, T))
    W *= (1.0 / np.sqrt(d)) if scale is None else scale
    Xs, ys = [], []
    for t in range(T):
        X = rng.standard_normal((n, d))
        s = X @ W[:, t] + noise * rng.standard_normal(n)
        ys.append(np.where(s > np.median(s), 1.0, -1.0))
        Xs.append(X)
    return TaskSet.from_arrays(name, Xs, ys)
