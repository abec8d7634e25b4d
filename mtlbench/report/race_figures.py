"""The figure of a solver race: relative suboptimality (log) against solver time (log).

Drawn from race rows (:func:`mtlbench.race.race_rows`, the ``races`` table of the store): one
panel per model selection, one curve per solver (solid, markers at reported iterations; a run
that reported nothing is its final point alone), reference runs dashed.  A run stopped at its
time limit is drawn up to where it was stopped, its last point crossed and its legend entry
saying "stopped at the time limit"; a run the panel cannot draw (failed, or stopped before it
reported a point) is named under the panel with why, never left out silently.  Suboptimality is
(F(t) - F_ref) / |F_ref| against the model's reference optimum (certified / independent solver
/ best found, in the panel's title with the solvers' agreement); values at or below
:data:`FLOOR` are drawn on the floor.  Dotted lines mark the table's levels 1e-2, 1e-4, 1e-6.

:func:`race_figures` draws, for ``mtlbench publish``, the figure of every problem of a dataset
that was raced, from the latest row of each (model, solver, role, variant) in the store.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np

from ..race import STOPPED
from ..syntax import file_stem
from .canvas import _mpl, _panels, _save, _wrap, log_x_axis

FLOOR = 1e-16
LEVEL_LINES = (1e-2, 1e-4, 1e-6)
STOPPED_TEXT = "stopped at the time limit"


def _suboptimality(objectives: Sequence[float], ref: float) -> list[float]:
    scale = max(abs(ref), 1e-300)
    return [max((f - ref) / scale, FLOOR) for f in objectives]


def race_plot(rows: Sequence[Mapping[str, Any]], path: Path, title: str = "") -> Path | None:
    """Draw the race of ``rows`` (one race: any models, solvers and reference runs) into
    ``path``; None when no run has a curve and a reference."""
    panels: dict[str, list[Mapping[str, Any]]] = {}
    left_out: dict[str, list[str]] = {}
    for r in rows:
        ref = (r.get("reference") or {}).get("value")
        curve = r.get("curve") or {}
        if r.get("status") in ("ok", STOPPED) and ref is not None and curve.get("time"):
            panels.setdefault(r["model"], []).append(r)
        else:
            left_out.setdefault(r["model"], []).append(f"{_name(r)}: {_why_not_drawn(r, ref)}")
    if not panels:
        return None
    Figure = _mpl()
    nrows, ncols = _panels(len(panels), ncols=2)
    fig = Figure(figsize=(6.0 * ncols, 4.2 * nrows), layout="constrained")
    for i, (label, runs) in enumerate(panels.items()):
        ax = fig.add_subplot(nrows, ncols, i + 1)
        ref = runs[0]["reference"]
        drawn = []
        for r in runs:
            curve = r["curve"]
            times = [max(float(t), 1e-6) for t in curve["time"]]
            sub = _suboptimality(curve["objective"], ref["value"])
            name = _name(r)
            style = dict(ls="--", color="0.5", lw=1.0) if r["role"] == "reference" else \
                dict(ls="-", lw=1.6, marker="o" if len(times) < 40 else None, ms=3)
            if r.get("status") == STOPPED:
                name += f" ({STOPPED_TEXT})"
            (line,) = ax.plot(times, sub, label=name, **style)
            if r.get("status") == STOPPED:  # where it was stopped
                ax.plot(times[-1:], sub[-1:], ls="none", marker="x", ms=8, mew=2,
                        color=line.get_color())
            drawn += times
        if left_out.get(label):
            ax.text(0.01, 0.01, "not drawn: " + "; ".join(left_out[label]), fontsize=6,
                    transform=ax.transAxes, va="bottom", ha="left", wrap=True)
        for lv in LEVEL_LINES:
            ax.axhline(lv, color="0.8", lw=0.8, ls=":", zorder=0)
        log_x_axis(ax, np.asarray(drawn))
        ax.set_yscale("log")
        ax.set_ylim(FLOOR / 3, None)
        ax.set_xlabel("solver time (s)")
        ax.set_ylabel("(F - F_ref) / |F_ref|")
        agr = runs[0].get("agreement") or {}
        verdict = ""
        if agr.get("ok") is not None:
            verdict = "; solvers agree" if agr["ok"] else "; SOLVERS DISAGREE"
        # a selection label lists its parameters: break its lines after the commas
        ax.set_title(_wrap(label.replace(",", ", "), 64) + f"\nreference: {ref['kind']}{verdict}",
                     fontsize=8)
        ax.legend(fontsize=7, loc="best")
    fig.suptitle(title or "Solver race", fontsize=10)
    return _save(fig, Path(path))


def _name(r: Mapping[str, Any]) -> str:
    return r["solver"] + (f" (reference: {r['variant']})" if r.get("role") == "reference"
                          else "")


def _why_not_drawn(r: Mapping[str, Any], ref: Any) -> str:
    if r.get("status") == STOPPED:
        return f"{STOPPED_TEXT} before it reported progress"
    if r.get("status") != "ok":
        return f"failed ({str(r.get('message') or '')[:60]})"
    return "no reference optimum" if ref is None else "no progress reported"


def latest_race_rows(store, dataset: str) -> dict[str, list[dict[str, Any]]]:
    """Per problem of ``dataset``: the latest stored row of each (model, solver, role,
    variant) of its races (one repetition and seed: those of the latest row)."""
    df = store.races(datasets=[dataset])
    out: dict[str, list[dict[str, Any]]] = {}
    for problem, g in df.groupby("problem", sort=True):
        last = g.iloc[-1]
        g = g[(g["rep"] == last["rep"]) & (g["seed"] == last["seed"])]
        g = g.drop_duplicates(subset=["model", "solver", "role", "variant"], keep="last")
        out[str(problem)] = g.to_dict(orient="records")
    return out


def race_figures(store, dataset: str, outdir: str | Path, rel_to: str | Path | None = None,
                 fmt: str = "png") -> list[dict[str, Any]]:
    """The race figure of every raced problem of ``dataset``, as figure entries of
    :func:`mtlbench.report.figures.make_figures` (``kind`` "race")."""
    from .figures import figure_entry

    out = []
    for problem, rows in latest_race_rows(store, dataset).items():
        rep, seed = rows[0]["rep"], rows[0]["seed"]
        dates = sorted(str(r["finished_at"]) for r in rows)
        path = race_plot(rows, Path(outdir) / f"{file_stem(problem)}-race.{fmt}",
                         f"{problem}: solver race (training split of repetition {rep}, "
                         f"seed {seed})")
        origins = sorted({o for r in rows for o in (r.get("origin") or {}).values()})
        how = {"store": "selected by the stored units", "centre": "the starting-design centre",
               "given": "given on the command line"}
        chosen = ", ".join(how.get(o, o) for o in origins) or "the models' defaults"
        out.append(figure_entry(
            "race", f"Solver race ({problem})", path,
            Path(rel_to) if rel_to is not None else None,
            caption=("Relative suboptimality (F - F_ref) / |F_ref| against solver time, one "
                     f"panel per model (hyperparameters: {chosen}), one curve per solver "
                     "(dashed: longer reference runs; crossed at its last point: a run "
                     f"{STOPPED_TEXT}, drawn up to there); F_ref is certified by a duality "
                     "gap, confirmed by an independent solver, or the best found (panel "
                     "title); runs not drawn are named under their panel. "
                     f"Raced {dates[0]} to {dates[-1]} by `mtlbench race`; see docs/race.md."),
            note="no race run with a curve and a reference"))
    return out


__all__ = ["race_plot", "race_figures", "latest_race_rows", "FLOOR", "STOPPED_TEXT"]
