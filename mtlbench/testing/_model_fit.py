"""How the model checks make, fit and score a model: each step under the contract's side
conditions (fit returns self and changes neither its hyperparameters nor the data; scores are
finite floats, one per row), a failure becoming a :class:`~mtlbench.testing.ConformanceError`
naming the model, the check and what to fix.
"""
from __future__ import annotations

import inspect
import json
from typing import Any, Mapping

import numpy as np

from mtlbench._json import jsonable
from mtlbench.errors import ModelContractError
from mtlbench.protocol import checked_scores

from ._common import _fail, _label
from .problems import _problem


def _init_signature(model_class: type) -> dict[str, inspect.Parameter]:
    sig = inspect.signature(model_class.__init__)
    return {p.name: p for p in sig.parameters.values() if p.name != "self"}


def _make(model_class: type, params: Mapping[str, Any] | None, check: str, **extra: Any):
    kwargs = {**dict(params or {}), **extra}
    try:
        return model_class(**kwargs)
    except Exception as exc:
        raise _fail(_label(model_class), check,
                    f"{model_class.__name__}(**{kwargs!r}) raised {type(exc).__name__}: {exc}; "
                    "__init__ must only store its keyword arguments") from exc


def _fit(model: Any, tasks: Any, check: str, init: Any = None) -> Any:
    """``model.fit`` with the contract's side conditions: returns self, leaves the
    hyperparameters and the training data unchanged."""
    who = _label(type(model))
    before = model.get_params(deep=False)
    fp = tasks.fingerprint()
    try:
        out = model.fit(tasks, init=init) if init is not None else model.fit(tasks)
    except Exception as exc:
        raise _fail(who, check, f"fit on {tasks!r} with {before} raised "
                                f"{type(exc).__name__}: {exc}") from exc
    if out is not model:
        raise _fail(who, check, f"fit must return self, returned {out!r}")
    after = model.get_params(deep=False)
    for k, v in before.items():
        if not _equal(after[k], v):
            raise _fail(who, check, f"fit changed hyperparameter {k}: {v!r} -> {after[k]!r}; "
                                    "keep derived values in attributes ending in '_'")
    if tasks.fingerprint() != fp:
        raise _fail(who, check, "fit modified the training data in place")
    return model


_FITTED: dict[tuple, Any] = {}


def _fitted(model_class: type, params: Mapping[str, Any] | None, key: str, check: str):
    """A model with ``params`` fitted on kit problem ``key``, fitted once and shared by the
    checks that only read it (callers must not refit it)."""
    ck = (model_class, json.dumps(dict(params or {}), sort_keys=True, default=repr), key)
    if ck not in _FITTED:
        if len(_FITTED) >= 16:
            _FITTED.clear()
        _FITTED[ck] = _fit(_make(model_class, params, check), _problem(key), check)
    return _FITTED[ck]


def _scores(model: Any, tasks: Any, check: str) -> list:
    """decision_function on every task, checked by the protocol's own score check
    (:func:`mtlbench.protocol.checked_scores`) and, more strictly, for a float dtype."""
    who = _label(type(model))
    out = []
    for t in range(tasks.T):
        X = tasks.X(t)
        try:
            raw = model.decision_function(X, t)
        except Exception as exc:
            raise _fail(who, check, f"decision_function(X of shape {X.shape}, task={t}) raised "
                                    f"{type(exc).__name__}: {exc}") from exc
        try:
            out.append(checked_scores(raw, X.shape[0], tasks.task_names[t], require_float=True))
        except (ModelContractError, FloatingPointError) as exc:
            raise _fail(who, check, str(exc)) from None
    return out


def _same_scores(a: list, b: list) -> tuple[bool, float]:
    diff = max(float(np.max(np.abs(x - y))) if x.size else 0.0 for x, y in zip(a, b))
    return all(np.array_equal(x, y) for x, y in zip(a, b)), diff


def _json_ok(value: Any) -> bool:
    try:
        json.dumps(jsonable(value), allow_nan=True)
        return True
    except (TypeError, ValueError):
        return False


def _equal(a: Any, b: Any) -> bool:
    if a is b:
        return True
    try:
        if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
            return bool(np.array_equal(a, b))
        return bool(a == b)
    except Exception:  # noqa: BLE001
        return False
