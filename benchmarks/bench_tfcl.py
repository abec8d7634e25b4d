"""TFCL-family speed and convergence: old vs new side by side in one run, targets beside them.

"old" is the code of the landed tree the issues measured (git ref ``OLD_REF``, extracted with
``git show`` into a temporary package); "new" is this checkout.  One BLAS thread throughout
(as the protocol runs every unit).  Sections:

1. One fit per TFCL label on a simulated training split (simulated data of generator seed
   101, protocol split seed 0, repetition 0: 100 tasks x 136 rows x 80 features) at the
   hyperparameters the default adaptive search (20 fits) selected there by validation
   (``SELECTED``; ``mtlbench compare --datasets "simulated[seed=101]" --reps 1``).  Old and
   new fit the same problem: the old code is run in
   ``lam_scale="absolute"`` mode with the alphas the new code derived (``alpha_*``), with its
   own iteration cap.  Printed per label: median time over ``--reps`` interleaved runs,
   iterations and converged for old / Alg. to the letter (new code, ``accelerate=False``,
   cap 2000) / new (accelerated), the relative objective differences, and the 0.3 s target.
2. SUN scale (``mtlbench.synthetic``'s low-rank tasks: T = 250 users x 50 labels, d = 2048):
   one new fit per label at its default hyperparameters, the per-unit precomputation
   (``TaskSet.memo``) timed apart, with the targets
   (TFCL-Q <= 15 s, the others <= 30 s), iterations, converged and the time split.
3. Micro-benchmarks: the partial-spectrum U-step vs dense eigh at d = 2048, T = 250; the
   O(n d) squared AUC loss vs brute-force pairs.
4. ``--paper-scale``: one fit per label and point on the training split of
   ``synthetic-attributes`` attr0 (seed 0 split, rep 0: 192 tasks x 34 rows x 100 features, the
   paper's Shoes scale), old (``--old-ref``, default ``main`` at the time of the polish) vs new
   at the same absolute alphas, over points from today's starting grids to 10-100x beyond
   them (``PAPER_POINTS``): CPU seconds, iterations, converged, the final objectives' relative
   difference (new - old) / max(1, |old|) (negative: new lower), and per label the median
   ratio of times and the spread of the differences.  ``--seed 101``: the design data
   (``synthetic-attributes[seed=101]``) instead of the default generator seed 0.

``--design`` prints the validation sweep the starting grids were designed from (simulated
seed 101 only; module docstrings of ``tfcl.py`` / ``tfcl_q.py``).

Run: python benchmarks/bench_tfcl.py [--reps 3] [--skip-sun] [--only-sun] [--design]
     python benchmarks/bench_tfcl.py --paper-scale [--old-ref main] [--labels tfcl,tfcl-q]
                                     [--seed 101]
"""
from __future__ import annotations

import argparse
import importlib
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from threadpoolctl import threadpool_limits

OLD_REF = "00507cd"
ROOT = Path(__file__).resolve().parents[1]
# label -> (hyperparameters selected by validation on the design split, new class name)
SELECTED = {
    "tfcl": dict(lam_group=0.05, k=5, lam_ridge=0.01),
    "tfcl-noauc": dict(lam_group=0.08, k=6),
    "tfcl-q": dict(lam_group=0.05, k=4, lam_common=10.0, lam_personal=1.0),
    "tfcl-q-noauc": dict(lam_group=0.08, k=4, lam_common=100.0, lam_personal=1.0),
    "tfcl-q-nog": dict(lam_common=0.03, lam_personal=0.086),
    "tfcl-coc": dict(lam_group=0.1, k=4, lam_common=0.01, lam_personal=0.3),
}
TARGET_SIM = 0.3
TARGET_SUN = {"tfcl-q": 15.0}
TARGET_SUN_OTHER = 30.0


def old_package():
    """Import the TFCL modules of ``OLD_REF`` as the package ``mtlbench_models_old``."""
    tmp = Path(tempfile.mkdtemp(prefix="tfcl_old_"))
    pkg = tmp / "mtlbench_models_old"
    pkg.mkdir()
    files = subprocess.run(["git", "-C", str(ROOT), "ls-tree", "-r", "--name-only", OLD_REF,
                            "plugins/mtlbench_models/"], capture_output=True, text=True,
                           check=True).stdout.split()
    for f in files:
        if f.endswith(".py"):
            src = subprocess.run(["git", "-C", str(ROOT), "show", f"{OLD_REF}:{f}"],
                                 capture_output=True, text=True, check=True).stdout
            dest = pkg / Path(f).relative_to("plugins/mtlbench_models")
            dest.parent.mkdir(parents=True, exist_ok=True)
            dest.write_text(src)
    sys.path.insert(0, str(tmp))
    return (importlib.import_module("mtlbench_models_old.tfcl"),
            importlib.import_module("mtlbench_models_old.tfcl_q"))


def new_classes():
    from mtlbench_models.tfcl import TFCL, TFCLNoAUC
    from mtlbench_models.tfcl_q import TFCLCoc, TFCLQ, TFCLQNoAUC, TFCLQNoG

    return {c.name: c for c in (TFCL, TFCLNoAUC, TFCLQ, TFCLQNoAUC, TFCLQNoG, TFCLCoc)}


def old_model(old, label, new_fit):
    """The old class at the same problem: absolute alphas taken from the new fit."""
    o_tfcl, o_q = old
    if label in ("tfcl", "tfcl-noauc"):
        cls = o_tfcl.TFCLNoAUC if label == "tfcl-noauc" else o_tfcl.TFCL
        return cls(lam_group=new_fit.alpha_group_, lam_ridge=new_fit.alpha_ridge_,
                   k=new_fit.k, lam_scale="absolute")
    cls = {"tfcl-q": o_q.TFCLQ, "tfcl-q-noauc": o_q.TFCLQNoAUC, "tfcl-q-nog": o_q.TFCLQNoG,
           "tfcl-coc": o_q.TFCLCoc}[label]
    a = new_fit.alpha_
    return cls(lam_common=a["common"], lam_group=a["group"], lam_ridge=a["ridge"],
               lam_personal=a["personal"], k=new_fit.k, lam_scale="absolute")


def design_split(seed: int = 101):
    from mtlbench.protocol import ProtocolConfig, make_split
    from mtlbench_datasets.simulated import make_simulated

    ts = make_simulated(seed)
    sp = make_split(ts, ProtocolConfig(seed=0), 0)
    return (ts.subset(sp.train, name="simulated[train]", meta={}),
            ts.subset(sp.val, name="simulated[val]", meta={}))


def timed_fit(model, tasks):
    """Wall-clock seconds, CPU seconds of this process (one BLAS thread: equal to the wall
    time on an idle machine, and much less sensitive to other processes), fitted model."""
    t, c = time.perf_counter(), time.process_time()
    model.fit(tasks)
    return time.perf_counter() - t, time.process_time() - c, model


def conv_of(m) -> bool:
    c = getattr(m, "converged_", None)
    return bool(m.diagnostics_.get("converged")) if c is None else bool(c)


def rel(a: float, b: float) -> float:
    return abs(a - b) / max(1.0, abs(b))


def bench_simulated(reps: int) -> None:
    old = old_package()
    new = new_classes()
    train, _ = design_split()
    print(f"1. One fit on a simulated training split ({train.T} tasks x "
          f"{train.X(0).shape[0]} x {train.d}), at the selected hyperparameters; median of "
          f"{reps} interleaved runs, one BLAS thread; old = {OLD_REF}")
    print(f"{'label':<13} {'old s':>7} {'it':>4} {'conv':>5} | "
          f"{'Alg. s':>7} {'it':>5} {'conv':>5} | "
          f"{'new s':>7} {'cpu s':>6} {'it':>4} {'conv':>5} | {'old/new':>7} | {'dF new-Alg':>10} "
          f"{'dF new-old':>10} | target  met (cpu)")
    for label, params in SELECTED.items():
        cls = new[label]
        cls(**params).fit(train)                 # warm the per-data memo (shared in a search)
        t_new, c_new, t_old = [], [], []
        m_new = m_old = None
        for _ in range(reps):
            dt, dc, m_new = timed_fit(cls(**params), train)
            t_new.append(dt)
            c_new.append(dc)
            dt, _, m_old = timed_fit(old_model(old, label, m_new), train)
            t_old.append(dt)
        t_alg, _, m_alg = timed_fit(cls(accelerate=False, **params), train)
        f_new, f_old = m_new.objective_history_[-1], m_old.objective_history_[-1]
        f_alg = m_alg.objective_history_[-1]
        med_new, med_old = float(np.median(t_new)), float(np.median(t_old))
        cpu_new = float(np.median(c_new))
        print(f"{label:<13} {med_old:7.3f} {m_old.n_iter_:4d} {str(conv_of(m_old)):>5} | "
              f"{t_alg:7.3f} {m_alg.n_iter_:5d} {str(m_alg.converged_):>5} | "
              f"{med_new:7.3f} {cpu_new:6.3f} {m_new.n_iter_:4d} {str(m_new.converged_):>5} | "
              f"{med_old / med_new:6.1f}x | {rel(f_new, f_alg):10.1e} {rel(f_new, f_old):10.1e} | "
              f"{TARGET_SIM:5.1f} s  "
              f"{'yes' if med_new <= TARGET_SIM and m_new.converged_ else 'NO'}"
              f" ({'yes' if cpu_new <= TARGET_SIM and m_new.converged_ else 'NO'})",
              flush=True)
    print("   dF = |F_a - F_b| / max(1, |F_b|) of the final (P)/(Q) objectives; old stops at its "
          "cap (100 / 200) unconverged where conv = False; (P), (Q) are non-convex, so the "
          "variants may end at different critical points.")


def bench_sun(labels) -> None:
    from mtlbench.synthetic import make_low_rank_tasks

    new = new_classes()
    ts = make_low_rank_tasks(seed=0)
    print(f"2. SUN scale (T={ts.T} users x 50 labels, d={ts.d}), default hyperparameters, "
          "one BLAS thread")
    from mtlbench_models.tfcl import loss_at_zero, make_loss
    from mtlbench_models.tfcl_q import common_lipschitz

    for label in labels:
        # What a search computes once per unit (TaskSet.memo): the loss object, grad J(0)
        # and, for TFCL-Q, lambda_max(sum_t H_t).  Timed apart, as in section 1.
        model = new[label]()
        c0 = time.process_time()
        J = make_loss(ts, model.loss, label)
        loss_at_zero(ts, J, model.loss)
        if label.startswith("tfcl-q") or label == "tfcl-coc":
            ts.memo(("tfcl", "common_lipschitz", model.loss),
                    lambda: common_lipschitz(J, ts.d, ts.T))
        pre = time.process_time() - c0
        dt, dc, m = timed_fit(model, ts)
        tm = m.diagnostics_["timings"]
        target = TARGET_SUN.get(label, TARGET_SUN_OTHER)
        print(f"   {label:<13} {dt:7.1f} s (cpu {dc:6.1f} s) {m.n_iter_:4d} it  converged "
              f"{m.converged_!s:<5} | "
              f"U-step {tm['ustep']:6.1f} s, gradients {tm['gradient']:6.1f} s, prox "
              f"{tm['prox']:5.1f} s | target {target:.0f} s: "
              f"{'met' if dt <= target and m.converged_ else 'MISSED'} (cpu: "
              f"{'met' if dc <= target and m.converged_ else 'MISSED'}); once per unit: "
              f"{pre:.1f} s cpu", flush=True)


def bench_micro(reps: int) -> None:
    from mtlbench import TaskSet
    from mtlbench_models._losses import SquaredAUCLoss, squared_auc_bruteforce
    from mtlbench_models.tfcl import ustep, ustep_dense

    rng = np.random.default_rng(0)
    d, T, k = 2048, 250, 10
    fg, tg = rng.integers(0, k, d), np.repeat(np.arange(k), T // k)
    block = (fg[:, None] == tg[None, :]) & (rng.random((d, T)) < 0.3)
    exact = np.where(block, rng.standard_normal((d, T)), 0.0)
    exact[rng.random(d) < 0.3] = 0.0
    print(f"3. U-step, d={d}, T={T}, k={k}, block-diagonal W with zero rows")
    t0 = time.perf_counter()
    ud = ustep_dense(exact, k)
    t_dense = time.perf_counter() - t0
    t0 = time.perf_counter()
    up = ustep(exact, k)
    t_part = time.perf_counter() - t0
    print(f"   dense eigh {t_dense:.3f} s | partial {t_part:.3f} s ({t_dense / t_part:.0f}x) | "
          f"max|dU| {np.abs(ud.dense() - up.dense()).max():.1e}")
    n = 200
    X = rng.standard_normal((n, 100))
    y = np.where(rng.random(n) < 0.3, 1.0, -1.0)
    J = SquaredAUCLoss(TaskSet.from_arrays("b", [X], [y]))
    w = rng.standard_normal((100, 1))
    t0 = time.perf_counter()
    for _ in range(20 * reps):
        v1, g1 = J.value_and_grad(w)
    t_fast = (time.perf_counter() - t0) / (20 * reps)
    t0 = time.perf_counter()
    v2, g2 = squared_auc_bruteforce(X, y, w[:, 0])
    t_brute = time.perf_counter() - t0
    print(f"   squared AUC loss + gradient, n={n}, d=100: O(n d) {t_fast * 1e3:.3f} ms | pairs "
          f"{t_brute * 1e3:.3f} ms | |dval| {abs(v1 - v2):.1e}, "
          f"max|dgrad| {np.abs(g1[:, 0] - g2).max():.1e}")


# label -> points (beyond the starting grids: lam_group / lam_ridge / lam_common 10-100x weaker
# and stronger, large k); new units (lam_scale="data")
PAPER_POINTS = {
    "tfcl": [dict(lam_group=g, k=k, lam_ridge=r) for g, k, r in [
        (0.02, 2, 1e-3), (0.05, 4, 1e-3), (0.12, 8, 1e-3), (0.005, 2, 1e-3), (0.02, 16, 1e-2),
        (0.002, 32, 1e-3), (0.05, 2, 1e-5), (0.02, 4, 1.0), (0.01, 64, 1e-3)]],
    "tfcl-noauc": [dict(lam_group=g, k=k, lam_ridge=r) for g, k, r in [
        (0.05, 2, 1e-3), (0.08, 4, 1e-3), (0.13, 8, 1e-3), (0.01, 2, 1e-3), (0.02, 16, 1e-2),
        (0.005, 32, 1e-4), (0.05, 2, 1.0)]],
    "tfcl-q": [dict(lam_group=g, k=k, lam_ridge=r, lam_common=c, lam_personal=p)
               for g, k, r, c, p in [(0.02, 2, 1e-3, 10, 1), (0.05, 4, 1e-3, 10, 1),
                                     (0.12, 8, 1e-3, 1, 1), (0.12, 4, 1e-3, 0.01, 0.1),
                                     (0.005, 16, 1e-2, 0.1, 0.3), (0.05, 2, 1e-5, 100, 10),
                                     # over the start ranges, personal users included
                                     (0.004, 2, 0.3, 0.01, 0.03), (0.01, 3, 1e-3, 0.1, 0.05),
                                     (0.03, 5, 0.03, 1, 0.1), (0.07, 7, 0.003, 30, 0.15),
                                     (0.1, 8, 1.0, 3, 0.5), (0.02, 6, 0.01, 0.03, 0.07)]],
    "tfcl-coc": [dict(lam_group=g, k=k, lam_ridge=r, lam_common=c, lam_personal=p)
                 for g, k, r, c, p in [(0.01, 2, 1e-3, 0.1, 0.3), (0.1, 4, 1e-3, 0.1, 0.3),
                                       (1, 8, 1e-3, 0.1, 0.3), (0.1, 1, 1e-3, 10, 0.3),
                                       (0.001, 16, 1e-2, 1, 0.03), (10, 2, 1e-5, 0.01, 3),
                                       # the fit a seed-101 unit capped at 2,000 sweeps
                                       (1.52, 7, 0.0035, 8.11, 0.107),
                                       (43, 4, 1e-3, 0.05, 0.13), (0.3, 3, 0.01, 1, 0.05),
                                       (5, 6, 3e-4, 30, 0.2)]],
    "tfcl-q-nog": [dict(lam_common=c, lam_personal=p) for c, p in [
        (0.003, 0.03), (0.03, 0.1), (0.3, 0.3), (0.0003, 0.01), (3, 1), (0.03, 3),
        (0.001, 0.1), (0.01, 0.05), (0.1, 0.2), (1, 0.03)]],
}
PAPER_POINTS["tfcl-q-noauc"] = PAPER_POINTS["tfcl-q"]


def bench_paper_scale(labels, seed: int = 0) -> None:
    import pickle

    from mtlbench.plugins import get_registry
    from mtlbench.protocol import ProtocolConfig, evaluable_tasks, make_split, restrict_tasks

    old = old_package()
    new = new_classes()
    ts = get_registry().dataset(f"synthetic-attributes[seed={seed}]").load("attr0")
    ts = restrict_tasks(ts, evaluable_tasks(ts)[0])
    sp = make_split(ts, ProtocolConfig(), 0)
    train = ts.subset(sp.train, name="attr0[train]", meta={})
    pickle.dumps(train)                          # (the same object for old and new)
    print(f"4. One fit per point, synthetic-attributes[seed={seed}] attr0 training split "
          f"({train.T} tasks x ~{train.X(0).shape[0]} x {train.d}); CPU seconds, one BLAS "
          f"thread; old = {OLD_REF}")
    print(f"{'label':<13} {'point':<58} {'old s':>6} {'it':>5} {'conv':>5} | {'new s':>6} "
          f"{'it':>4} {'conv':>5} | {'old/new':>7} | {'dF rel':>9}")
    for label in labels:
        ratios, diffs = [], []
        for params in PAPER_POINTS[label]:
            _, c_new, m_new = timed_fit(new[label](**params), train)
            _, c_old, m_old = timed_fit(old_model(old, label, m_new), train)
            f_new, f_old = m_new.objective_history_[-1], m_old.objective_history_[-1]
            dF = (f_new - f_old) / max(1.0, abs(f_old))
            ratios.append(c_old / c_new)
            diffs.append(dF)
            point = ", ".join(f"{k}={v:g}" for k, v in params.items())
            print(f"{label:<13} {point:<58} {c_old:6.2f} {m_old.n_iter_:5d} "
                  f"{str(conv_of(m_old)):>5} | {c_new:6.3f} {m_new.n_iter_:4d} "
                  f"{str(m_new.converged_):>5} | {c_old / c_new:6.1f}x | {dF:9.1e}", flush=True)
        print(f"{label:<13} median old/new {np.median(ratios):.1f}x; dF from {min(diffs):.1e} "
              f"to {max(diffs):.1e} (median {np.median(diffs):.1e})", flush=True)


def design() -> None:
    """The validation sweep on simulated seed 101 the starting grids were designed from."""
    from mtlbench.protocol import mean_auc

    new = new_classes()
    train, val = design_split()
    sweeps = {
        "tfcl": ([0.005, 0.01, 0.02, 0.05, 0.1, 0.2], [2, 4, 8, 16], {}),
        "tfcl-noauc": ([0.03, 0.06, 0.09, 0.13], [3, 4, 5, 8], {}),
        "tfcl-q": ([0.02, 0.05, 0.12], [2, 4, 8], {"lam_common": 1.0}),
        "tfcl-q-noauc": ([0.04, 0.06, 0.09], [2, 4, 8], {"lam_common": 1.0}),
        "tfcl-coc": ([0.01, 0.1, 1.0], [2, 4, 8], {"lam_common": 0.1}),
    }
    for label, (lams, ks, extra) in sweeps.items():
        print(f"{label} {extra}: mean validation AUC x100 (iterations), rows k, columns lam_group")
        print("      " + " ".join(f"{lg:>12g}" for lg in lams))
        for k in ks:
            cells = []
            for lg in lams:
                m = new[label](lam_group=lg, k=k, **extra).fit(train)
                cells.append(f"{100 * mean_auc(m, val)[0]:6.2f} ({m.n_iter_:3d})")
            print(f"{k:5d} " + " ".join(f"{c:>12}" for c in cells), flush=True)
    print("tfcl-q-nog: rows lam_common, columns lam_personal")
    for lc in (0.01, 0.1, 1.0):
        nog = new['tfcl-q-nog']
        cells = [f"{100 * mean_auc(nog(lam_common=lc, lam_personal=lp).fit(train), val)[0]:6.2f}"
                 for lp in (0.03, 0.1, 0.3, 1.0)]
        print(f"{lc:5g} " + " ".join(f"{c:>8}" for c in cells), flush=True)


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--skip-sun", action="store_true")
    ap.add_argument("--only-sun", action="store_true")
    ap.add_argument("--sun-labels", default=",".join(SELECTED))
    ap.add_argument("--design", action="store_true")
    ap.add_argument("--paper-scale", action="store_true")
    ap.add_argument("--old-ref", default=OLD_REF)
    ap.add_argument("--labels", default=",".join(SELECTED))
    ap.add_argument("--seed", type=int, default=0,
                    help="--paper-scale: synthetic-attributes generator seed (101: design data)")
    args = ap.parse_args()
    OLD_REF = args.old_ref
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    with threadpool_limits(limits=1):
        if args.design:
            design()
            sys.exit(0)
        if args.paper_scale:
            bench_paper_scale(args.labels.split(","), args.seed)
            sys.exit(0)
        if not args.only_sun:
            bench_simulated(args.reps)
        if not args.skip_sun:
            bench_sun(args.sun_labels.split(","))
        if not args.only_sun:
            bench_micro(args.reps)
