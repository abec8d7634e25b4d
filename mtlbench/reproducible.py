"""Linear algebra whose results are the same bits on every CPU, BLAS kernel and thread count.

The last bits of an ordinary matrix product depend on the order in which the BLAS adds its
terms, and that order depends on the kernel it picks for the CPU (OpenBLAS: by CPU type, or
``OPENBLAS_CORETYPE``), its block sizes and its number of threads; LAPACK's eigensolvers call
the BLAS, so theirs do too.  Data whose fingerprint is part of a result's identity (generated
data sets, a PCA of features) must not depend on the machine, so the products and the
eigendecomposition that make them are computed here:

* :func:`reproducible_matmul` ``(A, B)`` and :func:`reproducible_gram` ``(X)`` (= X^T X):
  error-free splitting (Ozaki, Ogita, Oishi & Rump, Numer. Algorithms 59, 2012).  Each row of
  A and each column of B is scaled by a power of two to a largest magnitude below 1 and split
  into s slices: slice i (i = 0, 1, ...) is what the slices before it left, rounded to a
  multiple of 2^-(i+1) beta (``(R + c) - c`` with c = 1.5 * 2^(52 - (i+1) beta): exact).  With
  2 beta + ceil(log2(s K)) <= 53 (K: the inner dimension) every term and every partial sum of
  the products A_i B_j of one level i + j is an integer multiple of 2^-(i+j+2) beta below 2^53
  of them: exactly representable, so the BLAS computes them exactly whatever its order of
  summation, blocking, threads or fused multiply-adds.  The levels i + j < s are added in a
  fixed order (the smallest first) and scaled back.  s is the least number of slices with
  s beta >= 53 (3 up to K = 2^17): the slices hold every entry to the last bit of its row's
  (column's) largest one, and the levels left out weigh at most about K 2^-s beta times the
  largest magnitudes of the row and the column: within the classical error bound of a float64
  product.  Cost: s (s + 1) / 2 BLAS products (6; the Gram matrix 4, two of them symmetric).
* :func:`reproducible_eigh` ``(C, k)``: the k largest eigenpairs of a symmetric matrix, by the
  method of LAPACK's ``dsyevr``: Householder reduction to tridiagonal form blocked as in
  ``dsytrd`` / ``dlatrd`` (the panel's matrix-vector products as numpy row sums, whose pairwise
  order numpy's source fixes, not the CPU; the trailing updates by
  :func:`reproducible_matmul`), the tridiagonal eigenpairs by LAPACK's ``dstemr`` (MRRR, whose
  only BLAS calls copy and scale), their vectors made orthonormal to rounding by classical
  Gram-Schmidt applied twice (MRRR alone leaves ~1e-13), and the back-transformation as numpy
  row sums.  Residuals and orthogonality are those of ``scipy.linalg.eigh`` (~1e-15 relative).

Everything else is IEEE-754 float64 additions, multiplications, divisions and square roots,
correctly rounded on every CPU and at every SIMD width.  Not covered: other builds of numpy and
scipy (their bundled LAPACK) and CPUs other than x86-64 (whose compilers may fuse LAPACK's
multiply-adds): the results are deterministic there, but may be other bits.
"""
from __future__ import annotations

import math

import numpy as np

__all__ = ["reproducible_matmul", "reproducible_gram", "reproducible_eigh"]

#: float64 significand bits
_DIGITS = 53
#: elements of an output block (rows of A at a time) and of an input chunk (K at a time)
_BLOCK = 1 << 21
#: columns per panel of the blocked tridiagonal reduction (as LAPACK's default block size)
_PANEL = 32
#: elements of the row products of a matrix-vector product held at a time (256 KB)
_ROW_BUFFER = 1 << 15


def _plan(K: int) -> tuple[int, int]:
    """(bits per slice beta, slices s) for inner dimension ``K``: the least s with
    s beta >= 53 where 2 beta + ceil(log2(s K)) <= 53."""
    s = 2
    while True:
        beta = (_DIGITS - max(s * K - 1, 1).bit_length()) // 2
        if beta < 1:
            raise ValueError(f"reproducible_matmul: inner dimension {K} is too large")
        if s * beta >= _DIGITS:
            return beta, s
        s += 1


def _exponents(M: np.ndarray, axis: int) -> np.ndarray:
    """Per row (``axis=1``) or column (``axis=0``): e with max |M| < 2^e (0 for zeros)."""
    top = np.maximum(M.max(axis=axis, initial=0.0), -M.min(axis=axis, initial=0.0))
    return np.frexp(top)[1]


def _slices(M: np.ndarray, beta: int, s: int) -> list[np.ndarray]:
    """``M`` (entries in (-1, 1); overwritten) as s slices, slice i an integer multiple of
    2^-(i+1) beta; their sum is M up to the last slice's half unit."""
    out = []
    for i in range(1, s + 1):
        c = 1.5 * 2.0 ** (_DIGITS - 1 - i * beta)
        piece = np.add(M, c)
        piece -= c
        if i < s:
            M -= piece
        out.append(piece)
    return out


def _scaled(M: np.ndarray, e: np.ndarray) -> np.ndarray:
    """A scaled copy of ``M``: M * 2^-e (e broadcast; exact)."""
    return np.ldexp(M, -e)


def _check(M: np.ndarray, what: str) -> np.ndarray:
    M = np.asarray(M, dtype=np.float64)
    if not np.all(np.isfinite(M)):
        raise ValueError(f"{what}: the matrix holds NaN or infinite values")
    return M


def _accumulate(levels: list[np.ndarray], As: list[np.ndarray], Bs: list[np.ndarray],
                tmp: np.ndarray) -> None:
    """levels[L] += sum over i + j = L of As[i] @ Bs[j] (exact: integer multiples below
    2^53 of one unit, :func:`_plan`); ``tmp`` has the levels' shape."""
    s = len(levels)
    for i in range(s):
        for j in range(s - i):
            levels[i + j] += np.matmul(As[i], Bs[j], out=tmp)


def _combine(levels: list[np.ndarray]) -> np.ndarray:
    """The levels' exact sums added in a fixed order, the smallest (highest level) first."""
    total = levels[-1]
    for lev in reversed(levels[:-1]):
        total += lev
    return total


def reproducible_matmul(A: np.ndarray, B: np.ndarray) -> np.ndarray:
    """``A @ B`` (A: m x K, B: K x n or K), the same bits on every CPU, BLAS kernel and
    thread count (module docstring); float64."""
    A = _check(A, "reproducible_matmul")
    B = _check(B, "reproducible_matmul")
    vector = B.ndim == 1
    if vector:
        B = B[:, None]
    if A.ndim != 2 or B.ndim != 2 or A.shape[1] != B.shape[0]:
        raise ValueError(f"reproducible_matmul: shapes {A.shape} and "
                         f"{B.shape[:1] if vector else B.shape} do not multiply")
    m, K = A.shape
    n = B.shape[1]
    out = np.zeros((m, n))
    if m and n and K:
        beta, s = _plan(K)
        ea, eb = _exponents(A, 1)[:, None], _exponents(B, 0)[None, :]
        chunk = max(1, _BLOCK // m)                    # columns of A (rows of B) at a time
        rows = max(1, _BLOCK // n)                     # rows of A (of the result) at a time
        whole_b = K <= chunk
        b_slices = _slices(_scaled(B, eb), beta, s) if whole_b else None
        for r0 in range(0, m, rows):
            r1 = min(m, r0 + rows)
            levels = [np.zeros((r1 - r0, n)) for _ in range(s)]
            tmp = np.empty((r1 - r0, n))
            for k0 in range(0, K, chunk):
                k1 = min(K, k0 + chunk)
                Bs = b_slices if whole_b else _slices(_scaled(B[k0:k1], eb), beta, s)
                _accumulate(levels, _slices(_scaled(A[r0:r1, k0:k1], ea[r0:r1]), beta, s), Bs,
                            tmp)
            out[r0:r1] = np.ldexp(_combine(levels), ea[r0:r1] + eb)
    return out[:, 0] if vector else out


def reproducible_gram(X: np.ndarray) -> np.ndarray:
    """``X.T @ X`` (X: n x d), exactly symmetric and the same bits on every CPU, BLAS kernel
    and thread count (:func:`reproducible_matmul`'s splitting, the slices of X's columns used
    on both sides, each pair of slices' product once); float64."""
    X = _check(X, "reproducible_gram")
    if X.ndim != 2:
        raise ValueError(f"reproducible_gram: X must be 2-d, got shape {X.shape}")
    n, d = X.shape
    if n == 0 or d == 0:
        return np.zeros((d, d))
    beta, s = _plan(n)
    e = _exponents(X, 0)[None, :]
    # sums over the row chunks of S_i^T S_j, i <= j, i + j < s: exact, the pair (j, i) is
    # the transpose of (i, j), added once at the end
    pairs = {(i, j): np.zeros((d, d)) for i in range(s) for j in range(i, s - i)}
    tmp = np.empty((d, d))
    rows = max(1, _BLOCK // (4 * d))
    for r0 in range(0, n, rows):
        S = _slices(_scaled(X[r0:r0 + rows], e), beta, s)
        for (i, j), acc in pairs.items():
            acc += np.matmul(S[i].T, S[j], out=tmp)
    levels = [np.zeros((d, d)) for _ in range(s)]
    for (i, j), acc in pairs.items():
        levels[i + j] += acc
        if j != i:
            levels[i + j] += acc.T
    return np.ldexp(_combine(levels), e.T + e)


def _rows_dot(M: np.ndarray, v: np.ndarray, buf: np.ndarray) -> np.ndarray:
    """M @ v as one numpy pairwise sum per row (an order numpy's source fixes, whatever the
    CPU), a few rows at a time (``buf``: their products, kept in cache)."""
    m = M.shape[0]
    out = np.empty(m)
    rows = max(1, buf.shape[0] // max(M.shape[1], 1))
    for r0 in range(0, m, rows):
        r1 = min(m, r0 + rows)
        part = buf[:(r1 - r0) * M.shape[1]].reshape(r1 - r0, M.shape[1])
        np.multiply(M[r0:r1], v, out=part)
        np.add.reduce(part, axis=1, out=out[r0:r1])
    return out


def _tridiagonalize(A: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Reduce symmetric ``A`` (n x n, both triangles; overwritten) to tridiagonal
    T = Q^T A Q, Q = H_0 ... H_{n-2}, H_j = I - tau_j v_j v_j^T (v_j[:j+1] = 0,
    v_j[j+1] = 1, the rest stored below the subdiagonal of column j of A): LAPACK's dsytrd /
    dlatrd (lower) in reproducible arithmetic.  Returns the diagonal, the subdiagonal and the
    taus."""
    n = A.shape[0]
    diag, sub, taus = np.zeros(n), np.zeros(max(n - 1, 0)), np.zeros(max(n - 1, 0))
    buf = np.empty(_ROW_BUFFER)
    j0 = 0
    while j0 < n:
        m = n - j0
        nb = m if m <= _PANEL + 1 else _PANEL     # the last panel takes every column
        T = A[j0:, j0:]
        V, W = np.zeros((m, nb)), np.zeros((m, nb))
        for i in range(nb):
            if i:
                T[i:, i] -= np.add.reduce(V[i:, :i] * W[i, :i], axis=1) \
                    + np.add.reduce(W[i:, :i] * V[i, :i], axis=1)
            diag[j0 + i] = T[i, i]
            if i + 1 >= m:
                break
            alpha = float(T[i + 1, i])
            x = T[i + 2:, i]
            xnorm = math.sqrt(float(np.add.reduce(x * x)))
            if xnorm == 0.0:
                tau, beta = 0.0, alpha
            else:
                beta = -math.copysign(math.sqrt(alpha * alpha + xnorm * xnorm), alpha)
                tau = (beta - alpha) / beta
                x *= 1.0 / (alpha - beta)
            sub[j0 + i], taus[j0 + i] = beta, tau
            T[i + 1, i] = 1.0
            v = T[i + 1:, i]
            V[i + 1:, i] = v
            if tau == 0.0:
                continue
            p = _rows_dot(T[i + 1:, i + 1:], v, buf)
            if i:
                wv = np.add.reduce(W[i + 1:, :i] * v[:, None], axis=0)
                vv = np.add.reduce(V[i + 1:, :i] * v[:, None], axis=0)
                p -= np.add.reduce(V[i + 1:, :i] * wv, axis=1) \
                    + np.add.reduce(W[i + 1:, :i] * vv, axis=1)
            w = tau * p
            w += (-0.5 * tau * float(np.add.reduce(w * v))) * v
            W[i + 1:, i] = w
        if nb == m:
            break
        P = reproducible_matmul(V[nb:], W[nb:].T)
        P += P.T                                    # V W^T + W V^T, exactly symmetric
        T[nb:, nb:] -= P
        j0 += nb
    return diag, sub, taus


def _orthonormalize(Q: np.ndarray) -> np.ndarray:
    """The rows of ``Q`` (k x n, nearly orthonormal) made orthonormal to rounding by classical
    Gram-Schmidt applied twice, the last row (largest eigenvalue) first; numpy reductions only."""
    k = Q.shape[0]
    for j in range(k - 1, -1, -1):
        done = Q[j + 1:]
        for _ in range(2):
            if done.shape[0]:
                r = np.add.reduce(done * Q[j], axis=1)
                Q[j] -= np.add.reduce(done * r[:, None], axis=0)
        Q[j] /= math.sqrt(float(np.add.reduce(Q[j] * Q[j])))
    return Q


def reproducible_eigh(C: np.ndarray, k: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """The ``k`` largest eigenvalues (ascending, as ``scipy.linalg.eigh(C,
    subset_by_index=[d - k, d - 1])`` returns them) and eigenvectors (columns) of symmetric
    ``C`` (d x d; its lower triangle is read), the same bits on every CPU, BLAS kernel and
    thread count (module docstring); ``k=None``: all d."""
    from scipy.linalg import eigh_tridiagonal

    C = _check(C, "reproducible_eigh")
    if C.ndim != 2 or C.shape[0] != C.shape[1]:
        raise ValueError(f"reproducible_eigh: C must be square, got shape {C.shape}")
    d = C.shape[0]
    k = d if k is None else int(k)
    if not 1 <= k <= d:
        raise ValueError(f"reproducible_eigh: k must be in 1..{d}, got {k}")
    A = np.tril(C) + np.tril(C, -1).T
    diag, sub, taus = _tridiagonalize(A)
    if d == 1:
        return diag.copy(), np.ones((1, 1))
    select = "a" if k == d else "i"
    w, Y = eigh_tridiagonal(diag, sub, select=select, select_range=(d - k, d - 1),
                            lapack_driver="stemr")
    Yt = _orthonormalize(np.array(Y.T, order="C"))   # k x d: one eigenvector per row
    for j in range(d - 2, -1, -1):
        if taus[j] == 0.0:
            continue
        v = A[j + 1:, j]
        part = Yt[:, j + 1:]
        c = taus[j] * np.add.reduce(part * v, axis=1)
        part -= np.multiply.outer(c, v)
    return w, np.ascontiguousarray(Yt.T)
