"""SquaredAUCLoss: O(n d) identity vs brute-force pairs, finite differences, Lipschitz."""
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from mtlbench import TaskSet
from mtlbench_models._core.datafits import SquaredAUCLoss, squared_auc_bruteforce


def make_tasks(seed, T=3, d=6):
    rng = np.random.default_rng(seed)
    Xs, ys = [], []
    for t in range(T):
        n = int(rng.integers(4, 30))
        y = np.where(rng.random(n) < 0.4, 1.0, -1.0)
        y[0], y[1] = 1.0, -1.0
        Xs.append(rng.standard_normal((n, d)) * rng.uniform(0.5, 3))
        ys.append(y)
    return TaskSet.from_arrays("t", Xs, ys)


@settings(max_examples=30, deadline=None)
@given(st.integers(0, 10_000))
def test_matches_bruteforce(seed):
    ts = make_tasks(seed)
    J = SquaredAUCLoss(ts)
    W = np.random.default_rng(seed + 1).standard_normal((ts.d, ts.T))
    val, G = J.value_and_grad(W)
    vb, Gb = 0.0, np.zeros_like(W)
    for t in range(ts.T):
        v, g = squared_auc_bruteforce(ts.X(t), ts.y(t), W[:, t])
        vb += v
        Gb[:, t] = g
    assert np.isclose(val, vb, rtol=1e-10, atol=1e-10)
    np.testing.assert_allclose(G, Gb, rtol=1e-9, atol=1e-9)
    assert np.isclose(J.value(W), val)


def test_finite_differences():
    ts = make_tasks(7)
    J = SquaredAUCLoss(ts)
    rng = np.random.default_rng(0)
    W, V = rng.standard_normal((ts.d, ts.T)), rng.standard_normal((ts.d, ts.T))
    h = 1e-6
    fd = (J.value(W + h * V) - J.value(W - h * V)) / (2 * h)
    assert np.isclose(fd, np.sum(J.grad(W) * V), rtol=1e-6)


def test_lipschitz_is_exact_hessian_norm():
    ts = make_tasks(11)
    J = SquaredAUCLoss(ts)
    for t in range(ts.T):
        X, y = ts.X(t), ts.y(t)
        pos = y > 0
        n1, n0 = pos.sum(), (~pos).sum()
        Lauc = (np.diag(np.where(pos, 1 / n1, 1 / n0))
                - (np.outer(pos, ~pos) + np.outer(~pos, pos)) / (n1 * n0))
        H = X.T @ Lauc @ X
        assert np.isclose(J.task_lipschitz[t], np.linalg.eigvalsh(H)[-1], rtol=1e-9)


def test_definition_as_double_sum():
    # l = 1/(2 n+ n-) sum (1 - (s_p - s_q))^2, the scores centred around the labels ytil
    X = np.array([[1.0], [2.0], [0.5], [-1.0]])
    y = np.array([1.0, 1.0, -1.0, -1.0])
    ts = TaskSet.from_arrays("t", [X], [y])
    w = np.array([[0.3]])
    s = X[:, 0] * 0.3
    expect = sum((1 - (s[p] - s[q])) ** 2 for p in (0, 1) for q in (2, 3)) / (2 * 4)
    assert np.isclose(SquaredAUCLoss(ts).value(w), expect)


@pytest.mark.parametrize("pad_ratio", [1.0, 1e9])
def test_bucketed_batched_form_matches_bruteforce(pad_ratio):
    """Tasks of unequal sizes: one zero-padded bucket per size (pad ratio 1) or all in one
    bucket give the same value and gradient as brute-force pairs, task by task."""
    rng = np.random.default_rng(5)
    Xs = [rng.standard_normal((int(rng.integers(6, 30)), 5)) for _ in range(12)]
    ys = [np.where(np.arange(len(X)) % 4 == 0, 1.0, -1.0) for X in Xs]
    J = SquaredAUCLoss(TaskSet.from_arrays("p", Xs, ys), pad_ratio=pad_ratio)
    sizes = {len(X) for X in Xs}
    assert len(J.buckets) == (1 if pad_ratio > 1 else len(sizes))
    W = rng.standard_normal((5, 12))
    v, G = J.value_and_grad(W)
    vb = 0.0
    for t in range(12):
        val, g = squared_auc_bruteforce(Xs[t], ys[t], W[:, t])
        vb += val
        np.testing.assert_allclose(G[:, t], g, rtol=1e-10, atol=1e-10)
    assert abs(v - vb) <= 1e-10 * max(1.0, abs(vb))


def test_shift_by_a_shared_vector_matches_forward():
    ts = make_tasks(3, T=5)
    J = SquaredAUCLoss(ts)
    rng = np.random.default_rng(1)
    W, v = rng.standard_normal((ts.d, ts.T)), rng.standard_normal(ts.d)
    for a, b in zip(J.shift(J.forward(W), v), J.forward(W + v[:, None])):
        np.testing.assert_allclose(a, b, atol=1e-12)


def test_columns_constant_within_every_task_are_free():
    """A column constant within each task (its constant may differ between tasks, like a
    bias or a school-level feature) gets an exactly zero column of Z_t: exactly zero gradient
    row for every W, and listed in ``free_columns``; a column constant in some tasks only is
    not free."""
    rng = np.random.default_rng(2)
    Xs, ys = [], []
    for t in range(4):
        X = rng.standard_normal((15, 5))
        X[:, 0] = 1.0                     # bias
        X[:, 3] = 0.1 * (t + 1) / 3.0     # task-level feature (not exactly representable)
        if t == 0:
            X[:, 4] = 7.0                 # constant in one task only
        y = np.where(np.arange(15) % 3 == 0, 1.0, -1.0)
        Xs.append(X)
        ys.append(y)
    J = SquaredAUCLoss(TaskSet.from_arrays("c", Xs, ys))
    assert list(J.free_columns) == [0, 3]
    G = J.grad(rng.standard_normal((5, 4)))
    assert np.all(G[[0, 3]] == 0.0) and np.all(G[[1, 2]] != 0.0)
    assert G[4, 0] == 0.0 and np.all(G[4, 1:] != 0.0)   # zero in the task where constant
