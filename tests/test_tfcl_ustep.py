"""U-step of TFCL (Thm. eigsol): partial solver vs dense eigh, every multiplicity case, and
the cvxpy SDP oracle over many seeds."""
import numpy as np
import pytest

from mtlbench_models.tfcl import bipartite_laplacian, ustep, ustep_dense, ustep_diff_norm
from mtlbench_models.tfcl_check import _safe_strength, check_ustep_rows, ustep_sdp


def paper_example():
    W = np.zeros((5, 6))
    W[:2, :2], W[2:4, 2:4], W[4, 4:] = 1.0, 2.0, 3.0
    return W


def test_paper_three_block_example_k2_is_case_2b():
    u = ustep(paper_example(), 2)
    assert (u.case, u.p, u.q) == ("2b", 0, 3)
    U = u.dense()
    assert np.isclose(np.trace(U), 2)
    # U = (2/3) * projector onto the three component indicators: identifiable (Rem. ident).
    labels = np.array([0, 0, 1, 1, 2, 0, 0, 1, 1, 2, 2])
    sizes = np.bincount(labels)
    P = (labels[:, None] == labels[None, :]) / sizes[labels][:, None]
    np.testing.assert_allclose(U, 2 / 3 * P, atol=1e-12)


@pytest.mark.parametrize("W,k,case", [
    (paper_example(), 2, "2b"), (paper_example(), 5, "2a"), (np.eye(2), 3, "2c"),
    (np.zeros((3, 4)), 2, "2d"), (np.arange(1, 31, dtype=float).reshape(6, 5) ** 0.5, 3, "1"),
])
def test_cases_match_dense_reference(W, k, case):
    a, b = ustep(W, k), ustep_dense(W, k)
    assert a.case == b.case == case
    assert (a.p, a.q) == (b.p, b.q)
    np.testing.assert_allclose(a.dense(), b.dense(), atol=1e-10)
    assert ustep_diff_norm(a, b) < 1e-6   # Gram-identity form: accurate to ~sqrt(eps)


@pytest.mark.parametrize("seed", range(3))
def test_partial_solver_on_large_graphs(seed):
    """Components above the dense threshold go through shift-invert Lanczos."""
    rng = np.random.default_rng(seed)
    d, T = 330, 50
    W = rng.standard_normal((d, T)) * (rng.random((d, T)) < (0.05 if seed % 2 else 0.6))
    W[: d // 4] = 0.0          # isolated features: many zero eigenvalues
    k = int(rng.integers(2, 8))
    a, b = ustep(W, k), ustep_dense(W, k)
    assert (a.p, a.q) == (b.p, b.q)
    np.testing.assert_allclose(a.dense(), b.dense(), atol=1e-8)
    np.testing.assert_allclose(a.distances(), b.distances(), atol=1e-8)
    a2 = ustep(W * 1.001, k, prev=a)          # warm-started
    b2 = ustep_dense(W * 1.001, k)
    np.testing.assert_allclose(a2.dense(), b2.dense(), atol=1e-8)


@pytest.mark.parametrize("shape", [(330, 40), (40, 330)])
def test_dense_component_shift_above_zero(shape):
    """Dense components use a positive shift below the wanted cluster, accepted only after
    the inertia count; same U as the full spectrum."""
    W = np.random.default_rng(shape[0]).standard_normal(shape)
    a, b = ustep(W, 6), ustep_dense(W, 6)
    assert a.stats["methods"] == {"shift-invert-above0": 1}
    assert (a.p, a.q) == (b.p, b.q)
    np.testing.assert_allclose(a.dense(), b.dense(), atol=1e-8)


def test_distances_and_inner_product_identity():
    rng = np.random.default_rng(3)
    W = rng.standard_normal((7, 5)) * (rng.random((7, 5)) < 0.6)
    u = ustep(W, 3)
    U = u.dense()
    d = 7
    D = np.diag(U)[:d, None] + np.diag(U)[None, d:] - 2 * U[:d, d:]
    np.testing.assert_allclose(u.distances(), D, atol=1e-12)
    # <L(W), U> = sum |W| * D (proof of Prop. sol)
    assert np.isclose(np.sum(bipartite_laplacian(W) * U), np.sum(np.abs(W) * D))
    # sum of the k smallest eigenvalues (Thm. eig)
    assert np.isclose(np.sum(bipartite_laplacian(W) * U),
                      np.sort(np.linalg.eigvalsh(bipartite_laplacian(W)))[:3].sum())


def test_diff_norm_matches_dense():
    rng = np.random.default_rng(5)
    W1 = rng.standard_normal((8, 6)) * (rng.random((8, 6)) < 0.4)
    W2 = W1 + 0.3 * rng.standard_normal((8, 6)) * (rng.random((8, 6)) < 0.3)
    for k in (1, 3, 6):
        a, b = ustep(W1, k), ustep(W2, k)
        assert np.isclose(ustep_diff_norm(a, b), np.linalg.norm(a.dense() - b.dense()), atol=1e-9)


def test_sdp_agreement_over_many_seeds():
    rows = check_ustep_rows(seeds=12)
    assert {r["case"] for r in rows} >= {"1", "2a", "2b", "2c", "2d"}
    for r in rows:
        assert r["max_abs_dU"] <= 1e-5, r
        assert abs(r["rel_gap"]) <= 1e-6, r
        assert abs(r["rel_gap_a0"]) <= 1e-6, r


def test_sdp_single_random_instance_with_ties():
    W = np.kron(np.eye(3), np.array([[1.0, 2.0]]))      # three identical blocks
    L = bipartite_laplacian(W)
    for k in (1, 2, 4, 5):
        u = ustep(W, k)
        a = _safe_strength(np.linalg.eigvalsh(L), u.p, u.q)
        Us, _ = ustep_sdp(L, k, a)
        np.testing.assert_allclose(u.dense(), Us, atol=1e-5)


def test_k_out_of_range():
    with pytest.raises(ValueError, match="tfcl: k must be"):
        ustep(np.ones((2, 2)), 5)


def test_check_ustep_cli():
    from click.testing import CliRunner

    from mtlbench_models.tfcl_check import _make_check_command

    res = CliRunner().invoke(_make_check_command(), ["--seeds", "3"])
    assert res.exit_code == 0, res.output
    lines = res.output.splitlines()
    for case in ("1", "2a", "2b", "2c", "2d"):
        assert any(line.startswith(case + " ") and "agree" in line for line in lines)
