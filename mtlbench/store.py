"""Results store: an embedded SQLite database (standard library), resumable and crash-safe.

Tables
------
units
    One row per unit of work (model, problem, repetition) with its identity key, status
    ("ok" or "failed"), chosen hyperparameters, the validation grid, mean validation and test
    AUC (binary targets), the target kind, every metric (``metrics``: the selection metric
    and its validation value, every applicable metric on test), times, iterations,
    convergence histories, diagnostics, split/data fingerprints, the protocol settings,
    package versions, seed, host and timestamps; failed units keep the error message and
    traceback.  ``origin`` is empty for a unit computed into this store, and
    "imported" / "verified" for one imported from a published file (``import-results``;
    "verified": recomputed here and found equal, :mod:`mtlbench.report.imported`).
task_scores
    One row per (unit, task) with the test AUC and the number of test labels (binary targets).
task_metrics
    One row per (unit, task, metric) with the task's test value of every metric the unit
    recorded (null: undefined, e.g. an nMSE where the task's test targets are all equal), the
    task's name and number of test rows.
arrays
    Small fitted arrays (W, groups) of repetition 0, for figures; npy bytes.

claims
    Units a running ``compare`` is computing (owner host, pid, lease), so a second run on the
    same store skips them; a claim of a dead owner (same host, pid gone) or past its lease is
    taken over.
races
    One row per solver run of ``mtlbench race`` (model selection, solver, role; problem,
    repetition, seed, split and data fingerprints): its objective-against-time curve, final
    objective, convergence, iterations, certificate, the reference optimum and the solvers'
    agreement of its model, the times to reach each suboptimality level, and provenance
    like units (versions, code fingerprints, host, dates).  :mod:`mtlbench.race`.

Every finished unit is written in one transaction as soon as it finishes, which also drops the
writer's claim of it (SQLite's journal makes the write all-or-nothing, so a killed run never
leaves a half-written unit, nor a claim on a finished one); :meth:`ResultStore.write_units`
and :meth:`ResultStore.transaction` make many units one transaction (an import, ``mtlbench
merge``).

Schema version
--------------
The layout is versioned with ``PRAGMA user_version`` (:data:`SCHEMA_VERSION`).  On open the
store is integrity-checked (``PRAGMA quick_check``); a store of an older layout is migrated in
place (columns and tables are only added, never dropped); a store written by a newer mtlbench
is refused with a message.  ``ResultStore(path, readonly=True)`` opens for reading only (the
``results`` and ``leaderboard`` commands), which also works on a read-only location.
"""
from __future__ import annotations

import contextlib
import io
import json
import os
import socket
import sqlite3
import time
import uuid
from pathlib import Path
from typing import Any, Iterable, Iterator, Mapping

import numpy as np
import pandas as pd

from .errors import MTLBenchError

SCHEMA_VERSION = 5
"""1: the layout before versioning (user_version 0); 2: + ``provenance`` column, ``claims``;
3: + ``races``; 4: + ``origin`` column; 5: + ``target_kind`` and ``metrics`` columns,
``task_metrics``.  One migration path from any of them: missing columns and tables are added,
then the version is set.  A unit stored before 5 is binary and recorded the AUC only."""
CLAIM_LEASE_SECONDS = 3600.0


class StoreError(MTLBenchError):
    """The results store cannot be opened, read or written (the message says what to do)."""

SCHEMA = """
CREATE TABLE IF NOT EXISTS units (
    key TEXT PRIMARY KEY,
    model TEXT NOT NULL,
    dataset TEXT NOT NULL,
    problem TEXT NOT NULL,
    rep INTEGER NOT NULL,
    seed INTEGER NOT NULL,
    status TEXT NOT NULL,
    best_params TEXT,
    model_config TEXT,
    grid TEXT,
    val_auc REAL,
    test_auc REAL,
    n_tasks INTEGER,
    dropped_tasks TEXT,
    time_total REAL,
    time_select REAL,
    time_fit REAL,
    n_iter INTEGER,
    history TEXT,
    diagnostics TEXT,
    split_fingerprint TEXT,
    data_fingerprint TEXT,
    protocol TEXT,
    dataset_params TEXT,
    versions TEXT,
    host TEXT,
    message TEXT,
    traceback TEXT,
    started_at TEXT,
    finished_at TEXT,
    provenance TEXT,
    origin TEXT,
    target_kind TEXT,
    metrics TEXT
);
CREATE INDEX IF NOT EXISTS units_by_problem ON units(problem, model);
CREATE TABLE IF NOT EXISTS task_scores (
    key TEXT NOT NULL,
    task_index INTEGER NOT NULL,
    task_name TEXT NOT NULL,
    test_auc REAL NOT NULL,
    n_test INTEGER NOT NULL,
    PRIMARY KEY (key, task_index)
);
CREATE TABLE IF NOT EXISTS task_metrics (
    key TEXT NOT NULL,
    task_index INTEGER NOT NULL,
    task_name TEXT NOT NULL,
    n_test INTEGER NOT NULL,
    metric TEXT NOT NULL,
    value REAL,
    PRIMARY KEY (key, metric, task_index)
);
CREATE TABLE IF NOT EXISTS arrays (
    key TEXT NOT NULL,
    name TEXT NOT NULL,
    data BLOB NOT NULL,
    PRIMARY KEY (key, name)
);
CREATE TABLE IF NOT EXISTS claims (
    key TEXT PRIMARY KEY,
    owner TEXT NOT NULL,
    host TEXT NOT NULL,
    pid INTEGER NOT NULL,
    expires REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS races (
    key TEXT PRIMARY KEY,
    race TEXT NOT NULL,
    dataset TEXT NOT NULL,
    problem TEXT NOT NULL,
    rep INTEGER NOT NULL,
    seed INTEGER NOT NULL,
    model TEXT NOT NULL,
    model_name TEXT NOT NULL,
    solver TEXT NOT NULL,
    role TEXT NOT NULL,
    variant TEXT,
    params TEXT,
    origin TEXT,
    status TEXT NOT NULL,
    message TEXT,
    curve TEXT,
    elapsed REAL,
    final_objective REAL,
    objective_source TEXT,
    converged INTEGER,
    n_iter INTEGER,
    certificate REAL,
    levels TEXT,
    reference TEXT,
    agreement TEXT,
    split_fingerprint TEXT,
    data_fingerprint TEXT,
    dataset_params TEXT,
    protocol TEXT,
    versions TEXT,
    provenance TEXT,
    host TEXT,
    started_at TEXT,
    finished_at TEXT
);
CREATE INDEX IF NOT EXISTS races_by_problem ON races(problem, model);
"""
REQUIRED_COLUMNS = ("key", "model", "dataset", "problem", "rep", "seed", "status")

UNIT_COLUMNS = ("key", "model", "dataset", "problem", "rep", "seed", "status", "best_params",
                "model_config", "grid", "val_auc", "test_auc", "n_tasks", "dropped_tasks",
                "time_total", "time_select", "time_fit", "n_iter", "history", "diagnostics",
                "split_fingerprint", "data_fingerprint", "protocol", "dataset_params",
                "versions", "host", "message", "traceback", "started_at", "finished_at",
                "provenance", "origin", "target_kind", "metrics")
JSON_COLUMNS = ("best_params", "model_config", "grid", "dropped_tasks", "history",
                "diagnostics", "protocol", "dataset_params", "versions", "provenance", "metrics")
RACE_COLUMNS = ("key", "race", "dataset", "problem", "rep", "seed", "model", "model_name",
                "solver", "role", "variant", "params", "origin", "status", "message", "curve",
                "elapsed", "final_objective", "objective_source", "converged", "n_iter",
                "certificate", "levels", "reference", "agreement", "split_fingerprint",
                "data_fingerprint", "dataset_params", "protocol", "versions", "provenance",
                "host", "started_at", "finished_at")
RACE_JSON_COLUMNS = ("params", "origin", "curve", "levels", "reference", "agreement",
                     "dataset_params", "protocol", "versions", "provenance")
_COLUMN_TYPES = {"rep": "INTEGER", "seed": "INTEGER", "n_tasks": "INTEGER",
                 "n_iter": "INTEGER", "val_auc": "REAL", "test_auc": "REAL",
                 "time_total": "REAL", "time_select": "REAL", "time_fit": "REAL"}


class ResultStore:
    """SQLite results store at ``path`` (created with its folder if missing, unless
    ``readonly``).  Raises :class:`StoreError` with what to do when the file is not a store,
    is damaged, was written by a newer mtlbench or cannot be opened."""

    def __init__(self, path: str | os.PathLike, readonly: bool = False) -> None:
        self.path = Path(path).expanduser()
        self.readonly = readonly
        self.owner = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
        self._renewed = 0.0
        self._batch = False
        where = str(self.path)
        existed = self.path.exists()
        try:
            if readonly:
                if not existed:
                    raise StoreError(f"no results store at {where!r}; run 'mtlbench compare' "
                                     "first or pass --store PATH")
                self._conn = _connect_readonly(self.path)
            else:
                self.path.parent.mkdir(parents=True, exist_ok=True)
                self._conn = sqlite3.connect(where, timeout=60.0)
                self._conn.execute("PRAGMA journal_mode=WAL")
                self._conn.execute("PRAGMA synchronous=NORMAL")
            self._check_and_migrate()
        except StoreError:
            if not existed and not readonly:
                _remove_new_store(self.path)
            raise
        except (OSError, sqlite3.Error) as exc:
            conn = getattr(self, "_conn", None)
            if conn is not None:
                conn.close()
            if not existed and not readonly:
                _remove_new_store(self.path)
            raise StoreError(_open_failure(self.path, exc, existed)) from None

    def _check_and_migrate(self) -> None:
        con = self._conn
        where = str(self.path)
        version = con.execute("PRAGMA user_version").fetchone()[0]
        if version > SCHEMA_VERSION:
            raise StoreError(
                f"the results store {where!r} was written by a newer mtlbench (store schema "
                f"{version}; this mtlbench reads schemas up to {SCHEMA_VERSION}). Upgrade "
                "mtlbench (pip install -U mtlbench) or pass another --store PATH.")
        rows = con.execute("PRAGMA quick_check").fetchall()
        if [r[0] for r in rows] != ["ok"]:
            raise StoreError(_damaged_message(where, "; ".join(str(r[0]) for r in rows[:3])))
        tables = {r[0] for r in con.execute(
            "SELECT name FROM sqlite_master WHERE type = 'table'")}
        missing_cols: list[str] = []
        if "units" in tables:
            have = {r[1] for r in con.execute("PRAGMA table_info(units)")}
            lacking = [c for c in REQUIRED_COLUMNS if c not in have]
            if lacking:
                raise StoreError(
                    f"{where!r} holds a 'units' table of an unknown layout (no column "
                    f"{', '.join(lacking)}); it is not an mtlbench results store. Pass "
                    "another --store PATH.")
            missing_cols = [c for c in UNIT_COLUMNS if c not in have]
        self.columns = [c for c in UNIT_COLUMNS if c not in missing_cols]
        self.has_races = "races" in tables
        self.has_task_metrics = "task_metrics" in tables
        needs = version < SCHEMA_VERSION or missing_cols or not {"units", "task_scores",
                                                                "arrays", "claims", "races",
                                                                "task_metrics"} <= tables
        if not needs:
            return
        if self.readonly:  # read what is there; missing columns read as empty
            if version == 0 and not tables:
                raise StoreError(f"{where!r} is not an mtlbench results store (it is empty)")
            return
        with con:  # migrate in one transaction: only add columns and tables
            for col in missing_cols:
                con.execute(f"ALTER TABLE units ADD COLUMN {col} {_COLUMN_TYPES.get(col, 'TEXT')}")
            con.executescript(SCHEMA)
            con.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
        self.columns = list(UNIT_COLUMNS)
        self.has_races = True
        self.has_task_metrics = True

    def close(self) -> None:
        self._conn.close()

    def __enter__(self) -> "ResultStore":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    # ------------------------------------------------------------------ writing
    def write_unit(self, row: dict[str, Any], task_scores: Iterable[tuple] = (),
                   arrays: dict[str, np.ndarray] | None = None) -> None:
        """Insert or replace one unit with its per-task scores, atomically; this process's
        claim of the unit is released in the same transaction (a kill right after the write
        leaves no claim on a finished unit for another run to wait out).  ``task_scores``:
        (task index, name, test AUC, test labels) of a binary unit; ``row["task_metrics"]``
        (not a column): (task index, name, test rows, metric, value or None) for every
        recorded metric."""
        try:
            self._write([(row, task_scores, arrays)])
        except sqlite3.Error as exc:
            raise StoreError(
                f"cannot write a unit to the results store {str(self.path)!r}: "
                f"{_cause(self.path, exc)}. The units finished before are saved; fix the "
                "cause and run the same command again to resume.") from None

    def write_units(self, units: Iterable[tuple[dict[str, Any], Iterable[tuple],
                                                dict[str, np.ndarray] | None]]) -> None:
        """Insert or replace several units ``(row, task_scores, arrays)`` in one transaction:
        all of them or, if anything fails (a kill, a full disk), none (an import)."""
        try:
            self._write(units)
        except sqlite3.Error as exc:
            raise StoreError(
                f"cannot write to the results store {str(self.path)!r}: "
                f"{_cause(self.path, exc)}. Nothing was written; fix the cause and run the "
                "same command again.") from None

    @contextlib.contextmanager
    def transaction(self) -> Iterator[None]:
        """The units written inside the block (:meth:`write_unit`, :meth:`write_units`) are one
        transaction: all of them are in the store afterwards, or, if the block raises, none."""
        if self.readonly:
            raise StoreError(f"cannot write to {str(self.path)!r}: opened read-only")
        try:
            with self._conn:
                self._conn.execute("BEGIN IMMEDIATE")
                self._batch = True
                try:
                    yield
                finally:
                    self._batch = False
        except sqlite3.Error as exc:
            raise StoreError(f"cannot write to the results store {str(self.path)!r}: "
                             f"{_cause(self.path, exc)}. Nothing was written.") from None

    def _write(self, units: Iterable[tuple[dict[str, Any], Iterable[tuple],
                                           dict[str, np.ndarray] | None]]) -> None:
        if self.readonly:
            raise sqlite3.OperationalError("the store was opened read-only")
        # one transaction, or part of the caller's (:meth:`transaction`)
        with contextlib.nullcontext() if self._batch else self._conn:
            for row, task_scores, arrays in units:
                self._insert(row, task_scores, arrays)

    def _insert(self, row: dict[str, Any], task_scores: Iterable[tuple],
                arrays: dict[str, np.ndarray] | None) -> None:
        """One unit's rows, inside the caller's transaction."""
        values = []
        for col in UNIT_COLUMNS:
            v = row.get(col)
            if col in JSON_COLUMNS and v is not None:
                v = json.dumps(v, sort_keys=True, default=repr)
            values.append(v)
        self._conn.execute(
            f"INSERT OR REPLACE INTO units ({', '.join(UNIT_COLUMNS)}) "
            f"VALUES ({', '.join('?' * len(UNIT_COLUMNS))})", values)
        self._conn.execute("DELETE FROM task_scores WHERE key = ?", (row["key"],))
        self._conn.executemany(
            "INSERT INTO task_scores (key, task_index, task_name, test_auc, n_test) "
            "VALUES (?, ?, ?, ?, ?)",
            [(row["key"], int(i), str(n), float(a), int(m)) for i, n, a, m in task_scores])
        self._conn.execute("DELETE FROM task_metrics WHERE key = ?", (row["key"],))
        self._conn.executemany(
            "INSERT INTO task_metrics (key, task_index, task_name, n_test, metric, value) "
            "VALUES (?, ?, ?, ?, ?, ?)",
            [(row["key"], int(i), str(n), int(m), str(metric), None if v is None else float(v))
             for i, n, m, metric, v in row.get("task_metrics") or ()])
        self._conn.execute("DELETE FROM arrays WHERE key = ?", (row["key"],))
        for name, arr in (arrays or {}).items():
            buf = io.BytesIO()
            np.save(buf, np.asarray(arr), allow_pickle=False)
            self._conn.execute("INSERT INTO arrays (key, name, data) VALUES (?, ?, ?)",
                               (row["key"], name, buf.getvalue()))
        self._conn.execute("DELETE FROM claims WHERE key = ? AND owner = ?",
                           (row["key"], self.owner))

    # ------------------------------------------------------------------ reading
    def statuses(self, keys: Iterable[str]) -> dict[str, str]:
        """Status of each key that is in the store."""
        keys = list(keys)
        out: dict[str, str] = {}
        for i in range(0, len(keys), 500):
            chunk = keys[i:i + 500]
            q = f"SELECT key, status FROM units WHERE key IN ({', '.join('?' * len(chunk))})"
            out.update(dict(self._conn.execute(q, chunk).fetchall()))
        return out

    def unit_states(self, keys: Iterable[str]) -> dict[str, tuple[str, str | None]]:
        """(status, finished_at) of each key that is in the store (what
        :meth:`claim_units` compares with, to see whether another run wrote a unit since)."""
        keys = list(keys)
        out: dict[str, tuple[str, str | None]] = {}
        for i in range(0, len(keys), 500):
            chunk = keys[i:i + 500]
            q = (f"SELECT key, status, finished_at FROM units WHERE key IN "
                 f"({', '.join('?' * len(chunk))})")
            out.update({r[0]: (r[1], r[2]) for r in self._conn.execute(q, chunk)})
        return out

    def units(self, *, problems: Iterable[str] | None = None, models: Iterable[str] | None = None,
              status: str | None = None, keys: Iterable[str] | None = None) -> pd.DataFrame:
        """Unit rows as a DataFrame (JSON columns decoded); ``keys`` restricts to those units."""
        q, args = "SELECT * FROM units WHERE 1=1", []
        for col, vals in (("problem", problems), ("model", models)):
            if vals is not None:
                vals = list(vals)
                q += f" AND {col} IN ({', '.join('?' * len(vals))})"
                args += vals
        if status:
            q += " AND status = ?"
            args.append(status)
        df = pd.read_sql_query(q + " ORDER BY problem, model, rep", self._conn, params=args)
        if keys is not None:
            df = df[df["key"].isin(set(keys))].reset_index(drop=True)
        for col in UNIT_COLUMNS:
            if col not in df.columns:  # an older layout opened read-only
                df[col] = None
        for col in JSON_COLUMNS:
            df[col] = df[col].map(lambda v: json.loads(v) if isinstance(v, str) else v)
        return df

    def unit_times(self) -> pd.DataFrame:
        """Seconds of every finished ("ok") unit: columns model (label), model_name, problem,
        time_total, problem_size (labels x features as the unit recorded it, NaN for units
        of releases that did not), n_tasks (tasks scored) — for the dispatch order, the ETA
        and ``--dry-run``'s estimate of later runs (:mod:`mtlbench.runner.cost`)."""
        where = "FROM units WHERE status = 'ok' AND time_total IS NOT NULL"
        try:  # SQLite's JSON functions read one number without parsing every diagnostics blob
            df = pd.read_sql_query(
                "SELECT model, problem, model_config, time_total, n_tasks, "
                f"json_extract(diagnostics, '$.problem_size') AS problem_size {where}",
                self._conn)
        except (sqlite3.OperationalError, pd.errors.DatabaseError):  # SQLite without JSON1
            df = pd.read_sql_query(
                f"SELECT model, problem, model_config, time_total, n_tasks, diagnostics {where}",
                self._conn)
            df["problem_size"] = [_problem_size(v) for v in df.pop("diagnostics")]
        df["problem_size"] = pd.to_numeric(df["problem_size"], errors="coerce")
        df["n_tasks"] = pd.to_numeric(df["n_tasks"], errors="coerce")
        df["model_name"] = [_name_of(v, m) for v, m in zip(df.model_config, df.model)]
        return df.drop(columns=["model_config"])

    def delete_units(self, keys: Iterable[str]) -> int:
        """Remove these units with their per-task scores and arrays, in one transaction;
        returns how many units were removed."""
        keys = list(keys)
        if self.readonly:
            raise StoreError(f"cannot delete units from {str(self.path)!r}: opened read-only")
        try:
            with self._conn:
                n = 0
                for i in range(0, len(keys), 500):
                    part = keys[i:i + 500]
                    marks = ", ".join("?" * len(part))
                    for table in ("task_scores", "task_metrics", "arrays"):
                        self._conn.execute(f"DELETE FROM {table} WHERE key IN ({marks})", part)
                    n += self._conn.execute(f"DELETE FROM units WHERE key IN ({marks})",
                                            part).rowcount
        except sqlite3.Error as exc:
            raise StoreError(f"cannot delete units from {str(self.path)!r}: "
                             f"{_cause(self.path, exc)}") from None
        return n

    def unit_identities(self) -> list[dict[str, Any]]:
        """What every stored unit's key is the hash of: key, model (label), dataset,
        problem, rep, model_config, protocol, dataset_params and provenance (JSON decoded)."""
        cols = ("key", "model", "dataset", "problem", "rep", "model_config", "protocol",
                "dataset_params", "provenance")
        out = []
        for row in self._conn.execute(f"SELECT {', '.join(cols)} FROM units"):
            unit = dict(zip(cols, row))
            for col in cols[5:]:
                if isinstance(unit[col], str):
                    unit[col] = json.loads(unit[col])
            out.append(unit)
        return out

    def rekey_units(self, moves: Mapping[str, tuple[str, Any]]) -> int:
        """Move units to other keys, ``{old key: (new key, provenance)}``: each with its rows
        of the per-unit tables and its ``provenance`` set, in one transaction; a unit whose
        new key is taken stays where it is.  Returns how many moved."""
        if self.readonly:
            raise StoreError(f"cannot re-key units of {str(self.path)!r}: opened read-only")
        con = self._conn
        try:
            with con:
                # every table keyed by unit (task_scores, arrays and any later one), not the
                # claims of running compares nor the races (keys of their own)
                tables = [t for (t,) in con.execute(
                    "SELECT name FROM sqlite_master WHERE type = 'table'")
                    if t not in ("units", "claims", "races")
                    and "key" in {r[1] for r in con.execute(f"PRAGMA table_info({t})")}]
                n = 0
                for old, (new, provenance) in moves.items():
                    if con.execute("SELECT 1 FROM units WHERE key = ?", (new,)).fetchone():
                        continue
                    moved = con.execute("UPDATE units SET key = ?, provenance = ? WHERE key = ?",
                                        (new, json.dumps(provenance, sort_keys=True), old)
                                        ).rowcount
                    for table in tables if moved else ():
                        con.execute(f"UPDATE {table} SET key = ? WHERE key = ?", (new, old))
                    n += moved
        except sqlite3.Error as exc:
            raise StoreError(f"cannot re-key units of {str(self.path)!r}: "
                             f"{_cause(self.path, exc)}") from None
        return n

    # ------------------------------------------------------------------ races
    def write_race(self, rows: Iterable[dict[str, Any]]) -> None:
        """Insert or replace the rows of one race (:data:`RACE_COLUMNS`), in one transaction."""
        values = []
        for row in rows:
            vals = []
            for col in RACE_COLUMNS:
                v = row.get(col)
                if col in RACE_JSON_COLUMNS and v is not None:
                    v = json.dumps(v, sort_keys=True, default=repr)
                elif col == "converged" and v is not None:
                    v = int(bool(v))
                vals.append(v)
            values.append(vals)
        try:
            if self.readonly:
                raise sqlite3.OperationalError("the store was opened read-only")
            with self._conn:
                self._conn.executemany(
                    f"INSERT OR REPLACE INTO races ({', '.join(RACE_COLUMNS)}) "
                    f"VALUES ({', '.join('?' * len(RACE_COLUMNS))})", values)
        except sqlite3.Error as exc:
            raise StoreError(f"cannot write the race to the results store "
                             f"{str(self.path)!r}: {exc}. Choose a writable --store PATH.") \
                from None

    def races(self, *, problems: Iterable[str] | None = None,
              datasets: Iterable[str] | None = None) -> pd.DataFrame:
        """Race rows as a DataFrame (JSON columns decoded; missing numbers and ``converged``
        as None), oldest first; empty for a store of an older layout opened read-only."""
        if not self.has_races:
            return pd.DataFrame(columns=list(RACE_COLUMNS))
        q, args = "SELECT * FROM races WHERE 1=1", []
        for col, vals in (("problem", problems), ("dataset", datasets)):
            if vals is not None:
                vals = list(vals)
                q += f" AND {col} IN ({', '.join('?' * len(vals))})"
                args += vals
        df = pd.read_sql_query(q + " ORDER BY finished_at, problem, model, solver", self._conn,
                               params=args)
        for col in RACE_JSON_COLUMNS:
            df[col] = df[col].map(lambda v: json.loads(v) if isinstance(v, str) else v)
        for col, kind in (("converged", bool), ("n_iter", int), ("elapsed", float),
                          ("final_objective", float), ("certificate", float)):
            df[col] = pd.Series([None if v is None or v != v else kind(v) for v in df[col]],
                                index=df.index, dtype=object)
        return df

    # ------------------------------------------------------------------ claims
    def claim_units(self, keys: Iterable[str], seen: Mapping[str, tuple] | None = None
                    ) -> tuple[set[str], set[str]]:
        """Claim ``keys`` for this process, in one transaction that also re-reads the units:
        returns (the keys now claimed by it, the keys another run wrote meanwhile).

        ``seen`` is what the caller read when it chose the keys (:meth:`unit_states`; a key
        absent from it was not in the store).  A key whose stored (status, finished_at) is no
        longer what the caller saw was written by another run since (finished, or recomputed
        by another ``--rerun``): it is not claimed.  Nor is a key another live run holds.  So
        two runs on one store never compute the same unit.  Claims of a dead owner on this
        host, or past their lease (another host), are taken over."""
        keys = list(keys)
        if self.readonly or not keys:
            return set(keys), set()
        seen = seen or {}
        host, now = socket.gethostname(), time.time()
        mine: set[str] = set()
        alive: dict[int, bool] = {}
        try:
            with self._conn:
                self._conn.execute("BEGIN IMMEDIATE")
                held, status = {}, {}
                for i in range(0, len(keys), 500):
                    chunk = keys[i:i + 500]
                    marks = ", ".join("?" * len(chunk))
                    held.update({r[0]: r[1:] for r in self._conn.execute(
                        f"SELECT key, owner, host, pid, expires FROM claims WHERE key IN "
                        f"({marks})", chunk)})
                    status.update({r[0]: tuple(r[1:]) for r in self._conn.execute(
                        f"SELECT key, status, finished_at FROM units WHERE key IN ({marks})",
                        chunk)})
                finished = {k for k in keys if status.get(k) != seen.get(k)}
                rows = []
                for k in keys:
                    if k in finished:
                        continue
                    h = held.get(k)
                    if h is not None and h[0] != self.owner and h[3] > now:
                        if h[1] != host:
                            continue
                        if h[2] not in alive:
                            alive[h[2]] = _pid_alive(h[2])
                        if alive[h[2]]:
                            continue
                    rows.append((k, self.owner, host, os.getpid(), now + CLAIM_LEASE_SECONDS))
                    mine.add(k)
                self._conn.executemany("INSERT OR REPLACE INTO claims (key, owner, host, pid, "
                                       "expires) VALUES (?, ?, ?, ?, ?)", rows)
        except sqlite3.Error as exc:
            raise StoreError(f"cannot claim units in the results store {str(self.path)!r}: "
                             f"{_cause(self.path, exc)}") from None
        self._renewed = now
        return mine, finished

    def renew_claims(self, every: float = 60.0) -> None:
        """Extend this process's claims (at most once per ``every`` seconds)."""
        now = time.time()
        if self.readonly or now - self._renewed < every:
            return
        with self._conn:
            self._conn.execute("UPDATE claims SET expires = ? WHERE owner = ?",
                               (now + CLAIM_LEASE_SECONDS, self.owner))
        self._renewed = now

    def release_claims(self, keys: Iterable[str] | None = None) -> None:
        """Drop this process's claims (all, or ``keys``)."""
        if self.readonly:
            return
        try:
            with self._conn:
                if keys is None:
                    self._conn.execute("DELETE FROM claims WHERE owner = ?", (self.owner,))
                else:
                    self._conn.executemany("DELETE FROM claims WHERE key = ? AND owner = ?",
                                           [(k, self.owner) for k in keys])
        except sqlite3.Error as exc:
            raise StoreError(f"cannot update the results store {str(self.path)!r}: "
                             f"{_cause(self.path, exc)}") from None

    def task_scores(self, keys: Iterable[str] | None = None) -> pd.DataFrame:
        q = ("SELECT u.model, u.dataset, u.problem, u.rep, t.task_index, t.task_name, t.test_auc, "
             "t.n_test, t.key FROM task_scores t JOIN units u ON u.key = t.key "
             "WHERE u.status = 'ok'")
        df = pd.read_sql_query(q, self._conn)
        if keys is not None:
            df = df[df["key"].isin(set(keys))]
        return df

    def unit_copy(self, key: str) -> tuple[dict[str, Any], list[tuple], dict[str, np.ndarray]]:
        """Unit ``key`` as stored, in what :meth:`write_unit` takes: its row (values as
        stored, JSON columns decoded, with ``task_metrics``: the per-task metric rows), its
        per-task scores (task_index, task_name, test_auc, n_test) and its fitted arrays by
        name -- to copy it into another store exactly."""
        cols = [c for c in UNIT_COLUMNS if c in self.columns]
        cur = self._conn.execute(f"SELECT {', '.join(cols)} FROM units WHERE key = ?", (key,))
        values = cur.fetchone()
        if values is None:
            raise KeyError(key)
        row = {c: (json.loads(v) if c in JSON_COLUMNS and isinstance(v, str) else v)
               for c, v in zip(cols, values)}
        scores = self._conn.execute("SELECT task_index, task_name, test_auc, n_test FROM "
                                    "task_scores WHERE key = ? ORDER BY task_index",
                                    (key,)).fetchall()
        if self.has_task_metrics:
            row["task_metrics"] = [tuple(r) for r in self._conn.execute(
                "SELECT task_index, task_name, n_test, metric, value FROM task_metrics "
                "WHERE key = ? ORDER BY task_index, metric", (key,))]
        arrays = {n: np.load(io.BytesIO(d), allow_pickle=False) for n, d in self._conn.execute(
            "SELECT name, data FROM arrays WHERE key = ? ORDER BY name", (key,))}
        return row, [tuple(r) for r in scores], arrays
    def task_metrics(self, keys: Iterable[str] | None = None,
                     metric: str | None = None) -> pd.DataFrame:
        """Per-task test values of "ok" units: columns model, dataset, problem, rep,
        task_index, task_name, n_test, metric, value (NaN: undefined), key; ``metric``
        restricts to one metric.  The AUC of units stored before the per-task metrics
        existed is read from ``task_scores`` (:meth:`task_values` does so for one metric)."""
        cols = ["model", "dataset", "problem", "rep", "task_index", "task_name", "n_test",
                "metric", "value", "key"]
        if not self.has_task_metrics:
            return pd.DataFrame(columns=cols)
        q = ("SELECT u.model, u.dataset, u.problem, u.rep, t.task_index, t.task_name, t.n_test, "
             "t.metric, t.value, t.key FROM task_metrics t JOIN units u ON u.key = t.key "
             "WHERE u.status = 'ok'")
        args: list[Any] = []
        if metric is not None:
            q += " AND t.metric = ?"
            args.append(metric)
        df = pd.read_sql_query(q, self._conn, params=args)
        df["value"] = pd.to_numeric(df["value"], errors="coerce")
        if keys is not None:
            df = df[df["key"].isin(set(keys))]
        return df

    def task_values(self, metric: str, keys: Iterable[str] | None = None) -> pd.DataFrame:
        """The per-task test values of one metric: the columns of :meth:`task_scores` with
        the value in ``value`` (for ``"auc"`` the stored per-task AUC of every binary unit,
        of any schema)."""
        if metric == "auc":
            return self.task_scores(keys).rename(columns={"test_auc": "value"})
        df = self.task_metrics(keys, metric)
        return df.drop(columns=["metric"])

    def array(self, key: str, name: str) -> np.ndarray | None:
        row = self._conn.execute("SELECT data FROM arrays WHERE key = ? AND name = ?",
                                 (key, name)).fetchone()
        return None if row is None else np.load(io.BytesIO(row[0]), allow_pickle=False)


def unit_target_kind(row: Mapping[str, Any]) -> str:
    """The target kind of a stored unit row (units stored before schema 5 are binary)."""
    kind = row.get("target_kind")
    return kind if isinstance(kind, str) and kind else "binary"


def unit_metric(row: Mapping[str, Any], metric: str) -> float | None:
    """The test value of ``metric`` of a stored unit row: ``metrics["test"][metric]``, and for
    ``"auc"`` the ``test_auc`` column (every binary unit, also one stored before schema 5);
    None when not recorded, undefined or failed."""
    recorded = row.get("metrics")
    if isinstance(recorded, dict) and isinstance(recorded.get("test"), dict):
        v = recorded["test"].get(metric)
        if v is not None:
            return float(v)
    if metric == "auc":
        v = row.get("test_auc")
        if v is not None and v == v:
            return float(v)
    return None


def recorded_metrics(row: Mapping[str, Any]) -> list[str]:
    """The metrics a stored unit row recorded on test (an old binary unit: the AUC)."""
    recorded = row.get("metrics")
    if isinstance(recorded, dict) and isinstance(recorded.get("test"), dict):
        return list(recorded["test"])
    return ["auc"] if unit_metric(row, "auc") is not None else []


def _name_of(config: Any, label: str) -> str:
    try:
        return json.loads(config)["name"]
    except Exception:  # noqa: BLE001 - an older row: the label up to its overrides
        return str(label).split("[")[0]


def _problem_size(diagnostics: Any) -> float:
    """``diagnostics["problem_size"]`` of a stored unit, NaN where it is not recorded."""
    try:
        return float(json.loads(diagnostics)["problem_size"])
    except Exception:  # noqa: BLE001 - an older row, or no diagnostics
        return float("nan")


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OSError):
        return True
    return True


def _is_sqlite_file(path: Path) -> bool:
    try:
        with open(path, "rb") as f:
            return f.read(16) == b"SQLite format 3\x00"
    except OSError:
        return False


def _connect_readonly(path: Path) -> sqlite3.Connection:
    """Open for reading; on a read-only location (no -shm/-wal can be created) fall back to
    SQLite's ``immutable`` mode, which reads the file as it is."""
    uri = path.resolve().as_uri()
    try:
        con = sqlite3.connect(f"{uri}?mode=ro", uri=True, timeout=60.0)
        con.execute("SELECT COUNT(*) FROM sqlite_master").fetchone()
        return con
    except sqlite3.OperationalError:
        return sqlite3.connect(f"{uri}?immutable=1", uri=True)


# SQLite's primary result codes (the low byte of ``sqlite_errorcode``)
SQLITE_PERM, SQLITE_BUSY, SQLITE_LOCKED, SQLITE_READONLY = 3, 5, 6, 8
SQLITE_IOERR, SQLITE_CORRUPT, SQLITE_FULL, SQLITE_CANTOPEN, SQLITE_NOTADB = 10, 11, 13, 14, 26
#: free bytes below which an I/O error is put down to a full disk
FULL_DISK_BYTES = 1 << 20


def disk_facts(path: Path) -> tuple[bool, int | None]:
    """(the file system holding ``path`` is mounted read-only, its free bytes or None), read
    at the nearest existing folder of ``path``."""
    probe = path if path.exists() else path.parent
    while not probe.exists() and probe != probe.parent:
        probe = probe.parent
    try:
        st = os.statvfs(probe)
    except (OSError, AttributeError):  # not POSIX, or vanished
        return False, None
    return bool(st.f_flag & getattr(os, "ST_RDONLY", 1)), st.f_bavail * st.f_frsize


def _primary_code(exc: BaseException) -> int | None:
    code = getattr(exc, "sqlite_errorcode", None)
    return code & 0xFF if isinstance(code, int) else None


def environment_cause(path: Path, exc: BaseException) -> str | None:
    """What in the environment stops reading or writing the store at ``path`` — a read-only
    file system, a full disk, missing permission, a missing folder, a lock held too long —
    judged from the error (SQLite's result code or the OS errno) and the file system; None
    when the error says nothing about the environment (then the file itself is at fault)."""
    import errno

    primary, err = _primary_code(exc), getattr(exc, "errno", None)
    read_only, free = disk_facts(path)
    folder = path.parent
    if read_only or err == errno.EROFS:
        return "it is on a read-only file system"
    if primary == SQLITE_FULL or err == errno.ENOSPC or (
            primary == SQLITE_IOERR and free is not None and free < FULL_DISK_BYTES):
        left = f"{free / 2**20:.1f} MiB free" if free is not None else "no space left"
        return f"the disk is full ({left} on the file system holding {str(folder)!r})"
    if err in (errno.EACCES, errno.EPERM) or primary in (SQLITE_PERM, SQLITE_READONLY) or (
            primary == SQLITE_CANTOPEN and folder.is_dir()
            and not os.access(path if path.exists() else folder, os.W_OK)):
        what = "the file" if path.exists() else "its folder"
        return f"permission denied: {what} is not writable by this user"
    if err == errno.ENOTDIR or (primary == SQLITE_CANTOPEN and not folder.is_dir()):
        return f"the folder {str(folder)!r} does not exist or is not a folder"
    if primary == SQLITE_CANTOPEN:
        return f"SQLite cannot open the file ({exc}; a network file system without locking?)"
    if primary in (SQLITE_BUSY, SQLITE_LOCKED):
        return (f"{exc} (another process has held the store locked for more than a minute: "
                "a run on another machine over a network file system?)")
    if primary == SQLITE_IOERR:
        return f"a disk I/O error ({exc}): the disk or the network file system failed"
    return None


def _cause(path: Path, exc: BaseException) -> str:
    return environment_cause(path, exc) or str(getattr(exc, "strerror", None) or exc)


def _open_failure(path: Path, exc: BaseException, existed: bool) -> str:
    """The message of a store that cannot be opened: the environment's cause first (read-only,
    permissions, disk full, missing folder), then what is wrong with the file itself (not an
    SQLite database, or damaged)."""
    where = str(path)
    cause = environment_cause(path, exc)
    if cause is not None and not existed:
        return (f"cannot create the results store {where!r}: {cause}. Nothing was written; "
                "fix the cause, or pass another --store PATH.")
    if cause is not None:
        read_only = cause.startswith("it is on a read-only")
        return (f"cannot open the results store {where!r} for writing: {cause}. Nothing in "
                "the store was changed; fix the cause, or pass another --store PATH"
                + ("; 'mtlbench results' and 'leaderboard' can read it where it is."
                   if read_only else "."))
    if existed and isinstance(exc, sqlite3.DatabaseError):
        if _primary_code(exc) == SQLITE_NOTADB or not _is_sqlite_file(path):
            return (f"cannot open the results store {where!r}: {exc} (the file is not an "
                    "SQLite database; it was left untouched). Choose another path with "
                    "--store PATH.")
        return _damaged_message(where, str(exc))
    return (f"cannot open the results store {where!r}: {getattr(exc, 'strerror', None) or exc}."
            " Choose a writable path with --store PATH.")


def _remove_new_store(path: Path) -> None:
    """Remove what a failed first open created at ``path`` (an empty file, its journal) —
    only when it holds no table, so a store another run has just created is never touched."""
    try:
        if path.exists() and path.stat().st_size:
            con = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True, timeout=1.0)
            try:
                if con.execute("SELECT COUNT(*) FROM sqlite_master").fetchone()[0]:
                    return
            finally:
                con.close()
        for p in (path, path.with_name(path.name + "-wal"), path.with_name(path.name + "-shm"),
                  path.with_name(path.name + "-journal")):
            p.unlink(missing_ok=True)
    except (OSError, sqlite3.Error):
        pass


def _damaged_message(where: str, detail: str) -> str:
    return (f"the results store {where!r} is not a valid SQLite database or is damaged "
            f"({detail}). Keep a copy; units may be recoverable with the sqlite3 tool "
            f"('sqlite3 {where} .recover | sqlite3 recovered.sqlite'); then pass another "
            "--store PATH (or move the file aside) to start a new store.")
