"""The one JSON cleaner of mtlbench: numpy values to plain Python, and canonical JSON.

Results (histories, diagnostics, unit keys), the conformance kit and published tables all
turn numpy arrays and scalars into JSON through :func:`jsonable`; unit keys use
:func:`config_json` (sorted keys, no spaces), so one value always has one key.
"""
from __future__ import annotations

import json
import math
from typing import Any, Mapping

import numpy as np

__all__ = ["jsonable", "config_json"]


def jsonable(obj: Any, *, strict: bool = False) -> Any:
    """``obj`` as lists/dicts of plain Python values: numpy arrays become (nested) lists,
    numpy scalars Python numbers, mapping keys strings, tuples lists.

    ``strict=True`` also turns NaN and +-inf into None, for files that must be strict JSON
    (``json.dumps(..., allow_nan=False)``); other values pass unchanged."""
    if isinstance(obj, np.ndarray):
        out = obj.tolist()
        return jsonable(out, strict=True) if strict else out
    if isinstance(obj, (np.floating, np.integer, np.bool_)):
        obj = obj.item()
    elif isinstance(obj, Mapping):
        return {str(k): jsonable(v, strict=strict) for k, v in obj.items()}
    elif isinstance(obj, (list, tuple)):
        return [jsonable(v, strict=strict) for v in obj]
    if strict and isinstance(obj, float) and not math.isfinite(obj):
        return None
    return obj


def config_json(obj: Any) -> str:
    """Canonical JSON (sorted keys, no spaces) used in unit keys."""
    return json.dumps(jsonable(obj), sort_keys=True, separators=(",", ":"), default=repr)
