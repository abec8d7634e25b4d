"""Leaderboard statistics on constructed results written into a temporary store."""
from __future__ import annotations

import json
import re

import numpy as np
import pytest
from click.testing import CliRunner
from scipy.stats import friedmanchisquare, wilcoxon

from mtlbench.cli import cli
from mtlbench.plugins import get_registry
from mtlbench.report.leaderboard import (SORT_HEADER, build_leaderboard, cell_text, to_csv,
                                         to_json, to_markdown)
from mtlbench.report.publish import publish
from mtlbench.report.stats import holm, wilcoxon_p
from mtlbench.store import ResultStore

from test_report_stats import brute_force_p


@pytest.fixture(autouse=True)
def stl_is_the_baseline(monkeypatch):
    """The role the built-in stl declares (``is_baseline = True``): set here so the tests hold
    whether or not the model file carries the declaration yet."""
    monkeypatch.setattr(get_registry().model_class("stl"), "is_baseline", True, raising=False)

PROTO = {"seed": 0, "test_fraction": 0.15, "val_fraction": 0.2, "protocol_version": 1, "reps": 8}
TASKS = [f"u{i}" for i in range(5)]


def unit(model, rep, auc, *, problem="toy", dataset="toy", status="ok", task_auc=None,
         extra=None):
    key = f"{model}-{problem}-{rep}"
    row = {"key": key, "model": model, "dataset": dataset, "problem": problem, "rep": rep,
           "seed": 0, "status": status, "test_auc": auc if status == "ok" else None,
           "protocol": PROTO, "dataset_params": {}, "model_config": {"name": model},
           "versions": {"mtlbench": "0.1.0", "plugin": "mtlbench 0.1.0", "cpu_count": "2",
                        "platform": "Linux-test"},
           "host": "testhost", "time_total": 1.5, "split_fingerprint": f"fp-{problem}-{rep}",
           "data_fingerprint": "data", "started_at": f"2024-01-01T00:00:{rep:02d}+00:00",
           "finished_at": f"2024-01-01T00:01:{rep:02d}+00:00",
           "message": None if status == "ok" else "RuntimeError: boom", **(extra or {})}
    if task_auc is None and status == "ok":
        task_auc = [auc] * len(TASKS)
    scores = [(i, n, a, 10) for i, (n, a) in enumerate(zip(TASKS, task_auc or []))]
    return row, scores


def make_store(path, rows):
    st = ResultStore(path)
    for row, scores in rows:
        st.write_unit(row, scores)
    return st


@pytest.fixture
def store(tmp_path):
    """best: clearly better than stl; twin: tied with best (balanced +-), 8 repetitions."""
    rng = np.random.default_rng(0)
    base = 0.80 + 0.01 * rng.standard_normal(8)
    rows = []
    for r in range(8):
        best = base[r] + 0.05
        sign = 1 if r % 2 == 0 else -1
        rows.append(unit("best", r, best, task_auc=[best + 0.01, best, best, best - 0.01, 0.8]))
        rows.append(unit("twin", r, best + sign * 0.001 * (r // 2 + 1)))
        rows.append(unit("stl", r, base[r], task_auc=[0.8] * 5))
    st = make_store(tmp_path / "s.sqlite", rows)
    yield st
    st.close()


def _cells(lb):
    return {r["model"]: r["cells"] for r in lb["rows"]}


def test_holm_against_hand_computation():
    # sorted: 0.005*4 = 0.02; 0.01*3 = 0.03; 0.03*2 = 0.06; 0.04*1 = 0.04 -> max(0.06, .04)
    assert holm([0.01, 0.04, 0.03, 0.005]) == pytest.approx([0.03, 0.06, 0.06, 0.02])
    assert holm([0.5, 0.9]) == pytest.approx([1.0, 1.0])  # capped at 1
    assert holm([]) == []
    assert holm([0.2]) == pytest.approx([0.2])


def test_clearly_better_is_significant_and_ties_are_not(store):
    lb = build_leaderboard(store, "toy")
    cells = _cells(lb)
    assert lb["rows"][0]["model"] in ("best", "twin")
    top = "best" if cells["best"]["toy"]["best"] else "twin"
    assert cells[top]["toy"]["best"] and cells[top]["toy"]["significantly_worse"] is None
    other = "twin" if top == "best" else "best"
    assert cells["stl"]["toy"]["significantly_worse"] is True
    assert cells["stl"]["toy"]["p_holm"] < 0.05
    assert cells[other]["toy"]["significantly_worse"] is False
    assert cells[other]["toy"]["p_holm"] > 0.05
    # the p-values are the exact Wilcoxon test's (brute force over the 2^8 sign flips: the
    # twin's differences are +-0.1, +-0.2, ... up to float rounding, tied pairs, so p = 1;
    # scipy ranked the rounding and said 0.93), Holm-corrected over the column's family
    b = np.array(cells[top]["toy"]["test_auc_x100"])
    raw = [brute_force_p(np.round(b - np.array(cells[m]["toy"]["test_auc_x100"]), 9))
           for m in (other, "stl")]
    assert raw[0] == 1.0
    assert raw[1] == pytest.approx(wilcoxon(b - np.array(cells["stl"]["toy"]["test_auc_x100"]))
                                   .pvalue)
    assert [cells[other]["toy"]["p_value"], cells["stl"]["toy"]["p_value"]] == pytest.approx(raw)
    assert [cells[other]["toy"]["p_holm"], cells["stl"]["toy"]["p_holm"]] == \
        pytest.approx(holm(raw))
    md = to_markdown(lb)
    assert "†" in cell_text(cells["stl"]["toy"], False)
    assert "Wilcoxon signed-rank" in md and "Holm" in md


def test_identical_scores_give_p_one():
    assert wilcoxon_p([0.0, 0.0, 0.0]) == 1.0
    assert wilcoxon_p([]) is None


def test_friedman_and_ranks(store):
    lb = build_leaderboard(store, "toy")
    cells = _cells(lb)
    f = lb["tests"]["friedman_over_problem_reps"]
    cols = [np.array(cells[m]["toy"]["test_auc_x100"]) for m in lb["tests"]["ranked_models"]]
    ref = friedmanchisquare(*cols)
    assert f["statistic"] == pytest.approx(ref.statistic)
    assert f["p_value"] == pytest.approx(ref.pvalue)
    ranks = {r["model"]: r["avg_rank"] for r in lb["rows"]}
    assert ranks["stl"] == 3.0
    assert ranks["best"] + ranks["twin"] == pytest.approx(3.0)
    assert lb["tests"]["friedman_over_problems"] is None  # one problem only


def test_win_tie_loss_against_stl(store):
    lb = build_leaderboard(store, "toy")
    wtl = {r["model"]: r["win_tie_loss"] for r in lb["rows"]}
    # per rep: tasks 0-3 well above 0.80, task 4 exactly 0.80 (a tie)
    assert wtl["best"]["win"] == 4 * 8 and wtl["best"]["tie"] == 8 and wtl["best"]["loss"] == 0
    assert wtl["stl"] is None


def test_compact_json_is_the_same_object_one_unit_per_line(store):
    lb = build_leaderboard(store, "toy")
    compact = to_json(lb, compact=True)
    assert json.loads(compact) == json.loads(to_json(lb))
    assert len(compact) < len(to_json(lb))
    n_units = len(json.loads(compact)["units"])
    assert n_units > 1
    # every unit on its own line, so a republication's diff names the units that changed
    lines = compact.splitlines()
    start = lines.index('"units":[')
    assert all(ln.startswith("{") for ln in lines[start + 1:start + 1 + n_units])
    assert lines[start + 1 + n_units] == "]"


def test_markdown_and_json_agree(store):
    lb = build_leaderboard(store, "toy")
    md = to_markdown(lb)
    data = json.loads(to_json(lb))
    lines = [ln for ln in md.splitlines() if ln.startswith("| ")]
    header = [c.strip() for c in lines[0].strip("|").split("|")]
    table = {}
    for ln in lines[1:]:
        cells = [c.strip() for c in ln.strip("|").split("|")]
        if len(cells) == len(header):
            table[cells[0].replace(" ⚠", "")] = dict(zip(header, cells))
    assert [r["model"] for r in data["rows"]] == list(table)[:len(data["rows"])]
    for r in data["rows"]:
        row = table[r["model"]]
        c = r["cells"]["toy"]
        nums = [float(x) for x in re.findall(r"\d+\.\d+", row["toy"])]
        assert nums == [round(c["mean"], 2), round(c["std"], 2)]
        assert ("**" in row["toy"]) == c["best"]
        assert ("†" in row["toy"]) == bool(c["significantly_worse"])
        assert row[SORT_HEADER] == f"{r['avg_rank']:.2f}"
        if r["win_tie_loss"]:
            w = r["win_tie_loss"]
            assert row["W/T/L vs stl (tasks)"] == f"{w['win']}/{w['tie']}/{w['loss']}"
    assert data["provenance"]["split_digest"] in md
    assert data["provenance"]["split_fingerprints_consistent"] is True
    csv_lines = to_csv(lb).strip().splitlines()
    assert len(csv_lines) == 1 + len(data["rows"])


def test_failures_counted_and_fewer_reps_flagged(tmp_path):
    rows = []
    for r in range(6):
        rows.append(unit("a", r, 0.9 + 0.001 * r))
        rows.append(unit("stl", r, 0.7 + 0.001 * r))
        rows.append(unit("flaky", r, 0.85, status="failed" if r < 2 else "ok"))
    st = make_store(tmp_path / "f.sqlite", rows)
    lb = build_leaderboard(st, "toy")
    row = {r["model"]: r for r in lb["rows"]}["flaky"]
    assert row["failed"] == 2 and row["reps_finished"] == 4 and row["fewer_reps"]
    assert row["cells"]["toy"]["n"] == 4
    md = to_markdown(lb)
    assert "flaky ⚠" in md
    assert "(n=4, 2 failed)" in md
    assert lb["provenance"]["units_failed"] == 2
    # only 4 pairs for flaky: it cannot reach p < 0.05, and the note names it
    assert row["cells"]["toy"]["significantly_worse"] is False
    assert "so these comparisons can never be marked: flaky (4 pairs" in md
    st.close()


def test_small_n_is_stated(tmp_path):
    rows = []
    for r in range(3):
        rows.append(unit("a", r, 0.9 + 0.001 * r))
        rows.append(unit("stl", r, 0.6))
    st = make_store(tmp_path / "n.sqlite", rows)
    lb = build_leaderboard(st, "toy")
    assert _cells(lb)["stl"]["toy"]["significantly_worse"] is False
    assert lb["tests"]["small_n_columns"][0]["models"][0]["pairs"] == 3
    md = to_markdown(lb)
    assert "no cell of this column can be marked significant" in md
    assert "Friedman" in md and "needs >= 3 models" in md
    st.close()


def test_other_protocol_settings_are_reported_not_mixed(tmp_path):
    rows = [unit("a", r, 0.9) for r in range(4)] + [unit("stl", r, 0.8) for r in range(4)]
    other = {**PROTO, "seed": 7}
    rows.append(unit("a", 0, 0.1, extra={"key": "other", "protocol": other, "seed": 7}))
    st = make_store(tmp_path / "p.sqlite", rows)
    lb = build_leaderboard(st, "toy")
    assert _cells(lb)["a"]["toy"]["mean"] == pytest.approx(90.0)
    assert any("left out 1 unit(s) of seed 7" in n for n in lb["notes"])
    assert lb["left_out"] == {"other seeds": 1} and lb["seed"] == 0
    st.close()


def test_cli_leaderboard(store, tmp_path):
    runner = CliRunner()
    path = str(store.path)
    res = runner.invoke(cli, ["leaderboard", "--dataset", "toy", "--store", path,
                              "--format", "markdown"])
    assert res.exit_code == 0, res.output
    assert "# Leaderboard: toy" in res.output and "| best" in res.output
    res = runner.invoke(cli, ["leaderboard", "--dataset", "toy", "--store", path,
                              "--format", "json"])
    assert res.exit_code == 0
    assert json.loads(res.output)["dataset"] == "toy"
    res = runner.invoke(cli, ["leaderboard", "--dataset", "toy", "--store", path,
                              "--format", "csv"])
    assert res.exit_code == 0 and res.output.startswith("dataset,problem,model")
    res = runner.invoke(cli, ["leaderboard", "--dataset", "nope", "--store", path])
    assert res.exit_code == 2 and "no results for dataset 'nope'" in res.output
    res = runner.invoke(cli, ["leaderboard", "--dataset", "toy", "--store",
                              str(tmp_path / "missing.sqlite")])
    assert res.exit_code == 2 and "no results store" in res.output


def test_publish_keeps_hand_written_files(store, tmp_path):
    out = tmp_path / "lb"
    out.mkdir()
    (out / "simulated-paper.md").write_text("# by hand\n")
    made = "<!-- generated by scripts/x.py from this folder's JSON: rerun `python x.py` -->\n"
    (out / "verdict.md").write_text(made + "# a page a script writes\n")
    publish(store, out, figures=False, log=lambda s: None)
    assert (out / "simulated-paper.md").read_text() == "# by hand\n"
    assert (out / "verdict.md").read_text().startswith(made)     # not publish's: kept
    md, js = (out / "toy.md").read_text(), json.loads((out / "toy.json").read_text())
    assert js["dataset"] == "toy" and "# Leaderboard: toy" in md
    readme = (out / "README.md").read_text()
    assert "(simulated-paper.md)" in readme and "(toy.md)" in readme and "(toy.json)" in readme
    # the index says how another document is made when its first line says so
    assert "- [simulated-paper.md](simulated-paper.md)\n" in readme
    assert ("- [verdict.md](verdict.md) — generated by scripts/x.py from this folder's JSON: "
            "rerun `python x.py`\n") in readme
    # a hand-written block in the index survives regeneration
    readme = readme.replace("<!-- hand-written:end -->", "my note\n<!-- hand-written:end -->")
    (out / "README.md").write_text(readme)
    res = CliRunner().invoke(cli, ["publish", "--store", str(store.path), "--out", str(out),
                                   "--no-figures"])
    assert res.exit_code == 0, res.output
    assert "my note" in (out / "README.md").read_text()
    assert (out / "simulated-paper.md").exists()


def test_several_problems_friedman_across_problems(tmp_path):
    rows = []
    for prob, shift in (("shoes/brown", 0.0), ("shoes/open", 0.02), ("shoes/pointy", -0.01)):
        for r in range(6):
            for model, auc in (("a", 0.9), ("b", 0.85), ("stl", 0.8)):
                rows.append(unit(model, r, auc + shift + 0.001 * r, problem=prob,
                                 dataset="shoes"))
    st = make_store(tmp_path / "m.sqlite", rows)
    lb = build_leaderboard(st, "shoes")
    assert lb["problems"] == ["shoes/brown", "shoes/open", "shoes/pointy"]
    f = lb["tests"]["friedman_over_problems"]
    assert f["blocks"] == 3 and f["models"] == 3
    means = [[90 + 100 * s, 85 + 100 * s, 80 + 100 * s] for s in (0.0, 0.02, -0.01)]
    ref = friedmanchisquare(*np.array(means).T)
    assert f["statistic"] == pytest.approx(ref.statistic)
    assert lb["tests"]["friedman_over_problem_reps"]["blocks"] == 18
    assert [r["model"] for r in lb["rows"]] == ["a", "b", "stl"]
    md = to_markdown(lb)
    header = next(ln for ln in md.splitlines() if ln.startswith("| model"))
    assert all(p in header for p in lb["problems"])
    st.close()


def test_model_with_only_failures_is_shown_not_ranked(tmp_path):
    rows = [unit("a", r, 0.9) for r in range(3)] + [unit("stl", r, 0.8) for r in range(3)]
    rows += [unit("broken", r, None, status="failed") for r in range(3)]
    st = make_store(tmp_path / "b.sqlite", rows)
    lb = build_leaderboard(st, "toy")
    row = {r["model"]: r for r in lb["rows"]}["broken"]
    assert row["failed"] == 3 and row["avg_rank"] is None and lb["rows"][-1]["model"] == "broken"
    md = to_markdown(lb)
    assert "— (n=0, 3 failed)" in md and "Not ranked" in md
    json.loads(to_json(lb))
    st.close()


def test_search_summary_reads_old_and_new_traces():
    import pandas as pd

    from mtlbench.report.leaderboard import search_summary

    new = {"search": "adaptive", "budget": 20, "n_fits": 20, "at_bound": ["lam"],
           "at_edge": [], "budget_exhausted": False,
           "fits": [{"params": {"lam": 1.0}, "val_auc": 0.8, "converged": False, "n_iter": 5,
                     "fit_time": 0.1, "phase": "start"}]}
    units = pd.DataFrame({
        "grid": [new, [{"params": {"lam": 1.0}, "val_auc": 0.7}] * 3,
                 {**new, "at_bound": [], "at_edge": ["mu"]}],
        "protocol": [{}, {}, {}], "best_params": [{"lam": 1.0}] * 3,
        "model_config": [{}] * 3, "diagnostics": [{}, {}, {"converged": True}],
    })
    s = search_summary(units)
    assert s["budget"] == [20] and s["fits_min"] == 3 and s["fits_max"] == 20
    assert s["at_bound"] == 1 and s["at_bound_params"] == ["lam"]
    assert s["at_edge"] == 1 and s["at_edge_params"] == ["mu"]
    # the selected search fit (lam = 1.0) did not converge in units 0 and 2; unit 1 recorded
    # nothing; only unit 2 records its refit's flag (True)
    assert s["selected_not_converged"] == 2 and s["selected_converged_unknown"] == 1
    assert s["refit_not_converged"] == 0 and s["refit_converged_unknown"] == 2
    # stored before degenerate selections were recorded
    assert s["degenerate"] is None and s["degenerate_unknown"] == 3


def test_at_bound_from_declared_bounds_or_unknown_for_list_spaces():
    import pandas as pd

    from mtlbench.report.select import at_bound

    declared = {"space": {"lam": {"kind": "log", "grid": [0.1, 1.0], "low": 0.0, "high": None},
                          "theta": {"kind": "linear", "grid": [0.5], "low": 0.0, "high": 1.0}}}
    row = pd.Series({"grid": [], "protocol": {}, "diagnostics": {}, "model_config": declared,
                     "best_params": {"lam": 0.1, "theta": 1.0}})
    assert at_bound(row) == ["theta"]
    old = row.copy()
    old["model_config"] = {"space": {"lam": [0.1, 1.0]}}
    assert at_bound(old) is None
    md_row = {"units": 2, "at_bound": None}
    from mtlbench.report.render import _count_text

    assert _count_text(md_row["at_bound"], md_row["units"]) == "—"


def test_search_summary_of_the_stored_layout():
    """The layout the protocol stores: the trace in ``grid``, the unit-level summary in
    ``diagnostics['search']`` (the selected search fit's and the refit's flags counted apart)."""
    import pandas as pd

    from mtlbench.report.leaderboard import search_summary

    trace = [{"params": {"lam": 0.1}, "phase": "start", "val_auc": 0.8, "converged": True,
              "n_iter": 3},
             {"params": {"lam": 1.0}, "phase": "extend", "val_auc": 0.9, "converged": True,
              "n_iter": 4}]
    summary = {"search": "adaptive", "budget": 20, "n_fits": 2, "at_bound": [],
               "at_edge": ["lam"], "budget_exhausted": True, "fit_times": [0.1, 0.2],
               "selected_converged": True, "refit_converged": False}
    units = pd.DataFrame({"grid": [trace], "protocol": [{"search": "adaptive", "budget": 20}],
                          "best_params": [{"lam": 1.0}], "model_config": [{}],
                          "diagnostics": [{"search": summary}]})
    s = search_summary(units)
    assert s["budget"] == [20] and s["fits_max"] == 2
    assert s["at_edge"] == 1 and s["at_bound"] == 0
    assert s["selected_not_converged"] == 0 and s["refit_not_converged"] == 1


def _search_unit(model, rep, auc, *, degenerate=None, share=None, selected=True, refit=True,
                 errors=0):
    """A unit in the stored layout: trace in ``grid``, summary in ``diagnostics['search']``;
    ``degenerate=None`` leaves out the fields (a unit stored before they existed)."""
    trace = [{"params": {"lam": 0.1}, "phase": "start", "val_auc": 0.7, "converged": selected}]
    trace += [{"params": {"lam": 10.0 ** i}, "phase": "start",
               "error": "ValueError: k must be <= 10"} for i in range(errors)]
    summary = {"search": "adaptive", "budget": 20, "n_fits": len(trace), "at_bound": [],
               "at_edge": [], "selected_converged": selected, "refit_converged": refit}
    if degenerate is not None:
        summary.update(degenerate=degenerate, selected_constant_share=share,
                       refit_constant_share=share)
    return unit(model, rep, auc, extra={"grid": trace, "best_params": {"lam": 0.1},
                                        "diagnostics": {"search": summary}})


def test_degenerate_selections_convergence_and_failed_fits_are_counted(tmp_path):
    """Each flag in its own column and in the JSON, the
    degenerate units and units with failed fits named, "not recorded" never shown as 0."""
    rows = []
    for r in range(6):
        rows.append(_search_unit("a", r, 0.9, degenerate=r < 2, share=0.5 if r < 2 else 0.0,
                                 selected=r != 3, refit=True, errors=2 if r == 4 else 0))
        rows.append(_search_unit("old", r, 0.85, selected=None, refit=None))
        rows.append(_search_unit("stl", r, 0.8, degenerate=False, share=0.0, refit=r != 5))
    st = make_store(tmp_path / "d.sqlite", rows)
    lb = build_leaderboard(st, "toy")
    a, old, stl = (lb.row(m).search for m in ("a", "old", "stl"))
    assert (a.degenerate, a.degenerate_unknown) == (2, 0)
    assert a.degenerate_units == ["toy rep 0 (50 % of tasks constant)",
                                  "toy rep 1 (50 % of tasks constant)"]
    assert (a.selected_not_converged, a.refit_not_converged) == (1, 0)
    assert a.failed_fits == 2 and a.failed_fit_units == ["toy rep 4 (2)"]
    assert (old.degenerate, old.degenerate_unknown) == (None, 6)
    assert old.selected_converged_unknown == 6 and old.refit_converged_unknown == 6
    assert (stl.selected_not_converged, stl.refit_not_converged) == (0, 1)
    md = to_markdown(lb)
    header = [c.strip() for c in next(ln for ln in md.splitlines()
                                      if ln.startswith("| model")).strip("|").split("|")]
    table = {c[0].strip(): dict(zip(header, (x.strip() for x in c)))
             for c in (ln.strip("|").split("|") for ln in md.splitlines()
                       if ln.startswith("| ") and not ln.startswith("| model"))
             if len(c) == len(header)}
    assert table["a"]["degenerate"] == "2/6" and table["old"]["degenerate"] == "not recorded"
    assert table["stl"]["degenerate"] == "0/6"
    assert table["a"]["selected fit not converged"] == "1/6"
    assert table["a"]["refit not converged"] == "0/6"
    assert table["stl"]["refit not converged"] == "1/6"
    assert table["old"]["selected fit not converged"] == "not recorded"
    assert table["a"]["failed search fits"] == "2 in 1/6 units"
    assert table["stl"]["failed search fits"] == "0"
    assert "**Degenerate selections**: a 2/6 (toy rep 0 (50 % of tasks constant)" in md
    assert "**Search fits that raised** (fits per unit in brackets): a 2 (toy rep 4 (2))" in md
    # every search fit's flag, not only the selected one's: a's unit 3 had its one fit capped;
    # "old" recorded no flag at all
    assert (a.search_not_converged, a.search_converged_recorded) == (1, 6)
    assert a.search_not_converged_units == ["toy rep 3 (1/1)"]
    assert old.search_not_converged is None and old.search_converged_recorded is None
    assert table["a"]["search fits not converged"] == "1/6"
    assert table["old"]["search fits not converged"] == "—"
    assert "**Search fits that did not converge** (not converged/recorded per unit in " \
           "brackets): a 1/6 in 1/6 units (toy rep 3 (1/1))" in md
    data = json.loads(to_json(lb))
    row = {r["model"]: r for r in data["rows"]}["a"]["search"]
    assert row["degenerate"] == 2 and row["failed_fits"] == 2
    units = {(u["model"], u["rep"]): u for u in data["units"]}
    assert units[("a", 0)]["degenerate"] is True and units[("old", 0)]["degenerate"] is None
    assert units[("a", 3)]["selected_fit_converged"] is False
    assert units[("a", 4)]["failed_fits"] == 2
    csv = to_csv(lb)
    assert ("degenerate,selected_fit_not_converged,refit_not_converged,failed_search_fits,"
            "search_fits_not_converged,search_fits_recorded") in csv
    st.close()


def test_both_convergence_columns_read_converged_only(tmp_path):
    """A model that reports convergence in ``diagnostics_["converged"]`` but never sets
    ``converged_``: its selected fit and its refit are both "not recorded", one meaning in
    both columns (the diagnostics do not stand in for the refit's flag)."""
    rows = []
    for r in range(3):
        row, scores = _search_unit("diag", r, 0.9, selected=None, refit=None)
        row["diagnostics"]["converged"] = True
        rows.append((row, scores))
    st = make_store(tmp_path / "c.sqlite", rows)
    lb = build_leaderboard(st, "toy")
    s = lb.row("diag").search
    assert (s.selected_not_converged, s.selected_converged_unknown) == (0, 3)
    assert (s.refit_not_converged, s.refit_converged_unknown) == (0, 3)
    lines = to_markdown(lb).splitlines()
    cells = [[c.strip() for c in ln.strip().strip("|").split("|")] for ln in lines
             if ln.startswith("| model") or ln.startswith("| diag")]
    table = dict(zip(*cells))
    assert table["selected fit not converged"] == table["refit not converged"] == "not recorded"
    st.close()


def test_machines_name_their_cpu_and_units_without_one_are_kept_apart(tmp_path):
    # two CPUs behind one host name (a machine replaced between sessions): the
    # provenance lists them apart, with the CPU where the units recorded it
    rows = [unit("stl", r, 0.7) for r in range(3)]
    rows += [unit("best", r, 0.8, extra={"versions": {
        "mtlbench": "0.1.0", "plugin": "mtlbench 0.1.0", "cpu_count": "2",
        "platform": "Linux-test", "cpu": "AMD EPYC, AVX-512"}}) for r in range(3)]
    with make_store(tmp_path / "s.sqlite", rows) as st:
        lb = build_leaderboard(st, "toy")
    machines = {(m.cpu, m.units) for m in lb.provenance.machines}
    assert machines == {(None, 3), ("AMD EPYC, AVX-512", 3)}
    text = to_markdown(lb)
    assert "testhost (2 CPUs, AMD EPYC, AVX-512, Linux-test; 3 units)" in text
    assert "testhost (2 CPUs, Linux-test; 3 units)" in text
    back = json.loads(to_json(lb))
    assert [m.get("cpu") for m in back["provenance"]["machines"]] in (
        [None, "AMD EPYC, AVX-512"], ["AMD EPYC, AVX-512", None])   # no key where not recorded


def test_a_unit_records_the_cpu_it_ran_on():
    from mtlbench.runner.unit import cpu_description, versions

    cpu = cpu_description()
    assert isinstance(cpu, str) and cpu
    assert versions()["cpu"] == cpu


def test_notes_name_models_the_arithmetic_rerun_found_sensitive(tmp_path):
    """The table beside the store (scripts/rerun_arithmetic.py --table) gives a note for a
    model whose units changed under another BLAS kernel, only while its stored units carry
    the code fingerprint that was measured; a model that reproduced gets none."""
    from mtlbench.report.arithmetic import ARITHMETIC_TABLE_SUFFIX

    prov = {"provenance": {"model": {"code": "c1"}}}
    rows = [unit(m, r, 0.8 + 0.01 * r, extra=prov) for m in ("best", "stl") for r in range(3)]
    st = make_store(tmp_path / "s.sqlite", rows)
    table = {"kernels": ["SkylakeX", "Haswell"], "models": {
        "best": {"toy": {"units": 3, "selection_differs": 1, "max_test_diff": 0.004,
                         "code": "c1"}},
        "stl": {"toy": {"units": 3, "selection_differs": 0, "max_test_diff": 0.0,
                        "code": "c1"}}}}
    side = (tmp_path / "s.sqlite").with_suffix(ARITHMETIC_TABLE_SUFFIX)
    side.write_text(json.dumps(table))
    notes = [n for n in build_leaderboard(st, "toy").notes if "floating-point" in n]
    assert len(notes) == 1 and notes[0].startswith("best: ") and "1 of 3" in notes[0], notes
    table["models"]["best"]["toy"]["code"] = "c0"          # measured on other code
    side.write_text(json.dumps(table))
    assert not [n for n in build_leaderboard(st, "toy").notes if "floating-point" in n]
    st.close()
