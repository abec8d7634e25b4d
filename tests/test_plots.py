"""Figures render to files with the Agg backend, from constructed results in a temporary store."""
from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("matplotlib")

from mtlbench.plugins import get_registry
from mtlbench.report.figures import make_figures
from mtlbench.report.plots import ablation_plot, convergence_plot, embeddings_plot, heatmaps
from mtlbench.store import ResultStore


@pytest.fixture(autouse=True)
def declared_roles(monkeypatch):
    """The roles the built-in models declare (stl the baseline, tfcl-noauc an ablation of
    tfcl): set here so the tests hold whether or not the model files carry them yet."""
    reg = get_registry()
    monkeypatch.setattr(reg.model_class("stl"), "is_baseline", True, raising=False)
    monkeypatch.setattr(reg.model_class("tfcl-noauc"), "ablation_of", "tfcl", raising=False)
    monkeypatch.setattr(reg.model_class("tfcl-noauc"), "ablation_label", "w/o AUC loss",
                        raising=False)


def _trace(best_lam):
    """A search trace over lam (log grid) peaking at ``best_lam``."""
    fits = []
    for i, lam in enumerate([0.01, 0.1, 1.0, 10.0, 100.0]):
        fits.append({"params": {"lam": lam, "k": 3}, "val_auc": 0.9 - 0.02 * abs(
            np.log10(lam) - np.log10(best_lam)), "converged": True, "n_iter": 10,
            "fit_time": 0.01, "phase": "start" if i < 3 else "extend"})
        fits.append({"params": {"lam": lam, "k": 5}, "val_auc": 0.88 - 0.02 * abs(
            np.log10(lam) - np.log10(best_lam)), "converged": True, "n_iter": 10,
            "fit_time": 0.01, "phase": "refine"})
    return {"search": "adaptive", "budget": 20, "n_fits": len(fits), "at_bound": [],
            "at_edge": [], "budget_exhausted": False, "fits": fits}

PNG = b"\x89PNG\r\n\x1a\n"
D, T = 80, 100  # the simulated data's shape (ground truth is loaded through its plugin)


def _row(model, rep, auc, **extra):
    return {"key": f"{model}-{rep}", "model": model, "dataset": "simulated",
            "problem": "simulated", "rep": rep, "seed": 0, "status": "ok", "test_auc": auc,
            "protocol": {"seed": 0, "test_fraction": 0.15, "val_fraction": 0.2,
                         "protocol_version": 1, "reps": 3},
            "dataset_params": {"seed": 0}, "model_config": {"name": model},
            "versions": {"mtlbench": "0.1.0"}, "host": "h", "time_total": 1.0,
            "split_fingerprint": f"fp{rep}", "diagnostics": {"support_precision": 0.5},
            "started_at": "2024-01-01T00:00:00+00:00", "finished_at": "2024-01-01T00:00:01+00:00",
            **extra}


@pytest.fixture
def store(tmp_path):
    rng = np.random.default_rng(0)
    st = ResultStore(tmp_path / "p.sqlite")
    hist = {"objective": [10.0, 5.0, 4.0, 3.9], "w_change": [1.0, 0.1, 0.01, 0.001],
            "u_change": [None, 0.5, 0.05, 0.005]}
    for model, base in (("stl", 0.84), ("lasso", 0.90), ("tfcl", 0.93), ("tfcl-noauc", 0.92)):
        for rep in range(3):
            extra = {"history": hist} if model.startswith("tfcl") else {}
            extra["grid"] = _trace(1.0 if model != "lasso" else 0.1)
            extra["best_params"] = {"lam": 1.0 if model != "lasso" else 0.1, "k": 3}
            arrays = {}
            if rep == 0:
                arrays["coef"] = rng.standard_normal((D, T))
                if model == "tfcl":
                    arrays["embeddings"] = rng.standard_normal((5, D + T, 5))
            scores = [(t, f"user{t:03d}", float(np.clip(base + 0.05 * rng.standard_normal(),
                                                         0, 1)), 30) for t in range(T)]
            st.write_unit(_row(model, rep, base + 0.005 * rep, **extra), scores, arrays)
    yield st
    st.close()


def _is_png(path):
    with open(path, "rb") as fh:
        return fh.read(8) == PNG


SVG = "{http://www.w3.org/2000/svg}"


def _svg_title_and_labels(path):
    """(title metadata, text drawn, axes whose tick labels are drawn without an axis label)
    of a figure's SVG file, read as XML: matplotlib writes each axis as a group
    ``matplotlib.axis_N`` holding one group per tick and, for its label, a text group."""
    import xml.etree.ElementTree as ET

    root = ET.parse(path).getroot()
    title = root.find(f"{SVG}title")
    unlabelled = []
    for g in root.iter(f"{SVG}g"):
        if not g.get("id", "").startswith("matplotlib.axis"):
            continue
        ticks = "".join(t for c in g if c.get("id", "").startswith(("xtick", "ytick"))
                        for t in c.itertext()).strip()
        label = "".join(t for c in g if c.get("id", "").startswith("text")
                        for t in c.itertext()).strip()
        if ticks and not label:
            unlabelled.append(g.get("id"))
    text = " ".join(" ".join(t.itertext()) for t in root.iter(f"{SVG}text"))
    return (title.text if title is not None else None), " ".join(text.split()), unlabelled


def assert_paper_figure(png):
    """A figure is written as PNG, SVG and PDF side by side; its SVG holds text (not glyph
    outlines) with the figure's title, and every axis that has tick labels has a label."""
    from mtlbench.report.canvas import figure_files

    files = figure_files(png)
    assert [f.suffix for f in files] == [".png", ".svg", ".pdf"]
    assert _is_png(files[0])
    assert files[2].read_bytes()[:5] == b"%PDF-"
    title, text, unlabelled = _svg_title_and_labels(files[1])
    assert title and " ".join(title.split()) in text, (files[1], title)
    assert not unlabelled, f"{files[1].name}: axes without a label: {unlabelled}"
    return title, text


def test_make_figures_draws_every_figure(store, tmp_path):
    figs = make_figures(store, "simulated", tmp_path / "figures", rel_to=tmp_path)
    kinds = {f["kind"]: f for f in figs}
    assert set(kinds) == {"box", "per_user", "tuning", "heatmaps", "convergence", "embeddings",
                          "ablation"}
    for f in figs:
        assert f["path"], f
        assert f["path"].startswith("figures/")
        assert f["files"] == [f["path"], f["path"][:-4] + ".svg", f["path"][:-4] + ".pdf"]
        assert_paper_figure(tmp_path / f["path"])
    _, text, _ = _svg_title_and_labels(tmp_path / kinds["box"]["files"][1])
    assert "test AUC x 100" in text and "model" in text


def test_figures_are_the_same_files_when_drawn_again(tmp_path):
    """No date or random id in the files: a republication changes no figure it redraws."""
    rng = np.random.default_rng(2)
    W = rng.standard_normal((6, 4))
    for run in ("a", "b"):
        heatmaps({"m": W}, np.eye(6, 4), tmp_path / run / "h.png", "title")
    for suffix in (".png", ".svg", ".pdf"):
        assert (tmp_path / "a" / f"h{suffix}").read_bytes() == \
            (tmp_path / "b" / f"h{suffix}").read_bytes(), suffix


def test_summary_figures_fit_their_labels(tmp_path):
    """The CD diagram keeps every label inside the file and off the axis; the equivalence
    panels wrap into rows, so their titles (block labels without repetition) do not collide."""
    from matplotlib.image import imread

    from mtlbench.report.plots import cd_diagram, equivalence_plot

    ranks = {f"model-{i:02d}-with-a-long-name": 1 + i * 0.8 for i in range(14)}
    cliques = [list(ranks)[:5], list(ranks)[3:9], list(ranks)[8:]]
    title, text = assert_paper_figure(cd_diagram(ranks, cliques, 5.73, tmp_path / "cd.png"))
    assert "CD = 5.73" in text and "average rank (1 = best)" in text
    assert all(f"{m} (" in text or f") {m}" in text for m in ranks)   # every label, whole
    blocks = ["landmine"] + [f"synthetic-attributes / attr{i}" for i in range(11)]
    rows = [{"block": b, "model": m, "best": "model-00-with-a-long-name", "p_best_better": 0.6,
             "p_equivalent": 0.3, "p_model_better": 0.1} for b in blocks for m in list(ranks)[1:]]
    png = equivalence_plot(rows, blocks, list(ranks), tmp_path / "eq.png", 0.5)
    _, text = assert_paper_figure(png)
    assert "synthetic-attributes / attr10" in text and "probability" in text
    height, width = imread(png).shape[:2]
    assert width < 1400 and height > width / 2     # panels in rows, not one 3,000 px strip


def test_the_ablation_figure_stays_a_page_wide(tmp_path):
    """Seven problems and four models per group: the panels stack instead of widening."""
    import pandas as pd
    from matplotlib.image import imread

    rows = [{"model": m, "status": "ok", "problem": f"synthetic-attributes/attr{p}",
             "test_auc": 0.8 + 0.01 * r + 0.002 * j}
            for j, m in enumerate(["tfcl", "tfcl-noauc", "tfcl-q", "tfcl-q-nog"])
            for p in range(7) for r in range(3)]
    groups = {"tfcl": ["tfcl", "tfcl-noauc"], "tfcl-q": ["tfcl-q", "tfcl-q-nog", "tfcl-noauc",
                                                         "tfcl"]}
    png = ablation_plot(pd.DataFrame(rows), tmp_path / "a.png", "ablations", groups=groups)
    _, text = assert_paper_figure(png)
    assert "attr6" in text and "synthetic-attributes/attr6" not in text
    assert imread(png).shape[1] <= 1400


def test_missing_data_gives_notes_not_errors(tmp_path):
    st = ResultStore(tmp_path / "q.sqlite")
    for rep in range(2):
        row = _row("stl", rep, 0.8, diagnostics={})
        row["dataset"], row["problem"] = "toy", "toy"
        st.write_unit(row, [(0, "a", 0.8, 5), (1, "b", 0.7, 5)])
    figs = {f["kind"]: f for f in make_figures(st, "toy", tmp_path / "figs")}
    assert figs["box"]["path"] and figs["per_user"]["path"]
    for kind in ("tuning", "heatmaps", "convergence", "embeddings", "ablation"):
        assert figs[kind]["path"] is None and figs[kind]["note"]
    st.close()


def test_direct_figure_functions(tmp_path):
    rng = np.random.default_rng(1)
    assert _is_png(heatmaps({"m": rng.standard_normal((6, 4))}, np.eye(6, 4), tmp_path / "h.png"))
    assert _is_png(convergence_plot({"tfcl": {"objective": [3, 2, 1], "w_change": [1, .5, .1],
                                              "u_change": [float("nan"), .2, .1]}},
                                    tmp_path / "c.png"))
    assert _is_png(embeddings_plot(rng.standard_normal((3, 10, 2)), tmp_path / "e.png", d=6,
                                   feature_groups=np.arange(6) % 2,
                                   task_groups=np.arange(4) % 2))
    assert convergence_plot({}, tmp_path / "none.png") is None
    import pandas as pd

    units = pd.DataFrame({"model": ["tfcl", "tfcl", "tfcl-q", "tfcl-q"], "status": ["ok"] * 4,
                          "problem": ["p"] * 4, "test_auc": [0.9, 0.91, 0.92, 0.93]})
    assert _is_png(ablation_plot(units, tmp_path / "a.png"))


def test_protocol_stores_embeddings_of_repetition_0():
    """The embeddings figure reads the array the protocol stores from ``embeddings_``."""
    from mtlbench import LinearMTLModel, TaskSet
    from mtlbench.protocol import ProtocolConfig, run_protocol

    class Emb(LinearMTLModel):
        name = "emb-test"

        def fit(self, tasks, init=None):
            self.coef_ = np.ones((tasks.d, tasks.T))
            self.embeddings_ = [np.full((tasks.d + tasks.T, 2), float(i)) for i in range(3)]
            return self

    rng = np.random.default_rng(0)
    Xs = [rng.standard_normal((30, 4)) for _ in range(3)]
    ys = [np.where(X[:, 0] > 0, 1.0, -1.0) for X in Xs]
    tasks = TaskSet.from_arrays("t", Xs, ys)
    out = run_protocol(Emb(), {}, tasks, ProtocolConfig(reps=1), 0, keep_arrays=True)
    assert out.arrays["embeddings"].shape == (3, 7, 2)
    assert "embeddings" not in run_protocol(Emb(), {}, tasks, ProtocolConfig(reps=1), 0).arrays


def _label_boxes(ax):
    """Window extents of the x tick labels that are drawn (major and minor)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    canvas = FigureCanvasAgg(ax.figure)
    canvas.draw()
    renderer = canvas.get_renderer()
    lo, hi = sorted(ax.get_xlim())
    boxes = []
    for which in ("major", "minor"):
        ticks = ax.xaxis.get_major_ticks() if which == "major" else ax.xaxis.get_minor_ticks()
        for tick in ticks:
            lab = tick.label1
            if lab.get_visible() and lab.get_text() and lo <= tick.get_loc() <= hi:
                boxes.append((lab.get_text(), lab.get_window_extent(renderer)))
    return boxes


@pytest.mark.parametrize("values, integer", [
    ([0.05, 0.1, 0.2, 0.3, 0.5], False),                  # under a decade and a half
    ([0.03, 0.05, 0.1, 0.2, 0.3, 0.5, 1.0], False),
    ([1e-6, 1e-4, 1e-3, 1e-2, 0.1, 1.0, 3.0], False),     # many decades
    ([0.3, 1, 3, 10, 30, 100, 300], False),
    ([2, 3, 4, 5, 6, 8, 10, 12, 16], True),               # a rank k
    ([1, 2, 4, 8, 16, 32, 64, 128, 256], True),
])
def test_log_axis_tick_labels_never_overlap(values, integer):
    """The tuning figure's log-axis labels overlapped (minor ticks labelled
    in a larger font when a range spans under two decades)."""
    from matplotlib.figure import Figure

    from mtlbench.report.canvas import log_x_axis
    from mtlbench.report.plots import TUNING_DPI

    fig = Figure(figsize=(3.3, 2.5), dpi=TUNING_DPI, layout="constrained")
    ax = fig.add_subplot(1, 1, 1)
    ax.scatter(values, np.arange(len(values)))
    log_x_axis(ax, np.asarray(values, dtype=float), integer)
    ax.tick_params(labelsize=7)
    boxes = _label_boxes(ax)
    assert len(boxes) >= 2, boxes   # the axis is labelled at all
    boxes.sort(key=lambda b: b[1].x0)
    for (ta, a), (tb, b) in zip(boxes, boxes[1:]):
        assert a.x1 < b.x0, f"labels {ta!r} and {tb!r} overlap"
