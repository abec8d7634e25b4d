"""A table says which of its units other code made than is installed now (a changed solver,
another plugin version): it shows what is stored, never stale results as current."""
from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest
from click.testing import CliRunner

from mtlbench.cli import cli


@pytest.fixture(scope="module")
def published(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("pub")
    store = str(tmp / "published.sqlite")
    res = CliRunner().invoke(cli, ["compare", "--models", "stl,lasso", "--reps", "3",
                                   "--store", store])
    assert res.exit_code == 0, res.output
    return store, None


def test_a_table_says_which_units_other_code_made(published, tmp_path):
    store, _ = published
    copy = tmp_path / "copy.sqlite"
    copy.write_bytes(Path(store).read_bytes())
    res = CliRunner().invoke(cli, ["leaderboard", "--dataset", "simulated", "--store",
                                   str(copy), "--format", "json"])
    assert res.exit_code == 0, res.output
    assert not [n for n in json.loads(res.output)["notes"] if "other code" in n]
    con = sqlite3.connect(copy)
    for key, prov in con.execute("SELECT key, provenance FROM units WHERE model = 'lasso' "
                                 "AND rep > 0").fetchall():
        p = json.loads(prov)
        p["model"]["code"] = "0" * 16          # as if lasso's solver had changed since
        con.execute("UPDATE units SET provenance = ? WHERE key = ?", (json.dumps(p), key))
    con.commit()
    con.close()
    res = CliRunner().invoke(cli, ["leaderboard", "--dataset", "simulated", "--store",
                                   str(copy), "--format", "json"])
    notes = [n for n in json.loads(res.output)["notes"] if "other code" in n]
    assert len(notes) == 1 and notes[0].startswith("lasso: 2 of its 2 unit(s) were made by "
                                                   "other code than is installed now (model code "
                                                   "changed")
