"""The solver race: reference optima, suboptimality levels, solver agreement, models
without progress reports, the store's races table, and the command line end to end."""
from __future__ import annotations

import json
import sqlite3

import numpy as np
import pytest
from click.testing import CliRunner

from mtlbench import LinearMTLModel, Log, report_progress
from mtlbench import race as rc
from mtlbench.cli import cli
from mtlbench.plugins import get_registry
from mtlbench.protocol import ProtocolConfig
from mtlbench.store import SCHEMA_VERSION, ResultStore
from mtlbench_models.stl import ridge_gap, ridge_objective, ridge_solve

from conftest import small_problem


# ------------------------------------------------------------------------- toy models
class ToyRidge(LinearMTLModel):
    """Per-task ridge, exact, with the ridge duality gap as certificate."""

    name = "toy-ridge"
    convex = True
    solver_name = "exact"
    solver_agreement_rtol = 1e-8
    search_space = {"lam": Log([0.5, 1.0, 2.0], low=0.0)}

    def __init__(self, lam: float = 1.0):
        self.lam = lam

    def fit(self, tasks, init=None):
        W = np.zeros((tasks.d, tasks.T))
        for t in range(tasks.T):
            W[:, t] = ridge_solve(tasks.X(t), tasks.y(t), self.lam)
            report_progress(t + 1, lambda: ridge_objective(tasks, W, self.lam),
                            lambda: ridge_gap(tasks, W, self.lam))
        self.coef_ = W
        return self

    def fitted_objective(self, tasks):
        return ridge_objective(tasks, self.coef_, self.lam)


class StallingRidge(ToyRidge):
    """Iterates that converge to the ridge solution of a 20% larger weight: the objective
    stalls above the optimum, and no certificate is reported."""

    def fit(self, tasks, init=None):
        target = np.column_stack([ridge_solve(tasks.X(t), tasks.y(t), 1.2 * self.lam)
                                  for t in range(tasks.T)])
        for k in range(1, 40):
            W = (1.0 - 0.7 ** k) * target
            report_progress(k, ridge_objective(tasks, W, self.lam))
        self.coef_ = target
        return self


ToyRidge.solvers = {"stalls": StallingRidge}


class NoProgress(ToyRidge):
    """A third-party model that reports nothing; its final objective comes from
    objective_history_ (no fitted_objective)."""

    name = "no-progress"
    fitted_objective = None   # not provided

    def fit(self, tasks, init=None):
        self.coef_ = np.column_stack([ridge_solve(tasks.X(t), tasks.y(t), self.lam)
                                      for t in range(tasks.T)])
        self.objective_history_ = [ridge_objective(tasks, self.coef_, self.lam)]
        return self


class Silent(NoProgress):
    """Neither progress nor any objective: listed with its time only."""

    name = "silent"

    def fit(self, tasks, init=None):
        super().fit(tasks)
        del self.objective_history_
        return self


class _Registry:
    def __init__(self, *classes):
        self.classes = {c.name: c for c in classes}

    def model_class(self, name):
        return self.classes[name]


def _race(registry, selectors, tasks, **kw):
    sel = rc.race_selections(registry, selectors, problem="p", rep=0, seed=0)
    info = {"dataset_params": {}, "split_fingerprint": "s", "data_fingerprint": "d"}
    return rc.run_race(registry, rc.race_entries(registry, sel), tasks, dataset="p",
                       problem="p", rep=0, config=ProtocolConfig(), info=info,
                       isolated=False, **kw)


# ------------------------------------------------------------------------- analysis
def test_a_solver_that_stalls_above_the_optimum_does_not_reach_1e_6():
    tasks = small_problem(T=4, n=30, d=6)
    result = _race(_Registry(ToyRidge), ["toy-ridge"], tasks)
    ref = result.references["toy-ridge[lam=1.0]"]
    assert ref.kind == "certified" and ref.certified_to < 1e-12
    rows = {r["solver"]: r for r in rc.race_rows(result)}
    exact, stalled = rows["exact"], rows["stalls"]
    assert all(exact["levels"][k] is not None for k in ("1e-02", "1e-04", "1e-06"))
    assert stalled["levels"]["1e-02"] is not None      # it does get close...
    assert stalled["levels"]["1e-06"] is None           # ...but never within 1e-6
    sub = (stalled["final_objective"] - ref.value) / ref.value
    assert sub > 1e-6
    agr = result.agreements["toy-ridge[lam=1.0]"]
    assert agr["ok"] is False and "DO NOT AGREE" in agr["message"]


def test_two_solvers_of_one_convex_objective_agree():
    """LASSO (homotopy and scikit-learn's coordinate descent) to 1e-8 relative, rMTFL (FISTA
    and the cvxpy conic program) to its stated 2e-6, each certified by a duality gap."""
    tasks = small_problem(T=4, n=30, d=12)
    result = _race(get_registry(), ["lasso[rho_ratio=0.05]", "rmtfl"], tasks)
    for label, rtol in (("lasso[rho_ratio=0.05]", 1e-8),
                        ("rmtfl[lam1_ratio=0.3,lam2_ratio=0.5]", 2e-6)):
        agr = result.agreements[label]
        assert agr["ok"] is True and agr["rtol"] == rtol and agr["spread"] <= rtol, agr
        assert len(agr["finals"]) == 2
        assert result.references[label].kind == "certified"
    for r in rc.race_rows(result):
        assert r["status"] == "ok" and r["converged"] is True
        assert r["levels"]["1e-06"] is not None


def test_a_model_without_progress_races_with_its_final_point():
    tasks = small_problem(T=3, n=30, d=5)
    result = _race(_Registry(NoProgress, Silent), ["no-progress", "silent"], tasks)
    rows = {r["model_name"]: r for r in rc.race_rows(result)}
    np_row = rows["no-progress"]
    assert np_row["status"] == "ok" and np_row["objective_source"] == "objective_history_"
    assert len(np_row["curve"]["time"]) == 1
    assert np_row["curve"]["objective"] == [np_row["final_objective"]]
    assert np_row["curve"]["time"] == [np_row["elapsed"]]
    # convex, but neither a certificate nor a second solver: best found, with a note
    ref = result.references[np_row["model"]]
    assert ref.kind == "best found" and "no certificate and no second solver" in ref.note
    silent = rows["silent"]
    assert silent["status"] == "ok" and silent["final_objective"] is None
    assert silent["curve"]["time"] == [] and silent["elapsed"] > 0
    assert result.references[silent["model"]].kind == "none"
    assert all(v is None for v in silent["levels"].values())


def test_reference_runs_tighten_tolerances_and_lengthen_caps():
    class Iterative(NoProgress):
        name = "iterative"
        convex = False

        def __init__(self, lam=1.0, tol=1e-6, max_iter=100, seed=3, verbose=False):
            self.lam, self.tol, self.max_iter, self.seed, self.verbose = \
                lam, tol, max_iter, seed, verbose

    entry = rc.RaceEntry("iterative", "iterative[lam=1.0]", {"lam": 1.0}, {"lam": "centre"},
                         "exact")
    variants = rc.reference_variants(Iterative, entry)
    assert [v.params for v in variants] == [
        {"lam": 1.0, "tol": 1e-8, "max_iter": 1000}, {"lam": 1.0, "seed": 4},
        {"lam": 1.0, "seed": 5}]
    assert all(v.role == "reference" for v in variants)
    assert variants[0].variant == "max_iter*10, tol/100"
    # a non-convex model's reference is best found, including its reference runs
    tasks = small_problem(T=3, n=30, d=5)
    result = _race(_Registry(Iterative), ["iterative"], tasks)
    assert result.references["iterative[lam=1.0]"].kind == "best found"
    assert [r.entry.role for r in result.runs].count("reference") == 3


def test_selection_precedence_given_then_store_then_centre(tmp_path):
    assert rc.centre_params(ToyRidge) == {"lam": 1.0}          # sqrt(0.5 * 2)
    assert rc.centre_params(get_registry().model_class("lasso")) == {"rho_ratio": 0.03}
    # bounds read the problem and the other values: TFCL's k <= d + T, lam_group <= 1/k
    tfcl = get_registry().model_class("tfcl")
    ctx = {"d": 1, "T": 2, "n_min": 5, "n_max": 9}
    assert rc.centre_params(tfcl, {**ctx, "d": 50})["k"] == 4      # sqrt(2 * 8)
    assert rc.centre_params(tfcl, ctx)["k"] == 3                   # clipped to d + T
    big = {**ctx, "d": 50}                                         # k <= 52
    assert rc.centre_params(tfcl, big, decided={"k": 52}) == {
        "lam_group": pytest.approx(1.0 / 52, rel=1e-12), "lam_ridge": 0.0316227766017}
    reg = _Registry(ToyRidge)
    with ResultStore(tmp_path / "s.sqlite") as store:
        store.write_unit({"key": "k1", "model": "toy-ridge", "dataset": "p", "problem": "p",
                          "rep": 0, "seed": 0, "status": "ok", "best_params": {"lam": 2.0},
                          "model_config": {"name": "toy-ridge", "fixed": {}, "space": {}},
                          "split_fingerprint": "s", "finished_at": "2026-01-01"})
        [(_, label, params, origin, note)] = rc.race_selections(
            reg, ["toy-ridge"], problem="p", rep=0, seed=0, store=store, split_fingerprint="s")
        assert params == {"lam": 2.0} and origin == {"lam": "store"} and "unit k1" in note
        [(_, label, params, origin, _)] = rc.race_selections(
            reg, ["toy-ridge[lam=0.5]"], problem="p", rep=0, seed=0, store=store)
        assert params == {"lam": 0.5} and origin == {"lam": "given"}
        [(_, _, params, origin, note)] = rc.race_selections(
            reg, ["toy-ridge"], problem="p", rep=1, seed=0, store=store)
        assert origin == {"lam": "centre"} and "no finished unit" in note
        with pytest.raises(Exception, match="another split"):
            rc.race_selections(reg, ["toy-ridge"], problem="p", rep=0, seed=0, store=store,
                               split_fingerprint="other")
    with pytest.raises(Exception, match="one point per model"):
        rc.race_selections(reg, ["toy-ridge[lam=[1,2]]"], problem="p", rep=0, seed=0)


# ------------------------------------------------------------------------- the store
def test_race_table_round_trip_and_schema(tmp_path):
    tasks = small_problem(T=3, n=30, d=5)
    result = _race(_Registry(ToyRidge), ["toy-ridge"], tasks)
    rows = rc.race_rows(result)
    path = tmp_path / "r.sqlite"
    with ResultStore(path) as store:
        store.write_race(rows)
        back = store.races().to_dict(orient="records")
    con = sqlite3.connect(path)
    assert con.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
    con.close()
    assert len(back) == len(rows)
    by_solver = {r["solver"]: r for r in back}
    for r in rows:
        b = by_solver[r["solver"]]
        for col in ("key", "race", "model", "params", "origin", "curve", "levels", "reference",
                    "agreement", "final_objective", "converged", "n_iter", "certificate",
                    "versions", "status"):
            assert b[col] == r[col], col
    # a store of the previous layout gains the table when opened for writing
    old = tmp_path / "old.sqlite"
    with ResultStore(old):
        pass
    con = sqlite3.connect(old)
    con.execute("DROP TABLE races")
    con.execute("PRAGMA user_version = 2")
    con.commit()
    con.close()
    with ResultStore(old, readonly=True) as ro:
        assert ro.races().empty
    with ResultStore(old) as rw:
        rw.write_race(rows)
        assert len(rw.races()) == len(rows)


# ------------------------------------------------------------------------- built-in clocks
def test_builtin_convex_models_certify_their_final_point():
    from mtlbench.progress import ProgressRecorder

    tasks = small_problem(T=4, n=30, d=8)
    reg = get_registry()
    for sel in ("stl", "lasso", "rmtfl"):
        rec = ProgressRecorder()
        with rec.recording():
            m = reg.model_class(sel)().fit(tasks)
        last = rec.points[-1]
        F = m.fitted_objective(tasks)
        assert last.objective == pytest.approx(F, rel=1e-9), sel
        assert last.certificate is not None and 0 <= last.certificate <= 1e-5 * abs(F), sel


# ------------------------------------------------------------------------- processes
@pytest.mark.slow
def test_race_objective_values_are_bit_identical_across_runs():
    tasks = small_problem(T=4, n=30, d=12)
    reg = get_registry()

    def objectives():
        sel = rc.race_selections(reg, ["lasso[rho_ratio=0.02]", "rmtfl"], problem="p", rep=0,
                                 seed=0)
        entries = [e for e in rc.race_entries(reg, sel) if e.solver != "cvxpy"]
        return [(r.entry.solver, [p["objective"] for p in r.points], r.final_objective)
                for r in (rc.run_entry(reg, e, tasks, timeout=120) for e in entries)]

    first, second = objectives(), objectives()
    assert first == second
    assert all(len(pts) > 1 for _, pts, _ in first)


@pytest.mark.slow
def test_cli_race_end_to_end_with_crashes_hangs_and_publish(tmp_path, monkeypatch):
    import fault_plugins
    from mtlbench.runner import load_problem
    from plugin_fixtures import activate

    root = fault_plugins.install(tmp_path / "faulty-dist")
    activate(monkeypatch, root)
    load_problem.cache_clear()
    monkeypatch.setenv("COLUMNS", "220")
    monkeypatch.chdir(tmp_path)
    store = str(tmp_path / "s.sqlite")
    runner = CliRunner()
    res = runner.invoke(cli, ["compare", "--datasets", "tiny", "--models", "stl,lasso",
                              "--reps", "1", "--store", store])
    assert res.exit_code == 0, res.output
    res = runner.invoke(cli, ["race", "--dataset", "tiny", "-m", "stl,lasso",
                              "-m", "f-good,f-exit", "-m", "f-hang", "--timeout", "5",
                              "--from-store", store, "--figures", str(tmp_path / "figs")])
    assert res.exit_code == 0, res.output
    out = res.output
    assert "homotopy and sklearn-cd agree" in out
    assert "stl[lam=" in out and "store" in out
    assert "exited with code 3" in out and "stopped at the time limit of 5 s" in out
    assert (tmp_path / "figs" / "race-tiny-rep0.png").is_file()
    with ResultStore(store) as rs:
        races = rs.races()
    status = dict(zip(races["model"] + "/" + races["solver"], races["status"]))
    assert status["f-exit/default"] == "failed" and status["f-hang/default"] == rc.STOPPED
    assert status["f-good/default"] == "ok"          # listed with its time only
    good = races[races["model"] == "f-good"].iloc[0]
    assert good["final_objective"] is None and good["elapsed"] > 0
    # json output: the same rows, with references and agreements
    res = runner.invoke(cli, ["race", "--dataset", "tiny", "-m", "lasso[rho_ratio=0.1]",
                              "--store", store, "--format", "json"])
    assert res.exit_code == 0, res.output
    assert not (tmp_path / "results").exists()   # no figure unless --figures DIR
    doc = json.loads(res.stdout)
    assert doc["format"] == rc.RACE_FORMAT
    assert doc["agreements"]["lasso[rho_ratio=0.1]"]["ok"] is True
    assert {r["solver"] for r in doc["runs"]} == {"homotopy", "sklearn-cd"}
    # publish draws the race figure of the dataset
    res = runner.invoke(cli, ["publish", "--store", store, "--out", str(tmp_path / "pub")])
    assert res.exit_code == 0, res.output
    md = (tmp_path / "pub" / "tiny.md").read_text()
    assert "Solver race (tiny)" in md and (tmp_path / "pub" / "figures" /
                                          "tiny-race.png").is_file()
    load_problem.cache_clear()


@pytest.mark.slow
def test_a_run_stopped_at_its_time_limit_keeps_its_curve_and_the_figure_says_so(
        tmp_path, monkeypatch):
    """A solver still running at ``--timeout`` is stopped with the points it reported: status
    "stopped", timed up to its last point, drawn with its last point crossed and "stopped at
    the time limit" in its legend; a run that cannot be drawn is named under its panel."""
    import fault_plugins
    from mtlbench.report.race_figures import STOPPED_TEXT, race_plot
    from plugin_fixtures import activate

    activate(monkeypatch, fault_plugins.install(tmp_path / "faulty-dist"))
    reg = get_registry()
    tasks = small_problem(T=3, n=20, d=4)
    exits = rc.run_entry(reg, rc.RaceEntry("f-exit", "f-crawl", {}, {}, "default"), tasks,
                         timeout=60.0)   # also starts the worker processes' server
    assert exits.status == "failed" and exits.points == []
    crawl = rc.RaceEntry("f-crawl", "f-crawl", {"seconds": 60.0}, {}, "default")
    run = rc.run_entry(reg, crawl, tasks, timeout=4.0)
    assert run.status == rc.STOPPED and "stopped at the time limit of 4 s" in run.message
    its = [p["iteration"] for p in run.points]
    assert len(its) >= 10 and its == list(range(1, len(its) + 1)), its
    assert run.elapsed == run.points[-1]["time"] < 4.0
    assert run.points[-1]["objective"] == pytest.approx(1.0 + 1.0 / its[-1])
    ref = rc.reference_optimum([run, exits], convex=False)
    assert ref.kind == "best found" and ref.value == run.points[-1]["objective"]
    # a stopped run reaches the levels its curve reached, and is drawn and marked
    tenth = run.points[9]
    assert rc.level_times(run, rc.Reference(tenth["objective"] / 1.005, "best found"))[
        "1e-02"] == tenth["time"]
    result = rc.RaceResult(dataset="tiny", problem="tiny", rep=0, seed=0,
                           config=ProtocolConfig(), dataset_params={}, split_fingerprint="s",
                           data_fingerprint="d", summary={}, runs=[run, exits],
                           references={"f-crawl": ref}, agreements={}, provenance={},
                           versions={})
    rows = rc.race_rows(result)
    assert [r["status"] for r in rows] == [rc.STOPPED, "failed"]
    assert len(rows[0]["curve"]["time"]) == len(run.points)
    svg = race_plot(rows, tmp_path / "race.svg").read_text()
    assert f"default ({STOPPED_TEXT})" in svg
    assert "not drawn: default: failed (its process exited with code 3" in svg
