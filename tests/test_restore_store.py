"""Rebuilding the published store from the published JSON (scripts/restore_store.py), and the
core loading every problem's data with BLAS on one thread (mtlbench.dataset.load_tasks)."""
from __future__ import annotations

import importlib.util
import json
import sqlite3
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner
from threadpoolctl import threadpool_info, threadpool_limits

from mtlbench.cli import cli
from mtlbench.data import TaskSet
from mtlbench.dataset import LOAD_BLAS_THREADS, Dataset, load_tasks

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "restore_store.py"


def _script():
    spec = importlib.util.spec_from_file_location("restore_store", SCRIPT)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _units(path):
    con = sqlite3.connect(path)
    try:
        return {r[0]: (r[1], r[2], r[3]) for r in
                con.execute("SELECT key, model, rep, origin FROM units")}
    finally:
        con.close()


@pytest.fixture(scope="module")
def published(tmp_path_factory):
    """A store of stl and lasso, 3 repetitions, published to a folder (no figures)."""
    tmp = tmp_path_factory.mktemp("pub")
    store, out = str(tmp / "published.sqlite"), tmp / "lb"
    runner = CliRunner()
    res = runner.invoke(cli, ["compare", "--models", "stl,lasso", "--reps", "3", "--store", store])
    assert res.exit_code == 0, res.output
    res = runner.invoke(cli, ["publish", "--store", store, "--out", str(out), "--no-figures"])
    assert res.exit_code == 0, res.output
    return store, out


def test_restore_then_compare_recomputes_only_rep0_and_reproduces_it(published, tmp_path,
                                                                     capsys):
    store, out = published
    restored = str(tmp_path / "restored.sqlite")
    script = _script()
    assert script.main(["restore", "--leaderboards", str(out), "--store", restored]) == 0
    assert "restored 4 unit(s)" in capsys.readouterr().out
    original, back = _units(store), _units(restored)
    assert set(back) < set(original)
    assert sorted(v[1] for v in back.values()) == [1, 1, 2, 2]      # rep 0 is left to compare
    assert all(v[2] is None for v in back.values())                  # not marked "imported"
    res = CliRunner().invoke(cli, ["compare", "--models", "stl,lasso", "--reps", "3",
                                   "--store", restored])
    assert res.exit_code == 0, res.output
    assert "ran 2 unit(s)" in res.output and "4 already in the store" in res.output
    assert set(_units(restored)) == set(original)                    # the same keys
    assert script.main(["check", "--leaderboards", str(out), "--store", restored]) == 0
    assert "6 unit(s) of the store compared" in capsys.readouterr().out
    # the same store to `publish`: no --force, the same tables
    before = json.loads((out / "simulated.json").read_text())
    res = CliRunner().invoke(cli, ["publish", "--store", restored, "--out", str(out),
                                   "--no-figures"])
    assert res.exit_code == 0, res.output
    after = json.loads((out / "simulated.json").read_text())
    untimed = [{k: v for k, v in row.items() if k != "time_total_s"} for row in after["rows"]]
    assert untimed == [{k: v for k, v in row.items() if k != "time_total_s"}
                       for row in before["rows"]]          # rep 0's run times are new
    assert [u["key"] for u in after["units"]] == [u["key"] for u in before["units"]]


def test_check_reports_a_unit_that_differs(published, tmp_path, capsys):
    store, out = published
    copy = tmp_path / "copy.sqlite"
    copy.write_bytes(Path(store).read_bytes())
    con = sqlite3.connect(copy)
    key = con.execute("SELECT key FROM units WHERE model = 'lasso' AND rep = 1").fetchone()[0]
    con.execute("UPDATE task_scores SET test_auc = test_auc * 0.5 WHERE key = ? "
                "AND task_index = 0", (key,))
    con.commit()
    con.close()
    assert _script().main(["check", "--leaderboards", str(out), "--store", str(copy)]) == 1
    text = capsys.readouterr().out
    assert "differs: simulated: lasso simulated rep 1" in text and "1 differ" in text


def test_check_any_code_pairs_units_of_other_code_and_names_a_changed_selection(
        published, tmp_path, capsys):
    """``check --any-code`` pairs units whose keys differ (other code) by model, problem,
    repetition, split, protocol and space; a changed selection is one line, and the rest pair
    as equal."""
    store, out = published
    copy = tmp_path / "other-code.sqlite"
    copy.write_bytes(Path(store).read_bytes())
    con = sqlite3.connect(copy)
    con.execute("PRAGMA foreign_keys = ON")
    con.execute("UPDATE task_scores SET key = key || 'x'")
    con.execute("UPDATE units SET key = key || 'x'")   # another code: no key in common
    con.execute("UPDATE units SET best_params = '{\"rho_ratio\": 0.5}' "
                "WHERE model = 'lasso' AND rep = 2")
    con.commit()
    con.close()
    script = _script()
    assert script.main(["check", "--leaderboards", str(out), "--store", str(copy)]) == 0
    assert "0 unit(s) of the store compared" in capsys.readouterr().out
    assert script.main(["check", "--any-code", "--leaderboards", str(out),
                        "--store", str(copy)]) == 1
    text = capsys.readouterr().out
    assert "selection differs: lasso simulated rep 2" in text
    assert "6 unit(s) of the store paired" in text and "5 with the same selection" in text


def test_units_of_other_code_are_left_for_compare(published, tmp_path, monkeypatch, capsys):
    import mtlbench.provenance as prov

    real = prov.unit_provenance

    def changed_lasso(registry, model, dataset):
        out = real(registry, model, dataset)
        if model == "lasso":
            out["model"] = {**out["model"], "code": "0" * 16}
        return out

    monkeypatch.setattr(prov, "unit_provenance", changed_lasso)
    restored = str(tmp_path / "r.sqlite")
    _, out = published
    assert _script().main(["restore", "--leaderboards", str(out), "--store", restored]) == 0
    text = capsys.readouterr().out
    assert "restored 2 unit(s)" in text and "3 made by other code" in text and "lasso 3" in text
    assert {v[0] for v in _units(restored).values()} == {"stl"}


@pytest.mark.parametrize("field, reason", [
    ("split_fingerprint", "the split of simulated repetition"),
    ("data_fingerprint", "the data fingerprint of simulated differs")])
def test_restore_refuses_a_file_in_one_line_and_restores_the_others(published, tmp_path,
                                                                   capsys, field, reason):
    """A file whose units this installation does not compute (a tampered split, data
    generated by other arithmetic) is refused with one line naming why and nothing of it is
    written; the other files are restored; the status is 2."""
    _, out = published
    folder = tmp_path / "lb"
    folder.mkdir()
    data = json.loads((out / "simulated.json").read_text())
    data["units"][1][field] = "0" * 64
    (folder / "a-refused.json").write_text(json.dumps(data))
    restored = tmp_path / "r.sqlite"
    script = _script()
    assert script.main(["restore", "--leaderboards", str(folder), "--store",
                        str(restored)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and reason in err[0] and "left for compare" in err[0], err
    assert _units(restored) == {}
    (folder / "simulated.json").write_text((out / "simulated.json").read_text())
    assert script.main(["restore", "--leaderboards", str(folder), "--store",
                        str(restored)]) == 2
    assert "restored 4 unit(s)" in capsys.readouterr().out
    assert len(_units(restored)) == 4


class _ThreadsSeen(Dataset):
    """Records how many threads the BLAS libraries allow while ``load`` runs."""

    name = "threads-seen"

    def load(self, problem, *, data_dir=None, cache_dir=None):
        self.seen = [i["num_threads"] for i in threadpool_info() if i["user_api"] == "blas"]
        return TaskSet.from_arrays(self.name, [np.arange(8.0).reshape(4, 2)],
                                   [np.array([-1.0, 1.0, -1.0, 1.0])])


def test_the_core_loads_data_with_blas_on_one_thread():
    # the bits of a PCA (synthetic-attributes, shoes) depend on the BLAS thread count; units
    # load in workers on one thread, so every load in the core must too
    if not [i for i in threadpool_info() if i["user_api"] == "blas"]:
        pytest.skip("no BLAS library visible to threadpoolctl")
    ds = _ThreadsSeen()
    with threadpool_limits(limits=2):
        load_tasks(ds, "threads-seen")
    assert ds.seen and set(ds.seen) == {LOAD_BLAS_THREADS} == {1}


def test_units_races_and_dask_runs_load_through_it(monkeypatch):
    # runner.unit.load_problem is what workers, the Dask client and the race call
    import mtlbench.runner.unit as unit

    if not [i for i in threadpool_info() if i["user_api"] == "blas"]:
        pytest.skip("no BLAS library visible to threadpoolctl")
    ds = _ThreadsSeen()

    class _Registry:
        def dataset(self, name):
            return ds

    monkeypatch.setattr(unit, "get_registry", lambda: _Registry())
    unit.load_problem.cache_clear()
    try:
        with threadpool_limits(limits=2):
            unit.load_problem("threads-seen", "threads-seen", None, "{}")
    finally:
        unit.load_problem.cache_clear()
    assert set(ds.seen) == {1}



def test_prune_lists_then_removes_units_of_other_code(published, tmp_path, capsys):
    store, _ = published
    copy = tmp_path / "copy.sqlite"
    copy.write_bytes(Path(store).read_bytes())
    con = sqlite3.connect(copy)
    for key, prov in con.execute("SELECT key, provenance FROM units WHERE model = 'lasso' "
                                 "AND rep > 0").fetchall():
        p = json.loads(prov)
        p["model"]["code"] = "0" * 16          # as if made before lasso's solver changed
        con.execute("UPDATE units SET provenance = ? WHERE key = ?", (json.dumps(p), key))
    con.commit()
    con.close()
    script = _script()
    assert script.main(["prune", "--store", str(copy)]) == 0
    text = capsys.readouterr().out
    assert "lasso simulated: 2 unit(s) of other code (model code changed" in text
    assert len(_units(copy)) == 6                                   # only listed
    assert script.main(["prune", "--store", str(copy), "--delete"]) == 0
    assert "removed 2 unit(s)" in capsys.readouterr().out
    left = _units(copy)
    assert len(left) == 4 and sorted(v[0] for v in left.values()).count("lasso") == 1
    con = sqlite3.connect(copy)
    assert con.execute("SELECT COUNT(DISTINCT key) FROM task_scores").fetchone()[0] == 4
    con.close()
