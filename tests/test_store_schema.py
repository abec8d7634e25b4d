"""The results store checks itself (issue 14, item 12): a schema version (PRAGMA user_version)
checked on open, older layouts migrated, newer ones refused, integrity checked, a full disk or
damaged pages give a clear error without losing finished units, and a store on a read-only
location can be read."""
from __future__ import annotations

import os
import sqlite3
import stat

import pytest

from mtlbench.store import SCHEMA_VERSION, ResultStore, StoreError


def _row(key, model="m", rep=0):
    return {"key": key, "model": model, "dataset": "d", "problem": "d", "rep": rep, "seed": 0,
            "status": "ok", "test_auc": 0.75, "time_total": 1.0,
            "model_config": {"name": model}, "versions": {"mtlbench": "x"}}


def _filled(path, n=3):
    with ResultStore(path) as s:
        for i in range(n):
            s.write_unit(_row(f"k{i}", rep=i), [(0, "t0", 0.75, 10)])
    return path


def test_new_store_has_the_schema_version(tmp_path):
    path = _filled(tmp_path / "s.sqlite")
    con = sqlite3.connect(path)
    assert con.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
    con.close()


def test_a_store_of_the_layout_before_versioning_is_migrated(tmp_path):
    path = tmp_path / "old.sqlite"
    con = sqlite3.connect(path)  # the unversioned layout: no provenance column, no claims
    con.executescript("""
        CREATE TABLE units (key TEXT PRIMARY KEY, model TEXT NOT NULL, dataset TEXT NOT NULL,
            problem TEXT NOT NULL, rep INTEGER NOT NULL, seed INTEGER NOT NULL,
            status TEXT NOT NULL, test_auc REAL, time_total REAL, model_config TEXT);
        CREATE TABLE task_scores (key TEXT NOT NULL, task_index INTEGER NOT NULL,
            task_name TEXT NOT NULL, test_auc REAL NOT NULL, n_test INTEGER NOT NULL,
            PRIMARY KEY (key, task_index));
        INSERT INTO units VALUES ('old', 'm', 'd', 'd', 0, 0, 'ok', 0.8, 2.0, '{"name": "m"}');
    """)
    con.commit()
    con.close()
    with ResultStore(path, readonly=True) as ro:  # read as it is, not migrated
        df = ro.units()
        assert list(df.key) == ["old"] and df.provenance.isna().all()
    with ResultStore(path) as s:
        assert list(s.units().key) == ["old"] and s.statuses(["old"]) == {"old": "ok"}
        s.write_unit(_row("new"))
        assert set(s.units().key) == {"old", "new"}
    con = sqlite3.connect(path)
    assert con.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
    con.close()


def test_a_store_of_a_newer_mtlbench_is_refused(tmp_path):
    path = _filled(tmp_path / "new.sqlite")
    con = sqlite3.connect(path)
    con.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    con.commit()
    con.close()
    for ro in (False, True):
        with pytest.raises(StoreError, match=r"written by a newer mtlbench \(store schema "
                                             rf"{SCHEMA_VERSION + 1}.*Upgrade mtlbench"):
            ResultStore(path, readonly=ro)


def test_a_table_of_another_program_is_refused(tmp_path):
    path = tmp_path / "other.sqlite"
    con = sqlite3.connect(path)
    con.execute("CREATE TABLE units (id INTEGER, name TEXT)")
    con.commit()
    con.close()
    with pytest.raises(StoreError, match="unknown layout .no column key"):
        ResultStore(path)


def test_damaged_pages_give_a_clear_error(tmp_path):
    path = _filled(tmp_path / "bad.sqlite", n=40)
    size = os.path.getsize(path)
    assert size > 4 * 4096
    with open(path, "r+b") as f:  # scribble over every page but the header page
        f.seek(4096)
        f.write(b"\xa5" * (size - 4096))
    with pytest.raises(StoreError, match="is damaged.*recover"):
        ResultStore(path)


def test_a_full_disk_is_a_clear_error_and_finished_units_stay(tmp_path):
    path = _filled(tmp_path / "full.sqlite", n=2)
    s = ResultStore(path)
    pages = s._conn.execute("PRAGMA page_count").fetchone()[0]
    s._conn.execute(f"PRAGMA max_page_count = {pages}")  # no room for one more page
    big = _row("k-big")
    big["history"] = ["x" * 200_000]
    with pytest.raises(StoreError, match=r"cannot write a unit.*disk is full.*units finished "
                                         r"before are saved"):
        s.write_unit(big)
    s.close()
    with ResultStore(path) as again:
        assert again.statuses(["k0", "k1", "k-big"]) == {"k0": "ok", "k1": "ok"}


@pytest.mark.skipif(os.geteuid() == 0, reason="root ignores file permissions")
def test_a_store_on_a_read_only_location_is_readable(tmp_path):
    folder = tmp_path / "ro"
    folder.mkdir()
    path = _filled(folder / "s.sqlite")
    folder.chmod(stat.S_IRUSR | stat.S_IXUSR)
    (folder / "s.sqlite").chmod(stat.S_IRUSR)
    try:
        with ResultStore(path, readonly=True) as s:
            assert len(s.units()) == 3
    finally:
        folder.chmod(stat.S_IRWXU)
        (folder / "s.sqlite").chmod(stat.S_IRUSR | stat.S_IWUSR)


def test_read_only_open_never_writes(tmp_path):
    path = _filled(tmp_path / "s.sqlite")
    before = path.read_bytes()
    with ResultStore(path, readonly=True) as s:
        assert len(s.summary()) == 1
        with pytest.raises(StoreError, match="read-only"):
            s.write_unit(_row("x"))
    assert path.read_bytes() == before
    with pytest.raises(StoreError, match="no results store"):
        ResultStore(tmp_path / "missing.sqlite", readonly=True)


def test_claims_keep_a_second_run_off_units_the_first_computes(tmp_path):
    path = tmp_path / "c.sqlite"
    a, b = ResultStore(path), ResultStore(path)
    assert a.claim_units(["u1", "u2"]) == {"u1", "u2"}
    assert b.claim_units(["u1", "u2", "u3"]) == {"u3"}  # a's owner (this pid) is alive
    a.release_claims(["u1"])
    assert b.claim_units(["u1"]) == {"u1"}
    con = sqlite3.connect(path)  # a claim of a dead process on this host is taken over
    con.execute("UPDATE claims SET pid = 2147483646 WHERE key = 'u2'")
    con.commit()
    con.close()
    assert b.claim_units(["u2"]) == {"u2"}
    a.close()
    b.close()


def test_cli_reports_store_problems_in_one_line(tmp_path):
    from click.testing import CliRunner

    from mtlbench.cli import cli

    path = _filled(tmp_path / "future.sqlite")
    con = sqlite3.connect(path)
    con.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 5}")
    con.commit()
    con.close()
    for cmd in (["results", "--store", str(path)],
                ["compare", "--models", "stl", "--reps", "1", "--store", str(path)]):
        res = CliRunner().invoke(cli, cmd)
        assert res.exit_code == 2, res.output
        assert "written by a newer mtlbench" in res.output and "Traceback" not in res.output
    ok = _filled(tmp_path / "ok.sqlite")
    res = CliRunner().invoke(cli, ["results", "--store", str(ok)], env={"COLUMNS": "200"})
    assert res.exit_code == 0, res.output
    assert "3 stored unit(s) were made by other code than is installed now" in \
        " ".join(res.output.split())
