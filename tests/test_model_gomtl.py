"""GO-MTL (squared and logistic): every block step decreases the objective (property test),
the initial basis is the single-task solutions' top singular vectors, mu_ratio = 1 gives
W = 0, k beyond min(d, T) is refused in one line."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from mtlbench import TaskSet
from mtlbench.progress import listen
from mtlbench_models._core.datafits import SquaredLoss
from mtlbench_models.gomtl import GOMTL, GOMTLLogistic, gomtl_objective


def _tasks(seed=0, d=6, T=5, n=10):
    rng = np.random.default_rng(seed)
    B = rng.standard_normal((d, 2))
    Xs = [rng.standard_normal((n + t, d)) for t in range(T)]
    ys = []
    for t, X in enumerate(Xs):
        y = np.where(X @ B[:, t % 2] + 0.5 * rng.standard_normal(len(X)) > 0, 1.0, -1.0)
        y[:2] = [1.0, -1.0]
        ys.append(y)
    return TaskSet.from_arrays("tiny", Xs, ys)


@settings(max_examples=15, deadline=None)
@given(seed=st.integers(0, 10_000), mu=st.floats(0.01, 0.9), k=st.integers(1, 5),
       logistic=st.booleans())
def test_every_block_step_decreases_the_objective(seed, mu, k, logistic):
    cls = GOMTLLogistic if logistic else GOMTL
    tasks = _tasks(seed)
    m = cls(mu_ratio=mu, k=k, max_iter=30).fit(tasks)
    h = np.asarray(m.objective_history_)
    # F at the start, after every block step and after every accepted line-search step
    assert 2 * m.n_iter_ + 1 <= len(h) <= 3 * m.n_iter_ + 1
    assert np.all(np.diff(h) <= 1e-10 * abs(h[0]))
    J = m._datafit(tasks)
    assert gomtl_objective(J, m.L_, m.S_, m.mu_, m.lam_) == pytest.approx(h[-1], rel=1e-9)
    np.testing.assert_allclose(m.coef_, m.L_ @ m.S_)


def test_initial_basis_and_first_objective():
    tasks = _tasks(1)
    sq = SquaredLoss(tasks)
    U = np.linalg.svd(sq.ridge(sq.curvature), full_matrices=False)[0]
    m = GOMTL(mu_ratio=0.2, k=3, max_iter=1).fit(tasks)
    # F at the start is J(0) (S = 0) + lam ||U_k||_F^2 = J(0) + lam k
    assert m.objective_history_[0] == pytest.approx(sq.value(np.zeros((6, 5))) + 3 * m.lam_)
    mu0 = np.abs(U[:, :3].T @ sq.grad(np.zeros((6, 5)))).max()
    assert m.mu_ == pytest.approx(0.2 * mu0)


@pytest.mark.parametrize("cls", [GOMTL, GOMTLLogistic])
def test_mu_ratio_one_gives_zero(cls):
    m = cls(mu_ratio=1.0, k=2).fit(_tasks(2))
    assert m.converged_
    assert not np.any(m.coef_)


def test_k_beyond_min_d_t_is_refused():
    with pytest.raises(ValueError, match=r"gomtl: k = 6 exceeds min\(d, T\) = 5"):
        GOMTL(k=6).fit(_tasks())


@pytest.mark.parametrize("cls", [GOMTL, GOMTLLogistic])
def test_progress_reports_the_objective_once_per_iteration(cls):
    # the block solvers run silently: a listener (the race) sees F itself, not the
    # subproblems' objectives
    seen = []
    with listen(lambda it, F, cert: seen.append((it, F))):
        m = cls(mu_ratio=0.1, k=3).fit(_tasks(3))
    assert [it for it, _ in seen] == list(range(1, m.n_iter_ + 1))
    F = np.array([f for _, f in seen])
    assert np.all(np.diff(F) <= 1e-12 * abs(F[0]))
    assert F[-1] == pytest.approx(m.objective_history_[-1], rel=1e-12)
