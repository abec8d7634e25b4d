"""Exact minimisation of a TFCL-family objective over a fixed structure ("polishing").

Once U and the support of the co-grouping block stop changing, every further iteration of
Alg. 1 / Alg. 2 is a proximal-gradient step on one convex problem: with U fixed, the support of
theta_g fixed (signs s) and theta_p = 0, the objective restricted to that structure is the
strictly convex quadratic

    q(c, g) = J(c 1^T + g) + a_c/2 ||c||^2 + <lin, g> + a_g/2 ||g||^2,   g_t supported on A_t,

(lin = alpha_1 D o s: the weighted l1 term on its support; no c for problem (P)), whose minimiser
the iterations approach at a rate set by the condition number (up to L/a_g: slow at weak ridge).
``FixedStructure`` computes that minimiser directly; the caller accepts it only if it is
the minimiser of the convex W-subproblem itself (signs kept, the optimality conditions of the
zero entries of g and of theta_p = 0 hold: ``kkt_ok``) and reproduces the same U, i.e. it is a
fixed point of Alg. 1 / Alg. 2 -- the point those iterations converge to on that structure.

How (J = sum_t 1/2 ||Z_t w_t - c_t||^2, Z_t: m_t x d with m_t = n_t + 1 or n_t << d here): for
fixed c, task t's block is a ridge problem on the columns A_t, solved in the m_t-dimensional
row space by the push-through identity.  Its optimal residual r_t = Z_t w_t - c_t is

    r_t = S_t (a_g e_t - Z_{A_t} lin_t),  e_t = Z_t c - c_t,
    S_t = (a_g I + Z_{A_t} Z_{A_t}^T)^{-1},

and g_{A_t} = -(Z_{A_t}^T r_t + lin_{A_t}) / a_g.  The shared part then solves the d x d system
[a_g sum_t Z_t^T S_t Z_t + a_c I] c = sum_t Z_t^T S_t (a_g c_t + Z_{A_t} lin_t) (one d x d matrix
for all tasks, no per-task d x d matrix); without theta_g (TFCL-Q w/o G) it is the ridge system
[sum_t Z_t^T Z_t + a_c I] c = sum_t Z_t^T c_t.  Cost: one batched m x m factorisation per task,
O(T m^2 d + T m d^2) -- tens of gradient passes, once per structure.

With personal columns (TFCL-Q's alpha_4 sum_t ||theta_p[:, t]||_2, not quadratic) the same
subproblem is solved by ``PersonalStructure``: per task the block (g_t, p_t) for a given c in
the row space (a scalar secular equation decides ||p_t||), and c by Newton's method on the
convex, differentiable function left after minimising the tasks out; ``kkt_shared_personal_ok``
checks the conditions of c and of the personal columns.  ``row_space_spectra`` (the
eigendecomposition of every Z_t Z_t^T) is data-only and computed once per training set.
Tasks with more rows than features (m_t > d: simulated data, School) are first reduced to d
rows (``compact_loss``: Z_t = Q_t R_t, the same loss up to a constant), so every system above
is min(m_t, d) x min(m_t, d).
"""
from __future__ import annotations

import numpy as np
from scipy.linalg import cho_factor, cho_solve

from .._core.datafits import LeastSquares


def compact_loss(J: LeastSquares) -> LeastSquares:
    """J with every task of more rows than features (m_t > d) replaced by d rows: with the
    thin QR factorisation Z_t = Q_t R_t, 1/2 ||Z_t w - c_t||^2 = 1/2 ||R_t w - Q_t^T c_t||^2
    + 1/2 (||c_t||^2 - ||Q_t^T c_t||^2), the same function of w up to a constant, so every
    minimiser, gradient and Hessian is unchanged while the structure solves below work with
    min(m_t, d) x min(m_t, d) systems.  J itself when no task has m_t > d.  Data only: a model
    computes it once per training set (``TaskSet.memo``)."""
    d = J.d
    if all(Z3.shape[1] <= d for _, Z3, _ in J.buckets):
        return J
    Zs, cs = [None] * J.T, [None] * J.T
    for idx, Z3, c2 in J.buckets:
        order = range(Z3.shape[0]) if idx is None else idx
        if Z3.shape[1] > d:
            Q, R = np.linalg.qr(Z3)                                     # (Tb, m, d), (Tb, d, d)
            c2 = np.matmul(Q.transpose(0, 2, 1), c2[:, :, None])[:, :, 0]
            Z3 = R
        for b, t in enumerate(order):
            Zs[t], cs[t] = Z3[b], c2[b]
    return LeastSquares.from_arrays(Zs, cs, d)


class FixedStructure:
    """The minimiser (c, g) of q above for one structure, for any linear term ``lin``.

    ``mask`` (d x T booleans): the support of g (None: no g); ``a_c`` None: no shared part c.
    With K_t = I + Z_A Z_A^T / a_g = a_g S_t^{-1} (m_t x m_t), the formulas of the module
    docstring read

        r_t = K_t^{-1} (Z_t c - c_t - Z_A lin_t / a_g),   g_t = -(Z_A^T r_t + lin_t) / a_g,
        [sum_t Z_t^T K_t^{-1} Z_t + a_c I] c = sum_t Z_t^T K_t^{-1} (c_t + Z_A lin_t / a_g).

    The per-task K_t^{-1} and the d x d system depend on the structure only, so they are
    formed once and ``solve(lin)`` (called again when the signs change) is cheap."""

    def __init__(self, J: LeastSquares, mask: np.ndarray | None, a_g: float,
                 a_c: float | None) -> None:
        d = J.d
        self.J, self.mask, self.a_c, self.a_g = J, mask, a_c, a_g
        self.parts = []
        H = np.zeros((d, d))
        for idx, Z3, c2 in J.buckets:
            sel = slice(None) if idx is None else idx
            if mask is None:
                if a_c is not None:
                    Zf = Z3.reshape(-1, d)
                    H += Zf.T @ Zf
                self.parts.append(None)
                continue
            Mk = mask[:, sel].T.astype(np.float64)                    # (Tb, d)
            ZA = Z3 * Mk[:, None, :]
            m = Z3.shape[1]
            K = np.matmul(ZA / a_g, ZA.transpose(0, 2, 1))
            K[:, np.arange(m), np.arange(m)] += 1.0
            Kinv = np.linalg.inv(K)
            KZ = None
            if a_c is not None:
                KZ = np.matmul(Kinv, Z3)
                H += Z3.reshape(-1, d).T @ KZ.reshape(-1, d)
            self.parts.append((sel, Mk, ZA, Kinv, KZ))
        self.H = None
        if a_c is not None:
            H[np.diag_indices(d)] += a_c
            self.H = H

    def solve(self, lin: np.ndarray | None) -> tuple[np.ndarray | None, np.ndarray]:
        """(c or None, g as a d x T array, zero off the mask); ``lin`` None: no linear term."""
        J = self.J
        d, T = J.d, J.T
        g = np.zeros((d, T))
        shifts = []
        for part in self.parts:
            if part is None or lin is None:
                shifts.append(None)
                continue
            sel, Mk, ZA = part[:3]
            Llin = lin[:, sel].T * Mk / self.a_g                   # (Tb, d)
            shifts.append((Llin, np.matmul(ZA, Llin[:, :, None])[:, :, 0]))
        c = None
        if self.H is not None:
            rhs = np.zeros(d)
            for (idx, Z3, c2), part, sh in zip(J.buckets, self.parts, shifts):
                if part is None:
                    rhs += Z3.reshape(-1, d).T @ c2.ravel()
                    continue
                KZ = part[4]
                rhs += np.einsum("tmd,tm->d", KZ, c2 if sh is None else c2 + sh[1])
            c = np.linalg.solve(self.H, rhs)
        if self.mask is None:
            return c, g
        for (idx, Z3, c2), (sel, Mk, ZA, Kinv, KZ), sh in zip(J.buckets, self.parts, shifts):
            e = -c2 if c is None else np.matmul(Z3, c) - c2
            if sh is not None:
                e = e - sh[1]
            r = np.matmul(Kinv, e[:, :, None])[:, :, 0]
            ZAr = np.matmul(r[:, None, :], ZA)[:, 0, :]                 # (Tb, d)
            gt = -ZAr / self.a_g
            if sh is not None:
                gt -= sh[0]
            g[:, sel] = (gt * Mk).T
        return c, g


def kkt_ok(G: np.ndarray, g: np.ndarray, mask: np.ndarray, signs: np.ndarray,
           threshold: np.ndarray, personal: float | None) -> bool:
    """Whether the solved point is the minimiser of the convex subproblem over *all* W (not
    only its structure): every entry of g on the mask kept its sign (so the l1 term is the
    linear term used), every entry off the mask satisfies |grad_ij| <= threshold_ij (0 is
    optimal there), and with ``personal`` (TFCL-Q) every user's theta_p = 0 is optimal,
    ||grad_t||_2 <= alpha_4.  ``G``: gradient of J at the solved W.  The inequalities carry a
    relative slack of 1e-9 (rounding of a point that is exact up to the solve's accuracy)."""
    if mask is not None:
        if not np.array_equal(np.sign(g[mask]), signs[mask]):
            return False
        slack = 1e-9 * max(float(np.max(np.abs(G), initial=0.0)), float(threshold.max(initial=0.0)))
        if np.any(np.abs(G[~mask]) > threshold[~mask] + slack):
            return False
    if personal is not None:
        norms = np.linalg.norm(G, axis=0)
        if np.any(norms > personal * (1.0 + 1e-9)):
            return False
    return True


# --------------------------------------------------------------------- with personal columns
def row_space_spectra(J: LeastSquares) -> list[tuple[np.ndarray, np.ndarray]]:
    """Per bucket of ``J``, the eigendecomposition Z_t Z_t^T = Q_t diag(lam_t) Q_t^T of every
    task's m x m row-space Gram matrix (ascending, clipped at 0): data only, so a model
    computes it once per training set (``TaskSet.memo``) for ``PersonalStructure``."""
    out = []
    for _, Z3, _ in J.buckets:
        lam, Q = np.linalg.eigh(np.matmul(Z3, Z3.transpose(0, 2, 1)))
        out.append((np.maximum(lam, 0.0), Q))
    return out


class PersonalStructure:
    """Exact minimiser of TFCL-Q's fixed-U subproblem on a fixed structure, personal columns
    included:

        Phi(c) = a_c/2 ||c||^2 + sum_t min_{g_t, p_t} [ 1/2 ||Z_t (c + g_t + p_t) - c_t||^2
                                  + <lin_t, g_t> + a_g/2 ||g_t||^2 + a_p ||p_t||_2 ],

    g_t supported on the columns A_t of ``mask`` (None: no g_t, TFCL-Q w/o G; lin = alpha_2
    D o signs: the weighted l1 term on its support), minimised over c.  For fixed c each task
    is solved exactly in its m_t-dimensional row space.  With v_t = Z_t^T r_t (r_t the
    residual) the optimality conditions are g_t = -(v_t + lin_t)_{A_t} / a_g and either
    p_t = 0 with ||v_t|| <= a_p, or p_t = -s_t v_t with ||v_t|| = a_p (s_t = ||p_t|| / a_p > 0);
    so r_t solves (K_t + s_t M_t) r_t = b_t with K_t = I + Z_A Z_A^T / a_g, M_t = Z_t Z_t^T,
    b_t = Z_t c - c_t - Z_A lin_A / a_g.  In the basis T_t = Q_t^T L_t^{-1} (K_t = L_t L_t^T,
    L_t^{-1} M_t L_t^{-T} = Q_t diag(lam_t) Q_t^T) both are diagonal; with b'_t = T_t b_t =
    Y_t c - beta_t (Y_t = T_t Z_t):

        u_t = b'_t / (1 + s_t lam_t),  r_t = T_t^T u_t,  v_t = Y_t^T u_t,
        ||v_t||^2 = f_t(s_t) = sum_i lam_i b'_i^2 / (1 + s_t lam_i)^2,

    and s_t is the root of f_t(s) = a_p^2 when f_t(0) > a_p^2 (the user is personal), else 0:
    a secular equation (f decreasing, 1/sqrt(f) concave and increasing, as in trust-region
    subproblems), solved by Newton's method on 1/sqrt(f(s)) - 1/a_p from s = 0, which
    increases monotonically to the root (stopped after a relative step below 1e-12: the
    convergence is quadratic, so the error left is at the rounding level).  Where K_t commutes
    with M_t -- A_t empty (K = I) or A_t all the columns the loss uses (K = I + M/a_g) -- the
    basis comes from ``row_space_spectra`` (computed once per training set); other tasks need
    one generalised m x m eigenproblem per structure.

    Phi is convex (a partial minimum of a jointly convex function) and differentiable with
    grad Phi = a_c c + sum_t v_t and Hessian

        a_c I + sum_t Y_t^T diag(1/(1 + s_t lam)) Y_t - sum_{personal t} z_t z_t^T / e_t,
        z_t = Y_t^T [lam u_t / (1 + s_t lam)],  e_t = sum_i lam_i^2 u_i^2 / (1 + s_t lam_i)

    (the rank-one term: s_t moves with c to keep ||v_t|| = a_p).  c is found from the
    caller's c by Newton steps with Armijo backtracking on Phi; the Hessian (one (T m) x d x d
    product) is reused while the steps shrink by 4x or more per step and recomputed
    otherwise; stopped after a step below 1e-10 max(1, ||c||), ``solve`` returns None if that
    takes more than ``_NEWTON_MAX`` steps.  Without personal users Phi is quadratic and one
    step solves it: the problem of ``FixedStructure``."""

    def __init__(self, J: LeastSquares, mask: np.ndarray | None, a_g: float,
                 a_c: float, a_p: float, spectra=None) -> None:
        d = J.d
        self.J, self.mask, self.a_g, self.a_c, self.a_p = J, mask, a_g, a_c, a_p
        spectra = row_space_spectra(J) if spectra is None else spectra
        used = np.ones(d, dtype=bool)
        used[J.free_columns] = False
        self.parts = []
        for (idx, Z3, c2), (lam0, Q0) in zip(J.buckets, spectra):
            sel = slice(None) if idx is None else idx
            Tb, m, _ = Z3.shape
            Mk = None
            if mask is None:
                lam, Tt = lam0, Q0.transpose(0, 2, 1)
            else:
                Mk = mask[:, sel].T.astype(np.float64)                  # (Tb, d)
                full = Mk[:, used].all(1)
                lam, Tt = lam0.copy(), Q0.transpose(0, 2, 1).copy()
                # K = I + M / a_g: same eigenvectors, lam / (1 + lam / a_g)
                sc = 1.0 / np.sqrt(1.0 + lam0[full] / a_g)
                lam[full] = lam0[full] * sc * sc
                Tt[full] *= sc[:, :, None]
                part = np.flatnonzero(~full & (Mk.sum(1) > 0))
                if part.size:
                    ZA = Z3[part] * Mk[part][:, None, :]
                    K = np.matmul(ZA, ZA.transpose(0, 2, 1)) / a_g
                    K[:, np.arange(m), np.arange(m)] += 1.0
                    Linv = np.linalg.inv(np.linalg.cholesky(K))
                    Zp = np.matmul(Linv, Z3[part])
                    lp, Qp = np.linalg.eigh(np.matmul(Zp, Zp.transpose(0, 2, 1)))
                    lam[part] = np.maximum(lp, 0.0)
                    Tt[part] = np.matmul(Qp.transpose(0, 2, 1), Linv)
            Y = np.matmul(Tt, Z3)                                      # (Tb, m, d)
            self.parts.append((sel, Mk, lam, Tt, Y, c2, Z3))

    def _betas(self, lin):
        out = []
        for sel, Mk, lam, Tt, Y, c2, Z3 in self.parts:
            rhs = c2
            if self.mask is not None and lin is not None:
                Plin = lin[:, sel].T * Mk / self.a_g                  # (Tb, d)
                rhs = c2 + np.matmul(Z3, Plin[:, :, None])[:, :, 0]
            out.append(np.matmul(Tt, rhs[:, :, None])[:, :, 0])
        return out

    def _secular(self, lam: np.ndarray, b: np.ndarray) -> np.ndarray | None:
        """s >= 0 per task (rows of lam, b): 0 where f(0) <= a_p^2, else the root of
        f(s) = a_p^2; None if Newton's method did not converge in ``_SECULAR_MAX`` steps."""
        lb2 = lam * b * b
        s = np.zeros(lam.shape[0])
        act = np.flatnonzero(lb2.sum(1) > self.a_p ** 2)
        if act.size == 0:
            return s
        lam_a, lb2_a = lam[act], lb2[act]
        sa = np.zeros(act.size)
        for _ in range(_SECULAR_MAX):
            w = 1.0 / (1.0 + sa[:, None] * lam_a)
            f = np.sum(lb2_a * w * w, axis=1)
            f1 = np.sum(lb2_a * lam_a * w ** 3, axis=1)
            step = (1.0 / self.a_p - 1.0 / np.sqrt(f)) * f * np.sqrt(f) / f1
            sa = sa + step
            if np.all(np.abs(step) <= 1e-12 * sa):
                s[act] = sa
                return s
        return None

    def _evaluate(self, c, betas, lin):
        """Phi(c), grad Phi and the per-bucket (u, s, v, g) of c (None: a secular equation
        did not converge)."""
        d = self.J.d
        phi = 0.5 * self.a_c * float(c @ c)
        grad = self.a_c * c
        state = []
        for (sel, Mk, lam, Tt, Y, c2, Z3), beta in zip(self.parts, betas):
            Tb, m = lam.shape
            b = (Y.reshape(-1, d) @ c).reshape(Tb, m) - beta
            s = self._secular(lam, b) if self.a_p is not None else np.zeros(Tb)
            if s is None:
                return None
            u = b / (1.0 + s[:, None] * lam)
            v = np.matmul(u[:, None, :], Y)[:, 0, :]                     # (Tb, d)
            r = np.matmul(u[:, None, :], Tt)[:, 0, :]                    # (Tb, m)
            grad = grad + v.sum(0)
            phi += 0.5 * float(np.sum(r * r))
            g = None
            if self.mask is not None:
                lin_b = lin[:, sel].T if lin is not None else 0.0
                g = -(v + lin_b) * Mk / self.a_g
                phi += float(np.sum(lin_b * g) + 0.5 * self.a_g * np.sum(g * g))
            if self.a_p is not None:
                phi += self.a_p * float(np.sum(s * np.linalg.norm(v, axis=1)))
            state.append((u, s, v, g))
        return phi, grad, state

    def _hessian(self, state) -> np.ndarray:
        d = self.J.d
        H = np.zeros((d, d))
        H[np.diag_indices(d)] = self.a_c
        for (sel, Mk, lam, Tt, Y, c2, Z3), (u, s, v, g) in zip(self.parts, state):
            w = 1.0 / (1.0 + s[:, None] * lam)
            Yw = (Y * np.sqrt(w)[:, :, None]).reshape(-1, d)
            H += Yw.T @ Yw
            pers = np.flatnonzero(s > 0)
            if pers.size:
                wl = w[pers] * lam[pers]
                z = np.matmul((wl * u[pers])[:, None, :], Y[pers])[:, 0, :]
                e = np.sum(wl * lam[pers] * u[pers] ** 2, axis=1)
                H -= (z / e[:, None]).T @ z
        return H

    def solve(self, lin: np.ndarray | None, c0: np.ndarray):
        """(c, g, p) minimising Phi from ``c0`` (g, p as d x T arrays; g None without a mask),
        or None if Newton's method did not stop within ``_NEWTON_MAX`` steps."""
        betas = self._betas(lin)
        c = np.array(c0, dtype=np.float64)
        out = self._evaluate(c, betas, lin)
        if out is None:
            return None
        phi, grad, state = out
        factor, last = None, np.inf
        for _ in range(_NEWTON_MAX):
            if factor is None:
                try:
                    factor = cho_factor(self._hessian(state))
                except np.linalg.LinAlgError:
                    return None
            step = -cho_solve(factor, grad)
            slope = float(grad @ step)
            t = 1.0
            while True:
                c_try = c + t * step
                out = self._evaluate(c_try, betas, lin)
                if out is None:
                    return None
                phi_try, grad_try, state_try = out
                # (the last clause: a change at the rounding level of Phi)
                if (phi_try <= phi + 1e-4 * t * slope or t < 1e-8
                        or phi_try - phi <= 1e-14 * max(1.0, abs(phi))):
                    break
                t *= 0.5
            size = t * float(np.linalg.norm(step))
            c, phi, grad, state = c_try, phi_try, grad_try, state_try
            if size <= 1e-10 * max(1.0, float(np.linalg.norm(c))):
                return self._blocks(c, state)
            if t < 1.0 or size > 0.25 * last:
                factor = None                     # slow progress: a fresh Hessian
            last = size
        return None

    def _blocks(self, c, state):
        d, T = self.J.d, self.J.T
        g = np.zeros((d, T)) if self.mask is not None else None
        p = np.zeros((d, T))
        for (sel, *_), (u, s, v, gb) in zip(self.parts, state):
            if gb is not None:
                g[:, sel] = gb.T
            p[:, sel] = (-s[:, None] * v).T
        return c, g, p


_NEWTON_MAX = 40
_SECULAR_MAX = 100


def kkt_shared_personal_ok(G: np.ndarray, c: np.ndarray, a_c: float, p: np.ndarray,
                           a_p: float) -> bool:
    """The optimality conditions ``kkt_ok`` does not check, for the blocks of TFCL-Q: the shared
    part, a_c c + sum_t grad_t J = 0, and every personal column, grad_t J = -a_p p_t/||p_t||
    (the l_{1,2} term's gradient where p_t != 0).  Relative slack 1e-8 (the solve works in
    the eigenbasis of each task; its residuals, recomputed from W, differ from it by rounding
    amplified by the conditioning of K_t)."""
    scale = max(float(np.abs(G).sum(1).max(initial=0.0)), a_c * float(np.abs(c).max(initial=0.0)),
                1e-300)
    if np.max(np.abs(a_c * c + G.sum(1)), initial=0.0) > 1e-8 * scale:
        return False
    norms = np.linalg.norm(p, axis=0)
    pers = norms > 0
    if pers.any():
        dev = G[:, pers] + a_p * p[:, pers] / norms[pers]
        if np.max(np.linalg.norm(dev, axis=0)) > 1e-8 * a_p:
            return False
    return True
