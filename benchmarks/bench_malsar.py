"""MALSAR under GNU Octave: an oracle for mtlbench's convex models and a speed reference.

    python benchmarks/bench_malsar.py            # School and simulated, 3 points per formulation
    python benchmarks/bench_malsar.py --quick    # School, one point per formulation (~1 minute)
    python benchmarks/bench_malsar.py --list     # the formulation table and what is installed
    python benchmarks/bench_malsar.py --all      # also MALSAR alone where mtlbench has no model
    python benchmarks/bench_malsar.py --formulations Least_L21,trace --data school --json out.json

Set-up, outside the repository (MALSAR is a test oracle and a speed reference, never part of
mtlbench; its code is GPL): GNU Octave from Debian's packages,
``DEBIAN_FRONTEND=noninteractive apt-get install -y octave`` (Debian 12: ``octave``
7.3.0-2, with ``libopenblas0-pthread`` 0.3.21 as its BLAS -- with ``--no-install-recommends``
install that package too, or Octave runs on the reference BLAS); MALSAR (Zhou, Chen & Ye,
github.com/jiayuzhou/MALSAR) unpacked at ``/work/malsar`` (``--malsar DIR``: the folder that
holds ``MALSAR/functions``, ``MALSAR/utils``, ``MALSAR/c_files``).  Every function of the table
runs as M-code under Octave except ``Least_Dirty`` / ``Logistic_Dirty``, whose l1,inf prox is
the C++ MEX ``prf_lbm`` (MALSAR ships no Linux build of it): ``--build-mex`` compiles it with
``mkoctfile --mex`` (package ``liboctave-dev``), giving it the ``matrix.h`` include that
Octave lacks (a one-line header including ``mex.h``, in a temporary folder), and MALSAR's two
other MEX sources, ``eplb`` and ``flsa`` (used by functions outside the table).

Problems (the same float64 arrays on both sides):

* ``school``: MALSAR's own ``school.mat`` (``--data-dir``, default /work/shared/data) with
  mtlbench's features (the ``school`` plugin: 27 z-scored columns plus a constant 1) and the
  exam scores as regression targets; ``school-binary``: the plugin's labels (score above the
  school's median), for the logistic formulations;
* ``simulated``: the training split (repetition 0 of the protocol's split) of the TFCL paper's
  simulated data, ``make_simulated(seed=101)`` (``--seed``; seed 101 is design data, no
  published table uses it): 100 tasks x 136 rows x 80 features, labels in {-1, +1} as targets
  of both losses.

Per instance (a formulation, a problem, MALSAR's rho's at fractions of their scale, below):

1. F*, the reference optimum: the lowest objective this script evaluates at any solution
   found -- mtlbench's solver run to ``tol = 1e-12``, cvxpy (Clarabel) where the conic
   problem is affordable, MALSAR's long run (2.) -- with the bound the mtlbench solver
   certifies (F* - optimum <= F* - F_ref + its last progress certificate, a duality gap);
   without an mtlbench model F* is printed as uncertified.
2. MALSAR (``tFlag = 1``: stop when |f_k - f_{k-1}| <= tol f_{k-1}, ``init = 2``: W = 0,
   ``maxIter`` = ``--max-iter``): one run at the smallest tol MALSAR accepts (100 eps) records
   the objective sequence; its iterates do not depend on tol, so the sequence tells at which
   iterate each tol of the ladder 1e-2, 5e-3, 2e-3, 1e-3, ..., 1e-14 stops.  The loosest tol
   that stops within 1e-8 relative of F* is then run cold ``--repeats`` times; the CPU time
   (Octave's ``cputime`` around the solver call only) is the median; the run is checked to stop
   at the predicted iterate.  Where MALSAR's recorded values are not its objective (the
   clustered functions, :func:`malsar_matched`) the candidate stops are bisected with cold
   runs instead.  If no tol gets there within ``maxIter`` the row says so and the time is a
   lower bound (the long run's).
3. mtlbench, cold (a fresh TaskSet, so no per-data cache carries over) at each tol of the
   same ladder until the objective is within 1e-8 relative of F*; that tol is run
   ``--repeats`` times, median CPU time (``time.process_time`` around ``fit``).
4. Printed: both CPU times and the ratio MALSAR / mtlbench, both objectives relative to F*,
   "same optimum to 1e-8 relative" (yes when both are within 1e-8 of F*), and two checks of
   the objective mapping: MALSAR's own last objective value against this script's evaluation
   of MALSAR's formulation at MALSAR's solution, and the model's ``fitted_objective`` times
   the formulation's factor against the same evaluation at mtlbench's solution.

Both sides get one BLAS thread (``OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1``), the same data,
a cold start and the same iteration cap; the machine is shared, so times are indicative and
only their ratio within one run means something.

The formulation table (:data:`FORMULATIONS`, one entry per MALSAR function) holds, for each:
the mtlbench model's registry name (:data:`MODEL_NAMES`, editable), the MALSAR call, its
objective as MALSAR's M-code computes it (``funVal_eval`` plus the non-smooth term), the
factor between it and mtlbench's objective, and the map from MALSAR's rho's to mtlbench's
hyperparameters; ``--list`` prints them.  Conventions: MALSAR's X{t} is n_t x d, W is d x T;
``opts.rho_L2`` (a ridge rho_L2 ||W||_F^2) is 0 everywhere except where an entry says; the
logistic functions fit an unpenalised intercept per task and average the loss over each
task's rows, (1/n_t) sum_i log(1 + exp(-y_i (x_i^T w_t + c_t))), so an mtlbench logistic model
matches them only with the same intercepts and weights (the mapping check says whether it
does).  Adding a formulation is one entry.  The map for a model that is not installed yet
uses the parameter names it is planned with; its entry is where to correct them.
"""
from __future__ import annotations

import argparse
import inspect
import json
import math
import re
import shutil
import subprocess
import sys
import tempfile
import time
import warnings
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any, Callable

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(Path(__file__).resolve().parent), str(ROOT), str(ROOT / "plugins"),
                str(ROOT / "datasets")]

from _common import worker_env  # noqa: E402 - benchmarks/ is on sys.path

REL = 1e-8                                        # matched accuracy, relative to F*
TIGHT = 1e-12                                     # tolerance of the reference run
MALSAR_MIN_TOL = 100 * float(np.finfo(float).eps)  # init_opts raises any smaller opts.tol to it
#: the tolerance ladder of both sides: 1-2-5 steps per decade
LADDER = tuple(m * 10.0 ** e for e in range(-2, -15, -1) for m in (1.0, 0.5, 0.2))[:-2]
OCTAVE_EXIT_NOISE = "error: ignoring const execution_exception& while preparing to exit"
DEFAULT_MALSAR = Path("/work/malsar")
DEFAULT_DATA = Path("/work/shared/data")
CVXPY_MAX_ENTRIES = 2_000_000   # sum_t n_t d above which the conic problem is not built
CVXPY_MAX_SDP_TASKS = 40        # T above which a T x T semidefinite variable is not built
MEX = {"prf_lbm": "prf_lbm.cpp", "eplb": "eplb.c", "flsa": "flsa.c"}  # c_files/<dir>/<src>


# ----------------------------------------------------------------------------- problems
@dataclass
class Problem:
    """Tasks as MALSAR reads them: X[t] (n_t x d), y[t] (n_t,); ``kind`` "regression" or
    "binary" (labels in {-1, +1})."""

    name: str
    kind: str
    Xs: list
    ys: list

    @property
    def T(self) -> int:
        return len(self.Xs)

    @property
    def d(self) -> int:
        return self.Xs[0].shape[1]

    @property
    def entries(self) -> int:
        return int(sum(X.shape[0] for X in self.Xs)) * self.d

    def tasks(self):
        """A fresh TaskSet of the same arrays (an empty per-data cache: a cold fit)."""
        from mtlbench import TaskSet

        names = [f"{self.name}{t:03d}" for t in range(self.T)]
        return TaskSet.from_arrays(self.name, self.Xs, self.ys, task_names=names,
                                   target_kind="real" if self.kind != "binary" else "binary")

    @cached_property
    def xty(self) -> np.ndarray:
        """[X_t^T y_t]_t (d x T): minus the squared loss's gradient at W = 0."""
        return np.stack([X.T @ y for X, y in zip(self.Xs, self.ys)], axis=1)

    @cached_property
    def logistic_grad0(self) -> np.ndarray:
        """Gradient (d x T) of MALSAR's logistic data term at W = 0 with the intercepts at
        their optimum there (c_t = log(m_+ / m_-))."""
        cols = []
        for X, y in zip(self.Xs, self.ys):
            c = math.log(np.sum(y > 0) / np.sum(y < 0))
            cols.append(-(X.T @ (y / (1.0 + np.exp(y * c)))) / y.size)
        return np.stack(cols, axis=1)

    def grad0(self, loss: str) -> np.ndarray:
        return self.xty if loss == "squared" else self.logistic_grad0

    def curvature(self, loss: str) -> float:
        """Mean over tasks of trace(H_t) / d, H_t the data term's Hessian bound (X_t^T X_t for
        the squared loss, X_t^T X_t / (4 n_t) for MALSAR's logistic loss): the scale of the
        smooth quadratic penalties' rho's."""
        per = [np.sum(X * X) / (1.0 if loss == "squared" else 4.0 * X.shape[0]) for X in self.Xs]
        return float(np.mean(per)) / self.d


def school_problem(kind: str, data_dir: Path) -> Problem:
    from scipy.io import loadmat

    from mtlbench.plugins import get_registry

    tasks = get_registry().dataset("school").load("school", data_dir=data_dir)
    Xs = [np.ascontiguousarray(tasks.X(t), dtype=np.float64) for t in range(tasks.T)]
    if kind == "binary":
        return Problem("school-binary", "binary", Xs, [tasks.y(t).copy() for t in range(tasks.T)])
    scores = [np.asarray(y, dtype=np.float64).ravel()
              for y in loadmat(str(data_dir / "school.mat"))["Y"].ravel()]
    if [s.size for s in scores] != [X.shape[0] for X in Xs]:
        sys.exit("bench_malsar: school.mat's scores do not align with the school plugin's tasks")
    return Problem("school", "regression", Xs, scores)


def simulated_problem(seed: int) -> Problem:
    from mtlbench.protocol import ProtocolConfig, make_split
    from mtlbench_datasets.simulated import make_simulated

    tasks = make_simulated(seed)
    train = tasks.subset(make_split(tasks, ProtocolConfig(), 0).train)
    return Problem("simulated", "binary",
                   [np.ascontiguousarray(train.X(t)) for t in range(train.T)],
                   [train.y(t).copy() for t in range(train.T)])


# ---------------------------------------------------------------- objective building blocks
def squared(p: Problem, W: np.ndarray) -> float:
    """sum_t 1/2 ||y_t - X_t w_t||^2."""
    return 0.5 * sum(float(np.sum((y - X @ W[:, t]) ** 2))
                     for t, (X, y) in enumerate(zip(p.Xs, p.ys)))


def logistic(p: Problem, W: np.ndarray, C: np.ndarray | None) -> float:
    """MALSAR's sum_t (1/n_t) sum_i log(1 + exp(-y_i (x_i^T w_t + c_t)))."""
    c = np.zeros(p.T) if C is None else np.ravel(C)
    return sum(float(np.mean(np.logaddexp(0.0, -y * (X @ W[:, t] + c[t]))))
               for t, (X, y) in enumerate(zip(p.Xs, p.ys)))


def l1(A):
    return float(np.abs(A).sum())


def l21_rows(A):
    return float(np.linalg.norm(A, axis=1).sum())


def l21_cols(A):
    return float(np.linalg.norm(A, axis=0).sum())


def l1inf_rows(A):
    return float(np.abs(A).max(axis=1).sum())


def nuclear(A):
    return float(np.linalg.svd(A, compute_uv=False).sum())


def cmtl_term(W: np.ndarray, rho1: float, rho2: float, k: float) -> float:
    """min over M (T x T, 0 <= M <= I, tr M = k) of c tr(W (eta I + M)^{-1} W^T), eta =
    rho2 / rho1, c = rho1 eta (1 + eta): M shares the eigenvectors of W^T W (eigenvalues s_i),
    its eigenvalues m_i = clip(sqrt(s_i / nu) - eta, 0, 1) with nu set by sum m_i = k
    (bisection on log nu)."""
    eta = rho2 / rho1
    c = rho1 * eta * (1.0 + eta)
    s = np.clip(np.linalg.eigvalsh(W.T @ W), 0.0, None)
    if np.count_nonzero(s) <= k:
        return c * float(np.sum(s) / (eta + 1.0))
    m_of = lambda nu: np.clip(np.sqrt(s / nu) - eta, 0.0, 1.0)
    # at nu = s_(k) / (1 + eta)^2 the k largest m_i are 1 (sum >= k); at s_max / eta^2 all 0
    kth = np.sort(s)[::-1][int(math.ceil(k)) - 1]
    lo, hi = math.log(kth / (1.0 + eta) ** 2) - 1.0, math.log(s.max() / eta ** 2) + 1.0
    for _ in range(200):                     # sum m(nu) decreases in nu
        mid = 0.5 * (lo + hi)
        lo, hi = (mid, hi) if m_of(math.exp(mid)).sum() > k else (lo, mid)
    return c * float(np.sum(s / (eta + m_of(math.exp(0.5 * (lo + hi))))))


def mean_deviation(W: np.ndarray) -> float:
    """||W (I - 11^T / T)||_F^2 = sum_t ||w_t - mean_t w_t||^2."""
    return float(np.sum((W - W.mean(axis=1, keepdims=True)) ** 2))


# ----------------------------------------------------------------------- the table
#: The mtlbench model (registry name) of each MALSAR function; a name that is not registered
#: is reported as "model not installed" and MALSAR runs alone.
MODEL_NAMES = {
    "Least_Lasso": "lasso", "Least_rMTFL": "rmtfl", "Least_L21": "l21", "Least_Trace": "trace-norm",
    "Least_SRMTL": "srmtl", "Least_CMTL": "cmtl", "Least_Dirty": "dirty",
    "Least_SRMTL(mean)": "meanreg",
    "Logistic_Lasso": "lasso-logistic", "Logistic_rMTFL": "rmtfl-logistic",
    "Logistic_L21": "l21-logistic", "Logistic_Trace": "trace-norm-logistic",
    "Logistic_SRMTL": "srmtl-logistic", "Logistic_CMTL": "cmtl-logistic",
    "Logistic_Dirty": "dirty-logistic",
}


@dataclass(frozen=True)
class Formulation:
    """One MALSAR function against one mtlbench model.

    ``key`` is the MALSAR function, with a suffix in parentheses for a second use of one
    function.  ``call`` is the Octave statement that is timed (variables X, Y: cell arrays;
    rho: the rho's; E: ``extras(p)``; opts); its left-hand side names what is read back (W and
    fv always; P, Q, C, M where the function returns them).  MALSAR's objective is
    ``factor * data + penalty(rho, solution, E)``, ``data`` = sum_t 1/2 ||y_t - X_t w_t||^2
    or :func:`logistic`; mtlbench's objective is MALSAR's divided by ``factor``.
    ``scales(p)`` gives one reference value per rho (the smallest value that makes W = 0
    optimal where there is one, else the data's curvature) and ``points`` the rho's as
    multiples of them; ``to_mtlbench(p, rho)`` the model's hyperparameters."""

    key: str
    folders: tuple
    call: str
    loss: str
    factor: float
    penalty: Callable
    scales: Callable
    points: tuple
    to_mtlbench: Callable
    mapping: str
    cvx_penalty: Callable | None = None   # (cp, variables, rho, E) -> (expression, constraints)
    extras: Callable = lambda p: {}
    opts: Callable = lambda rho: {}

    @property
    def malsar(self) -> str:
        return self.key.split("(")[0]

    @property
    def model(self) -> str | None:
        return MODEL_NAMES.get(self.key)

    @property
    def outputs(self) -> list[str]:
        return re.findall(r"[A-Za-z]\w*", self.call.split("=", 1)[0])

    def objective(self, p: Problem, rho, sol: dict, E: dict) -> float:
        """MALSAR's objective at ``sol`` (W, and P, Q, C where the formulation has them)."""
        W = sol["W"]
        data = squared(p, W) if self.loss == "squared" else logistic(p, W, sol.get("C"))
        return self.factor * data + self.penalty(rho, sol, E)


def _grad_norm(kind: str) -> Callable[[Problem, str], float]:
    """A norm of the data term's gradient at W = 0 (G0): the smallest weight of the matching
    penalty that makes W = 0 optimal."""
    norms = {"rows2": lambda G: np.linalg.norm(G, axis=1).max(),       # ||W||_{2,1}
             "cols2": lambda G: np.linalg.norm(G, axis=0).max(),       # ||W^T||_{2,1}
             "abs": lambda G: np.abs(G).max(),                         # ||W||_1
             "rows1": lambda G: np.abs(G).sum(axis=1).max(),           # ||W||_{1,inf}
             "spectral": lambda G: np.linalg.norm(G, 2)}               # ||W||_*
    return lambda p, loss: float(norms[kind](p.grad0(loss)))


ROWS2, COLS2, ABS, ROWS1, SPECTRAL = (_grad_norm(k) for k in
                                      ("rows2", "cols2", "abs", "rows1", "spectral"))


def _all_related(p: Problem) -> dict:
    """MALSAR's 'all tasks related' structure R = I - 11^T / T."""
    return {"R": np.eye(p.T) - np.full((p.T, p.T), 1.0 / p.T)}


def _cvx_mean_dev(cp, W):
    return cp.sum_squares(W - cp.sum(W, axis=1, keepdims=True) / W.shape[1])


class NotBuilt(Exception):
    """A conic form too large to build (the reason is the message)."""


def _cvx_cmtl(cp, v, rho, E):
    W, T = v["W"], v["W"].shape[1]
    if T > CVXPY_MAX_SDP_TASKS:   # Clarabel's KKT system of the (T + d)-sized cones: > 20 GB
        raise NotBuilt(f"the T x T semidefinite M is not built for T = {T} > "
                       f"{CVXPY_MAX_SDP_TASKS}")
    eta = rho[1] / rho[0]
    M = cp.Variable((T, T), symmetric=True)
    cons = [M >> 0, np.eye(T) - M >> 0, cp.trace(M) == E["k"]]
    return rho[0] * eta * (1 + eta) * cp.matrix_frac(W.T, eta * np.eye(T) + M), cons


_DATA = {"squared": "sum_t 1/2 ||y_t - X_t w_t||^2",
         "logistic": "sum_t (1/n_t) sum_i log(1 + exp(-y_i (x_i^T w_t + c_t)))"}


def _both_losses(name, folders, call, penalty, scales, points, to_mtlbench, mapping,
                 cvx_penalty, extras=lambda p: {}):
    """The Least_ and Logistic_ entries of one penalty: the same call (the logistic one also
    returns the intercepts C), penalty and maps, with the loss's own G0 and curvature
    (``scales(p, loss)``, ``to_mtlbench(p, rho, loss)``); ``mapping`` says DATA for the data
    term and MODEL for the model's name."""
    out = []
    for loss, prefix in (("squared", "Least_"), ("logistic", "Logistic_")):
        key = prefix + name
        c = call.replace("FUNC", key)
        if loss == "logistic":
            c = c.replace("[W, ", "[W, C, ")
        out.append(Formulation(
            key, folders, c, loss, 1.0, penalty, lambda p, s=scales, lo=loss: s(p, lo), points,
            lambda p, rho, f=to_mtlbench, lo=loss: f(p, rho, lo),
            mapping.replace("DATA", _DATA[loss]).replace("MODEL", str(MODEL_NAMES.get(key))),
            cvx_penalty, extras))
    return out


FORMULATIONS: dict[str, Formulation] = {f.key: f for f in [
    Formulation(
        "Least_Lasso", ("functions/Lasso",), "[W, fv] = Least_Lasso(X, Y, rho(1), opts);",
        "squared", 1.0, lambda rho, s, E: rho[0] * l1(s["W"]),
        lambda p: (ABS(p, "squared"),), ((0.003,), (0.03,), (0.3,)),
        lambda p, rho: {"rho_ratio": rho[0] / ABS(p, "squared")},
        "MALSAR: sum_t 1/2 ||y_t - X_t w_t||^2 + rho1 ||W||_1 (+ rho_L2 ||W||_F^2, 0 here).\n"
        "mtlbench lasso: the same objective (factor 1), rho = rho1, rho_ratio = rho1 / "
        "max |G0| (G0 = [X_t^T y_t], d x T).",
        lambda cp, v, rho, E: (rho[0] * cp.sum(cp.abs(v["W"])), [])),
    Formulation(
        "Least_rMTFL", ("functions/rMTFL",),
        "[W, fv, P, Q] = Least_rMTFL(X, Y, rho(1), rho(2), opts);", "squared", 2.0,
        lambda rho, s, E: rho[0] * l21_rows(s["P"]) + rho[1] * l21_cols(s["Q"]),
        lambda p: (2 * ROWS2(p, "squared"), 2 * COLS2(p, "squared")),
        ((0.15, 0.25), (0.3, 0.5), (0.6, 1.0)),
        lambda p, rho: {"lam1_ratio": rho[0] / (2 * ROWS2(p, "squared")),
                        "lam2_ratio": rho[1] / (2 * COLS2(p, "squared"))},
        "MALSAR: ||X(P+Q) - y||^2 + lambda1 ||P||_{1,2} + lambda2 ||Q^T||_{1,2} (rows of P, "
        "columns of Q; no 1/2).\nmtlbench rmtfl: sum_t 1/2 ||.||^2 + lam1 ||P||_{1,2} + lam2 "
        "||Q^T||_{1,2} = MALSAR / 2 (factor 2), lam1 = lambda1 / 2, lam2 = lambda2 / 2; "
        "lam1_ratio = lam1 / max_i ||G0[i,:]||_2, lam2_ratio = lam2 / max_t ||G0[:,t]||_2.",
        lambda cp, v, rho, E: (rho[0] * cp.sum(cp.norm(v["P"], 2, axis=1))
                               + rho[1] * cp.sum(cp.norm(v["Q"], 2, axis=0)), [])),
    Formulation(
        "Least_Dirty", ("functions/dirty", "c_files/prf_lbm"),
        "[W, fv, P, Q] = Least_Dirty(X, Y, rho(1), rho(2), opts);", "squared", 2.0,
        lambda rho, s, E: rho[0] * l1inf_rows(s["P"]) + rho[1] * l1(s["Q"]),
        lambda p: (2 * ROWS1(p, "squared"), 2 * ABS(p, "squared")),
        ((0.2, 0.5), (0.5, 0.8), (0.8, 0.95)),
        lambda p, rho: {"lam1_ratio": rho[0] / (2 * ROWS1(p, "squared")),
                        "lam2_ratio": rho[1] / (2 * ABS(p, "squared"))},
        "MALSAR: ||X(P+Q) - y||^2 + lambda1 ||P||_{1,inf} + lambda2 ||Q||_{1,1} "
        "(||P||_{1,inf} = sum_i max_t |P_it|; no 1/2).\nmtlbench dirty: sum_t 1/2 "
        "||.||^2 + lam1 ||P||_{1,inf} + lam2 ||Q||_1 = MALSAR / 2 (factor 2), lam = lambda / "
        "2; lam1_ratio = lam1 / max_i ||G0[i,:]||_1, lam2_ratio = lam2 / max |G0|.",
        lambda cp, v, rho, E: (rho[0] * cp.sum(cp.max(cp.abs(v["P"]), axis=1))
                               + rho[1] * cp.sum(cp.abs(v["Q"])), [])),
    Formulation(
        "Least_SRMTL(mean)", ("functions/SRMTL",),
        "[W, fv] = Least_SRMTL(X, Y, E.R, rho(1), 0, opts);", "squared", 1.0,
        lambda rho, s, E: rho[0] * mean_deviation(s["W"]) + rho[1] * float(np.sum(s["W"] ** 2)),
        lambda p: (p.curvature("squared"), p.curvature("squared")), ((0.1, 0.01), (1.0, 0.1)),
        lambda p, rho: {"lam_ratio": (rho[0] + rho[1]) / p.curvature("squared"),
                        "mean_ratio": rho[1] / (rho[0] + rho[1])},
        "MALSAR Least_SRMTL with R = I - 11^T/T, rho2 = 0 (no L1) and opts.rho_L2: sum_t 1/2 "
        "||.||^2 + rho1 sum_t ||w_t - w_bar||^2 + rho_L2 ||W||_F^2.\nmtlbench meanreg: sum_t "
        "1/2 ||.||^2 + lam sum_t ||w_t - w_bar||^2 + lam_mean T ||w_bar||^2, the same "
        "objective (factor 1) with lam = rho1 + rho_L2, lam_mean = rho_L2; lam_ratio = lam / "
        "curvature, mean_ratio = lam_mean / lam.",
        lambda cp, v, rho, E: (rho[0] * _cvx_mean_dev(cp, v["W"])
                               + rho[1] * cp.sum_squares(v["W"]), []),
        _all_related, lambda rho: {"rho_L2": rho[1]}),
    *_both_losses(
        "L21", ("functions/joint_feature_learning",), "[W, fv] = FUNC(X, Y, rho(1), opts);",
        lambda rho, s, E: rho[0] * l21_rows(s["W"]), lambda p, lo: (ROWS2(p, lo),),
        ((0.03,), (0.1,), (0.3,)), lambda p, rho, lo: {"lam_ratio": rho[0] / ROWS2(p, lo)},
        "MALSAR: DATA + rho1 ||W||_{2,1} (rows; + rho_L2 ||W||_F^2, 0 here).\nmtlbench MODEL: "
        "the same objective (factor 1; the logistic one with MALSAR's intercepts and 1/n_t), "
        "lam_ratio = rho1 / max_i ||G0[i,:]||_2 (G0: the data term's gradient at W = 0, "
        "intercepts at their optimum there).",
        lambda cp, v, rho, E: (rho[0] * cp.sum(cp.norm(v["W"], 2, axis=1)), [])),
    *_both_losses(
        "Trace", ("functions/low_rank",), "[W, fv] = FUNC(X, Y, rho(1), opts);",
        lambda rho, s, E: rho[0] * nuclear(s["W"]), lambda p, lo: (SPECTRAL(p, lo),),
        ((0.03,), (0.1,), (0.3,)), lambda p, rho, lo: {"lam_ratio": rho[0] / SPECTRAL(p, lo)},
        "MALSAR: DATA + rho1 ||W||_* (+ rho_L2 ||W||_F^2, 0 here).\nmtlbench MODEL: the same "
        "objective (factor 1; the logistic one with MALSAR's intercepts and 1/n_t), lam_ratio "
        "= rho1 / ||G0||_2 (spectral norm).",
        lambda cp, v, rho, E: (rho[0] * cp.normNuc(v["W"]), [])),
    *_both_losses(
        "SRMTL", ("functions/SRMTL",), "[W, fv] = FUNC(X, Y, E.R, rho(1), rho(2), opts);",
        lambda rho, s, E: rho[0] * float(np.sum((s["W"] @ E["R"]) ** 2)) + rho[1] * l1(s["W"]),
        lambda p, lo: (p.curvature(lo), ABS(p, lo)), ((0.1, 0.03), (1.0, 0.1)),
        lambda p, rho, lo: {"graph_ratio": rho[0] / p.curvature(lo),
                            "rho_ratio": rho[1] / ABS(p, lo)},
        "MALSAR: DATA + rho1 ||W R||_F^2 + rho2 ||W||_1 (+ rho_L2 ||W||_F^2, 0 here), R = I - "
        "11^T/T (MALSAR's 'all tasks related' structure: ||W R||_F^2 = tr(W L W^T) / T, L the "
        "complete graph's Laplacian).\nmtlbench MODEL: the same objective (factor 1; its "
        "default graph is this R), graph_ratio = rho1 / curvature, rho_ratio = rho2 / "
        "max |G0|.",
        lambda cp, v, rho, E: (rho[0] * _cvx_mean_dev(cp, v["W"])
                               + rho[1] * cp.sum(cp.abs(v["W"])), []),
        _all_related),
    *_both_losses(
        "CMTL", ("functions/CMTL",), "[W, fv, M] = FUNC(X, Y, rho(1), rho(2), E.k, opts);",
        lambda rho, s, E: cmtl_term(s["W"], rho[0], rho[1], E["k"]),
        lambda p, lo: (p.curvature(lo), p.curvature(lo)), ((0.1, 0.1), (1.0, 1.0)),
        lambda p, rho, lo: {"cluster_ratio": rho[0] / p.curvature(lo),
                            "ridge_ratio": rho[1] / p.curvature(lo), "k": 3},
        "MALSAR: DATA + rho1 eta (1 + eta) tr(W (eta I + M)^{-1} W^T) minimised over M too "
        "(0 <= M <= I, tr M = k; eta = rho2 / rho1; Zhou, Chen & Ye 2011's convex relaxation), "
        "k = 3.\nmtlbench MODEL: the same objective in W alone (the minimum over M in closed "
        "form), cluster_ratio = rho1 / curvature, ridge_ratio = rho2 / curvature, k = 3.",
        _cvx_cmtl, lambda p: {"k": 3.0}),
    Formulation(
        "Logistic_Lasso", ("functions/Lasso",),
        "[W, C, fv] = Logistic_Lasso(X, Y, rho(1), opts);", "logistic", 1.0,
        lambda rho, s, E: rho[0] * l1(s["W"]), lambda p: (ABS(p, "logistic"),),
        ((0.03,), (0.1,), (0.3,)), lambda p, rho: {"rho_ratio": rho[0] / ABS(p, "logistic")},
        f"MALSAR: {_DATA['logistic']} + rho1 ||W||_1.\nmtlbench lasso-logistic (planned): the "
        "same objective (factor 1), rho_ratio = rho1 / max |G0|.",
        lambda cp, v, rho, E: (rho[0] * cp.sum(cp.abs(v["W"])), [])),
    Formulation(
        "Logistic_rMTFL", ("functions/rMTFL",),
        "[W, C, P, Q, fv] = Logistic_rMTFL(X, Y, rho(1), rho(2), opts);", "logistic", 1.0,
        lambda rho, s, E: rho[0] * l21_rows(s["P"]) + rho[1] * l21_cols(s["Q"]),
        lambda p: (ROWS2(p, "logistic"), COLS2(p, "logistic")), ((0.15, 0.25), (0.3, 0.5)),
        lambda p, rho: {"lam1_ratio": rho[0] / ROWS2(p, "logistic"),
                        "lam2_ratio": rho[1] / COLS2(p, "logistic")},
        f"MALSAR: {_DATA['logistic']} + rho1 ||P||_{{1,2}} + rho2 ||Q^T||_{{1,2}} (factor 1: "
        "the logistic term is not doubled).\nmtlbench rmtfl-logistic (planned): the same "
        "objective, lam1_ratio = rho1 / max_i ||G0[i,:]||_2, lam2_ratio = rho2 / max_t "
        "||G0[:,t]||_2.",
        lambda cp, v, rho, E: (rho[0] * cp.sum(cp.norm(v["P"], 2, axis=1))
                               + rho[1] * cp.sum(cp.norm(v["Q"], 2, axis=0)), [])),
    Formulation(
        "Logistic_Dirty", ("functions/dirty", "c_files/prf_lbm"),
        "[W, C, P, Q, fv] = Logistic_Dirty(X, Y, rho(1), rho(2), opts);", "logistic", 1.0,
        lambda rho, s, E: rho[0] * l1inf_rows(s["P"]) + rho[1] * l1(s["Q"]),
        lambda p: (ROWS1(p, "logistic"), ABS(p, "logistic")), ((0.2, 0.5), (0.5, 0.8)),
        lambda p, rho: {"lam1_ratio": rho[0] / ROWS1(p, "logistic"),
                        "lam2_ratio": rho[1] / ABS(p, "logistic")},
        f"MALSAR: {_DATA['logistic']} + rho1 ||P||_{{1,inf}} + rho2 ||Q||_1 (factor 1).\n"
        "mtlbench dirty-logistic: the same objective (MALSAR's intercepts and 1/n_t), "
        "lam1_ratio = rho1 / max_i "
        "||G0[i,:]||_1, lam2_ratio = rho2 / max |G0|.",
        lambda cp, v, rho, E: (rho[0] * cp.sum(cp.max(cp.abs(v["P"]), axis=1))
                               + rho[1] * cp.sum(cp.abs(v["Q"])), [])),
]}


# ----------------------------------------------------------------------- MALSAR side
_DRIVER = """1;
function out = solve_once(X, Y, rho, E, opts)
  t0 = cputime();
  {call}
  out.seconds = cputime() - t0;
{keep}
end
data = load('{data}');
job = load('{job}');
addpath('{malsar}/utils');
{paths}
seconds = zeros(1, job.repeats);
for r = 1:job.repeats
  out = solve_once(data.X, data.Y, job.rho, job.E, job.opts);
  seconds(r) = out.seconds;
end
out.seconds = seconds;
save('-v7', '{out}', '-struct', 'out');
"""


class Octave:
    """Runs MALSAR's functions in ``octave --no-gui --quiet`` with one BLAS thread, one process
    per job; ``workdir`` holds the exported problems, jobs and results."""

    def __init__(self, malsar: Path, workdir: Path) -> None:
        self.malsar = malsar / "MALSAR"
        self.workdir = workdir
        self.exported: dict[str, Path] = {}
        self.jobs = 0

    def export(self, p: Problem) -> Path:
        """X, Y as 1 x T cell arrays (X{t}: n_t x d, Y{t}: n_t x 1)."""
        from scipy.io import savemat

        if p.name not in self.exported:
            X = np.empty((1, p.T), dtype=object)
            Y = np.empty((1, p.T), dtype=object)
            for t in range(p.T):
                X[0, t], Y[0, t] = p.Xs[t], p.ys[t][:, None]
            path = self.workdir / f"problem-{p.name}.mat"
            savemat(str(path), {"X": X, "Y": Y})
            self.exported[p.name] = path
        return self.exported[p.name]

    def missing(self, form: Formulation) -> str | None:
        """Why ``form`` cannot run here (a folder or a MEX file absent), or None."""
        for folder in form.folders:
            where = self.malsar / folder
            if not where.is_dir():
                return f"{where} not found"
            if folder.startswith("c_files/") and not list(where.glob("*.mex")):
                return f"no Octave build of {folder} (run with --build-mex)"
        return None

    def run(self, form: Formulation, p: Problem, rho, E: dict, tol: float, max_iter: int,
            repeats: int) -> dict:
        """``repeats`` cold runs of ``form`` at ``tol``; returns the last run's outputs (W, fv,
        ...; ``seconds``: CPU seconds of each run)."""
        from scipy.io import loadmat, savemat

        self.jobs += 1
        stem = self.workdir / f"job{self.jobs}"
        opts = {"init": 2.0, "tFlag": 1.0, "tol": float(tol), "maxIter": float(max_iter),
                "pFlag": 0.0, **{k: float(v) for k, v in form.opts(rho).items()}}
        savemat(f"{stem}-in.mat", {"rho": np.asarray(rho, dtype=np.float64)[None, :],
                                   "E": {"none": 0.0, **E}, "opts": opts,
                                   "repeats": float(repeats)})
        keep = "\n".join(f"  out.{v} = {v};" for v in form.outputs)
        script = _DRIVER.format(call=form.call, keep=keep, data=self.export(p),
                                job=f"{stem}-in.mat", out=f"{stem}-out.mat", malsar=self.malsar,
                                paths="\n".join(f"addpath('{self.malsar / f}');"
                                                for f in form.folders))
        Path(f"{stem}.m").write_text(script)
        proc = subprocess.run(["octave", "--no-gui", "--quiet", "--norc", f"{stem}.m"],
                              env=worker_env(), capture_output=True, text=True,
                              cwd=self.workdir)
        noise = [ln for ln in proc.stderr.splitlines()
                 if ln.strip() and OCTAVE_EXIT_NOISE not in ln]
        if proc.returncode != 0 or not Path(f"{stem}-out.mat").exists():
            raise RuntimeError(f"{form.malsar} under Octave failed: "
                               + " | ".join(noise[-3:] or ["(no message)"]))
        raw = loadmat(f"{stem}-out.mat")
        out = {k: np.asarray(raw[k], dtype=np.float64) for k in form.outputs + ["seconds"]}
        out["fv"] = out["fv"].ravel()
        out["seconds"] = out["seconds"].ravel()
        if "C" in out:
            out["C"] = out["C"].ravel()
        return out


def stop_index(fv: np.ndarray, tol: float) -> int:
    """Index of the iterate at which MALSAR's ``tFlag = 1`` rule stops a run with ``tol``
    (the first k >= 2 with |f_k - f_{k-1}| <= tol f_{k-1}; the last one if none): every
    function of the table checks it after appending f_k, from its third value on."""
    diff = np.abs(np.diff(fv))
    for k in range(2, fv.size):
        if diff[k - 1] <= tol * fv[k - 1]:
            return k
    return fv.size - 1


def loosest_tol(fv: np.ndarray, f_star: float,
                value: Callable[[float, int], float] | None = None) -> tuple[float, int] | None:
    """(tol, stop index): the loosest tol of the ladder (then MALSAR's smallest) whose run
    stops within REL of ``f_star``, or None.  The stop index of each tol comes from the
    objective values ``fv`` of one long run (:func:`stop_index`: MALSAR's rule reads these
    values), and the objective there is ``fv[k]``.  Where the recorded values are not the
    objective, ``value(tol, k)`` gives it (a cold run: costly), and the candidate stops are
    bisected instead of scanned -- assuming the objective, once within REL, stays there."""
    candidates: dict[int, float] = {}            # stop index -> the loosest tol stopping there
    for tol in LADDER + (MALSAR_MIN_TOL,):
        candidates.setdefault(stop_index(fv, tol), tol)
    stops = sorted(candidates)
    close = lambda f: abs(f - f_star) <= REL * abs(f_star)
    if value is None:
        return next(((candidates[k], k) for k in stops if close(fv[k])), None)
    lo, hi = -1, len(stops) - 1                  # stops[hi]: the long run's end
    if not close(value(candidates[stops[hi]], stops[hi])):
        return None
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if close(value(candidates[stops[mid]], stops[mid])):
            hi = mid
        else:
            lo = mid
    return candidates[stops[hi]], stops[hi]


def build_mex(malsar: Path) -> None:
    """Compile MALSAR's MEX sources for Octave (``mkoctfile --mex``) next to them, with a
    ``matrix.h`` (a MATLAB header Octave lacks) that includes ``mex.h``."""
    if shutil.which("mkoctfile") is None:
        sys.exit("bench_malsar: mkoctfile not found (Debian: apt-get install liboctave-dev)")
    with tempfile.TemporaryDirectory() as inc:
        (Path(inc) / "matrix.h").write_text('#include "mex.h"\n')
        for folder, src in MEX.items():
            where = malsar / "MALSAR" / "c_files" / folder
            proc = subprocess.run(["mkoctfile", "--mex", f"-I{inc}", src], cwd=where,
                                  capture_output=True, text=True)
            status = "built" if proc.returncode == 0 else "FAILED: " + proc.stderr.strip()[-200:]
            print(f"mex {folder}/{src}: {status}")


# ----------------------------------------------------------------------- references
def cvxpy_reference(form: Formulation, p: Problem, rho, E: dict) -> tuple[dict | None, str]:
    """MALSAR's formulation solved by cvxpy (Clarabel, tolerances 1e-10): (solution, status),
    or (None, why not)."""
    if form.cvx_penalty is None:
        return None, "no conic form"
    if p.entries > CVXPY_MAX_ENTRIES:
        return None, f"sum_t n_t d = {p.entries:,} > {CVXPY_MAX_ENTRIES:,}"
    import cvxpy as cp
    from scipy import sparse

    if "CLARABEL" not in cp.installed_solvers():
        return None, "Clarabel not installed"
    split = "P" in form.outputs
    v = ({"P": cp.Variable((p.d, p.T)), "Q": cp.Variable((p.d, p.T))} if split
         else {"W": cp.Variable((p.d, p.T))})
    if split:
        v["W"] = v["P"] + v["Q"]
    X = sparse.block_diag(p.Xs, format="csr")
    y = np.concatenate(p.ys)
    z = X @ cp.vec(v["W"], order="F")              # (w_1; ...; w_T): the block order
    if form.loss == "squared":
        data = 0.5 * cp.sum_squares(z - y)
    else:
        v["C"] = cp.Variable(p.T)
        rows = np.repeat(np.arange(p.T), [yt.size for yt in p.ys])
        S = sparse.csr_matrix((np.ones(y.size), (np.arange(y.size), rows)), shape=(y.size, p.T))
        weight = 1.0 / np.bincount(rows).astype(float)[rows]
        data = cp.sum(cp.multiply(weight, cp.logistic(-cp.multiply(y, z + S @ v["C"]))))
    try:
        pen, cons = form.cvx_penalty(cp, v, rho, E)
    except NotBuilt as exc:
        return None, str(exc)
    problem = cp.Problem(cp.Minimize(form.factor * data + pen), cons)
    tol = {"tol_gap_abs": 1e-10, "tol_gap_rel": 1e-10, "tol_feas": 1e-10, "max_iter": 500}
    try:
        with warnings.catch_warnings():   # "inaccurate": the status says so
            warnings.simplefilter("ignore", UserWarning)
            problem.solve(solver="CLARABEL", **tol)
    except cp.error.SolverError as exc:
        return None, f"Clarabel failed: {exc}"
    if v["W"].value is None:
        return None, f"no solution ({problem.status})"
    sol = {k: np.asarray(x.value, dtype=np.float64) for k, x in v.items()}
    return sol, str(problem.status)


def registered_model(name: str | None):
    """The mtlbench model class registered as ``name``, or None."""
    from mtlbench.plugins import get_registry

    reg = get_registry()
    return reg.model_class(name) if name in reg.model_names else None


def fit_mtlbench(cls, params: dict, p: Problem, tol: float | None, max_iter: int):
    """One cold fit (a fresh TaskSet) with one BLAS thread: (model, CPU seconds, tasks).
    ``tol`` and ``max_iter`` are passed where the model has them."""
    from threadpoolctl import threadpool_limits

    accepted = inspect.signature(cls.__init__).parameters
    kw = dict(params)
    if tol is not None and "tol" in accepted:
        kw["tol"] = tol
    if "max_iter" in accepted:
        kw["max_iter"] = max_iter
    model = cls(**kw)
    tasks = p.tasks()
    with threadpool_limits(limits=1):
        t0 = time.process_time()
        model.fit(tasks)
        seconds = time.process_time() - t0
    return model, seconds, tasks


def mtlbench_solution(model) -> dict:
    """W and, where the model has them, the parts P, Q and the intercepts C."""
    sol = {"W": np.asarray(model.coef_, dtype=np.float64)}
    for key, attr in (("P", "P_"), ("Q", "Q_"), ("C", "intercept_")):
        if getattr(model, attr, None) is not None:
            sol[key] = np.asarray(getattr(model, attr), dtype=np.float64)
    return sol


def own_objective(model, tasks) -> float | None:
    """The model's own value of its objective (``fitted_objective``, else the last of
    ``objective_history_``)."""
    if callable(getattr(model, "fitted_objective", None)):
        return float(model.fitted_objective(tasks))
    hist = getattr(model, "objective_history_", None)
    return float(hist[-1]) if hist else None


def reference_fit(cls, params: dict, p: Problem, max_iter: int):
    """The reference run (``tol = TIGHT``), listening to the solver's progress reports:
    (model, tasks, the certificate of the last report -- an upper bound of objective minus
    optimum in mtlbench's scaling, None if the model reports none)."""
    from mtlbench.progress import listen

    last: list = [None]

    def record(iteration, objective, cert):
        last[0] = cert() if callable(cert) else cert

    with listen(record):
        model, _, tasks = fit_mtlbench(cls, params, p, TIGHT, max_iter)
    return model, tasks, None if last[0] is None else float(last[0])


# ----------------------------------------------------------------------- one instance
def _rel(a: float, b: float) -> float:
    return (a - b) / abs(b) if b else a - b


#: Below this relative difference from this script's evaluation, MALSAR's recorded objective
#: values are taken as its objective (the clustered functions' may not be: :func:`malsar_matched`)
FV_AGREES = 1e-12


def malsar_matched(form: Formulation, p: Problem, rho, E: dict, octave: Octave,
                   args: argparse.Namespace, long: dict, f_star: float, F: Callable) -> dict:
    """MALSAR at the loosest ladder tol that stops within REL of ``f_star``, timed
    (``--repeats`` cold runs, checked to stop at the predicted iterate).

    Where MALSAR's recorded objective values are its objective (``fv`` agrees with this
    script's value at the long run's end), they judge each tol (:func:`loosest_tol`).  Where
    they are not -- ``Least_CMTL`` / ``Logistic_CMTL`` evaluate (eta I + M)^{-1} from the
    eigenvectors of a non-symmetric matrix -- candidate stops are run cold and judged by this
    script's objective at the W each returns (bisected; those runs count as timed repeats)."""
    fv = long["fv"] / form.factor
    runs: dict[float, dict] = {}

    def run_and_judge(tol: float, k: int) -> float:
        runs[tol] = long if k == fv.size - 1 else octave.run(form, p, rho, E, tol,
                                                              args.max_iter, 1)
        return F(runs[tol])

    trusted = abs(_rel(float(fv[-1]), F(long))) <= FV_AGREES
    pick = loosest_tol(fv, f_star, None if trusted else run_and_judge)
    if pick is None:
        f_long = F(long)
        return {"status": f"never within {REL:g} in {args.max_iter} iterations",
                "seconds": float(long["seconds"][0]), "lower_bound": True,
                "iters": int(fv.size), "F": f_long, "rel": _rel(f_long, f_star)}
    tol, k = pick
    timed = runs.get(tol)
    seconds = [] if timed is None else list(timed["seconds"])
    if len(seconds) < args.repeats:
        timed = octave.run(form, p, rho, E, tol, args.max_iter, args.repeats - len(seconds))
        seconds += list(timed["seconds"])
    f_m = F(timed)
    return {"tol": tol, "iters": int(timed["fv"].size), "seconds": float(np.median(seconds)),
            "F": f_m, "rel": _rel(f_m, f_star), "lower_bound": False, "fv_is_objective": trusted,
            "as_predicted": bool(timed["fv"].size == k + 1 and timed["fv"][-1] == long["fv"][k])}


def mtlbench_matched(cls, params: dict, p: Problem, args: argparse.Namespace, f_star: float,
                     F: Callable) -> dict:
    """mtlbench at the loosest ladder tol whose cold fit is within REL of ``f_star`` (the
    model's only fit if it has no tol), timed."""
    has_tol = "tol" in inspect.signature(cls.__init__).parameters
    for tol in (LADDER if has_tol else (None,)):
        model, _, _ = fit_mtlbench(cls, params, p, tol, args.max_iter)
        f_t = F(mtlbench_solution(model))
        if abs(f_t - f_star) <= REL * abs(f_star):
            break
    times = [fit_mtlbench(cls, params, p, tol, args.max_iter)[1] for _ in range(args.repeats)]
    return {"tol": tol, "iters": int(getattr(model, "n_iter_", -1)),
            "seconds": float(np.median(times)), "F": f_t, "rel": _rel(f_t, f_star),
            "converged": getattr(model, "converged_", None)}


def run_instance(form: Formulation, p: Problem, fractions: tuple, octave: Octave,
                 args: argparse.Namespace) -> dict:
    """Reference, MALSAR and mtlbench at matched accuracy on one instance (module docstring).
    Objectives are stored in mtlbench's scaling (MALSAR's / ``factor``), every one evaluated
    by this script at the solution a side returned."""
    E = form.extras(p)
    rho = tuple(float(f * s) for f, s in zip(fractions, form.scales(p)))
    F = lambda sol: form.objective(p, rho, sol, E) / form.factor
    row: dict[str, Any] = {"formulation": form.key, "model": form.model, "data": p.name,
                           "fractions": list(fractions), "rho": list(rho)}
    found: list[tuple[float, str]] = []        # (objective, by whom): F* is the lowest
    cls = registered_model(form.model)
    if cls is not None:
        params = row["params"] = form.to_mtlbench(p, rho)
        ref, tasks, cert = reference_fit(cls, params, p, args.max_iter)
        f_ref, own = F(mtlbench_solution(ref)), own_objective(ref, tasks)
        row["reference"] = {"F": f_ref, "certificate": cert,
                            "converged": getattr(ref, "converged_", None)}
        row["mapping_mtlbench"] = None if own is None else _rel(own, f_ref)
        found.append((f_ref, "mtlbench"))
    if args.cvxpy:
        sol, status = cvxpy_reference(form, p, rho, E)
        row["cvxpy"] = {"status": status, "F": None if sol is None else F(sol)}
        if sol is not None:
            found.append((row["cvxpy"]["F"], "cvxpy"))
    long = octave.run(form, p, rho, E, MALSAR_MIN_TOL, args.max_iter, 1)
    f_long = F(long)
    row["malsar_long"] = {"iters": int(long["fv"].size), "seconds": float(long["seconds"][0]),
                          "F": f_long}
    row["mapping_malsar"] = _rel(float(long["fv"][-1]) / form.factor, f_long)
    found.append((f_long, "MALSAR"))
    f_star, row["f_star_source"] = min(found)
    row["f_star"] = f_star
    # F* - optimum <= F* - (F_ref - certificate): the certified relative bound, if any
    cert = row.get("reference", {}).get("certificate")
    row["certified_within"] = (None if cert is None
                               else (f_star - row["reference"]["F"] + cert) / abs(f_star))
    row["malsar"] = malsar_matched(form, p, rho, E, octave, args, long, f_star, F)
    if cls is None:
        row["mtlbench"] = {"status": f"model {form.model!r} not installed"}
        return row
    row["mtlbench"] = mtlbench_matched(cls, params, p, args, f_star, F)
    row["ratio"] = row["malsar"]["seconds"] / max(row["mtlbench"]["seconds"], 1e-9)
    row["same_optimum"] = bool(abs(row["malsar"]["rel"]) <= REL
                               and abs(row["mtlbench"]["rel"]) <= REL)
    return row


# ----------------------------------------------------------------------- printing
def _fmt_tol(tol) -> str:
    return "-" if tol is None else f"{tol:.0e}"


def print_row(r: dict) -> None:
    m, b = r["malsar"], r["mtlbench"]
    frac = ", ".join(f"{f:g}" for f in r["fractions"])
    rho = ", ".join(f"{x:.6g}" for x in r["rho"])
    cert = r.get("certified_within")
    print(f"\n{r['formulation']} on {r['data']}: rho = ({rho}) = ({frac}) x scale;  "
          f"F* = {r['f_star']:.12g}  [lowest found, by {r['f_star_source']}; "
          + ("uncertified" if cert is None else f"certified within {cert:.1e} relative") + "]")
    if "params" in r:
        print(f"  mtlbench {r['model']}: " + ", ".join(f"{k}={v:.6g}" if isinstance(v, float)
                                                    else f"{k}={v}"
                                                    for k, v in r["params"].items()))
    lo = r["malsar_long"]
    bound = ">=" if m["lower_bound"] else "  "
    note = m.get("status", "" if m.get("as_predicted") else "(stop not as predicted!)")
    if m.get("fv_is_objective") is False:
        note += " (MALSAR's recorded values are not its objective: tol bisected by cold runs)"
    print(f"  MALSAR    tol {_fmt_tol(m.get('tol'))}  iters {m['iters']:>6}  CPU {bound}"
          f"{m['seconds']:8.3f} s  (F-F*)/F* {m['rel']:+.1e}  {note}   [long run: "
          f"{lo['iters']} iters, {lo['seconds']:.2f} s, {lo['F']:.12g}]")
    if "status" in b:
        print(f"  mtlbench  {b['status']}")
    else:
        print(f"  mtlbench  tol {_fmt_tol(b['tol'])}  iters {b['iters']:>6}  CPU   "
              f"{b['seconds']:8.3f} s  (F-F*)/F* {b['rel']:+.1e}  converged={b['converged']}")
        print(f"  ratio MALSAR / mtlbench: {bound.strip()}{r['ratio']:.1f}x;  same optimum to "
              f"{REL:g} relative: {'yes' if r['same_optimum'] else 'no'}")
    checks = [f"MALSAR's own objective vs this script's {r['mapping_malsar']:+.1e}"]
    if r.get("mapping_mtlbench") is not None:
        checks.append(f"model's fitted_objective vs this script's {r['mapping_mtlbench']:+.1e}")
    if "cvxpy" in r:
        c = r["cvxpy"]
        checks.append(f"cvxpy ({c['status']}) "
                      + ("-" if c["F"] is None else f"{_rel(c['F'], r['f_star']):+.1e} vs F*"))
    if "reference" in r:
        ref = r["reference"]
        checks.append(f"reference run (tol {TIGHT:g}) {_rel(ref['F'], r['f_star']):+.1e} vs F*,"
                      f" converged={ref['converged']}")
    print("  checks: " + "; ".join(checks), flush=True)


def print_summary(rows: list[dict]) -> None:
    print(f"\nSummary (CPU seconds, one BLAS thread, cold start, matched accuracy {REL:g} "
          "relative to F*):")
    print(f"{'formulation':<18} {'data':<14} {'point':<12} {'MALSAR s':>10} {'mtlbench s':>10} "
          f"{'ratio':>8}  same optimum")
    for r in rows:
        m, b = r["malsar"], r["mtlbench"]
        frac = ",".join(f"{f:g}" for f in r["fractions"])
        bound = ">=" if m["lower_bound"] else ""
        if "status" in b:
            tail = f"{'-':>10} {'-':>8}  ({b['status']})"
        else:
            tail = (f"{b['seconds']:10.3f} {bound + format(r['ratio'], '.1f') + 'x':>8}  "
                    f"{'yes' if r['same_optimum'] else 'no'}")
        print(f"{r['formulation']:<18} {r['data']:<14} {frac:<12} "
              f"{bound + format(m['seconds'], '.3f'):>10} {tail}")


def print_table(octave: Octave | None) -> None:
    for form in FORMULATIONS.values():
        installed = registered_model(form.model) is not None
        why = octave.missing(form) if octave is not None else None
        print(f"\n{form.key}  ->  mtlbench {form.model!r} "
              f"({'installed' if installed else 'model not installed'}); MALSAR "
              f"{'runs under Octave' if why is None else 'cannot run: ' + why}")
        print(f"  call: {form.call}")
        print(f"  points (x scale): {list(form.points)}")
        for line in form.mapping.splitlines():
            print(f"  {line}")


# ----------------------------------------------------------------------- main
def select(names: str | None, everything: bool) -> list[Formulation]:
    """Formulations by MALSAR function or mtlbench model name; by default those whose model
    is installed (``--all``: every one)."""
    if names:
        by_model = {f.model: f for f in FORMULATIONS.values()}
        out = []
        for n in names.split(","):
            f = FORMULATIONS.get(n.strip()) or by_model.get(n.strip())
            if f is None:
                sys.exit(f"bench_malsar: unknown formulation {n!r}; known: "
                         + ", ".join(FORMULATIONS) + " (or their model names)")
            out.append(f)
        return out
    return [f for f in FORMULATIONS.values()
            if everything or registered_model(f.model) is not None]


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true",
                    help="School only, the middle point, one repeat, no cvxpy (~1 minute)")
    ap.add_argument("--list", action="store_true", help="print the formulation table and exit")
    ap.add_argument("--all", action="store_true",
                    help="also the formulations whose mtlbench model is not installed")
    ap.add_argument("--formulations", help="comma-separated MALSAR functions or model names")
    ap.add_argument("--data", default="school,simulated", help="school and/or simulated")
    ap.add_argument("--points", help="indices into each formulation's points (e.g. 0,2)")
    ap.add_argument("--repeats", type=int, default=3, help="timed cold runs per side (median)")
    ap.add_argument("--max-iter", type=int, default=20000,
                    help="iteration cap of both sides (MALSAR's maxIter, mtlbench's max_iter)")
    ap.add_argument("--no-cvxpy", dest="cvxpy", action="store_false",
                    help="skip the cvxpy cross-check")
    ap.add_argument("--malsar", type=Path, default=DEFAULT_MALSAR,
                    help="folder holding MALSAR/ (default /work/malsar)")
    ap.add_argument("--data-dir", type=Path, default=DEFAULT_DATA, help="folder of school.mat")
    ap.add_argument("--seed", type=int, default=101, help="generator seed of the simulated data")
    ap.add_argument("--build-mex", action="store_true",
                    help="compile MALSAR's MEX files for Octave (mkoctfile) and exit")
    ap.add_argument("--json", type=Path, help="also write the rows to this JSON file")
    args = ap.parse_args(argv)
    if args.quick:
        args.data, args.repeats, args.cvxpy = "school", 1, False
    if args.build_mex:
        build_mex(args.malsar)
        return
    if not (args.malsar / "MALSAR" / "utils").is_dir():
        sys.exit(f"bench_malsar: MALSAR not found at {args.malsar} (see this script's docstring;"
                 " --malsar DIR)")
    if args.list:
        print_table(Octave(args.malsar, Path(".")))
        return
    if shutil.which("octave") is None:
        sys.exit("bench_malsar: octave not found (Debian: apt-get install octave)")
    forms = select(args.formulations, args.all)
    datasets = [d.strip() for d in args.data.split(",")]
    if set(datasets) - {"school", "simulated"}:
        sys.exit(f"bench_malsar: --data takes school and/or simulated, got {args.data!r}")
    problems: dict[str, Problem] = {}

    def problem(data: str, loss: str) -> Problem:
        key = "school-binary" if data == "school" and loss == "logistic" else data
        if key not in problems:
            problems[key] = (simulated_problem(args.seed) if data == "simulated"
                             else school_problem("binary" if key == "school-binary"
                                                 else "regression", args.data_dir))
        return problems[key]

    version = subprocess.run(["octave", "--no-gui", "--quiet", "--norc", "--eval",
                              "printf('%s | %s', version(), version('-blas'))"],
                             capture_output=True, text=True, env=worker_env()).stdout.strip()
    print(f"GNU Octave {version}\nMALSAR at {args.malsar}; numpy {np.__version__}; "
          f"repeats {args.repeats}; iteration cap {args.max_iter}; matched accuracy {REL:g}")
    rows: list[dict] = []
    with tempfile.TemporaryDirectory(prefix="bench-malsar-") as work:
        octave = Octave(args.malsar, Path(work))
        for form in forms:
            why = octave.missing(form)
            if why is not None:
                print(f"\n{form.key}: skipped, {why}")
                continue
            points = list(form.points)
            if args.points:
                points = [points[int(i)] for i in args.points.split(",") if int(i) < len(points)]
            elif args.quick:
                points = [points[len(points) // 2]]
            for data in datasets:
                p = problem(data, form.loss)
                for fractions in points:
                    row = run_instance(form, p, fractions, octave, args)
                    print_row(row)
                    rows.append(row)
    print_summary(rows)
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1, default=float))


if __name__ == "__main__":
    main()
