"""cvxpy as a second solver of a model's objective (``mtlbench race``, the tests' oracles): the
stacked per-task design, its size limit, the conic solver and its tolerances, in one place.

The tasks' designs are stacked block-diagonally, so that ``X @ vec(W, order="F")`` is
(X_1 w_1; ...; X_T w_T).  Instances with more than :data:`CVXPY_MAX_ENTRIES` entries
(sum_t n_t * d) are refused in one line: cvxpy's canonicalisation and the interior-point
factorisations grow faster than the data (the simulated data, 100 x 136 x 80 = 1.1 M, solve in
tens of seconds).  The solver is the first installed of Clarabel, ECOS, SCS (ECOS skipped for
a semidefinite program), at tolerances 1e-9.
"""
from __future__ import annotations

import warnings
from typing import Sequence

import numpy as np

__all__ = ["CVXPY_MAX_ENTRIES", "stacked_design", "solve_conic"]

#: Largest stacked design (sum_t n_t * d entries) for which a conic problem is built.
CVXPY_MAX_ENTRIES = 2_000_000

_TOLERANCES = {"CLARABEL": {"tol_gap_abs": 1e-9, "tol_gap_rel": 1e-9, "tol_feas": 1e-9},
               "ECOS": {"abstol": 1e-9, "reltol": 1e-9, "feastol": 1e-9},
               "SCS": {"eps": 1e-9, "max_iters": 100_000}}


def stacked_design(who: str, Xs: Sequence[np.ndarray], ys: Sequence[np.ndarray]):
    """(block-diagonal CSR design, stacked targets) of the tasks' ``Xs`` and ``ys``; refuses
    more than :data:`CVXPY_MAX_ENTRIES` entries with a ValueError naming ``who``."""
    from scipy import sparse

    d = Xs[0].shape[1] if len(Xs) else 0
    entries = int(sum(X.shape[0] for X in Xs)) * d
    if entries > CVXPY_MAX_ENTRIES:
        raise ValueError(f"{who} (cvxpy): the conic problem is not built for sum_t n_t * d = "
                         f"{entries:,} > {CVXPY_MAX_ENTRIES:,} (too slow for an interior-point "
                         "solver here)")
    return sparse.block_diag(list(Xs), format="csr"), np.concatenate(list(ys))


def solve_conic(problem, who: str, sdp: bool = False) -> str:
    """Solve the cvxpy ``problem`` with the first installed conic solver (module docstring);
    returns its name.  A solver's "inaccurate" warning is silenced: the status says so and the
    caller certifies the point with its own duality gap."""
    import cvxpy as cp

    order = ("CLARABEL", "SCS") if sdp else ("CLARABEL", "ECOS", "SCS")
    solver = next((s for s in order if s in cp.installed_solvers()), None)
    if solver is None:
        raise ValueError(f"{who} (cvxpy): none of the conic solvers {', '.join(order)} is "
                         "installed")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        problem.solve(solver=solver, **_TOLERANCES[solver])
    return solver
