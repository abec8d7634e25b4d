"""Joint (W, B) methods on AMTL's objective, for diagnosis only (issue 23 round 10).

AMTL's solver alternates blocks (then Levenberg-Marquardt near F = 0); these probes ask whether
a method on both blocks at once would do better where the alternation crawls.  Each works on
the rep-0 training split ``bench_amtl_objective.py`` uses, from the solver's own start
(B = 0, W = the s_X ridge), with F and lambda, mu exactly as ``AMTL.fit`` forms them:

    F(W, B) = sum_t c_t L_t(w_t) + lam ||W - W B||_F^2,   c_t = 1 + mu sum_s B_ts,
    grad_W F = c o (G W - X^T y) + 2 lam (R - R B^T),     R = W - W B,
    grad_B F = mu L 1^T - 2 lam W^T R                     (diagonal 0; B >= 0),

G W = [X_t^T X_t w_t]_t from the cached spectra.  The gradient is checked against central
differences before each probe (printed).

* ``lbfgsb``: scipy's L-BFGS-B on vec(W, B) (bounds B >= 0, diag B = 0); ``--scale`` first
  divides every variable by the square root of an estimate of its Hessian diagonal.  Prints
  the iterations to reach fractions of F_0 (stops at ``--target`` x F_0).
* ``newton``: trust-region Newton-CG (Steihaug) on W and the free B entries (B > 0, or 0 with
  a negative partial derivative), Hessian-vector products by central differences of the
  gradient, Jacobi scaling, the step projected onto B >= 0 and taken only if F falls.
* ``curvature``: after k outer iterations of AMTL (``--at``), the smallest and largest
  eigenvalue of F's Hessian on W and the positive B entries (ARPACK), and the best decrease of
  F along the smallest one's eigenvector (both signs, steps 1e-3..30, B projected) beside one
  block iteration's decrease there.

Round 10's numbers (benchmarks/patches/README.md): seed 101 attr0 (1, 1.3): L-BFGS-B stops at
0.907 F_0, scaled it needs 1,128 iterations to 0.1 F_0 (block-coordinate descent 431);
Newton-CG reaches 0.28 F_0 in 500 iterations.  Seed 102 attr0 (1, 1.78), k = 500 / 1,500:
smallest eigenvalue -1.40 / -2.36 against 2.1e5 / 3.1e5, decrease along it <= 1e-7 F_0.

    OMP_NUM_THREADS=1 python benchmarks/probe_amtl_joint_methods.py lbfgsb --scale \\
        --dataset-params seed=101 --problem attr0 --point 1:1.299
    OMP_NUM_THREADS=1 python benchmarks/probe_amtl_joint_methods.py curvature \\
        --dataset-params seed=102 --problem attr0 --point 1:1.778 --at 500,1500
"""
from __future__ import annotations

import argparse
import time

import numpy as np
from scipy.optimize import minimize
from scipy.sparse.linalg import ArpackNoConvergence, LinearOperator, eigsh

from mtlbench.protocol import ProtocolConfig
from mtlbench.race import race_problem
from mtlbench_models import amtl as A
from mtlbench_models._taskgram import TaskSpectra


class Objective:
    """F and its gradient on one training split at (lam, mu) as AMTL.fit scales them."""

    def __init__(self, tasks, lam_ratio: float, mu_ratio: float):
        self.spec = spec = TaskSpectra.of(tasks)
        self.T, self.d = spec.T, spec.d
        fitted = A.AMTL(lam=lam_ratio, mu=mu_ratio, max_iter=1).fit(tasks)
        self.lam, self.mu = fitted.lam_, fitted.mu_
        self.W0 = spec.shifted_solve(spec.Xty, np.ones(self.T), np.full(self.T, spec.energy))
        self.F0 = self.value(self.W0, np.zeros((self.T, self.T)))
        self.gradients = 0

    def value(self, W, B) -> float:
        return A._objective(self.spec, W, self.spec.gram_apply(W), B, self.lam, self.mu)[0]

    def value_and_gradient(self, W, B):
        """(F, grad_W F (d x T), grad_B F (T x T, diagonal 0))."""
        self.gradients += 1
        spec, lam, mu = self.spec, self.lam, self.mu
        GW = spec.gram_apply(W)
        F, L, R = A._objective(spec, W, GW, B, lam, mu)
        c = 1.0 + mu * B.sum(axis=1)
        gW = c * (GW - spec.Xty) + 2.0 * lam * (R - R @ B.T)
        gB = mu * L[:, None] - 2.0 * lam * (W.T @ R)
        np.fill_diagonal(gB, 0.0)
        return F, gW, gB

    def hessian_times(self, W, B, dW, dB, eps):
        """(H (dW, dB)) as (d x T, T x T) by central differences of the gradient, step eps."""
        _, a1, b1 = self.value_and_gradient(W + eps * dW, B + eps * dB)
        _, a2, b2 = self.value_and_gradient(W - eps * dW, B - eps * dB)
        return (a1 - a2) / (2.0 * eps), (b1 - b2) / (2.0 * eps)

    def check_gradient(self, seed: int = 0) -> None:
        rng = np.random.default_rng(seed)
        T = self.T
        W = self.W0 + 0.01 * rng.normal(size=self.W0.shape)
        B = 0.01 * np.abs(rng.normal(size=(T, T)))
        np.fill_diagonal(B, 0.0)
        vW, vB = rng.normal(size=W.shape), rng.normal(size=B.shape)
        np.fill_diagonal(vB, 0.0)
        _, gW, gB = self.value_and_gradient(W, B)
        eps = 1e-6
        fd = (self.value(W + eps * vW, B + eps * vB)
              - self.value(W - eps * vW, B - eps * vB)) / (2 * eps)
        an = float(np.sum(gW * vW) + np.sum(gB * vB))
        print(f"gradient check: directional derivative {an:.8g} analytic, {fd:.8g} central "
              f"differences (relative difference {abs(an - fd) / max(abs(fd), 1e-300):.1e})")


def _hessian_diagonal(obj: Objective, W, B):
    """Estimates of F's Hessian diagonal in W (d x T) and in B (T x T): c_t diag(G_t) +
    2 lam M_tt, and 2 lam ||w_s||^2 (the diagonal of the B-step's quadratic)."""
    spec = obj.spec
    c = 1.0 + obj.mu * B.sum(axis=1)
    diagG = np.einsum("tir,tr->it", spec.V ** 2, spec.e)
    hW = c * diagG + 2.0 * obj.lam * (1.0 + np.einsum("st,st->s", B, B))
    hB = np.repeat(2.0 * obj.lam * np.einsum("it,it->t", W, W)[:, None], obj.T, axis=1)
    return hW, hB


def _milestones(hist, F0) -> str:
    h = np.asarray(hist) / F0
    return " ".join(f"{q} F_0 at {int(np.argmax(h <= q)) + 1}" for q in (0.5, 0.3, 0.2, 0.1)
                    if (h <= q).any())


def probe_lbfgsb(obj: Objective, scale: bool, target: float, max_iter: int) -> None:
    d, T = obj.d, obj.T
    nW = d * T
    hW, hB = _hessian_diagonal(obj, obj.W0, np.zeros((T, T)))
    D = 1.0 / np.sqrt(np.concatenate([hW.ravel(), hB.ravel()])) if scale else np.ones(nW + T * T)

    def fg(z):
        x = z * D
        F, gW, gB = obj.value_and_gradient(x[:nW].reshape(d, T), x[nW:].reshape(T, T))
        return F, np.concatenate([gW.ravel(), gB.ravel()]) * D

    bounds = [(None, None)] * nW + [(0.0, 0.0) if s == t else (0.0, None)
                                    for s in range(T) for t in range(T)]
    hist = []

    class Reached(Exception):
        pass

    def callback(z):
        x = z * D
        hist.append(obj.value(x[:nW].reshape(d, T), x[nW:].reshape(T, T)))
        if hist[-1] <= target * obj.F0:
            raise Reached

    z0 = np.concatenate([obj.W0.ravel(), np.zeros(T * T)]) / D
    t0 = time.process_time()
    message = f"reached {target} F_0"
    try:
        res = minimize(fg, z0, jac=True, method="L-BFGS-B", bounds=bounds, callback=callback,
                       options=dict(maxiter=max_iter, ftol=1e-15, gtol=0.0))
        message = res.message
    except Reached:
        pass
    print(f"L-BFGS-B{' (scaled)' if scale else ''}: {message}; {len(hist)} iterations, "
          f"{obj.gradients} gradients, {time.process_time() - t0:.2f} CPU s, "
          f"F = {hist[-1] / obj.F0:.4g} F_0; {_milestones(hist, obj.F0)}")


def probe_newton(obj: Objective, target: float, max_iter: int, max_cg: int) -> None:
    d, T = obj.d, obj.T
    nW = d * T
    W, B = obj.W0.copy(), np.zeros((T, T))
    F, radius, products, hist = obj.F0, 1.0, 0, []
    t0 = time.process_time()
    it = 0
    while F > target * obj.F0 and it < max_iter:
        it += 1
        F, gW, gB = obj.value_and_gradient(W, B)
        free = (B > 0) | (gB < 0)
        np.fill_diagonal(free, False)
        hW, hB = _hessian_diagonal(obj, W, B)
        D = 1.0 / np.sqrt(np.concatenate([hW.ravel(), hB[free] + 1e-300]))
        g = np.concatenate([gW.ravel(), gB[free]]) * D

        def unpack(v, D=D, free=free):
            v = v * D
            dB = np.zeros((T, T))
            dB[free] = v[nW:]
            return v[:nW].reshape(d, T), dB

        def hess(v, W=W, B=B, D=D, free=free, unpack=unpack):      # scaled Hessian product
            nonlocal products
            products += 1
            dW, dB = unpack(v)
            eps = (1e-6 * (1.0 + float(np.linalg.norm(W)))
                   / max(float(np.linalg.norm(v * D)), 1e-300))
            hW, hB = obj.hessian_times(W, B, dW, dB, eps)
            return np.concatenate([hW.ravel(), hB[free]]) * D

        def to_boundary(z, p):
            a, b, c = p @ p, 2.0 * z @ p, z @ z - radius ** 2
            return (-b + np.sqrt(b * b - 4.0 * a * c)) / (2.0 * a)

        z, r = np.zeros_like(g), g.copy()
        p = -r
        for _ in range(max_cg):                  # Steihaug-Toint CG
            Hp = hess(p)
            pHp = float(p @ Hp)
            if pHp <= 0:
                z = z + to_boundary(z, p) * p
                break
            alpha = float(r @ r) / pHp
            if np.linalg.norm(z + alpha * p) >= radius:
                z = z + to_boundary(z, p) * p
                break
            z = z + alpha * p
            r_new = r + alpha * Hp
            if np.linalg.norm(r_new) <= 0.1 * np.linalg.norm(g):
                break
            p = -r_new + float(r_new @ r_new) / float(r @ r) * p
            r = r_new
        predicted = -float(g @ z + 0.5 * z @ hess(z))
        dW, dB = unpack(z)
        B_try = np.maximum(B + dB, 0.0)
        np.fill_diagonal(B_try, 0.0)
        F_try = obj.value(W + dW, B_try)
        rho = (F - F_try) / predicted if predicted > 0 else -1.0
        if F_try < F:
            W, B, F = W + dW, B_try, F_try
        hist.append(F)
        if rho < 0.25:
            radius *= 0.25
        elif rho > 0.75 and np.linalg.norm(z) >= 0.99 * radius:
            radius *= 2.0
    print(f"Newton-CG: {it} iterations, {products} Hessian products, "
          f"{time.process_time() - t0:.2f} CPU s, F = {F / obj.F0:.4g} F_0; "
          f"{_milestones(hist, obj.F0)}")


def probe_curvature(obj: Objective, tasks, lam_ratio, mu_ratio, at) -> None:
    d, T = obj.d, obj.T
    nW = d * T
    for k in at:
        fitted = A.AMTL(lam=lam_ratio, mu=mu_ratio, max_iter=k).fit(tasks)
        W, B = fitted.coef_, fitted.B_
        hist = fitted.objective_history_
        F, gW, gB = obj.value_and_gradient(W, B)
        pos = B > 0
        g = np.concatenate([gW.ravel(), gB[pos]])

        def unpack(v, pos=pos):
            dB = np.zeros((T, T))
            dB[pos] = v[nW:]
            return v[:nW].reshape(d, T), dB

        def hess(v, W=W, B=B, pos=pos, unpack=unpack):
            dW, dB = unpack(v)
            hW, hB = obj.hessian_times(W, B, dW, dB, 1e-4 / max(float(np.linalg.norm(v)), 1e-300))
            return np.concatenate([hW.ravel(), hB[pos]])

        op = LinearOperator((g.size, g.size), matvec=hess, dtype=np.float64)
        try:
            lo, vec = eigsh(op, k=1, which="SA", tol=1e-4, maxiter=2000, ncv=40)
        except ArpackNoConvergence as exc:       # the near-zero end clusters; take what converged
            lo, vec = exc.eigenvalues, exc.eigenvectors
        hi = eigsh(op, k=1, which="LA", tol=1e-3, return_eigenvectors=False)
        dW, dB = unpack(vec[:, 0])
        best = F
        for sign in (1.0, -1.0):
            for step in np.geomspace(1e-3, 30.0, 40):
                B_try = np.maximum(B + sign * step * dB, 0.0)
                np.fill_diagonal(B_try, 0.0)
                best = min(best, obj.value(W + sign * step * dW, B_try))
        per_iteration = (hist[-11] - hist[-1]) / 10.0 if len(hist) > 11 else float("nan")
        print(f"k = {k}: F = {F / obj.F0:.4f} F_0, nnz(B) = {int(pos.sum())}; Hessian eigenvalues "
              f"smallest {float(lo[0]):.3g}, largest {float(hi[0]):.3g}; along the smallest one's "
              f"eigenvector F falls by {(F - best) / obj.F0:.2e} F_0 at best, one block iteration "
              f"here by {per_iteration / obj.F0:.2e} F_0")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("probe", choices=("lbfgsb", "newton", "curvature"))
    ap.add_argument("--problem", default="attr0")
    ap.add_argument("--dataset", default="synthetic-attributes")
    ap.add_argument("--dataset-params", default="")
    ap.add_argument("--data-dir", default=None)
    ap.add_argument("--point", default="1:1.299")
    ap.add_argument("--target", type=float, default=0.1, help="stop at this fraction of F_0")
    ap.add_argument("--max-iter", type=int, default=None,
                    help="iterations (default: L-BFGS-B 3000, Newton-CG 500)")
    ap.add_argument("--max-cg", type=int, default=50, help="Newton-CG: inner iterations a step")
    ap.add_argument("--scale", action="store_true", help="L-BFGS-B: Jacobi-scaled variables")
    ap.add_argument("--at", default="500,1500", help="curvature: outer iterations of AMTL")
    args = ap.parse_args()
    from mtlbench.plugins import get_registry
    sel = args.dataset + (f"[{args.dataset_params}]" if args.dataset_params else "")
    tasks, _ = race_problem(get_registry(), sel, args.problem, args.data_dir, 0, ProtocolConfig())
    lam_ratio, mu_ratio = (float(v) for v in args.point.split(":"))
    obj = Objective(tasks, lam_ratio, mu_ratio)
    print(f"{sel}/{args.problem} rep 0 training split: T = {obj.T}, d = {obj.d}, "
          f"(lam, mu) = ({lam_ratio}, {mu_ratio}), F_0 = {obj.F0:.6g}")
    obj.check_gradient()
    obj.gradients = 0
    if args.probe == "lbfgsb":
        probe_lbfgsb(obj, args.scale, args.target, args.max_iter or 3000)
    elif args.probe == "newton":
        probe_newton(obj, args.target, args.max_iter or 500, args.max_cg)
    else:
        probe_curvature(obj, tasks, lam_ratio, mu_ratio, [int(v) for v in args.at.split(",")])


if __name__ == "__main__":
    main()
