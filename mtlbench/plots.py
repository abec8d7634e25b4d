"""Figures of the TFCL paper, drawn from stored results (matplotlib, imported lazily).

Every figure uses the units :func:`mtlbench.leaderboard.select_units` keeps for the table, so
figures and tables describe the same runs.  Drawing uses ``matplotlib.figure.Figure`` with
the Agg canvas directly: no pyplot state, no display needed.

=================  ==========================================================================
figure             content (paper figure)
=================  ==========================================================================
``box``            test AUC x 100 per repetition, one box per model, one panel per problem;
                   points = repetitions, diamond = mean (Fig. "AUC comparison", "Boxplot")
``per_user``       distribution over users of the per-user test AUC (mean over repetitions)
``heatmaps``       |W| learned by each model (repetition 0) beside the ground truth, simulated
                   data only: x = users, y = features (Fig. "Structural Recovery")
``convergence``    TFCL family: objective, ||W^t - W^{t-1}||_F, ||U^t - U^{t-1}||_F per
                   iteration, repetition 0 (Fig. "Convergence curves"); with several models
                   each objective is divided by its final value (their scales differ)
``embeddings``     TFCL: spectral embeddings f_1..f_{d+T} of the first iterations, repetition
                   0, projected on the two leading principal axes of the bulk (95 % of rows
                   nearest the median; isolated nodes would dominate), view framed on the
                   2nd-98th percentiles (Fig. "Evolution of Spectral Embeddings")
``ablation``       mean ± std test AUC of the TFCL variants present (Tab./Fig. "Ablation")
=================  ==========================================================================

A figure whose data is missing is not drawn; :func:`make_figures` returns a note saying why.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Sequence

import numpy as np
import pandas as pd

ABLATION_MODELS = ("tfcl-q", "tfcl-q-noauc", "tfcl-q-nog", "tfcl-coc", "tfcl", "tfcl-noauc")
DPI = 110


def _mpl():
    try:
        import matplotlib
    except ImportError as exc:  # pragma: no cover - depends on the environment
        from .errors import ConfigError

        raise ConfigError("figures need matplotlib: pip install 'mtlbench[plots]' "
                          "(or run publish with --no-figures)") from exc
    matplotlib.use("Agg", force=False)
    from matplotlib.figure import Figure

    return Figure


def _save(fig, path: Path) -> Path:
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    FigureCanvasAgg(fig)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=DPI, bbox_inches="tight", metadata={"Software": None}
                if path.suffix == ".png" else None)
    return path


def _order(units: pd.DataFrame) -> list[str]:
    """Models sorted by mean test AUC over everything they finished (best first)."""
    ok = units[units["status"] == "ok"]
    return list(ok.groupby("model")["test_auc"].mean().sort_values(ascending=False).index)


def _model_axis(ax, pos: np.ndarray, models: list[str], ylabel: str, title: str) -> None:
    """One model per x position, labels slanted; the styling every per-model panel shares."""
    ax.set_xticks(pos)
    ax.set_xticklabels(models, rotation=45, ha="right", fontsize=8)
    ax.set_ylabel(ylabel)
    ax.set_title(title, fontsize=10)
    ax.grid(axis="y", alpha=0.3)


def _panels(n: int, ncols: int = 3) -> tuple[int, int]:
    ncols = max(1, min(ncols, n))
    return int(np.ceil(n / ncols)), ncols


def _tfcl_models(models: Sequence[str]) -> list[str]:
    return [m for m in models if m.split("[")[0].startswith("tfcl")]


# =============================================================================== figures
def box_plot(units: pd.DataFrame, path: Path, title: str = "") -> Path | None:
    Figure = _mpl()
    ok = units[units["status"] == "ok"]
    if ok.empty:
        return None
    problems = sorted(ok["problem"].unique())
    models = _order(units)
    rows, cols = _panels(len(problems), 2)
    fig = Figure(figsize=(max(5.0, 0.7 * len(models) + 2) * cols, 3.8 * rows))
    for i, p in enumerate(problems):
        ax = fig.add_subplot(rows, cols, i + 1)
        data = [100 * ok[(ok.problem == p) & (ok.model == m)]["test_auc"].to_numpy()
                for m in models]
        pos = np.arange(1, len(models) + 1)
        present = [j for j, d in enumerate(data) if len(d)]
        ax.boxplot([data[j] for j in present], positions=pos[present], widths=0.6,
                   showfliers=False)
        rng = np.random.default_rng(0)
        for j in present:
            ax.scatter(pos[j] + rng.uniform(-0.15, 0.15, len(data[j])), data[j], s=9,
                       alpha=0.6, color="tab:blue", zorder=3)
            ax.scatter([pos[j]], [data[j].mean()], marker="D", s=22, color="tab:red", zorder=4)
        _model_axis(ax, pos, models, "test AUC x 100", p)
    fig.suptitle(title or "Test AUC per repetition (points; diamond = mean)", fontsize=11)
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
    fig = Figure(figsize=(max(5.0, 0.7 * len(models) + 2) * cols, 3.8 * rows))
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
        _model_axis(ax, pos, models, "per-user test AUC x 100\n(mean over repetitions)", p)
    fig.suptitle(title or "Distribution of per-user test AUC", fontsize=11)
    return _save(fig, path)


def heatmaps(coefs: dict[str, np.ndarray], truth: np.ndarray | None, path: Path,
             title: str = "") -> Path | None:
    """|W| per model (each scaled to its own max) and the ground truth, x = users, y = features."""
    Figure = _mpl()
    panels = list(coefs.items()) + ([("ground truth", truth)] if truth is not None else [])
    if not panels:
        return None
    rows, cols = _panels(len(panels), 3)
    fig = Figure(figsize=(3.4 * cols, 3.0 * rows))
    for i, (name, W) in enumerate(panels):
        ax = fig.add_subplot(rows, cols, i + 1)
        A = np.abs(np.asarray(W, dtype=np.float64))
        scale = A.max()
        ax.imshow(A / scale if scale > 0 else A, aspect="auto", cmap="viridis",
                  interpolation="nearest", vmin=0, vmax=1)
        ax.set_title(name, fontsize=9, fontweight="bold" if name == "ground truth" else None)
        ax.set_xlabel("users", fontsize=8)
        ax.set_ylabel("features", fontsize=8)
        ax.tick_params(labelsize=7)
    fig.suptitle(title or "|W| (repetition 0; each panel scaled to its maximum)", fontsize=11)
    fig.tight_layout()
    return _save(fig, path)


def convergence_plot(histories: dict[str, dict[str, list[float]]], path: Path,
                     title: str = "") -> Path | None:
    Figure = _mpl()
    histories = {m: h for m, h in histories.items() if h and h.get("objective")}
    if not histories:
        return None
    fig = Figure(figsize=(12, 3.4))
    specs = (("objective", "objective F(W^t, U^t)", False),
             ("w_change", "||W^t - W^{t-1}||_F", True),
             ("u_change", "||U^t - U^{t-1}||_F", True))
    # objectives of different models live on different scales (AUC vs squared loss): with
    # several models each curve is divided by its final value
    relative = len(histories) > 1
    for i, (key, label, logy) in enumerate(specs):
        ax = fig.add_subplot(1, 3, i + 1)
        for m, h in histories.items():
            y = np.asarray([np.nan if v is None else v for v in h.get(key, [])], dtype=float)
            if y.size == 0:
                continue
            if key == "objective" and relative:
                last = y[np.isfinite(y)][-1] if np.isfinite(y).any() else np.nan
                y = y / last if last and np.isfinite(last) else y * np.nan
            x = np.arange(1, y.size + 1)
            good = np.isfinite(y) & ((y > 0) if logy else True)
            ax.plot(x[good], y[good], label=m, lw=1.2)
        if logy:
            ax.set_yscale("log")
        from matplotlib.ticker import MaxNLocator

        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax.set_xlabel("iteration t")
        ax.set_title(label if not (key == "objective" and relative)
                     else "objective F(W^t, U^t) / final value", fontsize=10)
        ax.grid(alpha=0.3)
        if i == 0:
            ax.legend(fontsize=8)
    fig.suptitle(title or "Convergence (repetition 0, final refit)", fontsize=11)
    fig.tight_layout()
    return _save(fig, path)


def embeddings_plot(emb: np.ndarray, path: Path, d: int | None = None,
                    feature_groups: np.ndarray | None = None,
                    task_groups: np.ndarray | None = None, title: str = "",
                    max_iters: int = 6) -> Path | None:
    """``emb`` (iterations x (d+T) x k): rows f_1..f_{d+T}; features are the first d rows."""
    Figure = _mpl()
    emb = np.asarray(emb, dtype=np.float64)
    if emb.ndim != 3 or emb.shape[0] == 0:
        return None
    n_it = min(max_iters, emb.shape[0])
    rows, cols = _panels(n_it, 3)
    fig = Figure(figsize=(3.3 * cols, 3.1 * rows))
    N = emb.shape[1]
    groups = None
    if d is not None and feature_groups is not None and task_groups is not None \
            and len(feature_groups) + len(task_groups) == N:
        groups = np.concatenate([np.asarray(feature_groups), np.asarray(task_groups)])
    is_feature = np.arange(N) < (d if d is not None else 0)
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
        c = groups if groups is not None else np.where(is_feature, 0, 1)
        for mask, marker, lab in ((is_feature, "o", "features"), (~is_feature, "^", "tasks")):
            if mask.any():
                ax.scatter(P[mask, 0], P[mask, 1], c=c[mask], cmap="tab10", vmin=0, vmax=9,
                           marker=marker, s=12, alpha=0.75, label=lab)
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
        ax.tick_params(labelsize=7)
        if it == 0 and d is not None:
            ax.legend(fontsize=7, loc="best")
    fig.suptitle(title or "Spectral embeddings (2 leading principal axes; colour = true group)",
                 fontsize=11)
    fig.tight_layout()
    return _save(fig, path)


def ablation_plot(units: pd.DataFrame, path: Path, title: str = "") -> Path | None:
    Figure = _mpl()
    ok = units[(units["status"] == "ok") & units["model"].isin(ABLATION_MODELS)]
    models = [m for m in ABLATION_MODELS if m in set(ok["model"])]
    if len(models) < 2:
        return None
    problems = sorted(ok["problem"].unique())
    g = ok.groupby(["problem", "model"])["test_auc"]
    mean, std = 100 * g.mean(), 100 * g.std(ddof=1)
    fig = Figure(figsize=(max(5.0, 1.2 * len(problems) * len(models) / 2 + 2), 3.8))
    ax = fig.add_subplot(1, 1, 1)
    width = 0.8 / len(models)
    x = np.arange(len(problems))
    for j, m in enumerate(models):
        mu = [mean.get((p, m), np.nan) for p in problems]
        sd = [std.get((p, m), np.nan) for p in problems]
        ax.bar(x + (j - (len(models) - 1) / 2) * width, mu, width, yerr=sd, label=m, capsize=2)
    ax.set_xticks(x)
    ax.set_xticklabels(problems)
    lo = np.nanmin(mean.to_numpy() - np.nan_to_num(std.to_numpy())) if len(mean) else 0
    ax.set_ylim(max(0.0, lo - 3), min(100.0, float(np.nanmax(mean.to_numpy())) + 3))
    ax.set_ylabel("test AUC x 100 (mean ± std)")
    ax.legend(fontsize=8, ncol=min(3, len(models)))
    ax.grid(axis="y", alpha=0.3)
    fig.suptitle(title or "Ablation of the TFCL variants", fontsize=11)
    return _save(fig, path)


# =============================================================================== from a store
def _ground_truth(units: pd.DataFrame, dataset: str, problem: str) -> tuple[dict | None, str]:
    """meta of the evaluated tasks (true_W, groups) loaded through the dataset plugin."""
    from .errors import MTLBenchError
    from .plugins import get_registry
    from .protocol import config_json, evaluable_tasks, restrict_tasks

    import warnings

    from .plugins import PluginWarning

    try:
        with warnings.catch_warnings():  # the CLI has reported broken plugins already
            warnings.simplefilter("ignore", PluginWarning)
            ds = get_registry().dataset(dataset)
    except MTLBenchError as exc:
        return None, f"dataset plugin unavailable ({exc})"
    stored = units["dataset_params"].iloc[0]
    if config_json(ds.params()) != config_json(stored):
        return None, (f"dataset parameters {ds.params()} differ from the stored run's {stored}")
    name = problem.split("/", 1)[1] if "/" in problem else problem
    try:
        tasks = ds.load(name)
    except Exception as exc:  # noqa: BLE001 - a figure must not stop publishing
        return None, f"cannot load {problem}: {exc}"
    if "true_W" not in tasks.meta:
        return None, "the dataset has no ground truth"
    keep, _ = evaluable_tasks(tasks)
    tasks = restrict_tasks(tasks, keep)
    return tasks.meta, ""


def _rep0(units: pd.DataFrame, model: str, problem: str) -> pd.Series | None:
    u = units[(units.model == model) & (units.problem == problem) & (units.status == "ok")
              & (units.rep == 0)]
    return None if u.empty else u.iloc[0]


def make_figures(store, dataset: str, outdir: str | Path, rel_to: str | Path | None = None,
                 fmt: str = "png") -> list[dict[str, Any]]:
    """Draw every figure that the stored results of ``dataset`` allow.

    Returns one dict per figure: ``title``, ``kind``, ``path`` (relative to ``rel_to`` when
    given; None when not drawn), ``caption`` and ``note`` (why a figure was not drawn).
    """
    from .leaderboard import select_units

    outdir = Path(outdir)
    units, _ = select_units(store, dataset)
    problems = sorted(units["problem"].unique())
    models = _order(units)
    results: list[dict[str, Any]] = []

    def add(kind: str, title: str, path: Path | None, caption: str = "", note: str = "") -> None:
        rel = None
        if path is not None:
            rel = str(path.relative_to(rel_to)) if rel_to is not None else str(path)
        results.append({"kind": kind, "title": title, "path": rel, "caption": caption,
                        "note": note if path is None else ""})

    def fname(kind: str, problem: str | None = None) -> Path:
        stem = dataset if problem is None or problem == dataset else problem.replace("/", "-")
        return outdir / f"{stem}-{kind}.{fmt}"

    add("box", "Test AUC per repetition", box_plot(units, fname("box"), f"{dataset}: test AUC"),
        "Box plots of the test AUC x 100 of each repetition; points are repetitions, the "
        "diamond is the mean.")
    p = per_user_plot(units, store.task_scores(), fname("per-user"),
                      f"{dataset}: per-user test AUC")
    add("per_user", "Per-user test AUC", p,
        "Distribution over users of the per-user test AUC (averaged over repetitions).",
        "no per-task scores")

    tfcl = _tfcl_models(models)
    for prob in problems:
        suffix = "" if len(problems) == 1 else f" ({prob})"
        # heat maps: only where structure recovery was measured (data with a true W)
        has_truth = any(isinstance(d, dict) and "support_precision" in d
                        for d in units[units.problem == prob]["diagnostics"])
        meta, why = (_ground_truth(units, dataset, prob) if has_truth
                     else (None, "no ground-truth W for this dataset (real data)"))
        if meta is not None:
            coefs = {}
            for m in models:
                r = _rep0(units, m, prob)
                if r is not None:
                    W = store.array(r["key"], "coef")
                    if W is not None and W.shape == np.shape(meta["true_W"]):
                        coefs[m] = W
            path = heatmaps(coefs, np.asarray(meta["true_W"]), fname("heatmaps", prob),
                            f"{prob}: |W| learned (repetition 0) and ground truth")
            missing = [m for m in models if m not in coefs]
            add("heatmaps", "Learned W and ground truth" + suffix, path,
                "|W| of each model's final refit in repetition 0 (x = users, y = features), each "
                "scaled to its maximum, beside the true W." +
                (f" No stored W for: {', '.join(missing)}." if missing else ""))
        else:
            add("heatmaps", "Learned W and ground truth" + suffix, None, note=why)

        hist = {}
        for m in tfcl:
            r = _rep0(units, m, prob)
            if r is not None and isinstance(r["history"], dict):
                hist[m] = r["history"]
        path = convergence_plot(hist, fname("convergence", prob),
                                f"{prob}: TFCL convergence (repetition 0, final refit)")
        add("convergence", "TFCL convergence" + suffix, path,
            "Objective, ||W^t - W^{t-1}||_F and ||U^t - U^{t-1}||_F per iteration of the final "
            "refit of repetition 0.",
            "no TFCL-family model with a stored history in these results")

        emb_model, emb = None, None
        for m in sorted(tfcl, key=lambda m: (m != "tfcl", m)):
            r = _rep0(units, m, prob)
            if r is None:
                continue
            e = store.array(r["key"], "embeddings")
            if e is None and isinstance(r["diagnostics"], dict) and "embeddings" in r["diagnostics"]:
                e = np.asarray(r["diagnostics"]["embeddings"], dtype=np.float64)
            if e is not None:
                emb_model, emb = m, e
                break
        if emb is not None:
            d = None
            fg = tg = None
            if meta is not None:
                d = int(np.shape(meta["true_W"])[0])
                fg, tg = meta.get("feature_groups"), meta.get("task_groups")
            else:
                r = _rep0(units, emb_model, prob)
                W = store.array(r["key"], "coef") if r is not None else None
                d = None if W is None else int(W.shape[0])
            path = embeddings_plot(emb, fname("embeddings", prob), d, fg, tg,
                                   f"{prob}: {emb_model} spectral embeddings, first iterations")
            add("embeddings", f"Spectral embeddings ({emb_model})" + suffix, path,
                "Rows f_1..f_{d+T} of the spectral embedding in the first iterations of the final "
                "refit of repetition 0, projected on their two leading principal axes; circles = "
                "features, triangles = tasks" + ("; colour = true group." if fg is not None
                                                 else "."))
        else:
            add("embeddings", "Spectral embeddings" + suffix, None,
                note="no stored TFCL spectral embeddings (array 'embeddings' of repetition 0)")

    path = ablation_plot(units, fname("ablation"), f"{dataset}: ablation of TFCL variants")
    present = [m for m in ABLATION_MODELS if m in models]
    add("ablation", "Ablation of the TFCL variants", path,
        f"Mean ± std test AUC x 100 of {', '.join(present)}.",
        f"needs >= 2 of {', '.join(ABLATION_MODELS)} (present: {', '.join(present) or 'none'})")
    return results


__all__ = ["box_plot", "per_user_plot", "heatmaps", "convergence_plot", "embeddings_plot",
           "ablation_plot", "make_figures", "ABLATION_MODELS"]
