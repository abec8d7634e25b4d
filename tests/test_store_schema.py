"""The results store checks itself: a schema version (PRAGMA user_version)
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


@pytest.mark.parametrize("version, layout", [(2, "no races table, no origin column"),
                                             (3, "races, no origin column"),
                                             (3, "origin column, no races table"),
                                             (4, "races, origin column")])
def test_every_older_layout_reaches_the_one_current_version(tmp_path, version, layout):
    """Schema 3 (``races``) and schema 4 (``origin``) were added on two branches, schema 5
    (``target_kind``, ``metrics``, ``task_metrics``) after both: a store of schema 2 or of any
    intermediate layout migrates along the one path to version 5, keeping its units."""
    assert SCHEMA_VERSION == 5
    path = _filled(tmp_path / "s.sqlite")
    con = sqlite3.connect(path)
    if "no origin" in layout:
        con.execute("ALTER TABLE units DROP COLUMN origin")
    if "no races" in layout:
        con.execute("DROP TABLE races")
    for col in ("target_kind", "metrics"):  # every layout before 5
        con.execute(f"ALTER TABLE units DROP COLUMN {col}")
    con.execute("DROP TABLE task_metrics")
    con.execute(f"PRAGMA user_version = {version}")
    con.commit()
    con.close()
    with ResultStore(path, readonly=True) as ro:  # read as it is
        assert len(ro.units()) == 3
    with ResultStore(path) as s:
        assert len(s.units()) == 3 and s.has_races and "origin" in s.columns
        assert "metrics" in s.columns and s.has_task_metrics
        s.write_unit({**_row("imp"), "origin": "imported"})
        assert s.units(keys=["imp"]).origin.tolist() == ["imported"]
        assert s.races().empty
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
        assert len(s.units()) == 3
        with pytest.raises(StoreError, match="read-only"):
            s.write_unit(_row("x"))
    assert path.read_bytes() == before
    with pytest.raises(StoreError, match="no results store"):
        ResultStore(tmp_path / "missing.sqlite", readonly=True)


def test_claims_keep_a_second_run_off_units_the_first_computes(tmp_path):
    path = tmp_path / "c.sqlite"
    a, b = ResultStore(path), ResultStore(path)
    assert a.claim_units(["u1", "u2"]) == ({"u1", "u2"}, set())
    # a's owner (this pid) is alive
    assert b.claim_units(["u1", "u2", "u3"]) == ({"u3"}, set())
    a.release_claims(["u1"])
    assert b.claim_units(["u1"]) == ({"u1"}, set())
    con = sqlite3.connect(path)  # a claim of a dead process on this host is taken over
    con.execute("UPDATE claims SET pid = 2147483646 WHERE key = 'u2'")
    con.commit()
    con.close()
    assert b.claim_units(["u2"]) == ({"u2"}, set())
    a.close()
    b.close()


@pytest.mark.parametrize("rerun", [False, True], ids=["new", "rerun"])
def test_a_unit_written_between_reading_and_claiming_is_not_claimed(tmp_path, rerun):
    """Run B read the store (u1 not finished, or finished at t0 for a
    --rerun), run A then finished u1 and released its claim; B's claim must see that in the
    same transaction and leave u1 alone (before, B claimed and computed it a second time)."""
    path = tmp_path / "race.sqlite"
    a, b = ResultStore(path), ResultStore(path)
    if rerun:
        a.write_unit({**_row("u1"), "finished_at": "t0"})
    seen_by_b = b.unit_states(["u1", "u2"])
    assert a.claim_units(["u1"], seen=a.unit_states(["u1"])) == ({"u1"}, set())
    a.write_unit({**_row("u1"), "finished_at": "t1"})
    a.release_claims(["u1"])
    assert b.claim_units(["u1", "u2"], seen=seen_by_b) == ({"u2"}, {"u1"})
    # what B saw is still true of u2: claimed; a rerun of u1 by B after reading again: claimed
    b.release_claims()
    assert b.claim_units(["u1"], seen=b.unit_states(["u1"])) == ({"u1"}, set())
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


# ------------------------------------------------------------------ the real cause
def _sqlite_error(message, code, name):
    exc = sqlite3.OperationalError(message)
    exc.sqlite_errorcode, exc.sqlite_errorname = code, name
    return exc


#: What SQLite raised, and what statvfs said, when a store was opened for writing on a
#: read-only bind mount and on a full tmpfs (measured on Linux; test_store_faults_on_real_mounts
#: repeats it where mounts can be made): (error, file system read-only, free bytes, message)
FAULTS = {
    "read-only": (("unable to open database file", 14, "SQLITE_CANTOPEN"), True, 10**9,
                  "it is on a read-only file system"),
    "disk-full": (("disk I/O error", 4874, "SQLITE_IOERR_SHMSIZE"), False, 0,
                  "the disk is full (0.0 MiB free"),
    "permission": (("unable to open database file", 14, "SQLITE_CANTOPEN"), False, 10**9,
                   "permission denied"),
}


@pytest.mark.parametrize("existing", [True, False], ids=["existing-store", "new-store"])
@pytest.mark.parametrize("fault", sorted(FAULTS))
def test_store_faults_name_their_cause(tmp_path, monkeypatch, fault, existing):
    """A read-only location, a full disk or missing permission is named as such, in one line
    through the CLI (before: a valid store was called "damaged ... .recover", a new one "not an
    SQLite database; left untouched", and a 0-byte file was left behind); an existing store is
    left as it was, a new one leaves no file."""
    import mtlbench.store.diagnosis as store_mod
    from click.testing import CliRunner

    from mtlbench.cli import cli

    error, read_only, free, expected = FAULTS[fault]
    path = _filled(tmp_path / "s.sqlite") if existing else tmp_path / "new.sqlite"
    before = path.read_bytes() if existing else None
    real_connect = sqlite3.connect

    def connect_then_fail(database, *args, **kwargs):  # SQLite creates the file, then fails
        real_connect(database, *args, **kwargs).close()
        raise _sqlite_error(*error)

    monkeypatch.setattr(store_mod.sqlite3, "connect", connect_then_fail)
    monkeypatch.setattr(store_mod, "disk_facts", lambda p: (read_only, free))
    if fault == "permission":
        monkeypatch.setattr(store_mod.os, "access", lambda p, mode: not mode & os.W_OK)
    res = CliRunner().invoke(cli, ["compare", "--models", "stl", "--reps", "1",
                                   "--store", str(path)])
    monkeypatch.undo()
    out = " ".join(res.output.split())
    assert res.exit_code == 2 and "Traceback" not in res.output, res.output
    assert expected in out, out
    assert "damaged" not in out and "not an SQLite database" not in out, out
    if existing:
        assert f"cannot open the results store {str(path)!r} for writing" in out, out
        assert path.read_bytes() == before
    else:
        assert f"cannot create the results store {str(path)!r}" in out, out
        assert not path.exists()


def test_a_new_store_that_cannot_be_created_leaves_nothing(tmp_path, monkeypatch):
    """The 0-byte file of a failed first open is removed, but a store another run has just
    created beside it (it holds tables) is never touched."""
    import mtlbench.store.diagnosis as store_mod

    monkeypatch.setattr(store_mod, "disk_facts", lambda p: (False, 0))
    full = _sqlite_error("database or disk is full", 13, "SQLITE_FULL")
    real_connect = sqlite3.connect

    def connect_then_fail(database, *args, **kwargs):
        real_connect(database, *args, **kwargs).close()
        raise full

    monkeypatch.setattr(store_mod.sqlite3, "connect", connect_then_fail)
    with pytest.raises(StoreError, match="cannot create the results store .*the disk is full"):
        ResultStore(tmp_path / "new.sqlite")
    assert list(tmp_path.iterdir()) == []
    monkeypatch.undo()
    store_mod._remove_new_store(_filled(tmp_path / "other.sqlite"))
    assert (tmp_path / "other.sqlite").exists()


@pytest.mark.skipif(os.geteuid() == 0, reason="root ignores file permissions")
def test_a_new_store_in_a_folder_without_write_permission(tmp_path):
    folder = tmp_path / "locked"
    folder.mkdir()
    folder.chmod(stat.S_IRUSR | stat.S_IXUSR)
    try:
        with pytest.raises(StoreError, match="permission denied: its folder is not writable"):
            ResultStore(folder / "s.sqlite")
        assert list(folder.iterdir()) == []
    finally:
        folder.chmod(stat.S_IRWXU)


def _can_make_mounts() -> bool:
    import shutil
    import subprocess

    if os.geteuid() != 0 or not shutil.which("unshare"):
        return False
    return subprocess.run(["unshare", "-m", "mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs",
                           "/mnt"], capture_output=True).returncode == 0


@pytest.mark.slow
@pytest.mark.skipif(not _can_make_mounts(), reason="needs root and a private mount namespace "
                                                   "(unshare -m) to make read-only and full "
                                                   "file systems")
def test_store_faults_on_real_mounts(tmp_path):
    """The drill behind FAULTS: a read-only bind mount and a full 256 KiB tmpfs, in a private
    mount namespace, with a store there and a new one."""
    import subprocess
    import sys
    import textwrap

    src, mnt = tmp_path / "src", tmp_path / "mnt"
    src.mkdir()
    mnt.mkdir()
    _filled(src / "s.sqlite")
    probe = textwrap.dedent("""
        import sys
        from mtlbench.store import ResultStore, StoreError
        try:
            ResultStore(sys.argv[1])
        except StoreError as exc:
            print(exc)
    """)
    script = f"""
        set -e
        py() {{ {sys.executable} -c '{probe}' "$1"; }}
        mount --bind {src} {mnt}; mount -o remount,ro,bind {mnt}
        py {mnt}/s.sqlite; py {mnt}/new.sqlite; ls {mnt}; umount {mnt}
        mount -t tmpfs -o size=256k tmpfs {mnt}; cp {src}/s.sqlite {mnt}/
        dd if=/dev/zero of={mnt}/fill bs=4k 2>/dev/null || true
        py {mnt}/s.sqlite; py {mnt}/new.sqlite; ls {mnt}
    """
    out = subprocess.run(["unshare", "-m", "sh", "-c", script], capture_output=True,
                         text=True, timeout=120)
    lines = out.stdout.splitlines()
    assert out.returncode == 0 and len(lines) >= 7, out.stdout + out.stderr
    assert "for writing: it is on a read-only file system" in lines[0]
    assert "cannot create the results store" in lines[1] and "read-only" in lines[1]
    assert lines[2] == "s.sqlite"  # nothing left behind
    assert "for writing: the disk is full" in lines[3]
    assert "cannot create the results store" in lines[4] and "disk is full" in lines[4]
    assert not [f for f in lines[5:] if f.startswith("new.sqlite")]  # nothing left behind


def test_unit_times_read_the_problem_size_with_or_without_sqlite_json(tmp_path, monkeypatch):
    """unit_times() reads diagnostics["problem_size"] with SQLite's json_extract, and by
    parsing the JSON where SQLite lacks it: the same frame either way (NaN where not recorded)."""
    import pandas as pd

    path = tmp_path / "t.sqlite"
    with ResultStore(path) as s:
        s.write_unit({**_row("a"), "time_total": 2.0, "diagnostics": {"problem_size": 1200}})
        s.write_unit({**_row("b"), "time_total": 3.0, "diagnostics": {}})
        with_json = s.unit_times()
        real = pd.read_sql_query

        def no_json(query, *a, **k):
            if "json_extract" in query:
                raise pd.errors.DatabaseError("no such function: json_extract")
            return real(query, *a, **k)

        monkeypatch.setattr(pd, "read_sql_query", no_json)
        without = s.unit_times()
    pd.testing.assert_frame_equal(with_json, without)
    assert with_json.problem_size.tolist()[0] == 1200 and with_json.problem_size.isna().sum() == 1
