"""The results store, an embedded SQLite database: resumable and crash-safe.

* :mod:`.schema` — the tables, the schema version and the migration of older layouts;
* :mod:`.results` — :class:`ResultStore`: opening, writing and reading units and races;
* :mod:`.claims` — the claims of the units a running ``compare`` computes;
* :mod:`.diagnosis` — :class:`StoreError` and why a store cannot be opened, read or written.
"""
from __future__ import annotations

from .claims import CLAIM_LEASE_SECONDS
from .diagnosis import FULL_DISK_BYTES, StoreError, disk_facts, environment_cause
from .results import ResultStore, recorded_metrics, unit_metric, unit_target_kind
from .schema import (JSON_COLUMNS, RACE_COLUMNS, RACE_JSON_COLUMNS, REQUIRED_COLUMNS, SCHEMA,
                     SCHEMA_VERSION, UNIT_COLUMNS)

__all__ = ["ResultStore", "StoreError", "SCHEMA_VERSION", "SCHEMA", "UNIT_COLUMNS",
           "JSON_COLUMNS", "RACE_COLUMNS", "RACE_JSON_COLUMNS", "REQUIRED_COLUMNS",
           "CLAIM_LEASE_SECONDS", "FULL_DISK_BYTES", "disk_facts", "environment_cause",
           "unit_target_kind", "unit_metric", "recorded_metrics"]
