"""A result is tied to the code that made it: the unit key includes the model's and the
dataset's distribution, version and a fingerprint of their code, so a new plugin version or an
edited solver is recomputed, ``results`` says when rows are of older code, and ``compare
--rerun [MODEL]`` forces recomputation.  The fingerprint follows the parsed code: a docstring
or comment edit keeps it, any code edit changes it; units stored under the previous rule (the
source hashed as text) by the code installed now stay current."""
from __future__ import annotations

import json
import os
import sqlite3
import sys
from pathlib import Path

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
        from mtlbench.plugins import registry as plugins

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


MODEL = '''"""A model module."""
import numpy as np

SCALE = 2.0  # the scale


class M:
    """A model."""

    method = "lbfgs"

    def __init__(self, lam=1.0):
        """Keep lam."""
        self.lam = lam

    def fit(self, x):
        # scale, then shift
        return np.asarray(x) * SCALE + self.lam
'''

#: edits that leave what the code does alone: (what, old text, new text)
SAME_CODE = [
    ("module docstring", '"""A model module."""', '"""Another wording,\n\nover three lines."""'),
    ("class docstring removed", '    """A model."""\n', ""),
    ("method docstring", '"""Keep lam."""', '"""Keep ``lam``, the weight of the penalty."""'),
    ("comment", "# scale, then shift", "# the scale first (see SCALE), the shift after"),
    ("comment added", "    def fit(self, x):\n", "    def fit(self, x):  # a new comment\n"),
    ("layout", "np.asarray(x) * SCALE + self.lam",
     "(np.asarray(x) * SCALE\n                + self.lam)"),
    ("a string that does nothing", '    method = "lbfgs"\n',
     '    method = "lbfgs"\n    """The solver."""\n'),
]
#: edits of the code
OTHER_CODE = [
    ("number", "SCALE = 2.0", "SCALE = 3.0"),
    ("operator", "* SCALE + self.lam", "* SCALE - self.lam"),
    ("default argument", "lam=1.0", "lam=0.5"),
    ("string constant", '"lbfgs"', '"cd"'),
    ("renamed function", "def fit(", "def fit_all("),
    ("import", "import numpy as np", "import numpy as np\nimport math"),
]


def _package(tmp_path, monkeypatch, name, files):
    """Import ``name``.model from a package of ``files``: (its class M, the package folder)."""
    import importlib

    pkg = tmp_path / name
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    for fname, text in files.items():
        (pkg / fname).write_text(text)
    monkeypatch.syspath_prepend(str(tmp_path))
    return importlib.import_module(f"{name}.model").M, pkg


def _forget(name):
    for m in [m for m in sys.modules if m.startswith(name)]:
        del sys.modules[m]


def _rewrite(path, text):
    path.write_text(text)
    os.utime(path, ns=(10**9, 10**9))  # another file version, whatever the clock says


@pytest.mark.parametrize("edit", SAME_CODE, ids=[e[0] for e in SAME_CODE])
def test_a_docstring_or_comment_edit_keeps_the_fingerprint(tmp_path, monkeypatch, edit):
    from mtlbench.provenance import code_fingerprint, text_fingerprint

    _, old, new = edit
    assert old in MODEL
    name = f"tp_same_{SAME_CODE.index(edit)}"
    cls, pkg = _package(tmp_path, monkeypatch, name, {"model.py": MODEL})
    before, text_before = code_fingerprint(cls), text_fingerprint(cls)
    _rewrite(pkg / "model.py", MODEL.replace(old, new))
    assert code_fingerprint(cls) == before
    assert text_fingerprint(cls) != text_before  # the previous rule saw any edit
    _forget(name)


@pytest.mark.parametrize("edit", OTHER_CODE, ids=[e[0] for e in OTHER_CODE])
def test_a_code_edit_changes_the_fingerprint(tmp_path, monkeypatch, edit):
    from mtlbench.provenance import code_fingerprint

    _, old, new = edit
    assert old in MODEL
    name = f"tp_other_{OTHER_CODE.index(edit)}"
    cls, pkg = _package(tmp_path, monkeypatch, name, {"model.py": MODEL})
    before = code_fingerprint(cls)
    _rewrite(pkg / "model.py", MODEL.replace(old, new))
    assert code_fingerprint(cls) != before
    _forget(name)


def test_the_previous_rule_hashes_the_files_as_text(tmp_path, monkeypatch):
    """text_fingerprint is the rule units were stored under before: sha256 over the files
    (sorted), each as its path below the package's folder, a NUL and the sha256 of its bytes
    (computed here without mtlbench)."""
    import hashlib

    from mtlbench.provenance import source_files, text_fingerprint

    cls, _ = _package(tmp_path, monkeypatch, "tp_textrule",
                      {"model.py": MODEL, "_helpers.py": "K = 1  # shared\n"})
    files = source_files(cls)
    assert [Path(f).name for f in files] == ["_helpers.py", "model.py"]
    h = hashlib.sha256()
    for f in files:
        rel = Path(f).relative_to(tmp_path).as_posix()
        h.update(rel.encode() + b"\0" + hashlib.sha256(Path(f).read_bytes()).digest())
    assert text_fingerprint(cls) == h.hexdigest()[:16]
    _forget("tp_textrule")


def test_a_file_that_does_not_parse_is_hashed_by_its_bytes_and_says_so(tmp_path, monkeypatch):
    from mtlbench.provenance import code_fingerprint

    draft = "def unfinished(:\n    return 1  # draft\n"
    cls, pkg = _package(tmp_path, monkeypatch, "tp_unparsed",
                        {"model.py": MODEL, "_draft.py": draft})
    with pytest.warns(UserWarning, match=r"_draft\.py does not parse.*hash of its bytes"):
        fp = code_fingerprint(cls)
    assert fp and len(fp) == 16
    _rewrite(pkg / "_draft.py", draft.replace("# draft", "# a draft"))
    with pytest.warns(UserWarning, match="does not parse"):
        assert code_fingerprint(cls) != fp  # its bytes count: a comment edit too
    _forget("tp_unparsed")


def test_the_parsed_code_is_kept_beside_the_bytecode_for_its_bytes_only(tmp_path, monkeypatch):
    import mtlbench.provenance as prov

    monkeypatch.setattr(sys, "dont_write_bytecode", False)
    cls, pkg = _package(tmp_path, monkeypatch, "tp_kept", {"model.py": MODEL})
    fp = prov.code_fingerprint(cls)
    assert [f.name.split(".")[-2] for f in (pkg / "__pycache__").glob("model.*.json")] == [
        f"code-{prov.CODE_RULE}"]

    def unparsed(tree):
        raise AssertionError("parsed again")

    prov._read_source.cache_clear()  # a new process: only the kept results are left
    prov._hash_files.cache_clear()
    monkeypatch.setattr(prov, "_canonical", unparsed)
    assert prov.code_fingerprint(cls) == fp
    _rewrite(pkg / "model.py", MODEL.replace("# the scale", "# the scale, a comment"))
    with pytest.raises(AssertionError, match="parsed again"):  # other bytes: parsed anew
        prov.code_fingerprint(cls)
    _forget("tp_kept")


def _store_as_previous_rule(store, codes):
    """Rewrite the units of ``store`` as the previous fingerprint rule stored them: each
    unit's code fingerprints replaced by ``codes(part, class)`` and its key by the hash of its
    identity with them."""
    from mtlbench.report.imported import published_spec

    con = sqlite3.connect(store)
    with con:
        for key, dataset, config, protocol, params, model, problem, rep, prov in con.execute(
                "SELECT key, dataset, model_config, protocol, dataset_params, model, problem, "
                "rep, provenance FROM units").fetchall():
            prov = json.loads(prov)
            old = {part: {**prov[part], "code": codes(part, prov[part]["class"])}
                   for part in ("model", "dataset")}
            unit = {"key": key, "model": model, "problem": problem, "rep": rep,
                    "model_config": json.loads(config), "protocol": json.loads(protocol),
                    "dataset_params": json.loads(params), "provenance": old}
            new = published_spec(unit, dataset).key_under(unit["protocol"]["search_version"])
            con.execute("UPDATE units SET key = ?, provenance = ? WHERE key = ?",
                        (new, json.dumps(old, sort_keys=True), key))
            for table in ("task_scores", "arrays"):
                con.execute(f"UPDATE {table} SET key = ? WHERE key = ?", (new, key))
    con.close()


def _text_rule(part, qualified):
    """The previous rule's fingerprint of the installed class named ``qualified``."""
    from mtlbench.plugins import get_registry
    from mtlbench.provenance import text_fingerprint

    reg = get_registry()
    classes = ([reg.model_class(n) for n in reg.model_names] if part == "model"
               else [type(reg.dataset(n)) for n in reg.dataset_names])
    cls, = [c for c in classes if f"{c.__module__}.{c.__qualname__}" == qualified]
    return text_fingerprint(cls, "mtlbench_test_faulty")


def test_units_stored_under_the_previous_rule_by_this_code_stay_current(dist, tmp_path):
    """A store of the previous rule whose plugin's code has not changed since: ``results``
    judges its units current, ``compare`` moves them to this rule's keys and reruns nothing;
    units of the previous rule made by other code are rerun."""
    from mtlbench.plugins import get_registry
    from mtlbench.provenance import stale_keys
    from mtlbench.store import ResultStore

    store = str(tmp_path / "prev.sqlite")
    assert "ran 4 unit(s)" in _compare(store).output
    now = _rows(store)
    _store_as_previous_rule(store, _text_rule)
    assert {r[2] for r in _rows(store)}.isdisjoint({r[2] for r in now})
    with ResultStore(store, readonly=True) as rs:
        assert stale_keys(rs, get_registry()) == {}
    text = " ".join(_compare(store).output.split())
    assert "ran 0 unit(s)" in text and "4 already in the store" in text, text
    assert "4 stored unit(s) of the previous code fingerprint rule" in text
    assert _rows(store) == now  # this rule's keys and provenance; the same finish times
    con = sqlite3.connect(store)
    assert con.execute("SELECT COUNT(DISTINCT key) FROM task_scores").fetchone()[0] == 4
    for table in ("task_scores", "arrays"):  # moved with their units
        assert con.execute(f"SELECT COUNT(*) FROM {table} WHERE key NOT IN "
                           "(SELECT key FROM units)").fetchone()[0] == 0
    assert con.execute("SELECT COUNT(*) FROM arrays").fetchone()[0] > 0
    con.close()
    assert "previous code fingerprint rule" not in _compare(store).output  # once

    _store_as_previous_rule(store, lambda part, cls: "0" * 16 if part == "model" else
                            _text_rule(part, cls))  # as if stored by older model code
    assert "ran 4 unit(s)" in _compare(store).output


def test_published_fingerprints_of_unchanged_built_in_code_stay_current(dist, tmp_path,
                                                                        monkeypatch):
    """The built-in classes' units were published under the previous rule by code whose
    docstrings changed since: the table of published fingerprints makes them current exactly
    when the installed code's fingerprint is the one the table gives that published code."""
    import mtlbench._published_fingerprints as table
    from mtlbench.plugins import get_registry
    from mtlbench.provenance import code_fingerprint

    store = str(tmp_path / "pub.sqlite")
    assert "ran 4 unit(s)" in _compare(store).output
    now = _rows(store)
    good = get_registry().model_class("f-good")
    name = f"{good.__module__}.{good.__qualname__}"
    published = "00000000000000aa"
    _store_as_previous_rule(store, lambda part, cls: (published if cls == name else
                                                      "00000000000000bb" if part == "model"
                                                      else _text_rule(part, cls)))
    monkeypatch.setattr(table, "PUBLISHED", {
        name: (published, code_fingerprint(good, "mtlbench_test_faulty"))})
    res = _compare(store)
    assert "ran 2 unit(s)" in res.output, res.output  # f-version's code is not in the table
    assert [r for r in _rows(store) if r[0] == "f-good"] == [r for r in now if r[0] == "f-good"]

    store = str(tmp_path / "pub2.sqlite")
    assert "ran 4 unit(s)" in _compare(store).output
    _store_as_previous_rule(store, lambda part, cls: (published if cls == name else
                                                      _text_rule(part, cls)))
    monkeypatch.setattr(table, "PUBLISHED", {name: (published, "f" * 16)})
    assert "ran 2 unit(s)" in _compare(store).output  # f-good's code changed since


def test_published_units_of_the_previous_rule_import_under_this_rules_keys(dist, tmp_path):
    """``import-results`` of a file published under the previous rule by the code installed
    now: its keys are checked as published, then the units are stored under this rule's
    keys, and ``--verify`` recomputes them as units of the same code (bit-identical)."""
    from mtlbench.report.publish import README_HAND_START, publish
    from mtlbench.store import ResultStore

    theirs = str(tmp_path / "theirs.sqlite")
    assert "ran 4 unit(s)" in _compare(theirs).output
    now = {r[2] for r in _rows(theirs)}
    _store_as_previous_rule(theirs, _text_rule)
    with ResultStore(theirs) as rs:
        publish(rs, tmp_path / "lb", figures=False, log=lambda s: None)
    published = json.loads((tmp_path / "lb" / "tiny.json").read_text())
    assert {u["key"] for u in published["units"]}.isdisjoint(now)
    mine = str(tmp_path / "mine.sqlite")
    res = CliRunner().invoke(cli, ["import-results", str(tmp_path / "lb" / "tiny.json"),
                                   "--store", mine, "--verify", "1"], env={"COLUMNS": "200"})
    out = " ".join(res.output.split())
    assert res.exit_code == 0, out
    assert "4 unit(s) of" in out and "previous rule that name the code installed here" in out
    assert "recomputed with the same code" in out and "bit-identical" in out
    assert {r[2] for r in _rows(mine)} == now
    assert "ran 0 unit(s)" in _compare(mine).output

    # the store the file was published from, moved to this rule's keys by compare, publishes
    # into the same folder: the same store (no --force), its hand-written block kept
    assert "4 stored unit(s) of the previous" in " ".join(_compare(theirs).output.split())
    readme = tmp_path / "lb" / "README.md"
    readme.write_text(readme.read_text().replace(README_HAND_START, README_HAND_START
                                                 + "\nA note kept by the same store.", 1))
    with ResultStore(theirs) as rs:
        publish(rs, tmp_path / "lb", figures=False, log=lambda s: None)
    assert "A note kept by the same store." in readme.read_text()
    assert {u["key"] for u in json.loads((tmp_path / "lb" / "tiny.json").read_text())[
        "units"]} == now


@pytest.mark.slow
@pytest.mark.parametrize("shift, agrees", [("1e-12", True), ("10.0", False)],
                         ids=["same-numbers", "other-numbers"])
def test_verify_of_units_made_by_other_code_refits_at_their_hyperparameters(
        dist, tmp_path, shift, agrees):
    """import-results --verify of units whose model code changed since: bit-identity is not
    expected; the model is refitted with this code at the published
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
    """A helper module the model imports (here inside ``fit``) outside the model class's
    top-level package is part of the fingerprint when it belongs to the plugin's
    distribution: editing it makes the unit rerun."""
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
