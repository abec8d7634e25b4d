"""Leaderboard notes from measurement: the models whose units changed when this code was rerun
under other floating-point arithmetic (``scripts/rerun_arithmetic.py --table``)."""
from __future__ import annotations

import json
from pathlib import Path

import pandas as pd

#: ``<store>`` + this (e.g. ``results/published.arithmetic.json``): the table that
#: ``scripts/rerun_arithmetic.py --table`` writes, read by :func:`arithmetic_notes`.
ARITHMETIC_TABLE_SUFFIX = ".arithmetic.json"


def arithmetic_notes(store, units: pd.DataFrame, dataset: str) -> list[str]:
    """One sentence per model whose units on ``dataset`` changed under other floating-point
    arithmetic when this code was rerun (other selections, or test values more than 1e-9
    apart), from the table beside the store (:data:`ARITHMETIC_TABLE_SUFFIX`); only for a
    model whose stored units carry the code fingerprint that was measured."""
    path = getattr(store, "path", None)
    table_path = Path(str(path)).with_suffix(ARITHMETIC_TABLE_SUFFIX) if path else None
    if table_path is None or not table_path.is_file():
        return []
    try:
        table = json.loads(table_path.read_text(encoding="utf-8"))
        measured = table["models"]
        kernels = ", ".join(table["kernels"])
    except (OSError, ValueError, KeyError, TypeError):
        return []
    codes: dict[str, set] = {}
    for label, prov in zip(units["model"], units.get("provenance", [None] * len(units))):
        code = ((prov or {}).get("model") or {}).get("code") if isinstance(prov, dict) else None
        codes.setdefault(label, set()).add(code)
    out = []
    for label in sorted(codes):
        cell = (measured.get(label) or {}).get(dataset)
        if not isinstance(cell, dict) or cell.get("code") not in codes[label]:
            continue
        differ, n = int(cell.get("selection_differs", 0)), int(cell.get("units", 0))
        gap = float(cell.get("max_test_diff", 0.0))
        if differ or gap > 1e-9:
            out.append(f"{label}: sensitive to floating-point arithmetic — rerun under the "
                       f"OpenBLAS kernels {kernels} (scripts/rerun_arithmetic.py), "
                       f"{differ} of {n} unit comparisons selected other hyperparameters and a "
                       f"test metric's value differed by up to {gap:.2g}.")
    return out


__all__ = ["ARITHMETIC_TABLE_SUFFIX", "arithmetic_notes"]
