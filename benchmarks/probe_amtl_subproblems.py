"""How much of each block subproblem's gap one AMTL outer iteration closes (issue 23 round 9).

Fits AMTL(lam, mu) for k outer iterations (``max_iter=k``: the state the k-th iteration left,
on the rep-0 training split ``bench_amtl_objective.py`` uses), then at that (W, B):

* B-step: F after 1, 2, 4, 8, 20 Jacobi-scaled projected steps (``_b_descent``; the solver
  takes ``b_passes`` = 2), as the fraction of the gap F(B) - F(B*) left (B* = 500 steps);
* W-step (after 2 B-steps, as the solver does): the W-subproblem's quadratic after 1, 2, 3, 5,
  10, 20 PCG iterations with the solver's block-diagonal preconditioner (it takes
  ``cg_max_iter`` = 2), as the fraction of its gap left (300 iterations = exact), and the
  spectrum ends of M = (I - B)(I - B)^T.

Round 9's numbers (seed 101 attr0, (1, 1.3), k = 50 / 150 / 300): 2 B-steps leave 0.80 / 0.88 /
0.95 of the B gap, 2 CG iterations 0.92 / 0.96 / 0.96 of the W gap: both blocks are solved
far from exactly, which is why the block phase creeps (module docstring).

``--preconditioners`` (round 10) adds the W-step's PCG with two other preconditioners: the
Sylvester operator S P + 2 lam P M with S = mean_t c_t G_t (M exact, the data curvature
averaged over tasks; two eigenbases), and a two-level one (block-diagonal, then the Sylvester
solve on the residual, then block-diagonal again: symmetric multiplicative; positive definite
only if the block-diagonal step contracts in the energy norm, which is not guaranteed, but CG
converged steadily with it in these runs; the reverse order stalled).  Round 10's
numbers (same fit, k = 30 / 150): after 2 iterations the Sylvester one leaves 0.76 / 0.85 and the
two-level one 0.42 / 0.59 of the gap (block-diagonal 0.90 / 0.96); a Sylvester solve costs
four dense products (two d x d x T, two d x T x T) and a two-level one that plus two Hessian
products (benchmarks/patches/README.md, round 10).

    OMP_NUM_THREADS=1 python benchmarks/probe_amtl_subproblems.py --dataset-params seed=101 \
        --problem attr0 --point 1:1.299 --at 50,150,300
"""
from __future__ import annotations

import argparse

import numpy as np

from mtlbench.protocol import ProtocolConfig
from mtlbench.race import race_problem
from mtlbench_models import amtl as A
from mtlbench_models._taskgram import TaskSpectra


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--problem", default="attr0")
    ap.add_argument("--dataset", default="synthetic-attributes")
    ap.add_argument("--dataset-params", default="")
    ap.add_argument("--data-dir", default=None)
    ap.add_argument("--point", default="1:1.299")
    ap.add_argument("--at", default="50,150,300")
    ap.add_argument("--preconditioners", action="store_true",
                    help="also the W-step's PCG with the Sylvester and two-level preconditioners")
    args = ap.parse_args()
    from mtlbench.plugins import get_registry
    sel = args.dataset + (f"[{args.dataset_params}]" if args.dataset_params else "")
    tr, _ = race_problem(get_registry(), sel, args.problem, args.data_dir, 0, ProtocolConfig())
    spec = TaskSpectra.of(tr)
    lam_r, mu_r = (float(v) for v in args.point.split(":"))
    for k in (int(v) for v in args.at.split(",")):
        m = A.AMTL(lam=lam_r, mu=mu_r, max_iter=k).fit(tr)
        W, B0, lam, mu = m.coef_, m.B_, m.lam_, m.mu_
        F0 = m.objective_history_[0]
        GW = spec.gram_apply(W)
        L = spec.losses(W)

        def F_of(B):                       # F at the fitted W (the module's own objective)
            return A._objective(spec, W, GW, B, lam, mu)[0]

        res = {}
        for passes in (1, 2, 4, 8, 20, 500):
            B = B0.copy()
            C, diagC, G, pen = A._b_setup(W, B, L, lam, mu)
            A._b_descent(B, G, W, C, diagC, pen, passes, 0.0)
            res[passes] = (F_of(B), B)
        fstar, gap = res[500][0], F_of(B0) - res[500][0]
        print(f"k = {k}: F / F_0 = {F_of(B0) / F0:.4f}, nnz(B) = {np.count_nonzero(B0)}")
        print(f"  B-step gap {gap:.4g}; left after p steps:",
              " ".join(f"p{p} {(res[p][0] - fstar) / gap:.3f}" for p in (1, 2, 4, 8, 20)))
        B = res[2][1]
        T = spec.T
        c = 1.0 + mu * B.sum(axis=1)
        a = 2.0 * lam * (1.0 + np.einsum("st,st->s", B, B))
        IB = np.eye(T) - B
        M = IB @ IB.T
        ev = np.linalg.eigvalsh(M)

        def H(P):
            return c * spec.gram_apply(P) + 2.0 * lam * (P @ M)

        rhs = spec.Xty * c

        def q(X):
            return 0.5 * np.sum(X * H(X)) - np.sum(rhs * X)

        def block_diagonal(R):             # the solver's preconditioner
            return spec.shifted_solve(R, c, a)

        def pcg(n, prec=block_diagonal):
            X = W.copy()
            R = rhs - H(X)
            Z = prec(R)
            P, rz, out = Z, np.sum(R * Z), []
            for _ in range(n):
                HP = H(P)
                al = rz / np.sum(P * HP)
                X, R = X + al * P, R - al * HP
                out.append(q(X))
                Z = prec(R)
                rzn = np.sum(R * Z)
                P, rz = Z + rzn / rz * P, rzn
            return out

        qs = pcg(300)
        qstar, q0 = qs[-1], q(W)

        def left(qk):                      # the fraction of the W-step's gap left after k
            return " ".join(f"k{i} {(qk[i - 1] - qstar) / (q0 - qstar):.3f}"
                            for i in (1, 2, 3, 5, 10, 20))

        print(f"  W-step gap {q0 - qstar:.4g} (M eigenvalues {ev[0]:.1e} .. {ev[-1]:.3g}, "
              f"{int((ev < 1e-3).sum())} below 1e-3); left after k CG iterations:", left(qs))
        if not args.preconditioners:
            continue
        # the task-averaged data curvature S = mean_t c_t G_t with M exactly: the Sylvester
        # operator S P + 2 lam P M, inverted in the eigenbases of S and M
        S = np.einsum("t,tir,tr,tjr->ij", c, spec.V, spec.e, spec.V) / T
        s_ev, U = np.linalg.eigh(S)
        m_ev, Q = np.linalg.eigh(2.0 * lam * M)

        def sylvester(R):
            return U @ ((U.T @ R @ Q) / (s_ev[:, None] + m_ev[None, :])) @ Q.T

        def two_level(R):                  # block-diagonal smoother around the Sylvester solve
            z = block_diagonal(R)
            z = z + sylvester(R - H(z))
            return z + block_diagonal(R - H(z))

        for name, prec, cost in (("Sylvester", sylvester, "4 dense products"),
                                 ("two-level", two_level, "those + 2 Hessian products")):
            print(f"  {name} ({cost} per iteration): left after k CG iterations:",
                  left(pcg(20, prec)))


if __name__ == "__main__":
    main()
