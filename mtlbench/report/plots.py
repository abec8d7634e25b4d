"""Figures drawn from stored results (matplotlib, imported lazily).

Every figure uses the units :func:`mtlbench.report.select.select_units` keeps for the table,
so figures and tables describe the same runs.  Drawing uses ``matplotlib.figure.Figure`` with
the Agg canvas directly: no pyplot state, no display needed.  No model is named here: which
models appear in a model-specific figure follows from what they store (``history``,
``embeddings``, ``coef``) or declare (``ablation_of``, :mod:`mtlbench.report.roles`).

=================  ==========================================================================
figure             content
=================  ==========================================================================
``box``            test AUC x 100 per repetition, one box per model (box = median and
                   quartiles, whiskers = range, points = repetitions, diamond = mean),
                   one panel per problem (paper Fig. "AUC comparison")
``per_user``       distribution over users of the per-user test AUC (mean over repetitions)
``tuning``         the search: validation AUC against each searched hyperparameter, one row of
                   panels per model (every fit of every repetition, the best fit per value
                   joined, the selected values marked); log axis for positive ranges
``heatmaps``       |W| learned by each model (repetition 0) beside the ground truth, data with
                   a known W only, with a colour bar (paper Fig. "Structural Recovery")
``convergence``    every model with a stored convergence history: objective (divided by its
                   final value when several models share a panel), change of W and of U per
                   iteration of the final refit of repetition 0 (paper Fig. "Convergence")
``embeddings``     the best-ranked model that stores spectral embeddings (array
                   ``embeddings``): the first iterations projected on the two leading
                   principal axes of the bulk, colour = true group with a legend
``ablation``       each full model with the models declaring ``ablation_of`` it: mean ± std
                   test AUC over repetitions; the y axis starts near the data and the break
                   is marked
=================  ==========================================================================

Each function draws one figure from data it is given and returns the file path, or None when
there is nothing to draw; :func:`mtlbench.report.figures.make_figures` decides from a store
which figures can be drawn and says why the others are not.
"""
from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from ..syntax import problem_name
from .canvas import _cmap, _mpl, _panels, _save, _wrap, log_x_axis

EQUIVALENCE_COLUMNS = 4   # panels per row of the equivalence figure
ABLATION_PANEL_MAX = 11.0  # inches: the widest ablation panel (1,210 px at DPI)
TUNING_DPI = 80  # the tuning figure is a tall grid of small panels
HISTORY_LABELS = {  # matplotlib mathtext, rendered as formulas
    "objective": r"objective $F(W^{t}, U^{t})$",
    "w_change": r"$\|W^{t} - W^{t-1}\|_F$",
    "u_change": r"$\|U^{t} - U^{t-1}\|_F$",
}


def _order(units: pd.DataFrame) -> list[str]:
    """Models sorted by mean test AUC over everything they finished (best first)."""
    ok = units[units["status"] == "ok"]
    return list(ok.groupby("model")["test_auc"].mean().sort_values(ascending=False).index)


def _model_axis(ax, pos: np.ndarray, models: list[str], ylabel: str, title: str) -> None:
    """One model per x position, labels slanted; the styling every per-model panel shares."""
    ax.set_xticks(pos)
    ax.set_xticklabels(models, rotation=45, ha="right", fontsize=8)
    ax.set_xlabel("model", fontsize=9)
    ax.set_ylabel(ylabel)
    if title:
        ax.set_title(title, fontsize=10)
    ax.grid(axis="y", alpha=0.3)


# =============================================================================== figures
def box_plot(units: pd.DataFrame, path: Path, title: str = "") -> Path | None:
    """Test AUC x 100 per repetition; box = median and quartiles, diamond = mean."""
    Figure = _mpl()
    ok = units[units["status"] == "ok"]
    if ok.empty:
        return None
    problems = sorted(ok["problem"].unique())
    models = _order(units)
    rows, cols = _panels(len(problems), 2)
    fig = Figure(figsize=(max(5.0, 0.7 * len(models) + 2) * cols, 3.8 * rows),
                 layout="constrained")
    for i, p in enumerate(problems):
        ax = fig.add_subplot(rows, cols, i + 1)
        data = [100 * ok[(ok.problem == p) & (ok.model == m)]["test_auc"].to_numpy()
                for m in models]
        pos = np.arange(1, len(models) + 1)
        present = [j for j, d in enumerate(data) if len(d)]
        ax.boxplot([data[j] for j in present], positions=pos[present], widths=0.6,
                   showfliers=False, whis=(0, 100),
                   medianprops={"color": "black", "lw": 1.2})
        rng = np.random.default_rng(0)
        for j in present:
            ax.scatter(pos[j] + rng.uniform(-0.15, 0.15, len(data[j])), data[j], s=9,
                       alpha=0.6, color="tab:blue", zorder=3,
                       label="repetition" if j == present[0] else None)
            ax.scatter([pos[j]], [data[j].mean()], marker="D", s=22, color="tab:red", zorder=4,
                       label="mean" if j == present[0] else None)
        # one problem: the figure title names it; several: each panel names its problem
        _model_axis(ax, pos, models, "test AUC x 100",
                    problem_name(p) if len(problems) > 1 else "")
        if i == 0:
            ax.legend(fontsize=7, loc="lower left")
    fig.suptitle((title + "\n" if title else "") + "box: median and quartiles; whiskers: "
                 "min-max; points: repetitions; diamond: mean", fontsize=10)
    return _save(fig, path)


def per_user_plot(units: pd.DataFrame, task_scores: pd.DataFrame, path: Path,
                  title: str = "") -> Path | None:
    Figure = _mpl()
    ok = units[units["status"] == "ok"]
    ts = task_scores[task_scores["key"].isin(set(ok["key"]))]
    if ts.empty:
        return None
    problems = sorted(ts["problem"].unique())
    models = [m for m in _order(units) if m in set(ts["model"])]
    rows, cols = _panels(len(problems), 2)
    fig = Figure(figsize=(max(5.0, 0.7 * len(models) + 2) * cols, 3.8 * rows),
                 layout="constrained")
    for i, p in enumerate(problems):
        ax = fig.add_subplot(rows, cols, i + 1)
        per_user = (ts[ts.problem == p].groupby(["model", "task_name"])["test_auc"].mean() * 100)
        data = [per_user.loc[m].to_numpy() if m in per_user.index.get_level_values(0) else
                np.array([]) for m in models]
        present = [j for j, d in enumerate(data) if len(d) > 1]
        pos = np.arange(1, len(models) + 1)
        if present:
            ax.violinplot([data[j] for j in present], positions=pos[present], widths=0.8,
                          showmedians=True)
        _model_axis(ax, pos, models, "per-user test AUC x 100\n(mean over repetitions)",
                    problem_name(p) if len(problems) > 1 else "")
    fig.suptitle((title + "\n" if title else "") + "violin: distribution over users; middle "
                 "bar: median; end bars: min and max", fontsize=10)
    return _save(fig, path)


def heatmaps(coefs: dict[str, np.ndarray], truth: np.ndarray | None, path: Path,
             title: str = "") -> Path | None:
    """|W| per model (each scaled to its own max) and the ground truth, x = users, y = features;
    one shared colour bar (0 = zero entry, 1 = the panel's largest |entry|)."""
    Figure = _mpl()
    panels = list(coefs.items()) + ([("ground truth", truth)] if truth is not None else [])
    if not panels:
        return None
    rows, cols = _panels(len(panels), 3)
    fig = Figure(figsize=(3.4 * cols + 0.8, 3.0 * rows), layout="constrained")
    axes, im = [], None
    for i, (name, W) in enumerate(panels):
        ax = fig.add_subplot(rows, cols, i + 1)
        A = np.abs(np.asarray(W, dtype=np.float64))
        scale = A.max()
        im = ax.imshow(A / scale if scale > 0 else A, aspect="auto", cmap="viridis",
                       interpolation="nearest", vmin=0, vmax=1)
        ax.set_title(name, fontsize=9, fontweight="bold" if name == "ground truth" else None)
        ax.set_xlabel("users", fontsize=8)
        ax.set_ylabel("features", fontsize=8)
        ax.tick_params(labelsize=7)
        axes.append(ax)
    cb = fig.colorbar(im, ax=axes, shrink=0.8)
    cb.set_label("|W| / max |W| of the panel", fontsize=8)
    cb.ax.tick_params(labelsize=7)
    fig.suptitle(title or "|W| (repetition 0)", fontsize=11)
    return _save(fig, path)


def convergence_plot(histories: dict[str, dict[str, list[float]]], path: Path,
                     title: str = "") -> Path | None:
    """One panel per stored history series (objective, change of W, change of U, ...), one
    line per model; objectives divided by their final value when several models share it."""
    Figure = _mpl()
    from matplotlib.ticker import MaxNLocator

    histories = {m: h for m, h in histories.items() if h and h.get("objective")}
    if not histories:
        return None
    keys = ["objective"] + sorted({k for h in histories.values() for k, v in h.items()
                                   if k != "objective" and isinstance(v, list) and len(v) > 1},
                                  key=lambda k: (list(HISTORY_LABELS).index(k)
                                                 if k in HISTORY_LABELS else 99, k))
    keys = keys[:4]
    fig = Figure(figsize=(4.0 * len(keys) + 1.5, 3.4), layout="constrained")
    relative = len(histories) > 1
    lines = []
    for i, key in enumerate(keys):
        ax = fig.add_subplot(1, len(keys), i + 1)
        logy = key != "objective"
        for m, h in histories.items():
            y = np.asarray([np.nan if v is None else v for v in h.get(key, [])], dtype=float)
            if y.size == 0:
                continue
            if key == "objective" and relative:
                last = y[np.isfinite(y)][-1] if np.isfinite(y).any() else np.nan
                y = y / last if last and np.isfinite(last) else y * np.nan
            x = np.arange(1, y.size + 1)
            good = np.isfinite(y) & ((y > 0) if logy else True)
            (ln,) = ax.plot(x[good], y[good], label=m, lw=1.2)
            if i == 0:
                lines.append(ln)
        if logy:
            ax.set_yscale("log")
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax.set_xlabel("iteration $t$")
        label = HISTORY_LABELS.get(key, key.replace("_", " "))
        ax.set_ylabel(label + (" / final value" if key == "objective" and relative else ""),
                      fontsize=9)
        ax.tick_params(labelsize=8)
        ax.grid(alpha=0.3)
    fig.legend(handles=lines, loc="outside right center", fontsize=8)
    fig.suptitle(title or "Convergence (repetition 0, final refit)", fontsize=11)
    return _save(fig, path)


def embeddings_plot(emb: np.ndarray, path: Path, d: int | None = None,
                    feature_groups: np.ndarray | None = None,
                    task_groups: np.ndarray | None = None, title: str = "",
                    max_iters: int = 6) -> Path | None:
    """``emb`` (iterations x (d+T) x k): rows f_1..f_{d+T}; features are the first d rows.
    Circles = features, triangles = tasks; colour = true group (legend) when known."""
    Figure = _mpl()
    from matplotlib.lines import Line2D

    emb = np.asarray(emb, dtype=np.float64)
    if emb.ndim != 3 or emb.shape[0] == 0:
        return None
    n_it = min(max_iters, emb.shape[0])
    rows, cols = _panels(n_it, 3)
    fig = Figure(figsize=(3.3 * cols + 1.6, 3.1 * rows), layout="constrained")
    N = emb.shape[1]
    groups = None
    if d is not None and feature_groups is not None and task_groups is not None \
            and len(feature_groups) + len(task_groups) == N:
        groups = np.concatenate([np.asarray(feature_groups), np.asarray(task_groups)])
    is_feature = np.arange(N) < (d if d is not None else 0)
    cmap = _cmap("tab10")
    if groups is not None:
        uniq = list(dict.fromkeys(np.sort(np.unique(groups)).tolist()))
        colour = {g: cmap(i % 10) for i, g in enumerate(uniq)}
        c_all = [colour[g] for g in groups.tolist()]
    else:
        uniq, colour = [], {}
        c_all = [cmap(0) if f else cmap(1) for f in is_feature]
    for it in range(n_it):
        ax = fig.add_subplot(rows, cols, it + 1)
        # principal axes of the bulk: isolated nodes (a zero row/column of W) sit far out and
        # would otherwise dominate the projection
        E = emb[it]
        norms = np.linalg.norm(E - np.median(E, axis=0), axis=1)
        inl = norms <= np.percentile(norms, 95)
        E = E - E[inl].mean(axis=0)
        if E.shape[1] > 2:
            _, _, vt = np.linalg.svd(E[inl], full_matrices=False)
            P = E @ vt[:2].T
        else:
            P = np.column_stack([E[:, 0], E[:, 1] if E.shape[1] > 1 else np.zeros(N)])
        for mask, marker in ((is_feature, "o"), (~is_feature, "^")):
            if mask.any():
                ax.scatter(P[mask, 0], P[mask, 1], c=[c_all[i] for i in np.flatnonzero(mask)],
                           marker=marker, s=12, alpha=0.75)
        # a few isolated nodes sit far out; frame the bulk (2nd-98th percentiles) instead
        lo, hi = np.percentile(P, 2, axis=0), np.percentile(P, 98, axis=0)
        if np.any(hi - lo <= 1e-9 * max(float(np.abs(P).max()), 1e-300)):
            lo, hi = P.min(axis=0), P.max(axis=0)  # the bulk is one point: show everything
        pad = 0.15 * np.maximum(hi - lo, 1e-12)
        ax.set_xlim(lo[0] - pad[0], hi[0] + pad[0])
        ax.set_ylim(lo[1] - pad[1], hi[1] + pad[1])
        n_out = int(np.count_nonzero(np.any((P < lo - pad) | (P > hi + pad), axis=1)))
        ax.set_title(f"iteration {it + 1}" + (f" ({n_out} outside view)" if n_out else ""),
                     fontsize=9)
        ax.set_xlabel("principal axis 1", fontsize=8)
        ax.set_ylabel("principal axis 2", fontsize=8)
        ax.tick_params(labelsize=7)
    handles = []
    if d is not None:
        handles += [Line2D([], [], ls="", marker="o", color="0.4", label="feature"),
                    Line2D([], [], ls="", marker="^", color="0.4", label="task")]
    if groups is not None:
        handles += [Line2D([], [], ls="", marker="s", color=colour[g], label=f"true group {g}")
                    for g in uniq[:10]]
    elif d is not None:
        handles = [Line2D([], [], ls="", marker="o", color=cmap(0), label="feature"),
                   Line2D([], [], ls="", marker="^", color=cmap(1), label="task")]
    if handles:
        fig.legend(handles=handles, loc="outside right center", fontsize=7)
    fig.suptitle(title or "Spectral embeddings (2 leading principal axes)", fontsize=11)
    return _save(fig, path)


def ablation_plot(units: pd.DataFrame, path: Path, title: str = "",
                  groups: dict[str, list[str]] | None = None,
                  labels: dict[str, str] | None = None) -> Path | None:
    """Mean ± std (over repetitions) test AUC x 100 of each full model and its ablations, one
    panel per group, problems side by side.  Dots with error bars, not bars: the y axis starts
    near the data, and the axis break is marked on the y axis."""
    Figure = _mpl()
    ok = units[units["status"] == "ok"]
    if groups is None:  # one group of whatever models were given
        groups = {"": list(dict.fromkeys(ok["model"]))}
    groups = {k: [m for m in v if m in set(ok["model"])] for k, v in groups.items()}
    groups = {k: v for k, v in groups.items() if len(v) >= 2}
    if not groups:
        return None
    problems = sorted(ok["problem"].unique())
    g = ok.groupby(["problem", "model"])["test_auc"]
    mean, std, cnt = 100 * g.mean(), 100 * g.std(ddof=1), g.size()
    ng = len(groups)
    width = max(len(v) for v in groups.values())
    # a panel widens with its points up to ABLATION_PANEL_MAX inches; wide panels stack
    panel = min(ABLATION_PANEL_MAX, max(4.5, 0.35 * width * len(problems) + 1.8))
    ncols = 2 if ng > 1 and 2 * panel <= ABLATION_PANEL_MAX + 1 else 1
    nrows = math.ceil(ng / ncols)
    fig = Figure(figsize=(panel * ncols, 3.6 * nrows), layout="constrained")
    for gi, (full, models) in enumerate(groups.items()):
        ax = fig.add_subplot(nrows, ncols, gi + 1)
        step = 0.8 / len(models)
        x = np.arange(len(problems))
        lows, highs = [], []
        for j, m in enumerate(models):
            mu = np.array([mean.get((p, m), np.nan) for p in problems])
            sd = np.nan_to_num(np.array([std.get((p, m), np.nan) for p in problems]))
            n = [int(cnt.get((p, m), 0)) for p in problems]
            xs = x + (j - (len(models) - 1) / 2) * step
            ax.errorbar(xs, mu, yerr=sd, fmt="o", capsize=3, ms=5,
                        label=(labels or {}).get(m, m) + f" (n={min(n)}" +
                        (f"-{max(n)}" if max(n) != min(n) else "") + ")")
            lows.append(np.nanmin(mu - sd))
            highs.append(np.nanmax(mu + sd))
        lo, hi = float(np.nanmin(lows)), float(np.nanmax(highs))
        pad = max(0.5, 0.1 * (hi - lo))
        ymin, ymax = max(0.0, lo - pad), min(100.0, hi + pad)
        ax.set_ylim(ymin, ymax)
        if ymin > 0:  # the axis does not start at 0: mark the break at its foot
            kw = {"transform": ax.transAxes, "color": "k", "clip_on": False, "lw": 1}
            for dy in (0.0, 0.025):
                ax.plot([-0.025, 0.025], [0.01 + dy, 0.035 + dy], **kw)
            ax.annotate(f"axis starts at {ymin:.1f}", (0.0, 0.0), xycoords="axes fraction",
                        xytext=(4, 4), textcoords="offset points", fontsize=7, color="0.3")
        ax.set_xticks(x)
        names = [problem_name(p) for p in problems]
        slant = sum(len(n) for n in names) * 0.08 > panel  # labels wider than the panel
        ax.set_xticklabels(names, fontsize=8, rotation=30 if slant else 0,
                           ha="right" if slant else "center")
        ax.set_xlim(-0.6, len(problems) - 0.4)
        ax.set_xlabel("problem", fontsize=9)
        ax.set_ylabel("test AUC x 100\n(mean ± std over repetitions)", fontsize=9)
        if full:
            ax.set_title(f"{full} and its ablations", fontsize=10)
        ax.legend(fontsize=7, loc="best")
        ax.grid(axis="y", alpha=0.3)
    fig.suptitle(title or "Ablations", fontsize=11)
    return _save(fig, path)


def _num_value(v: Any) -> float | None:
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return None
    return float(v) if math.isfinite(float(v)) else None


def tuning_plot(units: pd.DataFrame, path: Path, title: str = "") -> Path | None:
    """Validation AUC against each searched hyperparameter, one row of panels per model.

    Points: every fit of the search of every repetition (light); line: per value of the
    parameter, the best validation AUC over the other parameters, averaged over repetitions
    (the profile a reader checks for an interior optimum); stars: the selected values.  Log
    x axis when every value is positive and they span a factor >= 10."""
    from .select import row_search

    Figure = _mpl()
    ok = units[units["status"] == "ok"]
    per_model: dict[str, dict[str, list[tuple[int, Any, float]]]] = {}
    selected: dict[str, dict[str, list[Any]]] = {}
    for _, r in ok.iterrows():
        fits, _ = row_search(r)
        best = r.get("best_params") if isinstance(r.get("best_params"), dict) else {}
        for f in fits:
            params, val = f.get("params"), f.get("val_auc")
            if not isinstance(params, dict) or val is None or not np.isfinite(val):
                continue
            for k, v in params.items():
                per_model.setdefault(r["model"], {}).setdefault(k, []).append(
                    (int(r["rep"]), f"{r['problem']}", v, 100 * float(val)))
        for k, v in best.items():
            selected.setdefault(r["model"], {}).setdefault(k, []).append(v)
    # only parameters that took >= 2 values were searched
    per_model = {m: {k: v for k, v in ps.items() if len({repr(x[2]) for x in v}) >= 2}
                 for m, ps in per_model.items()}
    per_model = {m: ps for m, ps in per_model.items() if ps}
    if not per_model:
        return None
    models = [m for m in _order(units) if m in per_model]
    ncols = max(len(ps) for ps in per_model.values())
    fig = Figure(figsize=(3.3 * ncols + 1.2, 2.5 * len(models)), layout="constrained")
    for i, m in enumerate(models):
        for j, (k, pts) in enumerate(sorted(per_model[m].items())):
            ax = fig.add_subplot(len(models), ncols, i * ncols + j + 1)
            nums = [_num_value(v) for _, _, v, _ in pts]
            numeric = all(x is not None for x in nums)
            if numeric:
                xs = np.array(nums)
                keys = xs
            else:  # categorical: positions in first-seen order
                cats = list(dict.fromkeys(repr(v) for _, _, v, _ in pts))
                keys = np.array([cats.index(repr(v)) for _, _, v, _ in pts], dtype=float)
                xs = keys
            ys = np.array([y for *_, y in pts])
            # hundreds of points per panel: a raster layer inside the SVG / PDF keeps them small
            ax.scatter(xs, ys, s=6, alpha=0.25, color="tab:blue", rasterized=True)
            # profile: best over the other parameters per (rep, problem, value), mean over reps
            df = pd.DataFrame({"rep": [f"{r}|{p}" for r, p, _, _ in pts], "x": keys, "y": ys})
            prof = df.groupby(["rep", "x"])["y"].max().groupby("x").mean().sort_index()
            ax.plot(prof.index.to_numpy(), prof.to_numpy(), "-", color="tab:blue", lw=1.2)
            sel = selected.get(m, {}).get(k, [])
            for v in sel:
                xv = _num_value(v) if numeric else (cats.index(repr(v)) if repr(v) in cats
                                                    else None)
                if xv is not None and xv in prof.index:
                    ax.scatter([xv], [prof.loc[xv]], marker="*", s=70, color="tab:red",
                               zorder=4)
            integer = numeric and all(isinstance(v, int) for _, _, v, _ in pts)
            if numeric and np.all(xs > 0) and xs.max() / xs.min() >= 10:
                log_x_axis(ax, xs, integer)
            elif integer:
                from matplotlib.ticker import MaxNLocator

                ax.xaxis.set_major_locator(MaxNLocator(integer=True))
            if not numeric:
                ax.set_xticks(range(len(cats)))
                ax.set_xticklabels(cats, fontsize=7, rotation=30)
            ax.set_xlabel(k, fontsize=8)
            ax.tick_params(labelsize=7)
            ax.grid(alpha=0.3)
            ax.set_ylabel(f"{m}\nval AUC x 100" if j == 0 else "val AUC x 100", fontsize=8)
    fig.suptitle((title + "\n" if title else "") + "points: every fit of the search; line: best "
                 "over the other parameters, mean over repetitions; stars: selected values",
                 fontsize=10)
    # up to 14 x 5 panels: at DPI the file was ~0.85 MB; TUNING_DPI keeps 7-pt labels legible
    return _save(fig, path, dpi=TUNING_DPI)


def cd_diagram(average_ranks: dict[str, float], cliques: list[list[str]],
               critical_difference: float, path: Path, alpha: float = 0.05,
               title: str = "") -> Path | None:
    """The critical-difference diagram (Demšar 2006): the average ranks on an axis (1 = best,
    at the left), each model joined by an elbow line to its label (the better half at the
    left, the others at the right), a thick bar under the axis for each group of models the
    post-hoc test cannot separate (``cliques``), and the critical difference as a bar above
    the axis (left out when it spans the whole axis)."""
    Figure = _mpl()
    from matplotlib.transforms import offset_copy

    if len(average_ranks) < 2:
        return None
    models = sorted(average_ranks, key=lambda m: (average_ranks[m], m))
    k = len(models)
    left = models[:(k + 1) // 2]
    right = models[(k + 1) // 2:][::-1]          # the worst at the top of the right side
    rows = max(len(left), len(right))
    bars = len(cliques)
    step, gap = 1.0, 0.45                         # a label row; a clique bar's height
    top = -(bars + 1) * gap                        # the first label row sits below the bars
    fig = Figure(figsize=(8.0, 1.6 + 0.24 * rows + 0.1 * bars), layout="constrained")
    ax = fig.add_subplot(1, 1, 1)
    ax.set_xlim(1, k)
    ax.set_ylim(top - rows * step + 0.4 * step, 0.15)
    for side in ("left", "right", "bottom"):
        ax.spines[side].set_visible(False)
    ax.spines["top"].set_position(("data", 0))
    ax.xaxis.tick_top()
    ax.xaxis.set_label_position("top")
    ax.set_xticks(range(1, k + 1))
    ax.tick_params(axis="x", labelsize=8)
    ax.set_xlabel("average rank (1 = best)", fontsize=9)
    ax.set_yticks([])
    for i, m in enumerate(left + right):
        row = i if i < len(left) else i - len(left)
        y = top - row * step
        edge, ha, off = (1, "right", -4) if i < len(left) else (k, "left", 4)
        r = average_ranks[m]
        ax.plot([r, r, edge], [0, y, y], color="0.35", lw=0.9, clip_on=False)
        ax.plot([r], [0], "o", color="black", ms=3.5, clip_on=False, zorder=3)
        ax.text(edge, y, f"{m} ({r:.2f})" if ha == "right" else f"({r:.2f}) {m}", ha=ha,
                va="center", fontsize=8, clip_on=False,
                transform=offset_copy(ax.transData, fig, x=off, units="points"))
    for j, group in enumerate(cliques):
        ranks = [average_ranks[m] for m in group if m in average_ranks]
        if ranks:
            y = -(j + 1) * gap
            ax.plot([min(ranks) - 0.05, max(ranks) + 0.05], [y, y], color="black", lw=2.6,
                    solid_capstyle="butt", clip_on=False)
    cd = critical_difference
    if math.isfinite(cd) and 0 < cd < k - 1:
        above = offset_copy(ax.transData, fig, y=34, units="points")
        ax.plot([1, 1 + cd], [0, 0], color="black", lw=1.4, transform=above, clip_on=False)
        for x in (1, 1 + cd):
            ax.plot([x, x], [0, 0], "|", color="black", ms=7, transform=above, clip_on=False)
        ax.text(1 + cd / 2, 0, f"CD = {cd:.2f}", ha="center", va="bottom", fontsize=8,
                transform=offset_copy(ax.transData, fig, y=38, units="points"))
    fig.suptitle((title or "Average ranks across data sets") + "\nbars under the "
                 f"axis: groups the post-hoc test cannot separate at α = {alpha:g}",
                 fontsize=10)
    return _save(fig, path)


def equivalence_plot(rows: list[dict[str, Any]], blocks: list[str], models: list[str],
                     path: Path, rope: float | str, title: str = "") -> Path | None:
    """Per block, one stacked horizontal bar per model against the block's best:
    P(best better by more than the ROPE) / P(practically equivalent) / P(model better);
    ``rope``: its width, or a text naming it (a width per block)."""
    Figure = _mpl()
    if not rows:
        return None
    rows_by = {(r["block"], r["model"]): r for r in rows}
    nrows, ncols = _panels(len(blocks), EQUIVALENCE_COLUMNS)
    fig = Figure(figsize=(2.6 * ncols + 1.4, (0.9 + 0.17 * len(models)) * nrows + 0.6),
                 layout="constrained")
    colours = ("tab:red", "0.75", "tab:green")
    width = f"{rope:g}" if isinstance(rope, (int, float)) else str(rope)
    labels = (f"best better by > {width}", f"equivalent (±{width})",
              f"model better by > {width}")
    for i, block in enumerate(blocks):
        ax = fig.add_subplot(nrows, ncols, i + 1)
        y = np.arange(len(models))
        left = np.zeros(len(models))
        for key, colour, label in zip(("p_best_better", "p_equivalent", "p_model_better"),
                                      colours, labels):
            vals = np.array([rows_by.get((block, m), {}).get(key) or 0.0 for m in models])
            ax.barh(y, vals, left=left, color=colour, label=label if i == 0 else None,
                    height=0.7)
            left += vals
        best = next((r["best"] for r in rows if r["block"] == block), None)
        ax.set_yticks(y)
        first = i % ncols == 0
        ax.set_yticklabels(models if first else [], fontsize=7)
        if first:
            ax.set_ylabel("model", fontsize=8)
        ax.invert_yaxis()
        ax.set_xlim(0, 1)
        ax.tick_params(axis="x", labelsize=7)
        ax.set_xlabel("probability", fontsize=8)
        ax.set_title(_wrap(f"{block} (best: {best})", 30), fontsize=8)
    fig.legend(loc="outside lower center", ncol=3, fontsize=7)
    fig.suptitle(title or f"Against the best of each data set (ROPE ±{rope:g} AUC points)",
                 fontsize=10)
    return _save(fig, path)


__all__ = ["box_plot", "per_user_plot", "heatmaps", "convergence_plot", "embeddings_plot",
           "ablation_plot", "tuning_plot", "cd_diagram", "equivalence_plot",
           "HISTORY_LABELS"]
