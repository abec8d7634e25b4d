"""One selection rule for results, leaderboard and publish."""
from __future__ import annotations

import json

import numpy as np
import pytest
from click.testing import CliRunner

from mtlbench.cli import cli
from mtlbench.plugins import get_registry
from mtlbench.report.leaderboard import SORT_HEADER, build_leaderboard, to_markdown
from mtlbench.report.select import select_units
from mtlbench.store import ResultStore

TASKS = [f"u{i}" for i in range(4)]


@pytest.fixture(autouse=True)
def stl_is_the_baseline(monkeypatch):
    monkeypatch.setattr(get_registry().model_class("stl"), "is_baseline", True, raising=False)


def unit(model, rep, auc, *, seed=0, reps=3, space=None, dataset="toy", problem=None,
         status="ok", finished="2024-01-02T00:00:00+00:00", plugin="mtlbench 0.1.0", key=None):
    problem = problem or dataset
    row = {"key": key or f"{model}-{dataset}-{problem}-{seed}-{rep}-{json.dumps(space)}",
           "model": model, "dataset": dataset, "problem": problem, "rep": rep, "seed": seed,
           "status": status, "test_auc": auc if status == "ok" else None,
           "protocol": {"seed": seed, "test_fraction": 0.15, "val_fraction": 0.2,
                        "protocol_version": 1, "reps": reps},
           "dataset_params": {}, "model_config": {"name": model, "fixed": {},
                                                  "space": space or {"lam": [1.0]}},
           "versions": {"mtlbench": "0.1.0", "plugin": plugin}, "host": "h", "time_total": 1.0,
           "split_fingerprint": f"fp-{problem}-{seed}-{rep}", "data_fingerprint": "d",
           "started_at": finished, "finished_at": finished,
           "message": None if status == "ok" else "RuntimeError: boom",
           "traceback": None if status == "ok" else "Traceback (most recent call last):\n"
                                                     "  File \"x.py\", line 1\nRuntimeError: boom"}
    scores = [(i, n, auc, 10) for i, n in enumerate(TASKS)] if status == "ok" else []
    return row, scores


def make(path, rows):
    st = ResultStore(path)
    for row, scores in rows:
        st.write_unit(row, scores)
    return st


def _mixed_store(path):
    """The issue's store: model a has 3 reps of seed 0 (current space), 2 reps of seed 1,
    and 5 reps of seed 0 under an older search space, finished earlier."""
    rows = []
    for r in range(3):
        rows.append(unit("a", r, 0.85 + 0.01 * r, space={"lam": [0.1, 1.0]}))
        rows.append(unit("stl", r, 0.80 + 0.01 * r))
    for r in range(2):
        rows.append(unit("a", r, 0.95, seed=1))
    for r in range(5):
        rows.append(unit("a", r, 0.70, space={"lam": [1.0, 10.0]}, reps=5,
                         finished="2024-01-01T00:00:00+00:00"))
    return make(path, rows)


def test_results_and_leaderboard_agree_and_say_what_was_left_out(tmp_path):
    st = _mixed_store(tmp_path / "m.sqlite")
    sel = select_units(st, "toy")
    a = sel.units[sel.units["model"] == "a"]
    assert sorted(a["rep"]) == [0, 1, 2] and set(a["seed"]) == {0}
    assert sel.left_out == {"other seeds": 2, "older configuration or code": 5}
    lb = build_leaderboard(st, "toy")
    cell = {r["model"]: r["cells"]["toy"] for r in lb["rows"]}["a"]
    assert cell["n"] == 3 and cell["mean"] == pytest.approx(86.0)
    res = CliRunner().invoke(cli, ["results", "--store", str(st.path), "--format", "json"])
    assert res.exit_code == 0, res.output
    data = json.loads(res.output)
    row = next(r for r in data["results"] if r["model"] == "a")
    assert row["test_auc_mean_x100"] == pytest.approx(cell["mean"]) and row["reps"] == 3
    assert data["left_out"] == sel.left_out
    text = CliRunner().invoke(cli, ["results", "--store", str(st.path)]).output
    assert "left out: 2 unit(s) of other seeds; 5 unit(s) of older configuration or code" in text
    md = to_markdown(lb)
    assert "left out 2 unit(s) of seed 1" in md and "older search space" in md
    # --seed on both shows the other seed, the same way
    res = CliRunner().invoke(cli, ["results", "--store", str(st.path), "--seed", "1",
                                   "--format", "json"])
    row = next(r for r in json.loads(res.output)["results"] if r["model"] == "a")
    assert row["test_auc_mean_x100"] == pytest.approx(95.0) and row["reps"] == 2
    res = CliRunner().invoke(cli, ["leaderboard", "--dataset", "toy", "--store", str(st.path),
                                   "--seed", "1", "--format", "json"])
    lb1 = json.loads(res.output)
    assert lb1["seed"] == 1 and lb1["models"] == ["a"]
    # --models filters both
    res = CliRunner().invoke(cli, ["results", "--store", str(st.path), "--models", "stl",
                                   "--format", "csv"])
    assert res.exit_code == 0 and "stl" in res.output and "\ntoy,toy,a," not in res.output
    st.close()


def test_partial_run_shows_planned_vs_finished_and_names_absent_models(tmp_path):
    rows = []
    for r in range(5):
        rows.append(unit("a", r, 0.9, reps=5))
        rows.append(unit("stl", r, 0.8, reps=5))
    rows += [unit("b", r, 0.85, reps=5) for r in range(2)]            # interrupted
    rows += [unit(m, r, 0.8, reps=5, dataset="other") for m in ("a", "c") for r in range(5)]
    st = make(tmp_path / "p.sqlite", rows)
    lb = build_leaderboard(st, "toy")
    by = {r["model"]: r for r in lb["rows"]}
    assert (by["b"]["planned_units"], by["b"]["finished_units"], by["b"]["missing_units"]) == \
        (5, 2, 3)
    assert lb["absent_models"] == ["c"] and lb["complete"] is False
    md = to_markdown(lb)
    assert "**Incomplete run:** 12 of 15 planned units" in md
    assert "models without any unit: c" in md
    assert "| b ⚠" in md and "2/5" in md
    # the planned set can be passed: a named model without units is missing too
    res = CliRunner().invoke(cli, ["leaderboard", "--dataset", "toy", "--store", str(st.path),
                                   "--models", "a,b,stl,zz", "--format", "json"])
    assert res.exit_code == 0, res.output
    assert json.loads(res.output)["absent_models"] == ["zz"]
    st.close()


def test_sort_key_in_header_chance_flag_and_failure_tracebacks(tmp_path):
    rows = []
    for r in range(4):
        rows.append(unit("a", r, 0.9))
        rows.append(unit("coin", r, 0.51))
        rows.append(unit("stl", r, 0.8))
    rows.append(unit("broken", 0, None, status="failed"))
    st = make(tmp_path / "c.sqlite", rows)
    md = to_markdown(build_leaderboard(st, "toy"))
    header = next(ln for ln in md.splitlines() if ln.startswith("| model"))
    assert SORT_HEADER in header and "grid edge" not in header
    for col in ("budget (fits/unit)", "at bound", "not converged", "units done/planned"):
        assert col in header
    assert "| coin ≈" in md and "within 2 points of 50" in md
    runner = CliRunner()
    res = runner.invoke(cli, ["results", "--store", str(st.path), "--failures"])
    assert "failed broken toy rep 0: RuntimeError: boom" in res.output
    assert "Traceback" not in res.output
    res = runner.invoke(cli, ["results", "--store", str(st.path), "--failures", "--traceback"])
    assert res.exit_code == 0 and "Traceback (most recent call last)" in res.output
    st.close()


def test_latest_code_per_label_wins(tmp_path):
    rows = [unit("a", r, 0.7, plugin="pkg 0.2.0", finished="2024-01-01T00:00:00+00:00")
            for r in range(3)]
    rows += [unit("a", r, 0.9, plugin="pkg 0.2.1", key=f"new-{r}") for r in range(3)]
    st = make(tmp_path / "v.sqlite", rows)
    sel = select_units(st, "toy")
    assert np.allclose(sel.units["test_auc"], 0.9)
    assert sel.left_out == {"older configuration or code": 3}
    st.close()


def test_unknown_seed_or_model_is_a_clear_error(tmp_path):
    st = make(tmp_path / "e.sqlite", [unit("a", 0, 0.9)])
    res = CliRunner().invoke(cli, ["leaderboard", "--dataset", "toy", "--store", str(st.path),
                                   "--seed", "9"])
    assert res.exit_code == 2 and "no results with seed 9" in res.output
    res = CliRunner().invoke(cli, ["results", "--store", str(st.path), "--models", ""])
    assert res.exit_code == 2 and "--models is empty" in res.output
    st.close()


def test_the_report_package_names_no_plugin():
    """Roles come from what models declare, so no model or dataset name, and no
    import of the built-in plugin packages, appears in mtlbench/report."""
    import ast
    from pathlib import Path

    import mtlbench.report

    reg = get_registry()
    names = set(reg.model_names) | set(reg.dataset_names)
    found = []
    for path in Path(mtlbench.report.__file__).parent.glob("*.py"):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) \
                    and node.value in names:
                found.append(f"{path.name}:{node.lineno} {node.value!r}")
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                mods = [a.name for a in node.names] if isinstance(node, ast.Import) \
                    else [node.module or ""]
                found += [f"{path.name}:{node.lineno} import {m}" for m in mods
                          if m.startswith(("mtlbench_models", "mtlbench_datasets"))
                          or m in ("cli", "mtlbench.cli")  # the CLI hands its tools down
                          or (isinstance(node, ast.ImportFrom) and node.level == 2
                              and m == "cli")]
    assert not found, found


def test_model_roles_are_declared_on_the_contract():
    from mtlbench.model import MTLModel

    assert MTLModel.is_baseline is False and MTLModel.ablation_of is None
    assert MTLModel.ablation_label == ""


# ------------------------------------------------------------------ properties
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st_  # noqa: E402

_unit_st = st_.tuples(st_.sampled_from(["a", "b", "stl"]), st_.integers(0, 3),
                      st_.sampled_from([0, 1]), st_.sampled_from([1.0, 2.0]),
                      st_.floats(0.5, 1.0), st_.sampled_from(["ok", "ok", "failed"]),
                      st_.integers(0, 9))


@settings(max_examples=25, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st_.lists(_unit_st, min_size=1, max_size=25))
def test_selection_partitions_the_store_and_results_equal_the_leaderboard(tmp_path_factory,
                                                                          specs):
    """Every unit is either kept or counted as left out; the kept units hold one seed, one
    unit per (model, problem, rep) and, per model, one configuration; results and the
    leaderboard report the same means over the same units."""
    from mtlbench.report import results_frame

    path = tmp_path_factory.mktemp("prop") / "s.sqlite"
    rows = {}
    for model, rep, seed, lam, auc, status, minute in specs:
        row, scores = unit(model, rep, auc, seed=seed, space={"lam": [lam]}, reps=4,
                           status=status, finished=f"2024-01-01T00:{minute:02d}:00+00:00")
        rows[row["key"]] = (row, scores)  # a key written twice keeps the last write
    store = make(path, list(rows.values()))
    sel = select_units(store, "toy")
    kept = sel.units
    assert len(kept) + sum(sel.left_out.values()) == len(rows)
    assert kept["seed"].nunique() == 1
    assert not kept.duplicated(["model", "problem", "rep"]).any()
    for _, g in kept.groupby("model"):
        assert g["model_config"].map(json.dumps).nunique() == 1
    lb = build_leaderboard(store, "toy", selection=sel)
    res = results_frame(sel)
    for r in lb["rows"]:
        c = r["cells"]["toy"]
        got = res[res["model"] == r["model"]].iloc[0]
        assert got["reps"] == c["n"] and got["failed"] == c["failed"]
        if c["mean"] is None:
            assert got["test_auc_mean_x100"] is None or np.isnan(got["test_auc_mean_x100"])
        else:
            assert got["test_auc_mean_x100"] == pytest.approx(c["mean"], rel=1e-12)
        assert r["finished_units"] + r["failed"] + r["missing_units"] == r["planned_units"]
    store.close()


@given(st_.lists(st_.floats(0.0, 1.0), min_size=1, max_size=12))
def test_holm_is_monotone_and_never_below_the_raw_p(ps):
    from mtlbench.report.stats import holm

    adj = np.array(holm(ps))
    raw = np.array(ps)
    assert np.all(adj >= raw - 1e-15) and np.all(adj <= 1.0)
    order = np.argsort(raw, kind="stable")
    assert np.all(np.diff(adj[order]) >= -1e-15)
