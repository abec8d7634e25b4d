"""The judgement across data sets: leaderboard --all, summary_across,
publish's summary page."""
from __future__ import annotations

import json
import math

import numpy as np
import pytest
from click.testing import CliRunner
from scipy.stats import chi2

import mtlbench
from mtlbench.cli import cli
from mtlbench.plugins import get_registry
from mtlbench.report.across import Summary, bayes_signed_rank, summary_across
from mtlbench.report.leaderboard import build_leaderboard
from mtlbench.report.publish import publish

from test_report_select import make, unit

PNG = b"\x89PNG\r\n\x1a\n"
#: block -> model -> mean test AUC x 100; ranks a 1,1,2  b 2,2,1  stl 3,3,3
MEANS = {"one": {"a": 90.0, "b": 85.0, "stl": 80.0},
         "two": {"a": 88.0, "b": 86.0, "stl": 70.0},
         "three": {"a": 75.0, "b": 80.0, "stl": 70.0}}
REPS = 8


@pytest.fixture(autouse=True)
def stl_is_the_baseline(monkeypatch):
    monkeypatch.setattr(get_registry().model_class("stl"), "is_baseline", True, raising=False)


def _rows(datasets):
    rows = []
    for ds, means in datasets.items():
        for model, mean in means.items():
            for r in range(REPS):  # symmetric noise: the mean is exactly `mean`
                noise = 0.004 * (r - (REPS - 1) / 2)
                rows.append(unit(model, r, mean / 100 + noise, dataset=ds, reps=REPS))
    return rows


@pytest.fixture
def store(tmp_path):
    st = make(tmp_path / "x.sqlite", _rows(MEANS))
    yield st
    st.close()


def test_friedman_and_average_ranks_by_hand(store):
    res = CliRunner().invoke(cli, ["leaderboard", "--all", "--store", str(store.path),
                                   "--format", "json"])
    assert res.exit_code == 0, res.output
    s = json.loads(res.output)
    assert s["format"] == "mtlbench-summary/1" and sorted(s["blocks"]) == ["one", "three", "two"]
    # rank sums R = (4, 5, 9), N = 3, k = 3: chi2 = 12 / (N k (k+1)) sum R^2 - 3 N (k+1)
    assert s["average_ranks"] == pytest.approx({"a": 4 / 3, "b": 5 / 3, "stl": 3.0})
    assert list(s["average_ranks"]) == ["a", "b", "stl"]          # best first
    stat = 12 / (3 * 3 * 4) * (16 + 25 + 81) - 3 * 3 * 4
    assert s["friedman"]["statistic"] == pytest.approx(stat)      # 4.667
    assert s["friedman"]["p_value"] == pytest.approx(math.exp(-stat / 2))  # chi2 with 2 dof
    assert s["friedman"]["p_value"] == pytest.approx(chi2.sf(stat, 2))
    # Nemenyi: CD = q_0.05(3, inf) / sqrt 2 * sqrt(k (k+1) / (6 N)) = 2.343 * sqrt(4 / 6)
    assert s["posthoc"]["critical_difference"] == pytest.approx(2.3437 * math.sqrt(4 / 6),
                                                                rel=1e-3)
    assert s["posthoc"]["not_separated"] == [["a", "b", "stl"]]   # 3 blocks separate nothing
    row = {h["block"]: h for h in s["headline"]}["two"]
    assert row["best"]["model"] == "a" and row["baseline"]["model"] == "stl"
    assert row["best_competitor"]["model"] == "a"
    assert row["baseline"]["mean"] == pytest.approx(70.0)
    assert row["baseline"]["significantly_worse"] is True and row["baseline"]["p_holm"] < 0.05
    assert Summary.from_json(s).to_json() == s


def test_markdown_writes_the_cd_diagram_and_equivalence_figure(store, tmp_path):
    out = tmp_path / "page" / "summary.md"
    out.parent.mkdir()
    res = CliRunner().invoke(cli, ["leaderboard", "--all", "--store", str(store.path),
                                   "--output", str(out), "--rope", "1.0",
                                   "--figures", str(out.parent)])
    assert res.exit_code == 0, res.output
    md = out.read_text()
    assert "# Across data sets" in md and "Friedman test over the 3 blocks" in md
    assert "![Critical-difference diagram](summary-cd.png)" in md
    assert "region of practical equivalence ±1 test AUC" in md
    for name in ("summary-cd.png", "summary-equivalence.png"):
        assert (out.parent / name).read_bytes()[:8] == PNG
    res = CliRunner().invoke(cli, ["leaderboard", "--all", "--store", str(store.path),
                                   "--format", "csv"])
    assert res.exit_code == 0
    lines = res.output.strip().splitlines()
    assert lines[0].startswith("block,dataset,problem,model,role,mean_auc_x100,best,")
    assert len(lines) == 1 + 9
    assert "p_best_better,p_equivalent,p_model_better,rope" in lines[0]


def test_variants_of_one_generator_are_one_block_unless_asked(tmp_path):
    st = make(tmp_path / "v.sqlite", _rows({"toy": MEANS["one"], "toy[seed=1]": MEANS["two"],
                                            "other": MEANS["three"]}))
    run = CliRunner().invoke
    s = json.loads(run(cli, ["leaderboard", "--all", "--store", str(st.path), "--format",
                             "json"]).output)
    assert s["blocks"] == ["other", "toy"]
    assert "variant of toy" in s["left_out_blocks"]["toy[seed=1]"]
    md = run(cli, ["leaderboard", "--all", "--store", str(st.path), "--format",
                   "markdown"]).output
    assert "**Left out:** toy[seed=1]" in md and "--blocks all" in md
    s = json.loads(run(cli, ["leaderboard", "--all", "--store", str(st.path), "--format",
                             "json", "--blocks", "all"]).output)
    assert s["blocks"] == ["other", "toy", "toy[seed=1]"] and s["left_out_blocks"] == {}
    s = json.loads(run(cli, ["leaderboard", "--all", "--store", str(st.path), "--format",
                             "json", "--blocks", "toy[seed=1],other"]).output)
    assert s["blocks"] == ["other", "toy[seed=1]"]
    res = run(cli, ["leaderboard", "--all", "--store", str(st.path), "--blocks", "nope"])
    assert res.exit_code == 2 and "unknown block(s) nope" in res.output
    res = run(cli, ["leaderboard", "--store", str(st.path)])
    assert res.exit_code == 2 and "--all" in res.output
    st.close()


def test_a_data_set_of_several_problems_is_one_block_unless_asked(tmp_path):
    """Its problems count once: per repetition each model's mean over them, tested like a
    column; --blocks problems gives a block per problem."""
    rng = np.random.default_rng(3)
    vals = {(m, p, r): base + 2.0 * rng.standard_normal()
            for m, base in (("a", 80.0), ("b", 78.0), ("stl", 70.0))
            for p in ("p1", "p2", "p3") for r in range(REPS)}
    rows = [unit(m, r, v / 100, dataset="gen", problem=p, reps=REPS)
            for (m, p, r), v in vals.items()]
    rows += [unit(m, r, (mean + 0.4 * r) / 100, dataset="real", reps=REPS)
             for m, mean in MEANS["one"].items() for r in range(REPS)]
    st = make(tmp_path / "g.sqlite", rows)
    boards = [build_leaderboard(st, ds) for ds in ("gen", "real")]
    s = summary_across(boards, bayes_samples=500)
    assert s.blocks == ["gen", "real"] and "one block per independent data set" in s.blocks_rule
    assert "gen" in s.blocks_rule and s.friedman.blocks == 2
    agg = {m: [np.mean([vals[(m, p, r)] for p in ("p1", "p2", "p3")]) for r in range(REPS)]
           for m in ("a", "b", "stl")}
    for m in agg:
        assert s.block_means["gen"][m] == pytest.approx(np.mean(agg[m]), rel=1e-12)
    head = s.headline[0]
    assert head.block == "gen" and head.best.model == "a"
    assert head.best.std == pytest.approx(np.std(agg["a"], ddof=1), rel=1e-12)
    from mtlbench.report.stats import holm, wilcoxon_p

    raw = [wilcoxon_p(np.subtract(agg["a"], agg[m])) for m in ("b", "stl")]
    assert head.baseline.p_holm == pytest.approx(holm(raw)[1], rel=1e-12)
    eq = {e.model: e for e in s.equivalence if e.block == "gen"}
    assert eq["stl"].n_pairs == REPS
    assert eq["stl"].mean_difference == pytest.approx(np.mean(agg["a"]) - np.mean(agg["stl"]))
    per = summary_across(boards, blocks="problems", bayes_samples=200)
    assert per.blocks == ["gen / p1", "gen / p2", "gen / p3", "real"]
    assert per.friedman.blocks == 4
    chosen = summary_across(boards, blocks=["gen"], bayes_samples=200)
    assert chosen.blocks == ["gen"] and chosen.block_means["gen"] == s.block_means["gen"]
    st.close()


def test_bayesian_probabilities_sum_to_one_and_are_reproducible():
    rng = np.random.default_rng(0)
    best = 80 + rng.standard_normal(15)
    model = best - 0.4 - 0.3 * rng.standard_normal(15)
    p = bayes_signed_rank(best, model, rope=0.5, samples=2000, seed=0)
    assert sum(p) == pytest.approx(1.0, abs=1e-12) and all(0 <= x <= 1 for x in p)
    assert bayes_signed_rank(best, model, rope=0.5, samples=2000, seed=0) == p
    assert bayes_signed_rank(best, model, rope=0.5, samples=2000, seed=1) != p
    # far apart: the best is better with certainty; identical: equivalent
    assert bayes_signed_rank(best, best - 5, 0.5, 2000)[0] == pytest.approx(1.0)
    assert bayes_signed_rank(best, best, 0.5, 2000)[1] == pytest.approx(1.0)


def test_summary_across_from_leaderboards_and_the_api(store):
    boards = [build_leaderboard(store, ds) for ds in MEANS]
    s = summary_across(boards, bayes_samples=1000)
    for e in s.equivalence:
        assert e.p_best_better + e.p_equivalent + e.p_model_better == pytest.approx(1.0)
        assert e.n_pairs == REPS
    again = summary_across(boards, bayes_samples=1000)
    assert [e.to_json() for e in again.equivalence] == [e.to_json() for e in s.equivalence]
    api = mtlbench.load_results(str(store.path)).summary_across()
    assert api.average_ranks == pytest.approx(s.average_ranks)
    assert api.friedman.statistic == pytest.approx(s.friedman.statistic)
    focus = summary_across(boards, focus=["b"], bayes_samples=200)
    assert focus.roles["b"] == "focus" and focus.headline[0].focus["b"].model == "b"
    # without the Bayesian view: the same summary, its equivalence list empty
    bare = summary_across(boards, bayes_samples=1000, equivalence=False)
    assert s.equivalence and bare.equivalence == []
    assert {**bare.to_json(), "equivalence": None} == {**s.to_json(), "equivalence": None}


def test_publish_writes_the_summary_page_linked_from_the_index(store, tmp_path):
    out = tmp_path / "lb"
    publish(store, out, figures=False, log=lambda s: None)
    md = (out / "summary.md").read_text()
    assert md.startswith("<!-- generated by mtlbench (mtlbench publish)")
    assert "## Headline" in md and "## Practical equivalence" in md
    assert json.loads((out / "summary.json").read_text())["blocks"] == ["one", "three", "two"]
    assert "[summary.md](summary.md)" in (out / "README.md").read_text()
    manifest = json.loads((out / ".manifest.json").read_text())
    assert {"summary.md", "summary.json"} <= set(manifest["files"])


def test_figures_elsewhere_are_linked_relative_to_the_page(store, tmp_path):
    page, figs = tmp_path / "page" / "s.md", tmp_path / "figs"
    page.parent.mkdir()
    res = CliRunner().invoke(cli, ["leaderboard", "--all", "--store", str(store.path), "-o",
                                   str(page), "--figures", str(figs)])
    assert res.exit_code == 0, res.output
    assert "](../figs/summary-cd.png)" in page.read_text()
    assert (figs / "summary-cd.png").read_bytes()[:8] == PNG
