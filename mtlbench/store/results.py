"""Results store: an embedded SQLite database (standard library), resumable and crash-safe.

:class:`ResultStore` opens a store (its layout and migrations: :mod:`mtlbench.store.schema`),
writes and reads units and races, and claims the units a run computes
(:mod:`mtlbench.store.claims`); what stops it is said by :mod:`mtlbench.store.diagnosis`.
Every finished unit is written in one transaction as soon as it finishes, which also drops the
writer's claim of it (SQLite's journal makes the write all-or-nothing, so a killed run never
leaves a half-written unit, nor a claim on a finished one); :meth:`ResultStore.write_units`
and :meth:`ResultStore.transaction` make many units one transaction (an import, ``mtlbench
merge``).  ``ResultStore(path, readonly=True)`` opens for reading only (the ``results`` and
``leaderboard`` commands), which also works on a read-only location.
"""
from __future__ import annotations

import contextlib
import io
import json
import os
import socket
import sqlite3
import uuid
from pathlib import Path
from typing import Any, Iterable, Iterator, Mapping

import numpy as np
import pandas as pd

from .claims import Claims
from .diagnosis import StoreError, _cause, _open_failure, _remove_new_store
from .schema import (JSON_COLUMNS, RACE_COLUMNS, RACE_JSON_COLUMNS, UNIT_COLUMNS,
                     check_and_migrate)



class ResultStore(Claims):
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
            self.columns, self.has_races, self.has_task_metrics = check_and_migrate(
                self._conn, where, readonly)
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

