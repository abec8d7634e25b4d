"""Arithmetic whose results do not depend on the machine: exact slice products (checked by
order invariance and against exact rational arithmetic), the eigensolver against LAPACK's,
and the same bits under other BLAS kernels, BLAS threads and numpy SIMD levels."""
import json
import os
import subprocess
import sys
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.linalg import eigh

from mtlbench.reproducible import reproducible_eigh, reproducible_gram, reproducible_matmul

EPS = np.finfo(np.float64).eps


def _matrix(rng, shape, spread):
    """Entries of magnitudes over ``spread`` decades, both signs, some exact zeros."""
    M = rng.standard_normal(shape) * 10.0 ** rng.uniform(-spread, spread, size=shape)
    M[rng.random(shape) < 0.1] = 0.0
    return M


@settings(max_examples=40, deadline=None)
@given(st.integers(1, 12), st.integers(1, 40), st.integers(1, 9), st.integers(0, 8),
       st.integers(0, 2 ** 32 - 1))
def test_products_do_not_depend_on_the_order_of_summation(m, K, n, spread, seed):
    """An exact sum is the same whatever order its terms come in: permuting the inner
    dimension, or computing one row or column at a time, gives the same bits (a plain float64
    product generally does not)."""
    rng = np.random.default_rng(seed)
    A, B = _matrix(rng, (m, K), spread), _matrix(rng, (K, n), spread)
    ref = reproducible_matmul(A, B)
    perm = rng.permutation(K)
    assert np.array_equal(reproducible_matmul(A[:, perm], B[perm]), ref)
    assert np.array_equal(np.vstack([reproducible_matmul(A[i:i + 1], B) for i in range(m)]),
                          ref)
    assert np.array_equal(reproducible_matmul(A, B[:, 0]), ref[:, 0])
    G = reproducible_gram(A)
    assert np.array_equal(G, G.T)
    assert np.array_equal(reproducible_gram(A[rng.permutation(m)]), G)


@settings(max_examples=25, deadline=None)
@given(st.integers(1, 5), st.integers(1, 30), st.integers(1, 4), st.integers(0, 6),
       st.integers(0, 2 ** 32 - 1))
def test_products_are_within_the_float64_error_bound_of_the_exact_product(m, K, n, spread,
                                                                          seed):
    """Against exact rational arithmetic: |computed - exact| <= 2 u |exact|
    + 6 K u max|a| max|b| per entry (u = 2^-53: the rounding of the levels' sum, and a bound
    of the levels left out, at most a few K 2^-s beta times the rows' and columns' powers of
    two, each below twice the largest magnitude)."""
    rng = np.random.default_rng(seed)
    A, B = _matrix(rng, (m, K), spread), _matrix(rng, (K, n), spread)
    C = reproducible_matmul(A, B)
    G = reproducible_gram(A)
    u = EPS / 2
    for i in range(m):
        for j in range(n):
            exact = sum(Fraction(float(A[i, k])) * Fraction(float(B[k, j])) for k in range(K))
            bound = 2 * u * abs(float(exact)) \
                + 6 * K * u * np.abs(A[i]).max() * np.abs(B[:, j]).max()
            assert abs(float(Fraction(float(C[i, j])) - exact)) <= bound
    for i in range(K):
        for j in range(i + 1):
            exact = sum(Fraction(float(A[r, i])) * Fraction(float(A[r, j])) for r in range(m))
            bound = 2 * u * abs(float(exact)) \
                + 6 * m * u * np.abs(A[:, i]).max() * np.abs(A[:, j]).max()
            assert abs(float(Fraction(float(G[i, j])) - exact)) <= bound


def test_large_inner_dimensions_and_blocks_are_exact_too():
    """Inner dimensions past one chunk and results past one block (several BLAS calls whose
    exact sums are added): still independent of the order of the inner dimension."""
    rng = np.random.default_rng(3)
    A, B = rng.standard_normal((3000, 1500)), rng.standard_normal((1500, 3))
    perm = rng.permutation(1500)
    C = reproducible_matmul(A, B)
    assert np.array_equal(reproducible_matmul(A[:, perm], B[perm]), C)
    np.testing.assert_allclose(C, A @ B, rtol=0, atol=1e-12 * np.abs(A @ B).max())
    X = rng.standard_normal((5000, 60)) * 10.0 ** rng.uniform(-3, 3, size=60)
    G = reproducible_gram(X)
    assert np.array_equal(reproducible_gram(X[rng.permutation(5000)]), G)
    scale = np.sqrt(np.outer(np.diag(G), np.diag(G)))        # |G_ij| <= that
    assert np.all(np.abs(G - X.T @ X) <= 1e-13 * scale)


def test_bad_input_is_one_clear_error():
    with pytest.raises(ValueError, match="do not multiply"):
        reproducible_matmul(np.ones((2, 3)), np.ones((2, 3)))
    with pytest.raises(ValueError, match="NaN or infinite"):
        reproducible_matmul(np.array([[np.nan]]), np.ones((1, 1)))
    with pytest.raises(ValueError, match="must be square"):
        reproducible_eigh(np.ones((2, 3)), 1)
    with pytest.raises(ValueError, match="k must be in 1..3"):
        reproducible_eigh(np.eye(3), 4)
    assert reproducible_matmul(np.ones((2, 0)), np.ones((0, 3))).tolist() == [[0.0] * 3] * 2


def _covariance(rng, n, d, signal):
    X = rng.standard_normal((n, d))
    X[:, :signal] *= 1.0 + 5.0 * rng.random(signal)
    X -= X.mean(axis=0)
    return X.T @ X / (n - 1)


@pytest.mark.parametrize("d,k", [(1, 1), (2, 1), (3, 3), (40, 7), (70, 70), (150, 40)])
def test_eigenpairs_match_lapack(d, k):
    """Eigenvalues within 1e-13 of the largest of LAPACK's, residuals and orthogonality of
    LAPACK's size (a few eps), the eigenvectors those of LAPACK up to sign where the
    eigenvalue is well separated; sizes across the blocked reduction's panels."""
    rng = np.random.default_rng(d)
    C = _covariance(rng, 3 * d + 5, d, max(1, d // 4))
    w, V = reproducible_eigh(C, k)
    wl, Vl = eigh(C, subset_by_index=[d - k, d - 1])
    scale = wl[-1]
    np.testing.assert_allclose(w, wl, rtol=0, atol=1e-13 * scale)
    assert np.abs(C @ V - V * w).max() <= 50 * d * EPS * scale
    assert np.abs(V.T @ V - np.eye(k)).max() <= 50 * d * EPS
    gaps = np.diff(np.concatenate([[-np.inf], np.linalg.eigvalsh(C)[d - k:], [np.inf]]))
    separated = np.minimum(gaps[:-1], gaps[1:]) > 1e-3 * scale
    for j in np.flatnonzero(separated):
        np.testing.assert_allclose(np.abs(V[:, j]), np.abs(Vl[:, j]), atol=1e-9)


def test_repeated_eigenvalues_give_an_orthonormal_basis():
    rng = np.random.default_rng(0)
    Q = np.linalg.qr(rng.standard_normal((50, 50)))[0]
    lam = np.repeat([1.0, 2.0, 5.0], [30, 15, 5])
    C = (Q * lam) @ Q.T
    w, V = reproducible_eigh(C, 25)
    np.testing.assert_allclose(w, np.sort(lam)[-25:], atol=1e-13 * 5)
    assert np.abs(V.T @ V - np.eye(25)).max() <= 1e-13
    assert np.abs(C @ V - V * w).max() <= 1e-13 * 5
    w, V = reproducible_eigh(np.diag([3.0, 1.0, 2.0]), 2)       # already tridiagonal
    np.testing.assert_allclose(w, [2.0, 3.0])
    np.testing.assert_allclose(np.abs(V), [[0, 1], [0, 0], [1, 0]], atol=1e-15)
# ------------------------------------------------------------------ across machines' arithmetic
_CHILD = r"""
import hashlib, json, sys
import numpy as np
from threadpoolctl import threadpool_info
from mtlbench.reproducible import reproducible_eigh, reproducible_gram, reproducible_matmul
from mtlbench.synthetic import make_simulated
from mtlbench.dataset import load_tasks
from mtlbench.plugins import get_registry
from mtlbench_datasets.synthetic_attributes import SyntheticAttributes

DATA = sys.argv[1] if len(sys.argv) > 1 else None
reg = get_registry()

def h(*arrays):
    out = hashlib.sha256()
    for a in arrays:
        out.update(np.ascontiguousarray(a).tobytes())
    return out.hexdigest()

rng = np.random.default_rng(7)
A, B = rng.standard_normal((400, 300)), rng.standard_normal((300, 200))
X = np.ldexp(rng.standard_normal((1500, 120)), rng.integers(-7, 7, size=120))
G = reproducible_gram(X)
print(json.dumps({
    "blas": sorted({str(i.get("architecture")) for i in threadpool_info()
                    if i.get("user_api") == "blas"}),
    "matmul": h(reproducible_matmul(A, B)), "gram": h(G), "eigh": h(*reproducible_eigh(G, 30)),
    "synthetic-attributes": SyntheticAttributes(
        setting="gist-like", n_items=1000, n_features=150, n_components=20, users=30,
        n_attributes=1).load("attr0").fingerprint(),
    "simulated": make_simulated(0).fingerprint(),
    "real": {name: load_tasks(reg.dataset(name), name, DATA).fingerprint()
             for name in ("school", "landmine", "lenk", "movielens")} if DATA else None}))
"""


SHARED = Path(__file__).resolve().parents[1].parent / "shared" / "data"


def _child(env: dict[str, str]) -> dict:
    data = [str(SHARED)] if (SHARED / "school.mat").is_file() else []
    out = subprocess.run([sys.executable, "-c", _CHILD, *data], capture_output=True, text=True,
                         env={**os.environ, "OMP_NUM_THREADS": "1", **env}, timeout=600)
    assert out.returncode == 0, out.stderr[-2000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


def _dispatched_simd() -> list[str]:
    """numpy's runtime-dispatched SIMD features this CPU has (disabled: the baseline code)."""
    from numpy._core._multiarray_umath import __cpu_dispatch__, __cpu_features__

    return [f for f in __cpu_dispatch__ if __cpu_features__.get(f)]


def test_the_same_bits_under_other_blas_kernels_threads_and_simd_levels():
    """Products, Gram matrix, eigenpairs, two generated data sets (one through the PCA, the
    heavy-tailed and unevenly scaled setting) and the real data sets' preprocessing (where
    ../shared/data holds them) in fresh processes: another OpenBLAS kernel, two BLAS
    threads, numpy without its dispatched SIMD code.  Each of these changes the last bits of
    a plain ``@`` / ``eigh``; the fingerprints here must not change."""
    base = _child({"OPENBLAS_NUM_THREADS": "1"})
    runs = {"two BLAS threads": _child({"OPENBLAS_NUM_THREADS": "2"})}
    simd = _dispatched_simd()
    if simd:
        runs["numpy baseline SIMD"] = _child({"OPENBLAS_NUM_THREADS": "1",
                                              "NPY_DISABLE_CPU_FEATURES": " ".join(simd)})
    for kernel in ("Haswell", "SkylakeX", "Sandybridge"):
        if [kernel.lower()] == [b.lower() for b in base["blas"]]:
            continue
        other = _child({"OPENBLAS_NUM_THREADS": "1", "OPENBLAS_CORETYPE": kernel})
        if [b.lower() for b in other["blas"]] == [kernel.lower()]:
            runs[kernel] = other
            break
    for what, run in runs.items():
        for key in ("matmul", "gram", "eigh", "synthetic-attributes", "simulated", "real"):
            assert run[key] == base[key], f"{key} differs with {what}"
    if not any(r["blas"] != base["blas"] for r in runs.values()):
        pytest.skip(f"only the {base['blas']} BLAS kernel runs here; threads and SIMD checked")
