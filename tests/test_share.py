"""Sharing runs: ``mtlbench merge`` (stores and published files of several machines in one
store) and ``mtlbench best-params`` (a run's selections as a config ``compare --config``
reads back)."""
from __future__ import annotations

import json
import math
import shutil
import sqlite3
import tomllib

import numpy as np
import pytest
from click.testing import CliRunner
from hypothesis import given
from hypothesis import strategies as st

from mtlbench.cli import cli
from mtlbench.errors import ConfigError
from mtlbench.report.best_params import choose_selection, toml_value
from mtlbench.report.merge import merge_stores, plan_merge
from mtlbench.store import ResultStore


def _run(*args):
    res = CliRunner().invoke(cli, [str(a) for a in args])
    return res


@pytest.fixture(scope="module")
def both(tmp_path_factory):
    """Store B: lasso and stl, 2 repetitions each; store A: B's stl units only (the same
    units, computed once)."""
    d = tmp_path_factory.mktemp("merge")
    b = d / "b.sqlite"
    res = _run("compare", "-m", "lasso,stl", "--reps", "2", "-j", "2", "--store", b)
    assert res.exit_code == 0, res.output
    a = d / "a.sqlite"
    shutil.copy(b, a)
    with ResultStore(a) as st_a:
        st_a.delete_units(st_a.units(models=["lasso"])["key"])
    return a, b


def _keys(path):
    with ResultStore(path, readonly=True) as st_:
        return sorted(st_.units()["key"])


def _edit(path, sql, *args):
    con = sqlite3.connect(path)
    with con:
        con.execute(sql, args)
    con.close()


# ------------------------------------------------------------------ merge
def test_merge_gives_the_union_without_duplicates(both, tmp_path):
    a, b = both
    target = tmp_path / "t.sqlite"
    res = _run("merge", a, b, "--store", target)
    assert res.exit_code == 0, res.output
    assert _keys(target) == sorted(set(_keys(a)) | set(_keys(b))) and len(_keys(target)) == 4
    assert "4 unit(s) into" in res.output
    assert "2 also in another source (kept once)" in res.output
    # each unit copied exactly: row, per-task scores, fitted arrays (repetition 0's)
    with ResultStore(b, readonly=True) as sb, ResultStore(target, readonly=True) as stt:
        for key in _keys(b):
            (r1, s1, a1), (r2, s2, a2) = sb.unit_copy(key), stt.unit_copy(key)
            assert r1 == r2 and s1 == s2 and a1.keys() == a2.keys()
            assert all(np.array_equal(a1[n], a2[n]) for n in a1)
        assert any(sb.unit_copy(k)[2] for k in _keys(b))   # arrays were there to copy
    # again: everything is already in the target, nothing is written twice
    res = _run("merge", a, b, "--store", target)
    assert res.exit_code == 0 and "0 unit(s) into" in res.output, res.output
    assert "2 already in the target" in res.output and len(_keys(target)) == 4


def test_merge_reads_published_files_as_import_results_does(both, tmp_path):
    a, b = both
    out = tmp_path / "pub"
    assert _run("publish", "--store", b, "--out", out, "--no-figures").exit_code == 0
    target = tmp_path / "t.sqlite"
    plan = merge_stores([str(a), str(out / "simulated.json")], target, log=lambda s: None)
    assert len(plan.write) == 4 and plan.duplicates == {str(out / "simulated.json"): 2}
    with ResultStore(target, readonly=True) as stt:
        units = stt.units()
    origin = dict(zip(units["model"], units["origin"]))
    assert not isinstance(origin["stl"], str) and origin["lasso"] == "imported"  # computed
    # the file first: a store's copy of the same unit is still the one kept (arrays, history)
    plan = plan_merge([str(out / "simulated.json"), str(a)], tmp_path / "t2.sqlite")
    kept = {rec.model: src.kind for src, _, rec in plan.write}
    assert kept == {"stl": "store", "lasso": "file"}
    assert plan.duplicates == {str(out / "simulated.json"): 2}


def test_a_conflicting_unit_is_refused_and_nothing_is_written(both, tmp_path):
    a, b = both
    c = tmp_path / "c.sqlite"
    shutil.copy(b, c)
    with ResultStore(c, readonly=True) as sc:
        u = sc.units(models=["stl"])
    key = u.loc[u["rep"] == 0, "key"].item()
    _edit(c, "UPDATE units SET best_params = ?, val_auc = 0.5 WHERE key = ?",
          json.dumps({"lam": 7.0}), key)
    target = tmp_path / "t.sqlite"
    res = _run("merge", a, c, "--store", target)
    assert res.exit_code == 2, res.output
    line = " ".join(res.output.split())
    assert "merge refused, nothing was written: unit stl simulated rep 0" in line
    assert f"results in {a} than in {c}" in line
    assert "best_params" in line and '{"lam": 7.0}' in line and "val_auc" in line
    assert "Traceback" not in res.output and not target.exists()
    # against the target's own unit: refused too, the target untouched
    shutil.copy(a, target)
    before = target.read_bytes()
    res = _run("merge", c, "--store", target)
    assert res.exit_code == 2 and "than in" in res.output and f"the target '{target}'" \
        in " ".join(res.output.split())
    assert target.read_bytes() == before


def test_merge_refuses_what_import_results_refuses(both, tmp_path):
    a, _ = both
    bad = tmp_path / "bad.sqlite"
    shutil.copy(a, bad)
    _edit(bad, "UPDATE units SET test_auc = 0.5 WHERE rep = 1")  # no longer the tasks' mean
    with pytest.raises(ConfigError, match=r"refusing to import .*bad.sqlite.*test_auc.*mean"):
        plan_merge([str(bad)], tmp_path / "t.sqlite")
    with pytest.raises(ConfigError, match="is the target store itself"):
        plan_merge([str(a)], a)
    with pytest.raises(ConfigError, match="given twice"):
        plan_merge([str(a), str(a)], tmp_path / "t.sqlite")


def test_failed_units_are_left_out_and_replaced_by_finished_ones(both, tmp_path):
    a, _ = both
    target = tmp_path / "t.sqlite"
    shutil.copy(a, target)
    with ResultStore(target, readonly=True) as stt:
        key = stt.units()["key"].iloc[0]
    _edit(target, "UPDATE units SET status = 'failed', test_auc = NULL WHERE key = ?", key)
    _edit(target, "DELETE FROM task_scores WHERE key = ?", key)
    plan = merge_stores([str(a)], target, log=lambda s: None)
    assert plan.replaced_failed == 1 and len(plan.write) == 1
    with ResultStore(target, readonly=True) as stt:
        assert set(stt.units()["status"]) == {"ok"}
    src = tmp_path / "f.sqlite"   # a source's failed unit is not merged, and said so
    shutil.copy(a, src)
    _edit(src, "UPDATE units SET status = 'failed', test_auc = NULL WHERE key = ?", key)
    plan = plan_merge([str(src)], tmp_path / "new.sqlite")
    assert len(plan.write) == 1 and "1 failed unit(s) left out" in plan.text()


# ------------------------------------------------------------------ best-params
def test_best_params_round_trips_through_compare_config(both, tmp_path):
    """Export the selections of a finished run, run compare --config with the file: every
    fit uses exactly the exported values, and the repetition whose selection was exported
    reproduces its test AUC bit for bit (same split, same values, the refit starts cold)."""
    _, b = both
    toml = tmp_path / "best.toml"
    res = _run("best-params", "--store", b, "-o", toml)
    assert res.exit_code == 0, res.output
    cfg = tomllib.loads(toml.read_text())
    assert cfg["compare"] == {"datasets": ["simulated"], "models": ["lasso", "stl"],
                              "reps": 2, "seed": 0, "test_fraction": 0.15,
                              "val_fraction": 0.2}
    pins = {m: t["problems"]["simulated"] for m, t in cfg["models"].items()}
    with ResultStore(b, readonly=True) as sb:
        old = sb.units()
    for m, values in pins.items():
        chosen = [r for _, r in old[old["model"] == m].iterrows() if r["best_params"] == values]
        assert chosen, (m, values)          # one repetition's own selection
    again = tmp_path / "again.sqlite"
    res = _run("compare", "--config", toml, "--store", again, "-j", "2")
    assert res.exit_code == 0, res.output
    with ResultStore(again, readonly=True) as sa:
        new = sa.units()
    assert len(new) == 4
    for _, r in new.iterrows():
        name = r["model_config"]["name"]
        assert r["model_config"]["fixed"] == pins[name] and r["model_config"]["space"] == {}
        ref = old[(old["model"] == name) & (old["rep"] == r["rep"])].iloc[0]
        if ref["best_params"] == pins[name]:
            assert r["test_auc"] == ref["test_auc"]   # bit-identical


def test_pins_apply_per_problem_and_are_checked(tmp_path):
    from mtlbench import api

    cfg = tmp_path / "c.toml"
    cfg.write_text('[models.stl.problems."simulated"]\nlam = 2.5\n'
                   '[models.stl.problems."school"]\nlam = 9.0\n')   # school: not in this run
    plan = api.plan("simulated,simulated[seed=3]", ["stl", "lasso"], reps=1, config=cfg,
                    store=tmp_path / "r.sqlite")
    labels = {(s.problem, s.label) for s in plan.specs}
    assert labels == {("simulated", "stl[lam=2.5]"), ("simulated", "lasso"),
                      ("simulated[seed=3]", "stl"), ("simulated[seed=3]", "lasso")}
    assert plan.labels == ["stl[lam=2.5]", "lasso", "stl"]
    # the command line's own override wins over a pin
    plan = api.plan("simulated", ["stl[lam=1.0]"], reps=1, config=cfg,
                    store=tmp_path / "r.sqlite")
    assert {s.label for s in plan.specs} == {"stl[lam=1.0]"}
    for text, fragment in [
        ('[models.stl.problems."simulated"]\nlam = [1.0, 2.0]\n', "a pinned value is a single"),
        ('[models.stl.problems."simulated"]\nnope = 1.0\n', "has no hyperparameter 'nope'"),
        ('[models.stl.problems."simulatd"]\nlam = 1.0\n', "Did you mean 'simulated'"),
        ('[models.stl]\nproblems = 3\n', "must be a table of problems"),
    ]:
        cfg.write_text(text)
        with pytest.raises(ConfigError, match=fragment):
            api.plan("simulated", ["stl"], reps=1, config=cfg, store=tmp_path / "r.sqlite")


def test_the_selection_made_most_often_is_exported():
    import pandas as pd

    def units(*rows):
        return pd.DataFrame([{"status": "ok", "model_config": {"fixed": {"k": 3}},
                              "best_params": {"lam": lam}, "val_auc": v} for lam, v in rows])

    assert choose_selection(units((0.1, 0.7), (0.2, 0.9), (0.1, 0.6))) == ({"k": 3, "lam": 0.1},
                                                                            2, 3)
    # a tie: the higher mean validation AUC
    assert choose_selection(units((0.1, 0.7), (0.2, 0.9)))[0] == {"k": 3, "lam": 0.2}
    assert choose_selection(units()[0:0] if False else pd.DataFrame(
        [{"status": "failed", "model_config": {}, "best_params": None, "val_auc": None}])) is None


@given(st.floats(allow_nan=False) | st.integers(-2**62, 2**62) | st.booleans()
       | st.text(max_size=20))
def test_pinned_values_are_written_so_that_toml_reads_them_back_exactly(v):
    back = tomllib.loads(f"x = {toml_value(v, 'x')}\n")["x"]
    assert back == v and type(back) is type(v)
    if isinstance(v, float) and v == 0:
        assert math.copysign(1, back) == math.copysign(1, v)


def test_values_toml_cannot_hold_are_refused():
    for v in (None, [1, 2], {"a": 1}):
        with pytest.raises(ConfigError, match="cannot be written to a config file"):
            toml_value(v, "lasso on simulated: rho_ratio")
