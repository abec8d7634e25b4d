"""``mtlbench check-ustep``: TFCL's closed-form U-step (Thm. eigsol) against a cvxpy SDP.

On small bipartite graphs covering every case of the proof of Thm. eigsol (1, 2a, 2b, 2c, 2d)
the closed form (``tfcl.ustep``) is compared with the SDP
min <L, U> + (a/2)||U||_F^2 s.t. 0 <= U <= I, tr U = k, solved by cvxpy, with 0 < a < eigengap
(then the closed form is the unique minimiser) and with a = 0 (objective value only).
Registered by its own entry point (``tfcl-check`` in pyproject.toml).
"""
from __future__ import annotations

import numpy as np

from mtlbench import hookimpl

from ._tfcl.eigen import bipartite_laplacian
from ._tfcl.ustep import ustep

__all__ = ["ustep_sdp", "check_ustep_rows", "register_commands"]


def ustep_sdp(L: np.ndarray, k: int, a: float,
              solver: str = "CLARABEL") -> tuple[np.ndarray, float]:
    """Solve min <L, U> + (a/2)||U||_F^2 s.t. 0 <= U <= I, tr U = k as an SDP with cvxpy."""
    import cvxpy as cp

    N = L.shape[0]
    U = cp.Variable((N, N), symmetric=True)
    obj = cp.trace(L @ U) + (a / 2.0) * cp.sum_squares(U)
    prob = cp.Problem(cp.Minimize(obj), [U >> 0, np.eye(N) - U >> 0, cp.trace(U) == k])
    prob.solve(solver=solver)
    if U.value is None:
        raise RuntimeError(f"cvxpy ({solver}) failed: status {prob.status}")
    return np.asarray(U.value), float(prob.value)


def _safe_strength(lams: np.ndarray, p: int, q: int) -> float:
    """A strong-convexity weight a with 0 < a < eigengap, for which the closed form is the unique
    minimiser of <L,U> + (a/2)||U||^2 (Thm. eigsol; the gap below lambda_{p+1} only matters
    when p >= 1)."""
    N = lams.shape[0]
    gaps = []
    if p >= 1:
        gaps.append(lams[p] - lams[p - 1])
    if q < N:
        gaps.append(lams[q] - lams[q - 1])
    return 0.5 * min(gaps) if gaps else 1.0


def _check_instances(seeds: int = 10):
    """(case label, W, k) instances covering every case of the proof of Thm. eigsol."""
    rng = np.random.default_rng(12345)
    paper = np.zeros((5, 6))
    paper[:2, :2], paper[2:4, 2:4], paper[4, 4:] = 1.0, 2.0, 3.0
    out = [("paper 3-block, k=2", paper, 2), ("paper 3-block, k=5", paper, 5),
           ("two equal edges, k=3", np.eye(2), 3), ("W = 0, k=2", np.zeros((3, 4)), 2),
           ("random dense, k=3", rng.random((6, 5)), 3)]
    for s in range(seeds):
        r = np.random.default_rng(s)
        B = np.round(r.random((int(r.integers(1, 3)), int(r.integers(1, 4)))) * 3 + 1)
        reps = int(r.integers(2, 4))
        blocks = [B] * reps + ([r.random((2, 2)) + 0.5] if r.random() < 0.5 else [])
        d, T = sum(b.shape[0] for b in blocks), sum(b.shape[1] for b in blocks)
        W = np.zeros((d, T))
        i = j = 0
        for b in blocks:
            W[i:i + b.shape[0], j:j + b.shape[1]] = b * np.where(r.random(b.shape) < 0.5, -1, 1)
            i, j = i + b.shape[0], j + b.shape[1]
        out.append((f"repeated blocks seed {s}", W, int(r.integers(1, d + T + 1))))
        out.append((f"random sparse seed {s}", r.random((5, 4)) * (r.random((5, 4)) < 0.5),
                    int(r.integers(1, 10))))
    return out


def check_ustep_rows(seeds: int = 10, solver: str = "CLARABEL") -> list[dict]:
    """Compare the closed-form U-step with the cvxpy SDP on every instance of
    :func:`_check_instances`.  Each row: case, k, p, q, a, max |U_closed - U_sdp|,
    relative objective gap (with the strong-convexity weight a), and the relative
    objective gap of the a = 0 problem <L, U> (where U_sdp need not be unique)."""
    rows = []
    for label, W, k in _check_instances(seeds):
        L = bipartite_laplacian(W)
        u = ustep(W, k)
        Uc = u.dense()
        lam_full = np.linalg.eigvalsh(L)
        a = _safe_strength(lam_full, u.p, u.q)
        Us, fs = ustep_sdp(L, k, a, solver)
        fc = float(np.sum(L * Uc) + a / 2 * np.sum(Uc * Uc))
        U0, f0 = ustep_sdp(L, k, 0.0, solver)
        fc0 = float(np.sum(L * Uc))
        rows.append({"instance": label, "case": u.case, "N": L.shape[0], "k": k, "p": u.p,
                     "q": u.q, "a": a, "max_abs_dU": float(np.abs(Uc - Us).max()),
                     "rel_gap": (fc - fs) / max(1.0, abs(fs)),
                     "rel_gap_a0": (fc0 - f0) / max(1.0, abs(f0))})
    return rows


def _make_check_command():
    import click

    @click.command("check-ustep")
    @click.option("--seeds", default=10, show_default=True,
                  help="random instances per generator (repeated blocks, random sparse)")
    @click.option("--solver", default="CLARABEL", show_default=True, help="cvxpy SDP solver")
    @click.option("--atol", default=1e-5, show_default=True, help="max allowed |U_closed - U_sdp|")
    @click.option("--rtol", default=1e-6, show_default=True,
                  help="max allowed relative objective gap")
    @click.option("--verbose", "-v", is_flag=True, help="print every instance")
    def check_ustep_command(seeds, solver, atol, rtol, verbose):
        """Cross-check TFCL's closed-form U-step (Thm. eigsol) against an SDP solved by cvxpy.

        On small bipartite graphs covering every multiplicity case of the proof (1, 2a, 2b,
        2c, 2d), solves min <L,U> + (a/2)||U||_F^2 s.t. 0 <= U <= I, tr U = k with
        0 < a < eigengap (unique minimiser) and prints, per case, the largest entry of
        |U_closed - U_sdp| and the relative objective gap (also for a = 0).  Exits with
        status 1 on disagreement.
        """
        rows = check_ustep_rows(seeds, solver)
        if verbose:
            for r in rows:
                click.echo(f"  {r['instance']:<28} case {r['case']:<3} N={r['N']:<3} k={r['k']:<3} "
                           f"p={r['p']:<3} q={r['q']:<3} max|dU|={r['max_abs_dU']:.2e} "
                           f"gap={r['rel_gap']:+.2e} gap(a=0)={r['rel_gap_a0']:+.2e}")
        click.echo(f"{'case':<5} {'instances':>9} {'max|U_closed-U_sdp|':>20} "
                   f"{'max rel. obj. gap':>18} {'gap (a=0)':>10}  verdict")
        bad = False
        for case in ("1", "2a", "2b", "2c", "2d"):
            rs = [r for r in rows if r["case"] == case]
            if not rs:
                click.echo(f"{case:<5} {0:>9}  (no instance)")
                bad = True
                continue
            du = max(r["max_abs_dU"] for r in rs)
            gap = max(abs(r["rel_gap"]) for r in rs)
            gap0 = max(abs(r["rel_gap_a0"]) for r in rs)
            ok = du <= atol and gap <= rtol and gap0 <= rtol
            bad |= not ok
            click.echo(f"{case:<5} {len(rs):>9} {du:>20.2e} {gap:>18.2e} {gap0:>10.2e}  "
                       f"{'agree' if ok else 'DISAGREE'}")
        if bad:
            click.echo("check-ustep: closed form and SDP disagree (or a case had no instance)",
                       err=True)
            raise SystemExit(1)
        click.echo("check-ustep: closed form agrees with the SDP in every case")

    return check_ustep_command


@hookimpl
def register_commands(cli):
    cli.add_command(_make_check_command())
