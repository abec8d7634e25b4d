"""Results store: an embedded SQLite database (standard library), resumable and crash-safe.

Tables
------
units
    One row per unit of work (model, problem, repetition) with its identity key, status
    ("ok" or "failed"), chosen hyperparameters, the validation grid, mean validation and test
    AUC, times, iterations, convergence histories, diagnostics, split/data fingerprints, the
    protocol settings, package versions, seed, host and timestamps; failed units keep the error
    message and traceback.
task_scores
    One row per (unit, task) with the test AUC and the number of test labels.
arrays
    Small fitted arrays (W, groups) of repetition 0, for figures; npy bytes.

Every finished unit is written in one transaction as soon as it finishes (SQLite's journal
makes the write all-or-nothing, so a killed run never leaves a half-written unit).
"""
from __future__ import annotations

import io
import json
import os
import sqlite3
from pathlib import Path
from typing import Any, Iterable

import numpy as np
import pandas as pd

from .errors import ConfigError

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
    finished_at TEXT
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
CREATE TABLE IF NOT EXISTS arrays (
    key TEXT NOT NULL,
    name TEXT NOT NULL,
    data BLOB NOT NULL,
    PRIMARY KEY (key, name)
);
"""

UNIT_COLUMNS = ("key", "model", "dataset", "problem", "rep", "seed", "status", "best_params",
                "model_config", "grid", "val_auc", "test_auc", "n_tasks", "dropped_tasks",
                "time_total", "time_select", "time_fit", "n_iter", "history", "diagnostics",
                "split_fingerprint", "data_fingerprint", "protocol", "dataset_params",
                "versions", "host", "message", "traceback", "started_at", "finished_at")
JSON_COLUMNS = ("best_params", "model_config", "grid", "dropped_tasks", "history",
                "diagnostics", "protocol", "dataset_params", "versions")


class ResultStore:
    """SQLite results store at ``path`` (created with its folder if missing)."""

    def __init__(self, path: str | os.PathLike) -> None:
        self.path = Path(path).expanduser()
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._conn = sqlite3.connect(str(self.path), timeout=60.0)
            self._conn.execute("PRAGMA journal_mode=WAL")
            self._conn.execute("PRAGMA synchronous=NORMAL")
            self._conn.executescript(SCHEMA)
            self._conn.commit()
        except (OSError, sqlite3.Error) as exc:
            raise ConfigError(
                f"cannot open the results store {str(self.path)!r}: {exc}. "
                "Choose a writable path with --store PATH."
            ) from None

    def close(self) -> None:
        self._conn.close()

    def __enter__(self) -> "ResultStore":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    # ------------------------------------------------------------------ writing
    def write_unit(self, row: dict[str, Any], task_scores: Iterable[tuple] = (),
                   arrays: dict[str, np.ndarray] | None = None) -> None:
        """Insert or replace one unit with its per-task scores, atomically."""
        values = []
        for col in UNIT_COLUMNS:
            v = row.get(col)
            if col in JSON_COLUMNS and v is not None:
                v = json.dumps(v, sort_keys=True, default=repr)
            values.append(v)
        with self._conn:  # one transaction
            self._conn.execute(
                f"INSERT OR REPLACE INTO units ({', '.join(UNIT_COLUMNS)}) "
                f"VALUES ({', '.join('?' * len(UNIT_COLUMNS))})", values)
            self._conn.execute("DELETE FROM task_scores WHERE key = ?", (row["key"],))
            self._conn.executemany(
                "INSERT INTO task_scores (key, task_index, task_name, test_auc, n_test) "
                "VALUES (?, ?, ?, ?, ?)",
                [(row["key"], int(i), str(n), float(a), int(m)) for i, n, a, m in task_scores])
            self._conn.execute("DELETE FROM arrays WHERE key = ?", (row["key"],))
            for name, arr in (arrays or {}).items():
                buf = io.BytesIO()
                np.save(buf, np.asarray(arr), allow_pickle=False)
                self._conn.execute("INSERT INTO arrays (key, name, data) VALUES (?, ?, ?)",
                                   (row["key"], name, buf.getvalue()))

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
        for col in JSON_COLUMNS:
            df[col] = df[col].map(lambda v: json.loads(v) if isinstance(v, str) else v)
        return df

    def task_scores(self, keys: Iterable[str] | None = None) -> pd.DataFrame:
        q = ("SELECT u.model, u.dataset, u.problem, u.rep, t.task_index, t.task_name, t.test_auc, "
             "t.n_test, t.key FROM task_scores t JOIN units u ON u.key = t.key "
             "WHERE u.status = 'ok'")
        df = pd.read_sql_query(q, self._conn)
        if keys is not None:
            df = df[df["key"].isin(set(keys))]
        return df

    def array(self, key: str, name: str) -> np.ndarray | None:
        row = self._conn.execute("SELECT data FROM arrays WHERE key = ? AND name = ?",
                                 (key, name)).fetchone()
        return None if row is None else np.load(io.BytesIO(row[0]), allow_pickle=False)

    def summary(self, *, problems: Iterable[str] | None = None,
                models: Iterable[str] | None = None,
                keys: Iterable[str] | None = None) -> pd.DataFrame:
        """Mean ± std (over repetitions) of test AUC per (problem, model), with failures.

        ``keys`` restricts to given units (a run's own units: the same model label may have
        been run earlier with another search space or protocol)."""
        df = self.units(problems=problems, models=models, keys=keys)
        if df.empty:
            return pd.DataFrame(columns=["problem", "model", "reps", "failed", "test_auc_mean",
                                         "test_auc_std", "time_total"])
        ok = df[df.status == "ok"]
        g = ok.groupby(["problem", "model"])
        out = pd.DataFrame({
            "reps": g.size(),
            "test_auc_mean": g.test_auc.mean(),
            "test_auc_std": g.test_auc.std(ddof=1),
            "time_total": g.time_total.sum(),
        })
        failed = df[df.status != "ok"].groupby(["problem", "model"]).size().rename("failed")
        out = out.join(failed, how="outer").reset_index()
        out["reps"] = out["reps"].fillna(0).astype(int)
        out["failed"] = out["failed"].fillna(0).astype(int)
        return out.sort_values(["problem", "test_auc_mean"], ascending=[True, False])
