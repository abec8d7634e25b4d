"""AMTL, VSTG-MTL and NC-CMTL: single-fit time, iterations, convergence and objective, old vs new.

"old" is the implementation of git ref ``OLD_REF`` (``--ref``; default: the tree that landed
before this round's speed work, ``git show REF:plugins/mtlbench_models/X.py``, imported from a
temporary copy), "new" is the working tree.  Both are fitted at the SAME hyperparameters, and
both objectives are evaluated by the same function, so
the "F old" and "F new" columns are comparable.  The rows print beside the issue-13 targets:
<= 0.3 s median on a simulated training split (100 tasks x 136 x 80), <= 30 s at SUN scale
(T = 250, 50 labels each, d = 2048; ``make_low_rank_tasks``), converged.

Hyperparameters: the validation optimum of each model's starting grid on simulated data of
generator seed 101 (the design data of the model docstrings), standing in for "the selected
point" until the fair-search tables exist.

Usage:  OPENBLAS_NUM_THREADS=1 python benchmarks/bench_competitors_2.py [--repeat N]
            [--skip-sun] [--skip-old-sun] [--models amtl,vstgmtl,nc-cmtl] [--amtl-unit SEED]
Timing is noisy on a shared machine: compare the ratio within one run, and the medians.
"""
from __future__ import annotations

import argparse
import importlib.util
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from mtlbench import TaskSet
from mtlbench.protocol import ProtocolConfig, make_split, mean_auc
from mtlbench_datasets.simulated import make_simulated
from mtlbench_models import amtl as amtl_new
from mtlbench_models import nc_cmtl as nc_new
from mtlbench_models import vstgmtl as vstg_new

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import sun_scale  # also imported from here by bench_vstgmtl.py

REPO = Path(__file__).resolve().parents[1]
OLD_REF = "6609da6"   # the landed tree before this round's AMTL / VSTG-MTL / NC-CMTL speed work
TARGET = {"simulated": 0.3, "sun-scale": 30.0}
POINT = {"amtl": dict(lam=0.74, mu=0.936),       # AMTL: the point issue 13 profiles at
         # VSTG-MTL: the selected point of the fair search on seed-101 simulated data
         "vstgmtl": dict(gamma1=1e-1, gamma2=1e-2, mu=0.316, n_bases=20, k=3),
         "nc-cmtl": dict(mu=10.0)}


def _module_at(ref: str, rel: str, mod_name: str):
    """The file ``plugins/mtlbench_models/<rel>.py`` as committed at ``ref``, as module
    ``mod_name``."""
    src = subprocess.run(["git", "-C", str(REPO), "show",
                          f"{ref}:plugins/mtlbench_models/{rel}.py"],
                         check=True, capture_output=True, text=True).stdout
    path = Path(tempfile.mkdtemp()) / f"old_{rel}.py"
    path.write_text(src)
    # named inside the plugin package so that its relative imports (``from ._linalg ...``) resolve
    spec = importlib.util.spec_from_file_location(mod_name, path)
    mod = importlib.util.module_from_spec(spec)
    mod.__package__ = "mtlbench_models"          # its relative imports of the shared _*.py helpers
    sys.modules[spec.name] = mod
    spec.loader.exec_module(mod)
    return mod


def old_module(name: str, ref: str = OLD_REF, helpers: tuple[str, ...] = ()):
    """The module ``plugins/mtlbench_models/<name>.py`` as committed at ``ref``.  It imports the
    shared helpers of the working tree, except those named in ``helpers`` (e.g. ``("_prox",)``):
    those are also taken at ``ref``, for this module only (bound while it is imported), so that
    an old-vs-new comparison includes changes to them."""
    saved = {}
    for h in helpers:
        full = f"mtlbench_models.{h}"
        saved[full] = sys.modules.get(full)
        sys.modules[full] = _module_at(ref, h, f"mtlbench_models._old_{h}")
    try:
        return _module_at(ref, name, f"mtlbench_models._old_{name}")
    finally:
        for full, mod in saved.items():
            if mod is None:
                sys.modules.pop(full, None)
            else:
                sys.modules[full] = mod


def simulated_train(seed: int = 0) -> TaskSet:
    ts = make_simulated(seed)
    sp = make_split(ts, ProtocolConfig(), 0)
    tr = ts.subset(sp.train, name="simulated[train]", meta={})
    tr._bench_val = ts.subset(sp.val, name="simulated[val]", meta={})
    return tr


def timed(make, tasks, repeat):
    times, m = [], None
    for _ in range(repeat):
        m = make()
        t0 = time.perf_counter()
        m.fit(tasks)
        times.append(time.perf_counter() - t0)
    return statistics.median(times), m


def pair(name, tasks, repeat, run_old):
    """(new model, old model or None, new time, old time, F new, F old)."""
    Xs = [tasks.X(t) for t in range(tasks.T)]
    ys = [tasks.y(t) for t in range(tasks.T)]
    p = POINT[name]
    if name == "amtl":
        t_new, new = timed(lambda: amtl_new.AMTL(**p), tasks, repeat)
        F = lambda m: amtl_new.amtl_objective(Xs, ys, m.coef_, m.B_, new.lam_, new.mu_)
        mk_old = lambda: OLD["amtl"].AMTL(**p)          # main's mu is the same ratio of mu_max
    elif name == "vstgmtl":
        t_new, new = timed(lambda: vstg_new.VSTGMTL(**p), tasks, repeat)
        prob = vstg_new._Problem(tasks)      # one objective function (SVD form) for old and new
        k = new.diagnostics_["k"]
        F = lambda m: vstg_new.vstg_objective(prob, m.U_, m.V_, new.gamma1_, new.gamma2_,
                                              new.mu_, k)
        mk_old = lambda: OLD["vstgmtl"].VSTGMTL(**p)
    else:
        t_new, new = timed(lambda: nc_new.NCCMTL(**p), tasks, repeat)
        F = lambda m: nc_new.nc_cmtl_objective(Xs, ys, m.coef_, p["mu"])
        mk_old = lambda: OLD["nc_cmtl"].NCCMTL(**p)
    old, t_old, f_old = None, float("nan"), float("nan")
    if run_old:
        t_old, old = timed(mk_old, tasks, 1)
        f_old = F(old)
    if name == "vstgmtl" and getattr(tasks, "_bench_val", None) is not None:
        va = tasks._bench_val             # validation AUC at this point: old vs new (a bug check)
        auc = lambda m: mean_auc(m, va)[0] if m is not None else float("nan")
        print(f"           vstgmtl validation AUC  new {auc(new):.4f}  old {auc(old):.4f}  "
              f"(U-step its new {new.diagnostics_['u_iters']}, V-step its new "
              f"{new.diagnostics_['fista_iters']})", flush=True)
    return new, old, t_new, t_old, F(new), f_old


OLD: dict = {}


def amtl_unit(tasks, rep: int = 0):
    """One protocol unit of AMTL (the default fair search, its fits and the refit), old vs new:
    (old seconds, new seconds, old selected params, new selected params)."""
    from mtlbench.protocol import run_protocol
    out = []
    for cls in (OLD["amtl"].AMTL, amtl_new.AMTL):
        t0 = time.perf_counter()
        res = run_protocol(cls(), cls.search_space, tasks, ProtocolConfig(), rep)
        out.append((time.perf_counter() - t0, getattr(res, "best_params", None)))
    return out[0][0], out[1][0], out[0][1], out[1][1]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ref", default=OLD_REF, help="git ref of the old implementation")
    ap.add_argument("--repeat", type=int, default=3, help="new fits per row (median reported)")
    ap.add_argument("--skip-sun", action="store_true")
    ap.add_argument("--skip-old-sun", action="store_true",
                    help="do not run main's implementation at SUN scale (minutes per model)")
    ap.add_argument("--new-only", action="store_true",
                    help="time only the current implementation "
                         "(the old VSTG-MTL fit takes minutes)")
    ap.add_argument("--models", default="amtl,vstgmtl,nc-cmtl")
    ap.add_argument("--amtl-unit", type=int, metavar="SEED", default=None,
                    help="also time one AMTL protocol unit (rep 0), old vs new, "
                         "on make_simulated(SEED)")
    a = ap.parse_args()
    if not a.new_only:
        for mod in ("amtl", "vstgmtl", "nc_cmtl"):
            OLD[mod] = old_module(mod, a.ref)
    models = a.models.split(",")
    data = [("simulated", simulated_train(0), not a.new_only)]
    if not a.skip_sun:
        data.append(("sun-scale", sun_scale(0), not (a.skip_old_sun or a.new_only)))
    print(f"{'data':10s} {'model':8s} {'new s':>8s} {'old s':>8s} {'ratio':>6s} {'target':>6s} "
          f"{'it new':>6s} {'it old':>6s} {'conv':>5s} {'F new':>14s} {'F old':>14s} "
          f"{'rel dF':>9s}")
    for label, tasks, run_old in data:
        for name in models:
            repeat = a.repeat if label == "simulated" else 1
            new, old, t_new, t_old, f_new, f_old = pair(name, tasks, repeat, run_old)
            it_old = old.n_iter_ if old is not None else -1
            rel = (f_old - f_new) / abs(f_new)
            print(f"{label:10s} {name:8s} {t_new:8.3f} {t_old:8.3f} {t_old / t_new:6.1f} "
                  f"{TARGET[label]:6.1f} {new.n_iter_:6d} {it_old:6d} {str(new.converged_):>5s} "
                  f"{f_new:14.8g} {f_old:14.8g} {rel:9.2e}", flush=True)
    if a.amtl_unit is not None and "amtl" in models:
        t_old, t_new, p_old, p_new = amtl_unit(make_simulated(a.amtl_unit))
        print(f"one AMTL unit (simulated seed {a.amtl_unit}, rep 0, default search): "
              f"new {t_new:.2f} s, old {t_old:.2f} s, ratio {t_old / t_new:.1f}; "
              f"selected new {p_new}, old {p_old}")


if __name__ == "__main__":
    main()
