"""TFCL speed benchmarks (issue 3), measured side by side in one run; prints ratios.

1. U-step: partial eigensolver (``tfcl.ustep``) vs a U-step from the full dense
   ``numpy.linalg.eigh`` (``tfcl.ustep_dense``) at d = 2048, T = 250 (N = 2298), same U
   within 1e-8 (max entry of |U_partial - U_dense|), on (a) a dense W, (b) a sparse, nearly
   block-diagonal W like TFCL's late iterates (cold and warm-started), (c) an exactly
   block-diagonal W with zero rows (what TFCL produces at convergence).
2. Squared AUC loss + gradient, O(n d) identity vs brute-force pairs at n = 200, d = 100.
3. One TFCL-Q fit at SUN scale (T = 250 users x 50 labels, d = 2048): total time and time
   per iteration split into U-step, gradient and prox.

Run: python benchmarks/bench_tfcl.py [--quick]
"""
from __future__ import annotations

import sys
import time

import numpy as np

from mtlbench import TaskSet
from mtlbench_models._losses import SquaredAUCLoss, squared_auc_bruteforce
from mtlbench_models.tfcl import ustep, ustep_dense
from mtlbench_models.tfcl_q import TFCLQ


def best_of(fn, reps):
    best, out = np.inf, None
    for _ in range(reps):
        t = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - t)
    return best, out


def bench_ustep(reps: int) -> None:
    rng = np.random.default_rng(0)
    d, T, k = 2048, 250, 10
    dense_W = rng.standard_normal((d, T))
    fg, tg = rng.integers(0, k, d), np.repeat(np.arange(k), T // k)
    block = (fg[:, None] == tg[None, :]) & (rng.random((d, T)) < 0.3)
    near = np.where(block, rng.standard_normal((d, T)), 0.0)
    leak = rng.random((d, T)) < 2e-4           # a few weak cross-block edges: one component
    near[leak] = 1e-3
    exact = np.where(block, near, 0.0)
    exact[rng.random(d) < 0.3] = 0.0           # features dropped by the l1-like W-step
    print(f"U-step, d={d}, T={T} (N={d + T}), k={k}; best of {reps}")
    for label, W in (("dense W", dense_W), ("sparse nearly block-diagonal W", near),
                     ("exactly block-diagonal W (zero rows)", exact)):
        t_dense, ud = best_of(lambda: ustep_dense(W, k), reps)
        t_part, up = best_of(lambda: ustep(W, k), reps)
        W2 = W * (1 + 0.01 * rng.standard_normal(W.shape))   # next iterate, warm start
        t_warm, uw = best_of(lambda: ustep(W2, k, prev=up), reps)
        err = np.abs(ud.dense() - up.dense()).max()
        err_w = np.abs(ustep_dense(W2, k).dense() - uw.dense()).max()
        print(f"  {label:<40} dense eigh {t_dense:7.3f}s | partial {t_part:7.3f}s "
              f"({t_dense / t_part:6.1f}x) | warm {t_warm:7.3f}s ({t_dense / t_warm:6.1f}x) | "
              f"max|dU| {err:.1e} / {err_w:.1e} | case {up.case}, {up.stats['methods']}")


def bench_auc(reps: int) -> None:
    rng = np.random.default_rng(1)
    n, d = 200, 100
    X = rng.standard_normal((n, d))
    y = np.where(rng.random(n) < 0.3, 1.0, -1.0)
    ts = TaskSet.from_arrays("b", [X], [y])
    J = SquaredAUCLoss(ts)
    w = rng.standard_normal((d, 1))
    t_fast, (v1, g1) = best_of(lambda: J.value_and_grad(w), reps * 20)
    t_brute, (v2, g2) = best_of(lambda: squared_auc_bruteforce(X, y, w[:, 0]), reps * 5)
    print(f"Squared AUC loss + gradient, n={n}, d={d}: O(n d) {t_fast * 1e3:.3f} ms | "
          f"pairwise {t_brute * 1e3:.3f} ms | {t_brute / t_fast:.0f}x | "
          f"|dval| {abs(v1 - v2):.1e}, max|dgrad| {np.abs(g1[:, 0] - g2).max():.1e}")


def bench_sun_fit(max_iter: int) -> None:
    rng = np.random.default_rng(2)
    d, T, n, k = 2048, 250, 50, 10
    items = rng.standard_normal((14000, d)) / np.sqrt(d)
    groups = rng.integers(0, k, T)
    Wt = rng.standard_normal((d, k))
    index, labels = [], []
    for t in range(T):
        ix = rng.choice(items.shape[0], n, replace=False)
        s = items[ix] @ Wt[:, groups[t]] + 0.3 * rng.standard_normal(n)
        yt = np.where(s > np.quantile(s, 0.6), 1.0, -1.0)
        index.append(ix)
        labels.append(yt)
    ts = TaskSet.from_shared_items("sun-scale", items, index, labels)
    t = time.perf_counter()
    m = TFCLQ(k=k, max_iter=max_iter).fit(ts)
    total = time.perf_counter() - t
    tm, it = m.diagnostics_["timings"], m.n_iter_
    print(f"TFCL-Q fit at SUN scale (T={T}, {n} labels each, d={d}, k={k}): {total:.1f}s total, "
          f"{it} iterations ({'converged' if m.diagnostics_['converged'] else 'max_iter'}); per "
          f"iteration: U-step {tm['ustep'] / it * 1e3:.1f} ms, gradient "
          f"{tm['gradient'] / it * 1e3:.1f} ms, prox {tm['prox'] / it * 1e3:.1f} ms "
          f"(target: a full fit within 60 s on 2 cores)")


if __name__ == "__main__":
    quick = "--quick" in sys.argv
    bench_ustep(1 if quick else 3)
    bench_auc(3)
    bench_sun_fit(100)  # TFCL-Q's default max_iter
