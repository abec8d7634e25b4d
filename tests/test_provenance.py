"""A result is tied to the code that made it (issue 14, item 2): the unit key includes the
model's and the dataset's distribution, version and a fingerprint of their source, so a new
plugin version or an edited solver is recomputed, ``results`` says when rows are of older
code, and ``compare --rerun [MODEL]`` forces recomputation."""
from __future__ import annotations

import os
import sqlite3
import sys

import pytest
from click.testing import CliRunner

import fault_plugins
from mtlbench.cli import cli
from mtlbench.runner import load_problem
from plugin_fixtures import activate, write_distribution


@pytest.fixture
def dist(tmp_path, monkeypatch):
    root = tmp_path / "dist"
    fault_plugins.install(root)
    activate(monkeypatch, root)
    load_problem.cache_clear()

    def reinstall(version="0.0.1", source=fault_plugins.SOURCE):
        fault_plugins.install(root, version=version, source=source)
        for mod in [m for m in sys.modules if m.startswith("tp_")]:
            del sys.modules[mod]
        from mtlbench import plugins

        plugins._reset_registry_for_tests()
        monkeypatch.setattr(plugins, "_REGISTRY", None)
        load_problem.cache_clear()

    yield reinstall
    load_problem.cache_clear()


def _rows(store):
    con = sqlite3.connect(store)
    try:
        return sorted(con.execute("SELECT model, rep, key, finished_at, provenance FROM units"))
    finally:
        con.close()


def _compare(store, *extra):
    return CliRunner().invoke(cli, ["compare", "--datasets", "tiny", "--models",
                                    "f-good,f-version", "--reps", "2", "--jobs", "1",
                                    "--store", store, *extra], env={"COLUMNS": "200"})


def test_a_new_plugin_version_or_edited_code_is_recomputed(dist, tmp_path):
    store = str(tmp_path / "p.sqlite")
    res = _compare(store)
    assert res.exit_code == 0 and "ran 4 unit(s)" in res.output, res.output
    first = _rows(store)
    assert '"version": "0.0.1"' in first[0][4] and '"code": "' in first[0][4]

    res = _compare(store)  # same code: nothing reruns
    assert "ran 0 unit(s)" in res.output

    dist(version="0.0.2")  # a version bump with the same source
    res = _compare(store)
    assert "ran 4 unit(s)" in res.output, res.output
    out = CliRunner().invoke(cli, ["results", "--store", store], env={"COLUMNS": "200"})
    text = " ".join(out.output.split())
    assert out.exit_code == 0, out.output
    assert "4 stored unit(s) were made by other code than is installed now" in text
    assert "model plugin mtlbench_test_faulty 0.0.1 -> mtlbench_test_faulty 0.0.2" in text

    # a solver edit without a version bump changes the fingerprint too
    dist(version="0.0.2", source=fault_plugins.SOURCE.replace("SHIFT = 0.0", "SHIFT = 0.5"))
    res = _compare(store)
    assert "ran 4 unit(s)" in res.output, res.output
    out = CliRunner().invoke(cli, ["results", "--store", store], env={"COLUMNS": "200"})
    assert "model code changed" in " ".join(out.output.split())


def test_rerun_forces_recomputation_of_all_or_named_models(dist, tmp_path):
    store = str(tmp_path / "r.sqlite")
    assert _compare(store).exit_code == 0
    before = {(m, r): f for m, r, _, f, _ in _rows(store)}
    res = _compare(store, "--rerun", "f-version")
    assert "ran 2 unit(s)" in res.output and "2 already in the store" in res.output, res.output
    res = _compare(store, "--rerun")
    assert "ran 4 unit(s)" in res.output, res.output
    res = _compare(store, "--rerun", "f-good,f-version")
    assert "ran 4 unit(s)" in res.output, res.output
    assert len(_rows(store)) == 4 and set(before) == {(m, r) for m, r, *_ in _rows(store)}


def test_code_fingerprint_follows_the_source_and_helper_modules(tmp_path, monkeypatch):
    from mtlbench.provenance import code_fingerprint

    pkg = tmp_path / "tp_fpkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "_helpers.py").write_text("def helper():\n    return 1\n")
    (pkg / "model.py").write_text("from ._helpers import helper\n\nclass M:\n    pass\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    import importlib

    mod = importlib.import_module("tp_fpkg.model")
    fp = code_fingerprint(mod.M)
    assert fp and len(fp) == 16 and code_fingerprint(mod.M) == fp
    (pkg / "_helpers.py").write_text("def helper():\n    return 2\n")
    os.utime(pkg / "_helpers.py", ns=(1, 1))
    assert code_fingerprint(mod.M) != fp  # a private helper module is part of the model
    for m in [m for m in sys.modules if m.startswith("tp_fpkg")]:
        del sys.modules[m]


@pytest.mark.slow
@pytest.mark.parametrize("shift, agrees", [("1e-12", True), ("10.0", False)],
                         ids=["same-numbers", "other-numbers"])
def test_verify_of_units_made_by_other_code_refits_at_their_hyperparameters(
        dist, tmp_path, shift, agrees):
    """import-results --verify of units whose model code changed since (issue 28, case 5):
    bit-identity is not expected; the model is refitted with this code at the published
    hyperparameters and its validation and test AUC must be within 0.005.  A solver edit that
    leaves the numbers alone passes; one that moves them is refused."""
    from mtlbench.report.publish import publish
    from mtlbench.store import ResultStore

    theirs = str(tmp_path / "theirs.sqlite")
    res = CliRunner().invoke(cli, ["compare", "--datasets", "tiny", "--models", "f-version",
                                   "--reps", "2", "--jobs", "1", "--store", theirs])
    assert res.exit_code == 0, res.output
    publish(ResultStore(theirs), tmp_path / "lb", figures=False, log=lambda s: None)
    dist(source=fault_plugins.SOURCE.replace("SHIFT = 0.0", f"SHIFT = {shift}"))
    mine = tmp_path / "mine.sqlite"
    res = CliRunner().invoke(cli, ["import-results", str(tmp_path / "lb" / "tiny.json"),
                                   "--store", str(mine), "--verify", "1"],
                             env={"COLUMNS": "200"})
    out = " ".join(res.output.split())
    assert "made by other code or search rule" in out and "model code" in out, out
    if agrees:
        assert res.exit_code == 0, out
        assert "refitted here at its published hyperparameters" in out
        assert "(1 of them verified by recomputing them here)" in out
    else:
        assert res.exit_code == 2 and "Nothing was imported" in out, out
        assert "at the published hyperparameters {} (made by other code" in out
        assert not mine.exists()


SIBLING_MODEL = '''
import numpy as np

from mtlbench import Dataset, LinearMTLModel, Log, TaskSet, hookimpl


class Shifted(LinearMTLModel):
    name = "tp-sibling"
    search_space = {"lam": Log([0.1, 1.0], low=0.0)}

    def __init__(self, lam=1.0):
        self.lam = lam

    def fit(self, tasks, init=None):
        from tp_sibhelp import shift  # a module of the same distribution, imported lazily

        self.coef_ = np.column_stack([tasks.X(t).T @ tasks.y(t) for t in range(tasks.T)])
        self.coef_ = self.coef_ / self.lam + shift()
        self.converged_ = True
        return self


class Small(Dataset):
    name = "tp-small"
    description = "4 tasks x 30 samples x 5 features"
    source = "generated"

    def load(self, problem="tp-small", *, data_dir=None, cache_dir=None):
        rng = np.random.default_rng(3)
        Xs = [rng.standard_normal((30, 5)) for _ in range(4)]
        return TaskSet.from_arrays("tp-small", Xs, [np.where(X[:, 0] > 0, 1.0, -1.0)
                                                    for X in Xs])


@hookimpl
def register_models(register):
    register(Shifted)


@hookimpl
def register_datasets(register):
    register(Small)
'''


def test_a_sibling_module_of_the_plugin_distribution_is_part_of_the_fingerprint(
        tmp_path, monkeypatch):
    """Issue 26 (d): a helper module the model imports (here inside ``fit``) that is not in
    the model class's top-level package was not fingerprinted, so editing it reran nothing
    and showed the old numbers.  Now every module of the plugin's distribution the model can
    import is hashed: the edit makes the unit rerun."""
    from mtlbench.plugins import get_registry
    from mtlbench.provenance import source_files

    root = tmp_path / "site"
    helper = "def shift():\n    return 0.0\n"
    write_distribution(root, "tpsibling", "1.0",
                       {"tp_sibmodel": SIBLING_MODEL, "tp_sibhelp": helper},
                       {"tp-sibling": "tp_sibmodel"})
    activate(monkeypatch, root)
    load_problem.cache_clear()
    cls = get_registry().model_class("tp-sibling")
    assert [f.rsplit("/", 1)[-1] for f in source_files(cls, "tpsibling")] == [
        "tp_sibhelp.py", "tp_sibmodel.py"]
    assert [f.rsplit("/", 1)[-1] for f in source_files(cls)] == ["tp_sibmodel.py"]

    store = str(tmp_path / "s.sqlite")

    def compare():
        res = CliRunner().invoke(cli, ["compare", "--datasets", "tp-small", "--models",
                                       "tp-sibling", "--reps", "1", "--jobs", "1",
                                       "--store", store], env={"COLUMNS": "200"})
        assert res.exit_code == 0, res.output
        return res.output

    assert "ran 1 unit(s)" in compare()
    assert "ran 0 unit(s)" in compare()
    (root / "tp_sibhelp.py").write_text("def shift():\n    return 0.25\n")
    os.utime(root / "tp_sibhelp.py", ns=(10**9, 10**9))
    for mod in [m for m in sys.modules if m.startswith("tp_")]:
        del sys.modules[mod]
    activate(monkeypatch, root)
    load_problem.cache_clear()
    assert "ran 1 unit(s)" in compare()
    assert len(_rows(store)) == 2  # the old unit is kept under its own key, not reused
    load_problem.cache_clear()
