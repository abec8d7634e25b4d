"""_core.solvers.lbfgs: the preconditioned L-BFGS of the factored solvers reaches the minimiser
of convex quadratics (with and without a preconditioner), decreases f at every iteration, and
stops where its caller's check says so; the solver built on it (solvers.LBFGS, a datafit plus a
differentiable penalty) reaches the ridge solution and refuses a non-smooth penalty."""
from __future__ import annotations

import numpy as np
import pytest

from mtlbench_models._core.solvers import lbfgs


def _quadratic(seed, n=30, cond=1e2):
    rng = np.random.default_rng(seed)
    Q, _ = np.linalg.qr(rng.standard_normal((n, n)))
    H = (Q * np.geomspace(1.0, cond, n)) @ Q.T
    b = rng.standard_normal(n)
    return H, b, lambda x: (0.5 * x @ H @ x - b @ x, H @ x - b)


@pytest.mark.parametrize("precondition", [False, True])
def test_lbfgs_reaches_the_minimiser_of_a_quadratic(precondition):
    H, b, fun = _quadratic(0)
    x_star = np.linalg.solve(H, b)
    seen = []
    Hd = np.diag(H)
    pre = (lambda x, v: v / Hd) if precondition else None
    # (f-based line searches resolve the gradient to ~sqrt(eps) relative, not to eps)
    check = lambda x: np.linalg.norm(H @ x - b) <= 1e-7 * np.linalg.norm(b)
    x, f, it, n_eval, stopped = lbfgs(fun, np.zeros(b.size), 2000, check=check, check_every=1,
                                      precondition=pre, progress=lambda i, f: seen.append(f))
    assert stopped and it == len(seen) and n_eval >= it
    np.testing.assert_allclose(x, x_star, rtol=1e-5, atol=1e-7)
    assert np.all(np.diff(seen) < 0)                      # Armijo: strict decrease
    assert f == pytest.approx(-0.5 * b @ x_star, rel=1e-10)


def test_lbfgs_stops_at_the_cap_and_on_a_flat_function():
    H, b, fun = _quadratic(1, cond=1e6)
    x, f, it, _, stopped = lbfgs(fun, np.zeros(b.size), 3, check=lambda x: False)
    assert it == 3 and not stopped
    # a function that cannot decrease (constant): the line search gives up, not stopped
    x, f, it, _, stopped = lbfgs(lambda x: (1.0, np.ones_like(x)), np.zeros(4), 50)
    assert not stopped and it == 0


def test_lbfgs_solver_reaches_the_ridge_solution_and_refuses_a_nonsmooth_penalty():
    """solvers.LBFGS on the squared loss plus lam/2 ||W||_F^2 reaches the per-task ridge
    solutions, certified by the duality gap; a penalty without a gradient is refused."""
    from classic_oracles import tiny
    from mtlbench_models._core.datafits import SquaredLoss
    from mtlbench_models._core.penalties import L21, SquaredFrobenius
    from mtlbench_models._core.solvers import LBFGS

    tasks = tiny(2, binary=False, d=5, T=4, n=8)
    J, pen = SquaredLoss(tasks), SquaredFrobenius(0.3)
    res = LBFGS(tol=1e-10).solve(J, pen, np.zeros((tasks.d, tasks.T)))
    assert res.converged and res.certificate <= 1e-10 and res.certificate_kind == "gap"
    assert len(res.history) == res.n_iter + 1
    np.testing.assert_allclose(res.W, J.ridge(0.3), rtol=1e-5, atol=1e-6)
    with pytest.raises(ValueError, match="L21 needs a gradient and a conjugate"):
        LBFGS().solve(J, L21(0.1), np.zeros((tasks.d, tasks.T)))
