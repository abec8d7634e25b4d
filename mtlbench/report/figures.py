"""Every figure the stored results of a dataset allow, drawn into a folder.

:func:`make_figures` reads the units the table uses (the selection rule of
:mod:`mtlbench.report.select`), decides from what models stored and declared which figures
can be drawn (:mod:`mtlbench.report.plots` draws them) and returns, per figure, its path or a
note saying why it was not drawn.  The figures of scores (box plot, per-user violins, tuning
curves, ablations) draw the test AUC: they are drawn for binary targets only.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from ..syntax import file_stem, problem_name
from .canvas import figure_files
from .plots import (_order, ablation_plot, box_plot, convergence_plot, embeddings_plot,
                    heatmaps, per_user_plot, tuning_plot)


def figure_entry(kind: str, title: str, path: Path | None, rel_to: Path | None = None,
                 caption: str = "", note: str = "") -> dict[str, Any]:
    """One figure as pages list it: ``kind``, ``title``, ``path`` (the PNG, relative to
    ``rel_to`` when given; None when not drawn), ``files`` (the PNG, SVG and PDF,
    :func:`mtlbench.report.canvas.figure_files`), ``caption``, and ``note`` saying why a
    figure was not drawn."""
    def rel(p: Path) -> str:
        return str(p.relative_to(rel_to)) if rel_to is not None else str(p)

    return {"kind": kind, "title": title, "path": None if path is None else rel(path),
            "files": [] if path is None else [rel(p) for p in figure_files(path)],
            "caption": caption, "note": note if path is None else ""}


def _ground_truth(units: pd.DataFrame, dataset: str, problem: str) -> tuple[dict | None, str]:
    """meta of the evaluated tasks (true_W, groups) loaded through the dataset plugin."""
    from ..dataset import load_tasks
    from ..errors import MTLBenchError
    from ..plugins import get_registry
    from ..protocol import config_json, evaluable_tasks, restrict_tasks

    import warnings

    from ..plugins import PluginWarning

    try:
        with warnings.catch_warnings():  # the CLI has reported broken plugins already
            warnings.simplefilter("ignore", PluginWarning)
            ds = get_registry().dataset(dataset)
    except MTLBenchError as exc:
        return None, f"dataset plugin unavailable ({exc})"
    stored = units["dataset_params"].iloc[0]
    if config_json(ds.params()) != config_json(stored):
        return None, (f"dataset parameters {ds.params()} differ from the stored run's {stored}")
    try:
        tasks = load_tasks(ds, problem_name(problem, dataset))
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


@dataclass
class _Drawn:
    """The figures drawn so far into ``outdir`` (paths relative to ``rel_to`` when given)."""

    dataset: str
    outdir: Path
    rel_to: Path | None
    fmt: str
    results: list[dict[str, Any]] = field(default_factory=list)

    def add(self, kind: str, title: str, path: Path | None, caption: str = "",
            note: str = "") -> None:
        self.results.append(figure_entry(kind, title, path, self.rel_to, caption, note))

    def fname(self, kind: str, problem: str | None = None) -> Path:
        stem = self.dataset if problem is None or problem == self.dataset else problem
        return self.outdir / f"{file_stem(stem)}-{kind}.{self.fmt}"


def make_figures(store, dataset: str, outdir: str | Path, rel_to: str | Path | None = None,
                 fmt: str = "png", selection=None) -> list[dict[str, Any]]:
    """Draw every figure that the stored results of ``dataset`` allow.

    Returns one dict per figure: ``title``, ``kind``, ``path`` (relative to ``rel_to`` when
    given; None when not drawn), ``caption`` and ``note`` (why a figure was not drawn).
    ``selection``: a :class:`~mtlbench.report.select.Selection` already made for the table.
    """
    from .select import select_units

    sel = selection or select_units(store, dataset)
    units = sel.units[sel.units["dataset"] == dataset]
    problems = sorted(units["problem"].unique())
    models = _order(units)
    out = _Drawn(dataset, Path(outdir), Path(rel_to) if rel_to is not None else None, fmt)
    from .select import problem_kinds

    auc = all(k == "binary" for k in problem_kinds(units).values())
    if auc:
        _dataset_figures(store, units, out)
    else:
        for kind, title in (("box", "Test AUC per repetition"), ("per_user", "Per-user test AUC"),
                            ("tuning", "Tuning curves"), ("ablation", "Ablations")):
            out.add(kind, title, None, note="these figures draw the test AUC; the targets of "
                                            "this data set are real-valued (see its tables)")
    for prob in problems:
        suffix = "" if len(problems) == 1 else f" ({prob})"
        meta = _heatmap_figure(store, units, models, prob, suffix, out)
        _convergence_figure(units, models, prob, suffix, out)
        _embeddings_figure(store, units, models, prob, suffix, meta, out)
    if auc:
        _ablation_figure(units, models, out)
    return out.results


def _dataset_figures(store, units: pd.DataFrame, out: _Drawn) -> None:
    """Box plot, per-user violins and tuning curves (all problems in one figure each)."""
    ds = out.dataset
    out.add("box", "Test AUC per repetition", box_plot(units, out.fname("box"),
                                                        f"{ds}: test AUC"),
            "Test AUC x 100 of each repetition: box = median and quartiles, whiskers = min-max, "
            "points = repetitions, diamond = mean.")
    p = per_user_plot(units, store.task_scores(keys=units["key"]), out.fname("per-user"),
                      f"{ds}: per-user test AUC")
    out.add("per_user", "Per-user test AUC", p,
            "Distribution over users of the per-user test AUC (averaged over repetitions).",
            "no per-task scores")
    out.add("tuning", "Tuning curves",
            tuning_plot(units, out.fname("tuning"), f"{ds}: validation AUC along the search"),
            "Validation AUC x 100 against each searched hyperparameter (one row per model): "
            "every fit of every repetition, the best fit per value averaged over repetitions, "
            "and the selected values (stars). An optimum inside the searched range shows as a "
            "peak.", "no stored search trace with a parameter that took two or more values")


def _heatmap_figure(store, units: pd.DataFrame, models: list[str], prob: str, suffix: str,
                    out: _Drawn) -> dict | None:
    """Learned |W| beside the ground truth, where structure recovery was measured; returns
    the ground truth's meta (None: no ground truth)."""
    has_truth = any(isinstance(d, dict) and "support_precision" in d
                    for d in units[units.problem == prob]["diagnostics"])
    meta, why = (_ground_truth(units, out.dataset, prob) if has_truth
                 else (None, "no ground-truth W for this dataset (real data)"))
    if meta is None:
        out.add("heatmaps", "Learned W and ground truth" + suffix, None, note=why)
        return None
    coefs = {}
    for m in models:
        r = _rep0(units, m, prob)
        if r is not None:
            W = store.array(r["key"], "coef")
            if W is not None and W.shape == np.shape(meta["true_W"]):
                coefs[m] = W
    path = heatmaps(coefs, np.asarray(meta["true_W"]), out.fname("heatmaps", prob),
                    f"{prob}: |W| learned (repetition 0) and ground truth")
    missing = [m for m in models if m not in coefs]
    out.add("heatmaps", "Learned W and ground truth" + suffix, path,
            "|W| of each model's final refit in repetition 0 (x = users, y = features), each "
            "scaled to its maximum (colour bar), beside the true W." +
            (f" No stored W for: {', '.join(missing)}." if missing else ""))
    return meta


def _convergence_figure(units: pd.DataFrame, models: list[str], prob: str, suffix: str,
                        out: _Drawn) -> None:
    hist = {}
    for m in models:
        r = _rep0(units, m, prob)
        if r is not None and isinstance(r["history"], dict) \
                and len(r["history"].get("objective") or []) > 1 \
                and len(r["history"]) > 1:
            hist[m] = r["history"]
    path = convergence_plot(hist, out.fname("convergence", prob),
                            f"{prob}: convergence (repetition 0, final refit)")
    out.add("convergence", "Convergence" + suffix, path,
            "Objective and the change of the iterates per iteration of the final refit of "
            f"repetition 0, for the models that store them ({', '.join(hist) or 'none'}).",
            "no model with a stored convergence history (objective and iterate changes)")


def _embeddings_figure(store, units: pd.DataFrame, models: list[str], prob: str, suffix: str,
                       meta: dict | None, out: _Drawn) -> None:
    """The spectral embeddings of the best-ranked model that stores them (repetition 0)."""
    emb_model, emb = None, None
    for m in models:
        r = _rep0(units, m, prob)
        if r is None:
            continue
        e = store.array(r["key"], "embeddings")
        if e is not None:
            emb_model, emb = m, e
            break
    if emb is None:
        out.add("embeddings", "Spectral embeddings" + suffix, None,
                note="no model stored spectral embeddings (array 'embeddings' of repetition 0)")
        return
    fg = tg = None
    if meta is not None:
        d = int(np.shape(meta["true_W"])[0])
        fg, tg = meta.get("feature_groups"), meta.get("task_groups")
    else:
        r = _rep0(units, emb_model, prob)
        W = store.array(r["key"], "coef") if r is not None else None
        d = None if W is None else int(W.shape[0])
    path = embeddings_plot(emb, out.fname("embeddings", prob), d, fg, tg,
                           f"{prob}: {emb_model} spectral embeddings, first iterations")
    out.add("embeddings", f"Spectral embeddings ({emb_model})" + suffix, path,
            "The d + T rows of the spectral embedding (one per feature, one per task) in the "
            "first iterations of the final refit of repetition 0 of the best-ranked model "
            "that stores them, projected on their two leading principal axes; circles = "
            "features, triangles = tasks" +
            ("; colour = true group (legend)." if fg is not None else "."))


def _ablation_figure(units: pd.DataFrame, models: list[str], out: _Drawn) -> None:
    from .roles import ablation_groups, ablation_label

    groups = ablation_groups(models, units)
    labels = {m: ablation_label(m, units).replace("\n", " ") for g in groups.values() for m in g}
    path = ablation_plot(units, out.fname("ablation"), f"{out.dataset}: ablations",
                         groups=groups, labels=labels) if groups else None
    out.add("ablation", "Ablations", path,
            "Mean ± std over repetitions of the test AUC x 100 of each full model beside the "
            "models that declare themselves its ablations (" +
            "; ".join(f"{k}: {', '.join(v[1:])}" for k, v in groups.items()) + "); the y axis "
            "starts near the data (break marked).",
            "no model of these results declares itself an ablation (ablation_of) of another "
            "model present")


__all__ = ["make_figures", "figure_entry"]
