"""The reference optimum of a model's runs, the agreement of its solvers and the times each
run took to reach the suboptimality levels."""
from __future__ import annotations

import math
from typing import Any, Sequence



from .runs import LEVELS, STOPPED, Reference, SolverRun


def _has_curve(run: SolverRun) -> bool:
    """A run whose points are objectives of its iterates: finished, or stopped at the time
    limit (the points it reached)."""
    return run.status == "ok" or (run.status == STOPPED and bool(run.points))


def reference_optimum(runs: Sequence[SolverRun], convex: bool) -> Reference:
    """The reference optimum of one model selection from its runs (module docstring); the
    points of a run stopped at the time limit count (each is an objective at an iterate, and
    a certificate there bounds the optimum), the run itself is no second solver."""
    ok = [r for r in runs if r.status == "ok"]
    drawn = [r for r in runs if _has_curve(r)]
    values = [p["objective"] for r in drawn for p in r.curve()
              if p.get("objective") is not None and math.isfinite(p["objective"])]
    if not values:
        return Reference(None, "none", note="no run reported an objective")
    best = min(values)
    lowers = [p["objective"] - p["certificate"] for r in drawn for p in r.curve()
              if p.get("certificate") is not None and math.isfinite(p["certificate"])]
    if lowers:
        lower = max(lowers)
        return Reference(best, "certified", lower,
                         f"a certificate bounds the optimum below by {lower:.12g}")
    solvers = {r.entry.solver for r in ok if r.entry.role == "solver"}
    failed = [r for r in runs if r.status != "ok" and r.entry.role == "solver"]
    if convex and len(solvers) > 1:
        return Reference(best, "independent solver", None,
                         f"convex: optimum of {len(solvers)} solvers "
                         f"({', '.join(sorted(solvers))})")
    why = "non-convex" if not convex else "convex, but no certificate and no second solver"
    if convex and failed:
        why += " (" + "; ".join(f"{r.entry.solver}: {r.message}" for r in failed) + ")"
    longer = [r for r in ok if r.entry.role == "reference"]
    how = (f"best of {len(ok)} run(s), {len(longer)} of them longer/other starts"
           if longer else f"best of {len(ok)} run(s)")
    return Reference(best, "best found", None, f"{why}: {how}; not known to be optimal")


def solver_agreement(runs: Sequence[SolverRun], rtol: float,
                     reference: Reference) -> dict[str, Any]:
    """Whether the solvers (role "solver") of one model agree on the optimum: the spread of
    their final objectives, relative to |F_ref|, is <= ``rtol``.  ``ok`` is None with fewer
    than two solvers that finished with an objective."""
    finals = {r.entry.solver: r.final_objective for r in runs
              if r.entry.role == "solver" and r.status == "ok" and r.final_objective is not None}
    out: dict[str, Any] = {"rtol": rtol, "finals": finals, "ok": None, "spread": None,
                           "message": ""}
    if len(finals) < 2 or reference.value is None:
        out["message"] = "one solver: nothing to compare" if len(finals) == 1 else \
            "fewer than two solvers finished"
        return out
    lo, hi = min(finals.values()), max(finals.values())
    spread = (hi - lo) / max(abs(reference.value), 1e-300)
    out["spread"] = spread
    out["ok"] = bool(spread <= rtol)
    names = " and ".join(sorted(finals))
    if out["ok"]:
        out["message"] = f"{names} agree: relative spread {spread:.1e} <= {rtol:g}"
    else:
        worst = max(finals, key=finals.get)
        out["message"] = (f"{names} DO NOT AGREE: relative spread {spread:.1e} > {rtol:g} "
                          f"({worst} stopped at {finals[worst]:.12g}, the best is {lo:.12g}); "
                          "their times are not comparable until they do")
    return out


def suboptimality(objective: float, reference: Reference) -> float | None:
    if reference.value is None:
        return None
    return (objective - reference.value) / max(abs(reference.value), 1e-300)


def level_times(run: SolverRun, reference: Reference,
                levels: Sequence[float] = LEVELS) -> dict[str, float | None]:
    """First solver time at which the run's relative suboptimality is <= each level (None:
    never reached -- also by a run stopped at the time limit before it got there --, or no
    reference)."""
    out: dict[str, float | None] = {f"{lv:.0e}": None for lv in levels}
    if not _has_curve(run) or reference.value is None:
        return out
    for p in run.curve():
        s = suboptimality(p["objective"], reference)
        for lv in levels:
            key = f"{lv:.0e}"
            if out[key] is None and s is not None and s <= lv:
                out[key] = float(p["time"])
    return out


# ----------------------------------------------------------------------------- the race
