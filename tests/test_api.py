"""The Python API (mtlbench.compare / plan / load_results) and the notebook-style example."""
from __future__ import annotations

import os
import runpy
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

import mtlbench
from mtlbench import api
from mtlbench.cli import cli
from mtlbench.errors import ConfigError, UnknownNameError

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    store = tmp_path_factory.mktemp("api") / "r.sqlite"
    seen = []
    res = mtlbench.compare(["simulated"], "lasso,stl", reps=2, store=store,
                           on_result=lambda r: seen.append((r.row["model"], r.row["rep"])))
    return res, store, seen


def test_compare_returns_frames(run):
    res, store, seen = run
    assert sorted(seen) == [("lasso", 0), ("lasso", 1), ("stl", 0), ("stl", 1)]
    assert res.report.ran == 4 and res.report.failed == 0
    units = res.to_frame()
    assert len(units) == 4 and set(units["status"]) == {"ok"}
    assert {"model", "problem", "rep", "test_auc_x100", "val_auc_x100", "best_params",
            "split_fingerprint"} <= set(units) and "test_auc" not in units
    tasks = res.to_frame(level="task")
    assert len(tasks) == 4 * 100  # 100 simulated users per unit
    # the unit's score is the mean of its tasks' AUCs; one scale (x 100) in every frame
    for key, g in tasks.groupby("key"):
        want = units.loc[units["key"] == key, "test_auc_x100"].item()
        assert abs(g["test_auc_x100"].mean() - want) < 1e-10 and 50 < want <= 100
    with pytest.raises(ConfigError, match="level"):
        res.to_frame(level="user")


def test_summary_and_leaderboard(run):
    res, _, _ = run
    s = res.summary()
    assert sorted(s["model"]) == ["lasso", "stl"] and set(s["reps"]) == {2}
    board = res.leaderboard()
    assert set(board["model"]) == {"lasso", "stl"} and set(board["dataset"]) == {"simulated"}
    for _, r in board.iterrows():  # the same float as the leaderboard's, not only close
        assert r["mean_auc_x100"] == s.loc[s["model"] == r["model"], "test_auc_mean_x100"].item()
    assert "lasso" in res._repr_html_()


def test_rerun_computes_nothing_and_matches_the_cli(run):
    res, store, _ = run
    again = mtlbench.compare(["simulated"], ["lasso", "stl"], reps=2, store=store)
    assert again.report.ran == 0 and again.report.skipped == 4
    out = CliRunner().invoke(cli, ["compare", "--models", "lasso,stl", "--reps", "2",
                                   "--store", str(store)])
    assert out.exit_code == 0 and "ran 0 unit(s)" in out.output  # CLI and API: same units


def test_load_results(run):
    res, store, _ = run
    loaded = mtlbench.load_results(store)
    assert len(loaded.to_frame()) == 4
    only = mtlbench.load_results(store, models=["stl"], datasets=["simulated"])
    assert set(only.to_frame()["model"]) == {"stl"} and len(only) == 2
    with pytest.raises(ConfigError, match="no results store"):
        mtlbench.load_results(Path(store).parent / "missing.sqlite")


def test_plan_is_a_dry_run_with_an_estimate(run):
    _, store, _ = run
    p = api.plan("simulated", ["lasso", "stl"], reps=4, store=store, jobs=2)
    assert len(p.specs) == 8 and len(p.todo) == 4 and p.stored_ok == 4
    est = p.estimate
    assert est.by_source == {"stored": (4, pytest.approx(est.compute_seconds))}
    assert est.workers == 2 and 0 < est.seconds <= est.compute_seconds
    assert "wall time over 2 process(es)" in est.text()
    assert "extrapolated" not in est.text()
    frame = p.units_frame()
    assert frame["will_run"].sum() == 4
    # a fresh store: the same model's times are gone, every unit comes from its cost_hint
    fresh = api.plan("simulated", ["lasso"], reps=1, store=Path(store).parent / "new.sqlite")
    assert set(fresh.estimate.by_source) == {"hint"} and fresh.estimate.seconds > 0
    assert "extrapolated from the model's cost_hint" in fresh.estimate.text()
    # another seed of the data: scaled from the stored problem (same size: same time)
    other = api.plan("simulated[seed=1]", ["lasso"], reps=1, store=store)
    assert set(other.estimate.by_source) == {"scaled"}
    stored = p.expected[next(s.key for s in p.todo if s.label == "lasso")].seconds
    assert other.estimate.compute_seconds == pytest.approx(stored, rel=0.05)


def test_dry_run_cli_prints_plan_and_runs_nothing(run):
    _, store, _ = run
    out = CliRunner().invoke(cli, ["compare", "--models", "lasso,stl", "--reps", "3",
                                   "--store", str(store), "--dry-run", "-j", "2"])
    assert out.exit_code == 0, out.output
    for part in ("dry run", "6 planned unit(s): 2 to run, 4 already in the store",
                 "estimate: about", "nothing was run"):
        assert part in out.output, part
    assert len(mtlbench.load_results(store).to_frame()) == 4


def test_bad_input_is_a_clear_error(tmp_path):
    with pytest.raises(UnknownNameError, match="Did you mean 'lasso'"):
        api.plan("simulated", ["lassso"], reps=1, store=tmp_path / "x.sqlite")
    with pytest.raises(ConfigError, match="empty name"):
        api.plan("simulated", ["lasso", " "], reps=1, store=tmp_path / "x.sqlite")
    with pytest.raises(ConfigError, match="jobs"):
        api.plan("simulated", ["lasso"], reps=1, jobs=0, store=tmp_path / "x.sqlite")


@pytest.mark.slow  # the example script runs a comparison (worker processes)
def test_notebook_example_runs_end_to_end(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("MTLBENCH_EXAMPLE_STORE", str(tmp_path / "demo.sqlite"))
    runpy.run_path(str(ROOT / "examples" / "notebook_api.py"), run_name="__main__")
    res = mtlbench.load_results(tmp_path / "demo.sqlite")
    units = res.to_frame()
    assert len(units) == 4 and set(units["status"]) == {"ok"}
    assert np.all((units["test_auc_x100"] > 50) & (units["test_auc_x100"] <= 100))
    assert not os.path.exists(tmp_path / "results")  # the example never wrote the default store


def test_api_module_is_an_attribute_after_a_bare_import():
    import subprocess
    import sys

    code = "import mtlbench; print(mtlbench.api.plan.__name__)"
    out = subprocess.run([sys.executable, "-c", code],
                         capture_output=True, text=True, check=True).stdout.strip()
    assert out == "plan"
