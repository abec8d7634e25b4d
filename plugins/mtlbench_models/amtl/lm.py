"""AMTL's Levenberg-Marquardt phase: damped Gauss-Newton steps jointly in W and the free entries
of B, on F written as a sum of squares,

    F(W, B) = 1/2 ||r(W, B)||^2,   r = ([sqrt(c_t) E_t]_t, sqrt(2 lam) (W - W B)),

E_t = task t's compressed loss residual (``objective.LossResiduals``), c_t = 1 + mu sum_s B_ts.
A step solves (J J^T + nu I) y = -r by preconditioned CG in the residual space and takes
delta = J^T y (``LevenbergMarquardt.step``); the phase's acceptance, damping and hand-back rules
are ``LMPhase``.  The options (forcing terms, re-solves, damping, precision, backtracking) are
constructor arguments of ``LevenbergMarquardt``.
"""
from __future__ import annotations

import numpy as np

from mtlbench_models._core.representations import TaskSpectra

from .objective import LossResiduals, residual_objective


def residual_jacobian(spec: TaskSpectra, res: LossResiduals, W, B, E, R, lam, mu):
    """r = (r1, r2), r1 = [sqrt(c_t) E_t]_t (T x (r + 1)), r2 = sqrt(2 lam) (W - W B) (d x T),
    and its Jacobian: returns (r1, r2, jac, jac_t), jac(dW, dB) = J [dW; dB] (the directional
    derivative of r), jac_t(u1, U2, mask) = J^T [u1; U2] restricted to the B entries where
    ``mask`` is 1 (``jac.scs`` = sqrt(c_t) s_t, T x r, the factor of J1's W part;
    ``jac_t.parts`` the same from precomputed U2 - U2 B^T and W^T U2).  The derivative of
    sqrt(c_t) E_t in B_ts is mu E_t / (2 sqrt(c_t)) for every s (c_t depends on task t's
    outgoing row sum)."""
    r = spec.r
    sc = np.sqrt(1.0 + mu * B.sum(axis=1))
    s2 = float(np.sqrt(2.0 * lam))    # a Python float keeps a float32 caller in float32
    Bt = np.ascontiguousarray(B.T)
    scs = sc[:, None] * res.s
    half = mu / (2.0 * sc)

    def jac(dW, dB, PdW=None):
        # PdW: spec.project(dW) when the caller has it
        u1 = (half * dB.sum(axis=1))[:, None] * E
        u1[:, :r] += scs * (spec.project(dW) if PdW is None else PdW)
        return u1, s2 * (dW - dW @ B - W @ dB)

    def jac_t(u1, U2, mask):
        return jac_t_parts(u1, U2 - U2 @ Bt, W.T @ U2, mask)

    def jac_t_parts(u1, K2, WU2, mask):
        dW = spec.lift(scs * u1[:, :r]) + s2 * K2
        q = half * np.einsum("tr,tr->t", E, u1)
        return dW, (q[:, None] - s2 * WU2) * mask

    jac_t.parts = jac_t_parts
    jac.scs = scs
    return sc[:, None] * E, s2 * R, jac, jac_t


def recon_block_inverse(W, B, lam, nu, dtype=np.float64):
    """U -> (2 lam (U (I - B)^T (I - B) + W W^T U) + nu U)^{-1} (d x T -> d x T), exact, in the
    eigenbases of (I - B)^T (I - B) (T x T) and W W^T (through the T x T Gram W^T W; eigenvalues
    below 1e-12 of the largest count as 0): the reconstruction block of J J^T + nu I when every
    B entry, the diagonal included, is free.  Applied in ``dtype``; ``solve.astype(dtype)`` is
    the same inverse in another precision, from the same eigendecompositions (float64)."""
    T = B.shape[0]
    IB = np.eye(T) - B
    ln, Qn = np.linalg.eigh(IB.T @ IB)
    lk, Vk = np.linalg.eigh(W.T @ W)
    keep = lk > 1e-12 * max(float(lk[-1]), 1e-300)
    lk, Qk = lk[keep], (W @ Vk[:, keep]) / np.sqrt(lk[keep])
    den_0 = 2.0 * lam * ln + nu
    dden = 1.0 / (2.0 * lam * (lk[:, None] + ln[None, :]) + nu) - 1.0 / den_0
    parts = (Qn, Qk, den_0, dden)

    def in_precision(dt):
        Qn_, Qk_, den_0_, dden_ = (np.asarray(a, dtype=dt) for a in parts)

        def solve(U2):
            # Qk (A Qn / den_k) Qn^T + (U2 - Qk Qk^T U2) Qn / den_0 Qn^T with U2 Qn formed once
            M = U2 @ Qn_
            return (M / den_0_ + Qk_ @ ((Qk_.T @ M) * dden_)) @ Qn_.T

        solve.astype = in_precision
        return solve

    return in_precision(dtype)


def lm_preconditioner(spec: TaskSpectra, res: LossResiduals, W, B, E, lam, mu, nu, free,
                      recon=None, coupling="full"):
    """The preconditioner of the inner CG on the free set ``free`` (T x T bool, diagonal
    False): (u1, U2) -> M^{-1} (u1, U2), u1 T x (r + 1) (loss residuals), U2 d x T
    (reconstruction residuals).

    D1 = the loss block, inverted exactly: per task c_t diag(e_t) + beta_t E_t E_t^T + nu,
    beta_t = mu^2 / (4 c_t) x (free entries of row t) (a Sherman-Morrison solve; = J1 J1^T + nu I
    when V_t has orthonormal columns); D2 = the reconstruction block
    2 lam (U (I - B)^T (I - B) + W W^T U) + nu U (``recon_block_inverse``).  ``coupling``:
    "none": block Jacobi M = diag(D1, D2); "w": symmetric block Gauss-Seidel
    M = (D + L) D^{-1} (D + L^T), L = [[0, 0], [C^T, 0]], with C = J1_W J2_W^T the W part of the
    off-diagonal block; "full": the same with the whole off-diagonal block C = J1 J2^T (W and the
    free B entries).  Applying M^{-1} q: z1 = D1^{-1} q1; z2 = D2^{-1} (q2 - C^T z1);
    z1 = D1^{-1} (q1 - C z2).  M is SPD whenever D is, so CG stays valid.  With "full",
    ``apply.parts`` also returns the products C z2 formed that ``jac_t.parts`` needs."""
    T, r = spec.T, spec.r
    c = 1.0 + mu * B.sum(axis=1)
    if recon is None:
        recon = recon_block_inverse(W, B, lam, nu)
    dt = E.dtype
    diag1 = np.concatenate([c[:, None] * spec.e, np.zeros((T, 1), dtype=dt)], axis=1) + nu
    beta = (mu * mu / (4.0 * c)) * free.sum(axis=1).astype(dt)
    Ed = E / diag1
    sm = beta / (1.0 + beta * np.einsum("tr,tr->t", E, Ed))

    def d1_solve(u1):
        return u1 / diag1 - (sm * np.einsum("tr,tr->t", Ed, u1))[:, None] * Ed

    if coupling == "none":
        return lambda u1, U2: (d1_solve(u1), recon(U2))
    s2 = float(np.sqrt(2.0 * lam))
    scs = np.sqrt(c)[:, None] * res.s                 # T x r
    full = coupling == "full"
    if full:
        mask = free.astype(dt)
        half = mu / (2.0 * np.sqrt(c))
    Bt = np.ascontiguousarray(B.T)

    def c_parts(U2):                                  # C U2 and the products it formed
        K = U2 - U2 @ Bt
        out = np.zeros((T, r + 1), dtype=dt)
        PK = spec.project(s2 * K)
        out[:, :r] = scs * PK
        WU = None
        if full:
            WU = W.T @ U2
            g = -s2 * np.einsum("ts,ts->t", WU, mask)
            out += (half * g)[:, None] * E
        return out, K, WU, PK

    def ct_apply(u1):                                 # C^T u1: T x (r + 1) -> d x T
        X = spec.lift(scs * u1[:, :r])
        out = s2 * (X - X @ B)
        if full:
            q = half * np.einsum("tr,tr->t", E, u1)
            out -= s2 * (W @ (q[:, None] * mask))
        return out

    def apply_parts(u1, U2):
        z1 = d1_solve(u1)
        z2 = recon(U2 - ct_apply(z1))
        cz, K, WU, PK = c_parts(z2)
        return d1_solve(u1 - cz), z2, K, WU, PK

    def apply(u1, U2):
        return apply_parts(u1, U2)[:2]

    if full:
        apply.parts = apply_parts
    return apply


def jjt_max_diag(spec: TaskSpectra, W, B, lam, mu) -> float:
    """The largest diagonal entry of J J^T, from the diagonals of its two blocks (at least
    1e-300)."""
    c = 1.0 + mu * B.sum(axis=1)
    IB = np.eye(B.shape[0]) - B
    loss_block = float((c[:, None] * spec.e).max(initial=0.0))
    recon_block = 2.0 * lam * (float(np.einsum("it,it->i", W, W).max(initial=0.0))
                               + float(np.einsum("st,st->t", IB, IB).max(initial=0.0)))
    return max(loss_block, recon_block, 1e-300)


class _StepSystem:
    """The linear algebra of one step: the free set, the fixed entries, the residuals and
    Jacobian products in float64 and, with ``low``, in that precision, and the inner PCG."""

    def __init__(self, lm, spec, res, W, B, E, R, lam, mu, nu, orthonormal, low):
        self.lm, self.W, self.B, self.lam, self.mu, self.nu = lm, W, B, lam, mu, nu
        self.orthonormal = orthonormal
        T = spec.T
        L = 0.5 * np.einsum("tr,tr->t", E, E)
        gB = mu * L[:, None] - 2.0 * lam * (W.T @ R)
        self.free = (B > 0) | (gB < 0)
        np.fill_diagonal(self.free, False)
        self.r1, self.r2, self.jac, self.jac_t = residual_jacobian(spec, res, W, B, E, R, lam, mu)
        self.ops = {np.dtype(np.float64): (spec, res, W, B, E, self.r1, self.r2, self.jac,
                                           self.jac_t)}
        if low is not None:
            spec_lo, res_lo = low
            dt = spec_lo.V.dtype
            W_lo, B_lo, E_lo = W.astype(dt), B.astype(dt), E.astype(dt)
            self.ops[dt] = (spec_lo, res_lo, W_lo, B_lo, E_lo,
                            *residual_jacobian(spec_lo, res_lo, W_lo, B_lo, E_lo, R.astype(dt),
                                               lam, mu))
        self.cg_dtype = next(reversed(self.ops))      # low's precision if given, else float64
        self.recons = {}
        self.fixed = np.zeros((T, T), dtype=bool)
        self.half_rr = 0.5 * (np.sum(self.r1 * self.r1) + np.sum(self.r2 * self.r2))

    def _start(self, dtype, y1, y2, cold, mask_):
        """(b1, b2, q1, q2, y1, y2): the right-hand side -r - J [0; dB_fix] and the residual at
        y (zero if ``cold``: then the residual is b, no product needed)."""
        spec_, res_, W_, B_, E_, r1_, r2_, jac_, jac_t_ = self.ops[dtype]
        if cold:
            y1, y2 = np.zeros_like(r1_), np.zeros_like(r2_)
        else:
            y1, y2 = np.asarray(y1, dtype=dtype), np.asarray(y2, dtype=dtype)
        if self.fixed.any():
            f1, f2 = jac_(np.zeros_like(W_), np.where(self.fixed, -B_, 0.0))
            b1, b2 = -r1_ - f1, -r2_ - f2
        else:
            b1, b2 = -r1_, -r2_
        if cold:
            return b1, b2, b1.copy(), b2.copy(), y1, y2
        dW, dB = jac_t_(y1, y2, mask_)
        h1, h2 = jac_(dW, dB)
        return b1, b2, b1 - h1 - self.nu * y1, b2 - h2 - self.nu * y2, y1, y2

    def _preconditioner(self, dtype):
        spec_, res_, W_, B_, E_ = self.ops[dtype][:5]
        if dtype not in self.recons:                  # the float64 finish rarely iterates
            first = next(iter(self.recons.values()), None)
            self.recons[dtype] = (recon_block_inverse(self.W, self.B, self.lam, self.nu, dtype)
                                  if first is None else first.astype(dtype))
        return lm_preconditioner(spec_, res_, W_, B_, E_, self.lam, self.mu, self.nu, self.free,
                                 self.recons[dtype], self.lm.coupling)

    def pcg(self, dtype, y1, y2, forcing, cold):
        """Preconditioned CG on (J J^T + nu I) y = -r - J [0; dB_fix] over the free set, from
        (y1, y2) (zero if ``cold``), with the operators in ``dtype``, to relative residual
        ``forcing`` (measured in that precision) or ``max_cg`` iterations.  With the full
        coupling (``share``) the preconditioner's products z2 - z2 B^T, W^T z2 and, with
        orthonormal spectra, the projection are carried along p2's (linear) recurrence instead
        of recomputed for J^T p.  Returns (y1, y2, iterations)."""
        jac_, jac_t_ = self.ops[dtype][7:]
        mask_ = self.free.astype(dtype)
        b1, b2, q1, q2, y1, y2 = self._start(dtype, y1, y2, cold, mask_)
        thr = float(forcing) * np.sqrt(np.sum(b1 * b1) + np.sum(b2 * b2))
        if np.sqrt(np.sum(q1 * q1) + np.sum(q2 * q2)) <= thr:
            return y1, y2, 0
        precond = self._preconditioner(dtype)
        shared = self.lm.share and hasattr(precond, "parts")
        apply = precond.parts if shared else precond
        r, nu = self.ops[dtype][0].r, self.nu

        def normal_product(p):                        # J J^T p (before the damping)
            if shared:
                dW, dB = jac_t_.parts(p[0], p[2], p[3], mask_)
                # orthonormal V_t: project(lift(x)) = x, so project(dW) = scs p1 + project(s2 pK)
                return jac_(dW, dB, jac_.scs * p[0][:, :r] + p[4] if self.orthonormal else None)
            return jac_(*jac_t_(p[0], p[1], mask_))

        z = apply(q1, q2)
        p = z
        rz = np.sum(q1 * z[0]) + np.sum(q2 * z[1])
        n = 0
        while n < int(self.lm.max_cg) and np.sqrt(np.sum(q1 * q1) + np.sum(q2 * q2)) > thr:
            h1, h2 = normal_product(p)
            h1 += nu * p[0]
            h2 += nu * p[1]
            alpha = rz / (np.sum(p[0] * h1) + np.sum(p[1] * h2))
            y1 += alpha * p[0]
            y2 += alpha * p[1]
            q1 -= alpha * h1
            q2 -= alpha * h2
            z = apply(q1, q2)
            rz_new = np.sum(q1 * z[0]) + np.sum(q2 * z[1])
            p = tuple(zi + (rz_new / rz) * pi for zi, pi in zip(z, p))
            rz = rz_new
            n += 1
        return y1, y2, n

    def step_of(self, y1, y2):
        """The step (dW, dB) = J^T y on the free set, minus B on the fixed entries."""
        mask = self.free.astype(np.float64)
        dW, dB = self.jac_t(np.asarray(y1, dtype=np.float64), np.asarray(y2, dtype=np.float64),
                            mask)
        dB += np.where(self.fixed, -self.B, 0.0)
        return dW, dB

    def clip_and_predict(self, dW, dB, a=1.0):
        """The point a of the way along the step (dW, dB), projected: W + a dW,
        max(0, B + a dB) (diagonal 0), and the decrease of F the Gauss-Newton model predicts
        for it."""
        B_a = np.maximum(self.B + a * dB, 0.0)
        np.fill_diagonal(B_a, 0.0)
        h1, h2 = self.jac(a * dW, B_a - self.B)
        return self.W + a * dW, B_a, float(self.half_rr - 0.5 * (np.sum((self.r1 + h1) ** 2)
                                                                 + np.sum((self.r2 + h2) ** 2)))


class LevenbergMarquardt:
    """Levenberg-Marquardt steps on F = 1/2 ||r||^2 and the rules of the phase (module
    docstring of the package).  Options:

    * ``switch``: the phase starts once F <= switch x F_0;
    * ``eta``, ``max_cg``: forcing term and iteration cap of the inner CG of the step's solve;
      ``eta_screen``: forcing term of the solves that only screen the active set (None: eta);
    * ``resolves``: re-solves after fixing at 0 the B entries a step drives negative;
    * ``coupling`` ("none", "w", "full") of the inner CG's preconditioner
      (``lm_preconditioner``); ``share``: carry its products along the CG recurrence;
    * ``precision`` of the inner CG's operators on interpolating problems (None: float64),
      used only while nu >= ``low_damping`` x the largest diagonal entry of J J^T;
    * ``damping0``: the first damping, relative to that entry (Madsen-Nielsen-Tingleff);
    * ``backtrack``: fractions of a step tried, in order, before it counts as rejected;
    * hand-back to block iterations after ``strikes`` poor steps (gain ratio < 1/4) in a row,
      ``rejects`` rejected steps in a row, or a window of ``window`` steps that did not reduce
      F by the factor ``window_fall``; block iterations then run until F has fallen by the
      factor ``resume``."""

    def __init__(self, switch=0.1, eta=0.2, max_cg=100, resolves=3, eta_screen=0.6,
                 coupling="full", share=True, precision=np.float32, low_damping=1e-7,
                 damping0=1e-3, backtrack=(1.0, 0.5, 0.25, 0.125), strikes=3, rejects=10,
                 window=10, window_fall=0.5, resume=0.5):
        self.switch, self.eta, self.max_cg, self.resolves = switch, eta, max_cg, resolves
        self.eta_screen, self.coupling, self.share = eta_screen, coupling, share
        self.precision, self.low_damping, self.damping0 = precision, low_damping, damping0
        self.backtrack, self.strikes, self.rejects = tuple(backtrack), strikes, rejects
        self.window, self.window_fall, self.resume = window, window_fall, resume

    def initial_damping(self, spec: TaskSpectra, W, B, lam, mu) -> float:
        """``damping0`` x the largest diagonal entry of J J^T."""
        return self.damping0 * jjt_max_diag(spec, W, B, lam, mu)

    def step(self, spec, res: LossResiduals, W, B, E, R, lam, mu, nu, orthonormal=False,
             guard_clipping=False, low=None):
        """One step: delta = J^T y, (J J^T + nu I) y = -r, over W and the free entries of B
        (B_st > 0, or = 0 with a negative partial derivative; never the diagonal), by PCG to
        relative residual ``eta``.  Entries the step drives below 0 are fixed at 0 and the step
        re-solved (warm-started), at most ``resolves`` times (the screening solves before the
        last to ``eta_screen``); what still goes below 0 is clipped -- with ``guard_clipping``
        only if the Gauss-Newton model predicts a decrease of F for the clipped step, else those
        entries are fixed as well and the step re-solved to ``eta``.  ``low`` = (spectra,
        residuals) in a lower precision (``LowPrecisionSpectra`` for both): the inner CG runs on
        them, and the step's own solve is checked in float64 and, where it misses its forcing
        term there, continued in float64.  Returns (along, CG iterations): ``along(a)`` = (W, B,
        predicted decrease of F) at the fraction a of the projected step; ``along.resolves``,
        ``along.clipped``, ``along.polish`` (float64 iterations of the finish)."""
        system = _StepSystem(self, spec, res, W, B, E, R, lam, mu, nu, orthonormal, low)
        y1 = y2 = None
        n_cg = n_polish = 0
        screening = self.eta_screen is not None and self.eta_screen > self.eta
        attempt = -1
        while True:
            attempt += 1
            loose = screening and attempt < int(self.resolves)
            forcing = self.eta_screen if loose else self.eta
            y1, y2, n = system.pcg(system.cg_dtype, y1, y2, forcing, attempt == 0)
            n_cg += n
            if system.cg_dtype != np.float64 and not loose:
                y1, y2, n = system.pcg(np.dtype(np.float64), y1, y2, forcing, False)
                n_cg += n
                n_polish += n
            dW, dB = system.step_of(y1, y2)
            below = system.free & (B + dB < 0)
            if loose and not below.any():
                screening = False            # the free set held: finish this solve to eta
                continue
            if not below.any():
                break
            if attempt >= int(self.resolves) and (
                    not guard_clipping or system.clip_and_predict(dW, dB)[2] > 0.0):
                break
            system.free &= ~below
            system.fixed |= below

        def along(a):
            return system.clip_and_predict(dW, dB, a)

        along.resolves, along.clipped, along.polish = attempt, int(below.sum()), n_polish
        return along, n_cg


class LMPhase:
    """The state of one fit's Levenberg-Marquardt phase: damping, the counters of poor and
    rejected steps and of the window, and the diagnostics.  ``iterate`` takes one step with
    backtracking; a step is accepted only if F strictly decreases."""

    COUNTERS = ("steps", "cg_iters", "rejected", "shortened", "exits", "resolves",
                "resolves_max", "float64_finish")

    def __init__(self, lm: LevenbergMarquardt, spec, res, lam, mu, orthonormal, guard, low):
        self.lm, self.spec, self.res, self.lam, self.mu = lm, spec, res, lam, mu
        self.orthonormal, self.guard, self.low = orthonormal, guard, low
        self.nu = self.grow = 0.0
        self.strikes = self.rejects = self.window_n = 0
        self.window_F = 0.0
        self.count = dict.fromkeys(self.COUNTERS, 0)

    def enter(self, W, B, F):
        """Start (or resume) the phase at (W, B) with objective F; a resumed phase keeps the
        damping reached so far."""
        if self.nu == 0.0:
            self.nu = self.lm.initial_damping(self.spec, W, B, self.lam, self.mu)
        self.grow, self.strikes, self.rejects = 2.0, 0, 0
        self.window_F, self.window_n = F, 0

    def should_hand_back(self, F) -> bool:
        """Whether the phase stopped paying: ``strikes`` poor steps, ``rejects`` rejections in a
        row, or a window of steps that did not reduce F enough."""
        lm = self.lm
        if self.window_n == lm.window:
            if F > lm.window_fall * self.window_F:
                self.strikes = lm.strikes
            self.window_F, self.window_n = F, 0
        return self.strikes >= lm.strikes or self.rejects >= lm.rejects

    def iterate(self, W, B, E, R, F):
        """One step from (W, B) (E, R its residuals, F its objective).  Returns (accepted, W, B,
        F, E, R, L) at the new point (None for W ... L when rejected)."""
        lm, spec, lam, mu = self.lm, self.spec, self.lam, self.mu
        step_low = self.low if self.low is not None and self.nu >= lm.low_damping * jjt_max_diag(
            spec, W, B, lam, mu) else None
        along, n_cg = lm.step(spec, self.res, W, B, E, R, lam, mu, self.nu, self.orthonormal,
                              self.guard, step_low)
        count = self.count
        count["steps"] += 1
        self.window_n += 1
        count["cg_iters"] += n_cg
        count["resolves"] += along.resolves
        count["resolves_max"] = max(count["resolves_max"], along.resolves)
        count["float64_finish"] += along.polish
        for frac in lm.backtrack:
            # the projected step, then shorter pieces of it: clipping at B >= 0 is what spoils a
            # full step, far more often than the damping is too weak
            W_try, B_try, pred = along(frac)
            F_try, E_try, R_try, L_try = residual_objective(spec, self.res, W_try, B_try, lam, mu)
            if F_try < F:
                count["shortened"] += frac < 1.0
                rho = (F - F_try) / pred if pred > 0 else 0.0
                self.nu *= max(1.0 / 3.0, 1.0 - (2.0 * rho - 1.0) ** 3)
                self.grow = 2.0
                self.strikes = 0 if rho >= 0.25 else self.strikes + 1
                self.rejects = 0
                return True, W_try, B_try, F_try, E_try, R_try, L_try
        self.nu *= self.grow
        self.grow *= 2.0
        self.rejects += 1
        count["rejected"] += 1
        return False, None, None, None, None, None, None
