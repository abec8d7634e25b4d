"""A result is tied to the code that made it (issue 14, item 2): the unit key includes the
model's and the dataset's distribution, version and a fingerprint of their source, so a new
plugin version or an edited solver is recomputed, ``results`` says when rows are of older
code, and ``compare --rerun [MODEL]`` forces recomputation."""
from __future__ import annotations

import sqlite3
import sys

import pytest
from click.testing import CliRunner

import fault_plugins
from mtlbench.cli import cli
from mtlbench.runner import load_problem
from plugin_fixtures import activate


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
    import os

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
