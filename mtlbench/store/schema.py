"""The results store's layout: its tables, the schema version and the migration of older
layouts.

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

Schema version
--------------
The layout is versioned with ``PRAGMA user_version`` (:data:`SCHEMA_VERSION`).  On open the
store is integrity-checked (``PRAGMA quick_check``); a store of an older layout is migrated in
place (columns and tables are only added, never dropped); a store written by a newer mtlbench
is refused with a message; opened read-only, an older layout is read as it is (missing
columns read as empty).
"""
from __future__ import annotations

import sqlite3

from .diagnosis import StoreError, _damaged_message

SCHEMA_VERSION = 5
"""1: the layout before versioning (user_version 0); 2: + ``provenance`` column, ``claims``;
3: + ``races``; 4: + ``origin`` column; 5: + ``target_kind`` and ``metrics`` columns,
``task_metrics``.  One migration path from any of them: missing columns and tables are added,
then the version is set.  A unit stored before 5 is binary and recorded the AUC only."""

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



def check_and_migrate(con: sqlite3.Connection, where: str, readonly: bool
                      ) -> tuple[list[str], bool, bool]:
    """Check the store open on ``con`` (at ``where``) and migrate an older layout in place,
    unless ``readonly``: returns (the unit columns it has, whether it has the ``races``
    table, whether it has ``task_metrics``)."""
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
    columns = [c for c in UNIT_COLUMNS if c not in missing_cols]
    has_races = "races" in tables
    has_task_metrics = "task_metrics" in tables
    needs = version < SCHEMA_VERSION or missing_cols or not {"units", "task_scores",
                                                            "arrays", "claims", "races",
                                                            "task_metrics"} <= tables
    if not needs:
        return columns, has_races, has_task_metrics
    if readonly:  # read what is there; missing columns read as empty
        if version == 0 and not tables:
            raise StoreError(f"{where!r} is not an mtlbench results store (it is empty)")
        return columns, has_races, has_task_metrics
    with con:  # migrate in one transaction: only add columns and tables
        for col in missing_cols:
            con.execute(f"ALTER TABLE units ADD COLUMN {col} {_COLUMN_TYPES.get(col, 'TEXT')}")
        con.executescript(SCHEMA)
        con.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
    return list(UNIT_COLUMNS), True, True
