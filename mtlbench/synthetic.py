"""Every synthetic data generator of mtlbench, once.

* :func:`make_simulated` — the TFCL paper's simulated data set (Experiments, "Simulated
  Dataset"), exactly as the paper states it: 100 users, 200 samples each (rows ~ N(0, I_80)),
  W (80 x 100) block diagonal with 5 blocks of (20, 20, 10, 20, 10) features x 20 users whose
  entries are N(C_b, 2.5^2) with C_b ~ U(0, K_b), K = (5, 5, 10, 15, 20); scores
  s_i = X_i w_i + N(0, 0.1^2); the 50 highest scores of each user labelled +1.  The true W and
  the feature/task groups are kept in ``meta`` for structure-recovery metrics.
* :func:`make_low_rank_tasks` — low-rank tasks at "SUN scale" for speed benchmarks and oracle
  tests (not a paper recipe).
* :func:`make_uneven_tasks` — tasks of different sizes (fewer and more samples than features),
  the conformance kit's shape test problem (not a paper recipe).
* :func:`make_attribute_items` and :func:`make_attribute_labels` — personalized attribute
  labels at the paper's Shoes scale (items with shared features, users who label items, users
  grouped by "shades of meaning" of an attribute): the ``synthetic-attributes`` dataset, which
  runs them through the same preprocessing as ``shoes`` (not a paper recipe; see its docstring).

The ``simulated`` dataset plugin and the conformance kit's test problems both use these, so the
core never imports a plugin to make data.

Every generator gives the same bits on every CPU, BLAS kernel and thread count: its matrix
products are :func:`mtlbench.reproducible.reproducible_matmul`, a norm is a numpy sum, and
``10 ** u`` is computed in decimal arithmetic (numpy's ``power`` differs in the last bit
between its SIMD versions); the rest is numpy's seeded random streams and IEEE-754 arithmetic.
"""
from __future__ import annotations

from decimal import Context, Decimal

import numpy as np

from .data import TaskSet
from .reproducible import reproducible_matmul

__all__ = ["make_simulated", "make_low_rank_tasks", "make_uneven_tasks", "make_attribute_items",
           "make_attribute_labels", "BLOCK_FEATURES", "USERS_PER_BLOCK", "CENTROID_UPPER"]

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
        s = reproducible_matmul(X, W[:, t]) + rng.normal(0.0, noise_std, size=n_samples)
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
    W = reproducible_matmul(rng.standard_normal((d, rank)), rng.standard_normal((rank, T)))
    W *= (1.0 / np.sqrt(d)) if scale is None else scale
    Xs, ys = [], []
    for t in range(T):
        X = rng.standard_normal((n, d))
        s = reproducible_matmul(X, W[:, t]) + noise * rng.standard_normal(n)
        ys.append(np.where(s > np.median(s), 1.0, -1.0))
        Xs.append(X)
    return TaskSet.from_arrays(name, Xs, ys)


def make_uneven_tasks(seed: int = 1, sizes=(9, 14, 23, 31, 48, 70), d: int = 12,
                      name: str = "uneven") -> TaskSet:
    """Tasks of sizes ``sizes`` over ``d`` features (some tasks have fewer samples than
    features, some more).  X_t ~ N(0, I); scores X_t (w_0 + 0.5 v_t) + N(0, 0.3^2) with
    w_0, v_t ~ N(0, I_d); labels +1 above the task's median, so at least 3 labels of each
    class per task for sizes >= 6."""
    rng = np.random.default_rng(seed)
    w0 = rng.standard_normal(d)
    Xs, ys = [], []
    for n in sizes:
        X = rng.standard_normal((n, d))
        s = reproducible_matmul(X, w0 + 0.5 * rng.standard_normal(d)) \
            + 0.3 * rng.standard_normal(n)
        ys.append(np.where(s > np.median(s), 1.0, -1.0))
        Xs.append(X)
    return TaskSet.from_arrays(name, Xs, ys,
                               task_names=[f"task{t}-n{n}" for t, n in enumerate(sizes)])


def make_attribute_items(seed: int = 0, n_items: int = 14658, n_features: int = 990,
                         latent_dim: int = 40, feature_noise: float = 0.5, *,
                         spectrum_decay: float = 1.0, tail: float = 0.0,
                         scale_decades: float = 0.0) -> tuple[np.ndarray, np.ndarray]:
    """Items with shared features, generated from latent item factors.

    Z (n_items x latent_dim) ~ N(0, diag((1 + j) ** -spectrum_decay)), j = 0 .. latent_dim - 1
    (a decaying spectrum, like image descriptors: the larger ``spectrum_decay``, the fewer
    directions carry the variance and the more correlated the features); features
    F = Z A + feature_noise * N(0, 1) with A (latent_dim x n_features) ~ N(0, 1 / latent_dim).
    Random stream ``SeedSequence([seed, 0])``.  Two options draw from streams of their own, so
    that at their neutral values (0) the data are those of the stream above bit for bit:

    * ``tail`` = 1 / nu > 0: heavy-tailed items (a multivariate Student-t with nu degrees of
      freedom, like GIST descriptors, where a few images carry far more energy than most):
      item i's row of Z and of the feature noise is multiplied by sqrt(nu / chi2_nu), drawn from
      ``SeedSequence([seed, 0, 1])``;
    * ``scale_decades`` = a > 0: feature f is multiplied by 10 ** u_f, u_f ~ U(-a/2, a/2)
      (features on unequal scales, as when descriptors of different kinds are concatenated),
      drawn from ``SeedSequence([seed, 0, 2])``.

    Returns ``(F, Z)``, float64 (n_items x n_features) and (n_items x latent_dim); labels are
    computed from the returned Z (heavy tails included).
    """
    rng = np.random.default_rng(np.random.SeedSequence([seed, 0]))
    variances = 1.0 + np.arange(latent_dim)
    if spectrum_decay != 1.0:
        variances = variances ** spectrum_decay
    scales = 1.0 / np.sqrt(variances)
    Z = rng.standard_normal((n_items, latent_dim)) * scales
    A = rng.standard_normal((latent_dim, n_features)) / np.sqrt(latent_dim)
    item_scale = None
    if tail > 0.0:
        nu = 1.0 / tail
        chi2 = np.random.default_rng(np.random.SeedSequence([seed, 0, 1])).chisquare(
            nu, size=n_items)
        item_scale = np.sqrt(nu / chi2)[:, None]
        Z = Z * item_scale
    F = reproducible_matmul(Z, A)
    noise = feature_noise * rng.standard_normal((n_items, n_features))
    F += noise if item_scale is None else noise * item_scale
    if scale_decades > 0.0:
        u = np.random.default_rng(np.random.SeedSequence([seed, 0, 2])).uniform(
            -0.5 * scale_decades, 0.5 * scale_decades, size=n_features)
        F *= _powers_of_ten(u)
    return F, Z


def _powers_of_ten(u: np.ndarray) -> np.ndarray:
    """10 ** u elementwise, in decimal arithmetic (34 digits; ``exp`` and ``ln`` correctly
    rounded) and then rounded to float64: the same bits on every machine."""
    ctx = Context(prec=34)
    ln10 = ctx.ln(Decimal(10))
    return np.array([float(ctx.exp(ctx.multiply(ln10, Decimal(float(x))))) for x in u])


def make_attribute_labels(seed: int, attribute: int, Z: np.ndarray, *, users: int = 200,
                          labels_per_user: int = 50, pool: int = 2000, shades: int = 3,
                          shade_spread: float = 0.8, personal_spread: float = 0.3,
                          one_sided: float = 0.06, label_noise: float = 0.1,
                          positive_share: float = 0.5) -> dict[str, np.ndarray]:
    """Personal labels of ``users`` annotators for attribute number ``attribute``.

    The attribute has a base direction b in the latent item space; each of its ``shades``
    "shades of meaning" (Kovashka & Grauman, IJCV 2015) is the unit vector of
    b + shade_spread * g_s (b, g_s unit vectors).  User u belongs to shade s(u) (shares drawn
    from a Dirichlet(2, ..., 2)) and scores item i by z_i . (v_s(u) + personal_spread * e_u),
    e_u ~ N(0, I / latent_dim).  Each user labels ``labels_per_user`` distinct items of the
    attribute's annotation pool (``pool`` items); the label is +1 when the score exceeds the
    user's own threshold, the pool's score quantile at 1 - positive_share + o_u with
    o_u ~ U(-0.15, 0.15) (``positive_share`` sets the class balance) --
    except for a ``one_sided`` share of users, whose quantile is 0.02 or 0.98 (they call nearly
    every item positive, or nearly none: the minority-class filter removes most of them).
    Finally each label is flipped with probability ``label_noise`` (annotator noise).
    Random stream ``SeedSequence([seed, 1, attribute])``: an attribute's labels do not depend
    on how many attributes are generated.

    Returns ``{"user": (m,) int, "item": (m,) int, "label": (m,) float in {-1, +1},
    "shade": (users,) int, "one_sided": (users,) bool}``, m = users * labels_per_user.
    """
    n_items, r = Z.shape
    if not 1 <= labels_per_user <= pool <= n_items:
        raise ValueError(f"need 1 <= labels_per_user ({labels_per_user}) <= pool ({pool}) "
                         f"<= n_items ({n_items})")
    rng = np.random.default_rng(np.random.SeedSequence([seed, 1, attribute]))
    unit = lambda v: v / np.sqrt(np.add.reduce(v * v))
    base = unit(rng.standard_normal(r))
    dirs = np.stack([unit(base + shade_spread * unit(rng.standard_normal(r)))
                     for _ in range(shades)])
    shade_of = rng.choice(shades, size=users, p=rng.dirichlet(np.full(shades, 2.0)))
    weights = dirs[shade_of] + personal_spread * rng.standard_normal((users, r)) / np.sqrt(r)
    pool_items = rng.choice(n_items, size=pool, replace=False)
    pool_scores = reproducible_matmul(Z[pool_items], weights.T)  # pool x users
    q = (1.0 - positive_share) + rng.uniform(-0.15, 0.15, size=users)
    lopsided = rng.random(users) < one_sided
    q[lopsided] = np.where(rng.random(int(lopsided.sum())) < 0.5, 0.02, 0.98)
    thresholds = np.array([np.quantile(pool_scores[:, u], q[u]) for u in range(users)])
    picks = np.stack([rng.choice(pool, size=labels_per_user, replace=False)
                      for _ in range(users)])                      # users x labels_per_user
    scores = np.take_along_axis(pool_scores.T, picks, axis=1)
    labels = np.where(scores > thresholds[:, None], 1.0, -1.0)
    flip = rng.random(labels.shape) < label_noise
    labels[flip] = -labels[flip]
    return {"user": np.repeat(np.arange(users), labels_per_user),
            "item": pool_items[picks].ravel(), "label": labels.ravel(),
            "shade": shade_of, "one_sided": lopsided}
