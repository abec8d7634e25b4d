"""Conformance kit for mtlbench plugins: reusable checks plus a pytest plugin.

A plugin author gets the whole kit by subclassing in a test file::

    from mtlbench.testing import ModelConformance, DatasetConformance

    class TestMeanReg(ModelConformance):
        model_class = MeanReg          # the MTLModel subclass under test
        params = {}                    # optional constructor overrides for the checks

    class TestMyData(DatasetConformance):
        dataset = MyDataset            # a Dataset subclass or instance

and runs plain ``pytest``.  The same checks are plain functions (``check_model``,
``check_dataset`` and the ``check_*`` they call) usable from any script; each raises
:class:`ConformanceError` (an ``AssertionError``) whose message names the plugin, the check and
what to fix.

Model checks (why each matters for the benchmark):

* ``check_model_metadata`` - registry ``name``, ``paper``, ``search_space`` mapping, an
  ``__init__`` with defaults for every parameter and no ``*args``/``**kwargs``;
* ``check_clone`` - scikit-learn ``clone`` and a ``get_params``/``set_params`` round trip keep
  every hyperparameter unchanged (the protocol clones a model for every grid point);
* ``check_search_space`` - every key is an ``__init__`` parameter, every entry a non-empty list
  of distinct JSON-able values (they are stored with results), at most ``max_grid`` grid points,
  and the first and last value of each list are accepted by ``fit``;
* ``check_fit_shapes`` - on tasks of different sizes (fewer and more samples than features),
  ``fit`` returns ``self``, leaves hyperparameters and the data untouched, and
  ``decision_function`` returns finite float scores of shape (n,) for every task (also for a
  single row); ``coef_`` is (d, T), ``feature_groups_`` (d,), ``task_groups_`` (T,),
  ``diagnostics_`` JSON-able, when present;
* ``check_refit`` - the same object refitted on a problem with another number of tasks forgets
  the first fit;
* ``check_deterministic`` - two fits give bit-identical scores even when the global numpy
  random state differs (results must be a function of data, seed and hyperparameters);
* ``check_pickle`` - the class and a fitted model survive a plain ``pickle`` round trip with
  identical scores (needed for parallel and distributed runs);
* ``check_warm_start`` - when ``supports_warm_start`` is true, ``fit(tasks, init=other)`` with a
  model fitted at another grid point works; when the model also declares ``convex = True``
  the warm-started fit reaches the cold fit's objective (or scores) within ``rtol`` (1e-3);
* ``check_objective_history`` - ``objective_history_`` (when present) holds finite floats, and is
  non-increasing (relative tolerance 1e-8) when the model declares ``monotone_objective = True``;
* ``check_beats_chance`` - mean per-task test AUC > ``min_auc`` (0.6) on a small version of the
  paper's simulated problem, with the default hyperparameters or, failing that, the model's
  own search space under the benchmark protocol.

A model may declare ``kit_params`` (a dict of constructor overrides, e.g. fewer iterations)
that the kit uses instead of the defaults to keep the checks fast.

Dataset checks: ``check_dataset_metadata`` (name, description, source, layout_help strings),
``check_dataset_problems`` (a non-empty list of distinct names), ``check_dataset_params``
(a JSON-able dict), ``check_dataset_availability`` (one of :data:`AVAILABILITY_VALUES`),
``check_dataset_load`` (a valid :class:`~mtlbench.data.TaskSet`, at least one task the protocol
can split, consistent ground truth in ``meta``) and ``check_dataset_deterministic`` (two loads
have the same fingerprint).  Data that is not available raises :class:`DataNotAvailable`
(pytest: a skip with the reason), never a download.

The pytest plugin (entry point ``pytest11: mtlbench``) adds

* ``--mtlbench-data-dir DIR`` (default ``$MTLBENCH_DATA_DIR``): where dataset checks look for files;
* ``--mtlbench-conformance NAMES`` : run the kit on *installed* plugins by registry name
  (comma-separated model or dataset names, or ``all``/``models``/``datasets``) without writing
  a test file, e.g. ``pytest --mtlbench-conformance meanreg``;
* fixtures ``mtlbench_data_dir``, ``mtlbench_small_problem`` and ``mtlbench_uneven_problem``.

This module imports only the standard library (and pytest, when present) at import time,
because pytest imports it in every run; numpy, scikit-learn and mtlbench's own modules are
imported inside the checks.
"""
from __future__ import annotations

import inspect
import json
import math
import os
import pickle
import re
from typing import Any, Callable, Iterable, Mapping

try:  # the check functions work without pytest; the test classes and the plugin need it
    import pytest
except ImportError:  # pragma: no cover
    pytest = None  # type: ignore[assignment]

__all__ = [
    "ConformanceError", "DataNotAvailable", "ModelConformance", "DatasetConformance",
    "MODEL_CHECKS", "DATASET_CHECKS", "AVAILABILITY_VALUES",
    "check_model", "check_dataset", "small_problem", "uneven_problem",
    "check_model_metadata", "check_clone", "check_search_space", "check_fit_shapes",
    "check_refit", "check_deterministic", "check_pickle", "check_warm_start",
    "check_objective_history", "check_beats_chance",
    "check_dataset_metadata", "check_dataset_problems", "check_dataset_params",
    "check_dataset_availability", "check_dataset_load", "check_dataset_deterministic",
]

#: What ``Dataset.availability`` may return.
AVAILABILITY_VALUES = ("generated", "cached", "in data-dir", "downloadable", "needs local files")
#: Availabilities for which ``load`` needs neither network nor user action.
LOADABLE = ("generated", "cached", "in data-dir")
_NAME_RE = re.compile(r"^[a-z0-9][a-z0-9_.\-]*$")
#: Relative tolerance of the non-increasing objective check.
MONOTONE_RTOL = 1e-8


class ConformanceError(AssertionError):
    """A plugin breaks the mtlbench contract; the message says which check and what to fix."""


class DataNotAvailable(Exception):
    """A dataset's files are not available locally; dataset checks that need data skip."""


def _fail(who: str, check: str, msg: str) -> ConformanceError:
    return ConformanceError(f"{who}: {check}: {msg}")


def _label(model_class: Any) -> str:
    name = getattr(model_class, "name", "") or ""
    return f"{name} ({model_class.__module__}.{model_class.__qualname__})" if name \
        else f"{model_class.__module__}.{model_class.__qualname__}"


# ============================================================================ test problems
def small_problem(seed: int = 0, n_samples: int = 60, n_positive: int = 20):
    """A small version of the paper's simulated problem (``make_simulated``): 10 tasks in
    5 blocks of 2, 16 features in blocks (4, 4, 2, 4, 2), ``n_samples`` labelled samples per
    task of which ``n_positive`` are positive.  Takes milliseconds to fit for linear models."""
    from .synthetic import make_simulated

    return make_simulated(seed=seed, n_samples=n_samples, n_positive=n_positive,
                          block_features=(4, 4, 2, 4, 2), users_per_block=2)


def uneven_problem(seed: int = 1, sizes: Iterable[int] = (9, 14, 23, 31, 48, 70), d: int = 12):
    """Tasks of different sizes over ``d`` features: some tasks have fewer samples than
    features, some more.  Labels come from a shared linear model plus a task-specific one, with
    at least 3 labels of each class per task."""
    import numpy as np

    from mtlbench.data import TaskSet

    rng = np.random.default_rng(seed)
    w0 = rng.standard_normal(d)
    Xs, ys = [], []
    for n in sizes:
        X = rng.standard_normal((n, d))
        s = X @ (w0 + 0.5 * rng.standard_normal(d)) + 0.3 * rng.standard_normal(n)
        y = np.where(s > np.median(s), 1.0, -1.0)
        Xs.append(X)
        ys.append(y)
    return TaskSet.from_arrays("uneven", Xs, ys,
                               task_names=[f"task{t}-n{n}" for t, n in enumerate(sizes)])


# ============================================================================ model helpers
def _init_signature(model_class: type) -> dict[str, inspect.Parameter]:
    sig = inspect.signature(model_class.__init__)
    return {p.name: p for p in sig.parameters.values() if p.name != "self"}


def _make(model_class: type, params: Mapping[str, Any] | None, check: str, **extra: Any):
    kwargs = {**dict(params or {}), **extra}
    try:
        return model_class(**kwargs)
    except Exception as exc:  # noqa: BLE001
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
    except Exception as exc:  # noqa: BLE001
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


_PROBLEMS: dict[str, Any] = {}
_FITTED: dict[tuple, Any] = {}


def _problem(key: str):
    """The kit's problems, built once per process: "small" (10 tasks x 30 samples),
    "small60" (10 tasks x 60 samples, for beats_chance) and "uneven"."""
    if key not in _PROBLEMS:
        _PROBLEMS[key] = {"small": lambda: small_problem(n_samples=30, n_positive=10),
                          "small60": lambda: small_problem(),
                          "uneven": lambda: uneven_problem()}[key]()
    return _PROBLEMS[key]


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
    """decision_function on every task, checked for shape, dtype and finiteness."""
    import numpy as np

    who = _label(type(model))
    out = []
    for t in range(tasks.T):
        X = tasks.X(t)
        try:
            s = model.decision_function(X, t)
        except Exception as exc:  # noqa: BLE001
            raise _fail(who, check, f"decision_function(X of shape {X.shape}, task={t}) raised "
                                    f"{type(exc).__name__}: {exc}") from exc
        s = np.asarray(s)
        if s.shape != (X.shape[0],):
            raise _fail(who, check, f"decision_function returned shape {s.shape} for task {t} "
                                    f"with {X.shape[0]} rows; expected ({X.shape[0]},)")
        if not np.issubdtype(s.dtype, np.floating):
            raise _fail(who, check, f"decision_function returned dtype {s.dtype}; expected float")
        if not np.all(np.isfinite(s)):
            raise _fail(who, check, f"decision_function returned NaN/inf for task {t}")
        out.append(s.astype(np.float64, copy=False))
    return out


def _same_scores(a: list, b: list) -> tuple[bool, float]:
    import numpy as np

    diff = max(float(np.max(np.abs(x - y))) if x.size else 0.0 for x, y in zip(a, b))
    return all(np.array_equal(x, y) for x, y in zip(a, b)), diff


def _json_ok(value: Any) -> bool:
    from mtlbench.protocol import _jsonable

    try:
        json.dumps(_jsonable(value), allow_nan=True)
        return True
    except (TypeError, ValueError):
        return False


# ============================================================================ model checks
def check_model_metadata(model_class: type, params: Mapping[str, Any] | None = None) -> None:
    """Class attributes and constructor follow the contract."""
    from mtlbench.model import MTLModel

    check = "metadata"
    who = _label(model_class) if isinstance(model_class, type) else repr(model_class)
    if not (isinstance(model_class, type) and issubclass(model_class, MTLModel)):
        raise _fail(who, check, "must be a subclass of mtlbench.MTLModel")
    name = getattr(model_class, "name", "")
    if not isinstance(name, str) or not _NAME_RE.match(name):
        raise _fail(who, check, f"class attribute 'name' must be a lower-case registry name "
                                f"(letters, digits, '-', '_', '.'), got {name!r}")
    if not isinstance(getattr(model_class, "paper", ""), str):
        raise _fail(who, check, "class attribute 'paper' must be a citation string")
    if not isinstance(getattr(model_class, "search_space", None), Mapping):
        raise _fail(who, check, "class attribute 'search_space' must be a dict param -> list")
    if not isinstance(getattr(model_class, "supports_warm_start", False), bool):
        raise _fail(who, check, "class attribute 'supports_warm_start' must be a bool")
    for p in _init_signature(model_class).values():
        if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
            raise _fail(who, check, f"__init__ must list every hyperparameter explicitly; "
                                    f"found *{p.name}")
        if p.default is p.empty and p.name not in (params or {}):
            raise _fail(who, check, f"__init__ parameter {p.name!r} needs a default value "
                                    "(the benchmark builds models from defaults plus overrides)")
    _make(model_class, params, check)


def check_clone(model_class: type, params: Mapping[str, Any] | None = None) -> None:
    """sklearn ``clone`` and ``get_params``/``set_params`` keep every hyperparameter."""
    from sklearn.base import clone

    check = "clone"
    who = _label(model_class)
    model = _make(model_class, params, check)
    init_names = set(_init_signature(model_class))
    try:
        got = model.get_params(deep=False)
    except Exception as exc:  # noqa: BLE001
        raise _fail(who, check, f"get_params raised {type(exc).__name__}: {exc}; store every "
                                "__init__ argument as an attribute of the same name") from exc
    if set(got) != init_names:
        raise _fail(who, check, f"get_params returned {sorted(got)}, expected the __init__ "
                                f"parameters {sorted(init_names)}")
    sig = _init_signature(model_class)
    passed = {k: p.default for k, p in sig.items() if p.default is not p.empty}
    passed.update(params or {})
    for k, v in passed.items():
        if not _equal(got[k], v):
            raise _fail(who, check, f"__init__ changed {k}: passed {v!r}, stored {got[k]!r}; "
                                    "store hyperparameters unchanged and validate in fit")
    try:
        twin = clone(model)
    except Exception as exc:  # noqa: BLE001
        raise _fail(who, check, f"sklearn.base.clone raised {type(exc).__name__}: {exc}") from exc
    twin_params = twin.get_params(deep=False)
    for k, v in got.items():
        if not _equal(twin_params[k], v):
            raise _fail(who, check, f"clone changed {k}: {v!r} -> {twin_params[k]!r}")
    rebuilt = _make(model_class, got, check)
    if not all(_equal(rebuilt.get_params(deep=False)[k], v) for k, v in got.items()):
        raise _fail(who, check, "constructing from get_params() does not give the same params")
    # set_params with each grid value works and is visible through get_params
    for key, values in dict(model_class.search_space).items():
        if key in init_names and isinstance(values, (list, tuple)) and values:
            try:
                m2 = clone(model).set_params(**{key: values[-1]})
            except Exception as exc:  # noqa: BLE001
                raise _fail(who, check, f"set_params({key}={values[-1]!r}) raised "
                                        f"{type(exc).__name__}: {exc}") from exc
            if not _equal(m2.get_params(deep=False)[key], values[-1]):
                raise _fail(who, check, f"set_params({key}=...) did not store the value")


def _equal(a: Any, b: Any) -> bool:
    if a is b:
        return True
    try:
        import numpy as np

        if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
            return bool(np.array_equal(a, b))
        return bool(a == b)
    except Exception:  # noqa: BLE001
        return False


def check_search_space(model_class: type, params: Mapping[str, Any] | None = None,
                       max_grid: int = 24, fit_values: str | bool = "extremes") -> None:
    """The declared grid is usable: keys are ``__init__`` parameters, lists are non-empty with
    distinct JSON-able values, the grid has at most ``max_grid`` points, and values are accepted by
    ``fit`` (one parameter at a time, the others at their defaults): the first and last value
    of each list (``fit_values="extremes"``), every value (``"all"``) or none (False)."""
    check = "search_space"
    who = _label(model_class)
    space = dict(model_class.search_space)
    init_names = set(_init_signature(model_class))
    size = 1
    from mtlbench.space import Param

    space = {k: (list(v.grid) if isinstance(v, Param) else v) for k, v in space.items()}
    for key, values in space.items():
        if key not in init_names:
            raise _fail(who, check, f"search_space key {key!r} is not an __init__ parameter "
                                    f"(parameters: {sorted(init_names)})")
        if isinstance(values, (str, bytes)) or not isinstance(values, (list, tuple)):
            raise _fail(who, check, f"search_space[{key!r}] must be a list of values, "
                                    f"got {values!r}")
        if len(values) == 0:
            raise _fail(who, check, f"search_space[{key!r}] is empty")
        if len({json.dumps(v, sort_keys=True, default=repr) for v in values}) != len(values):
            raise _fail(who, check, f"search_space[{key!r}] has repeated values: {values!r}")
        if not _json_ok(list(values)):
            raise _fail(who, check, f"search_space[{key!r}] values must be JSON-able "
                                    f"(they are stored with results), got {values!r}")
        size *= len(values)
    if size > max_grid:
        raise _fail(who, check, f"the grid has {size} points (> {max_grid}); every point is "
                                "fitted for every repetition: keep it small (typically <= 12)")
    if not fit_values:
        return
    tasks = _problem("small")
    defaults = _make(model_class, params, check).get_params(deep=False)
    for key, values in space.items():
        if params and key in params:
            continue  # fixed by the author for the kit
        chosen = list(values) if fit_values == "all" else list(values)[::max(len(values) - 1, 1)]
        for v in chosen:
            where = f"{check} ({key}={v!r})"
            if _equal(defaults.get(key), v):
                model = _fitted(model_class, params, "small", where)
            else:
                model = _fit(_make(model_class, params, where, **{key: v}), tasks, where)
            _scores(model, tasks, where)


def check_fit_shapes(model_class: type, params: Mapping[str, Any] | None = None) -> None:
    """Finite scores of the right shape on tasks of different sizes; fitted attributes valid;
    neither the hyperparameters nor the data change during ``fit``."""
    import numpy as np

    check = "fit_shapes"
    who = _label(model_class)
    tasks = _problem("uneven")
    model = _fitted(model_class, params, "uneven", check)
    _scores(model, tasks, check)
    one = tasks.X(0)[:1]
    s1 = np.asarray(model.decision_function(one, tasks.T - 1))
    if s1.shape != (1,):
        raise _fail(who, check, f"decision_function on one row returned shape {s1.shape}")
    T, d = tasks.T, tasks.d
    coef = getattr(model, "coef_", None)
    if coef is not None:
        coef = np.asarray(coef)
        if coef.shape != (d, T):
            raise _fail(who, check, f"coef_ has shape {coef.shape}; expected (d, T) = ({d}, {T})")
        if not np.all(np.isfinite(coef)):
            raise _fail(who, check, "coef_ contains NaN/inf")
    for attr, n, what in (("feature_groups_", d, "d"), ("task_groups_", T, "T")):
        g = getattr(model, attr, None)
        if g is not None:
            g = np.asarray(g)
            if g.shape != (n,) or not np.issubdtype(g.dtype, np.integer):
                raise _fail(who, check, f"{attr} must be an int array of shape ({what},) = "
                                        f"({n},), got {g.dtype} {g.shape}")
    diag = getattr(model, "diagnostics_", None)
    if diag is not None and (not isinstance(diag, Mapping) or not _json_ok(diag)):
        raise _fail(who, check, "diagnostics_ must be a JSON-able dict (numbers, strings, lists)")
    n_iter = getattr(model, "n_iter_", None)
    if n_iter is not None:
        try:
            ok = int(np.max(n_iter)) >= 0
        except (TypeError, ValueError):
            ok = False
        if not ok:
            raise _fail(who, check, f"n_iter_ must be a non-negative int, got {n_iter!r}")


def check_refit(model_class: type, params: Mapping[str, Any] | None = None) -> None:
    """Refitting a fitted object on another problem (other T, other sizes) gives that
    problem's shapes: ``fit`` starts from scratch."""
    check = "refit"
    b = _problem("small")
    try:  # a copy of the shared fit on the uneven problem saves one fit
        model = pickle.loads(pickle.dumps(_fitted(model_class, params, "uneven", check)))
    except (pickle.PicklingError, TypeError, AttributeError):
        model = _fit(_make(model_class, params, check), _problem("uneven"), check)
    _fit(model, b, check)
    coef = getattr(model, "coef_", None)
    if coef is not None and tuple(coef.shape) != (b.d, b.T):
        raise _fail(_label(model_class), check,
                    f"after refitting on {b.T} tasks coef_ has shape {coef.shape}: fit must "
                    "start from scratch (or from init) and not reuse the previous fit")
    _scores(model, b, check)


def check_deterministic(model_class: type, params: Mapping[str, Any] | None = None) -> None:
    """Two fits on the same data give bit-identical scores, whatever the global numpy seed."""
    import numpy as np

    check = "deterministic"
    tasks = _problem("small")
    first = _scores(_fitted(model_class, params, "small", check), tasks, check)
    state = np.random.get_state()
    try:
        np.random.seed(54321)
        model = _fit(_make(model_class, params, check), tasks, check)
    finally:
        np.random.set_state(state)
    same, diff = _same_scores(first, _scores(model, tasks, check))
    if not same:
        raise _fail(_label(model_class), check,
                    f"two fits on the same data differ (max |score difference| {diff:.3g}); "
                    "seed every random choice from a hyperparameter (e.g. random_state=0) or a "
                    "fixed numpy Generator, never the global numpy state")


def check_pickle(model_class: type, params: Mapping[str, Any] | None = None) -> None:
    """Class, unfitted and fitted model survive ``pickle``; the fitted copy scores identically."""
    check = "pickle"
    who = _label(model_class)
    if "<locals>" in model_class.__qualname__ or model_class.__module__ == "__main__":
        raise _fail(who, check, "the class must be importable by its module path (defined at "
                                "the top level of an installed module) to run in worker processes")
    tasks = _problem("small")
    try:
        pickle.loads(pickle.dumps(model_class))
        pickle.loads(pickle.dumps(_make(model_class, params, check)))
        model = _fitted(model_class, params, "small", check)
        copy = pickle.loads(pickle.dumps(model, protocol=pickle.HIGHEST_PROTOCOL))
    except ConformanceError:
        raise
    except Exception as exc:  # noqa: BLE001
        raise _fail(who, check, f"pickle round trip raised {type(exc).__name__}: {exc}; keep "
                                "fitted state in plain attributes (arrays, numbers, lists), not "
                                "lambdas, open files or locks") from exc
    same, diff = _same_scores(_scores(model, tasks, check), _scores(copy, tasks, check))
    if not same:
        raise _fail(who, check, f"scores differ after a pickle round trip (max {diff:.3g})")


WARM_START_RTOL = 1e-3


def _grid_of(decl: Any) -> list:
    """The starting grid of a search-space entry (a Param or a plain list)."""
    from mtlbench.space import Param

    return list(decl.grid) if isinstance(decl, Param) else list(decl)


def check_warm_start(model_class: type, params: Mapping[str, Any] | None = None,
                     rtol: float = WARM_START_RTOL) -> None:
    """``fit(tasks, init=previous)`` works when ``supports_warm_start`` is declared; the
    previous model was fitted at other hyperparameters, as in the protocol's search.

    For a model declaring ``convex = True`` (the only models the protocol warm-starts), the
    warm-started fit must reach the cold fit's answer: the final objective
    (``objective_history_[-1]``, when both fits set it) within ``rtol`` relative to
    max(1, |cold objective|), else the scores within ``rtol`` relative to max(1, max |cold
    score|).  A convex problem has one optimal value, so a start point may change only how
    fast it is reached."""
    import numpy as np

    if not getattr(model_class, "supports_warm_start", False):
        return
    check = "warm_start"
    who = _label(model_class)
    tasks = _problem("small")
    space = {k: _grid_of(v) for k, v in dict(model_class.search_space).items()
             if k not in (params or {})}
    last = {k: v[-1] for k, v in space.items()}
    first = {k: v[0] for k, v in space.items()}
    prev = _fit(_make(model_class, params, check, **first), tasks, check)
    model = _make(model_class, params, check, **last)
    _fit(model, tasks, check, init=prev)
    warm_scores = _scores(model, tasks, check)
    if not getattr(model_class, "convex", False):
        return
    cold = _fit(_make(model_class, params, check, **last), tasks, check)
    hw = getattr(model, "objective_history_", None)
    hc = getattr(cold, "objective_history_", None)
    if hw is not None and hc is not None and len(hw) and len(hc):
        fw, fc = float(np.ravel(hw)[-1]), float(np.ravel(hc)[-1])
        if not abs(fw - fc) <= rtol * max(1.0, abs(fc)):
            raise _fail(who, check, f"convex model: the fit at {last} warm-started from {first} "
                                    f"ends at objective {fw!r}, the cold fit at {fc!r} "
                                    f"(relative tolerance {rtol:g}); a warm start must not "
                                    "change the answer")
        return
    cold_scores = _scores(cold, tasks, check)
    scale = max(1.0, max(float(np.max(np.abs(c))) if c.size else 0.0 for c in cold_scores))
    _, diff = _same_scores(warm_scores, cold_scores)
    if diff > rtol * scale:
        raise _fail(who, check, f"convex model: scores of the fit at {last} warm-started from "
                                f"{first} differ from the cold fit's by {diff:.3g} (> {rtol:g} x "
                                f"{scale:.3g}); a warm start must not change the answer")


def check_objective_history(model_class: type, params: Mapping[str, Any] | None = None,
                            monotone: bool | None = None) -> None:
    """``objective_history_`` (when set) holds finite numbers; it is non-increasing (relative
    tolerance 1e-8) when declared monotone (``monotone_objective = True`` on the class, or
    ``monotone=True`` here)."""
    import numpy as np

    check = "objective_history"
    who = _label(model_class)
    if monotone is None:
        monotone = bool(getattr(model_class, "monotone_objective", False))
    model = _fitted(model_class, params, "small", check)
    hist = getattr(model, "objective_history_", None)
    if hist is None:
        if monotone:
            raise _fail(who, check, "monotone_objective is declared but fit sets no "
                                    "objective_history_")
        return
    try:
        h = np.asarray(hist, dtype=np.float64).ravel()
    except (TypeError, ValueError) as exc:
        raise _fail(who, check, f"objective_history_ must be a list of floats ({exc})") from exc
    if not np.all(np.isfinite(h)):
        raise _fail(who, check, "objective_history_ contains NaN/inf")
    if monotone and h.size > 1:
        tol = MONOTONE_RTOL * np.maximum(1.0, np.abs(h[:-1]))
        bad = np.flatnonzero(h[1:] > h[:-1] + tol)
        if bad.size:
            i = int(bad[0])
            raise _fail(who, check, f"objective increased at iteration {i + 1}: "
                                    f"{h[i]!r} -> {h[i + 1]!r} (declared monotone_objective)")


def check_beats_chance(model_class: type, params: Mapping[str, Any] | None = None,
                       min_auc: float = 0.6, tasks: Any = None) -> float:
    """Mean per-task test AUC above ``min_auc`` on a small simulated problem, under the
    benchmark protocol (one repetition, 25 % test): first with the default hyperparameters,
    then, if that is not enough, with the model's search space.  Returns the best test AUC."""
    from mtlbench.protocol import ProtocolConfig, run_protocol

    check = "beats_chance"
    from mtlbench.protocol import make_split, mean_auc

    tasks = tasks if tasks is not None else _problem("small60")
    # the starting grid only (the fallback below), to keep the kit fast
    config = ProtocolConfig(reps=1, seed=0, test_fraction=0.25, val_fraction=0.25, search="grid")
    who = _label(model_class)
    try:  # defaults: one fit on train+validation, scored on test
        split = make_split(tasks, config, rep=0)
        trainval = tasks.subset(split.trainval, meta={})
        test = tasks.subset(split.test, meta={})
        model = _fit(_make(model_class, params, check), trainval, check)
        auc = mean_auc(model, test)[0]
    except ConformanceError:
        raise
    except Exception as exc:  # noqa: BLE001
        raise _fail(who, check, f"scoring failed on the small simulated problem: "
                                f"{type(exc).__name__}: {exc}") from exc
    if auc > min_auc:
        return auc
    tried = [f"defaults: {auc:.3f}"]
    space = {k: v for k, v in dict(model_class.search_space).items() if k not in (params or {})}
    if space:  # the model's own grid under the protocol (validation-based selection)
        try:
            out = run_protocol(_make(model_class, params, check), space, tasks, config, rep=0)
        except Exception as exc:  # noqa: BLE001
            raise _fail(who, check, f"the protocol failed on the small simulated problem: "
                                    f"{type(exc).__name__}: {exc}") from exc
        tried.append(f"grid: {out.test_auc:.3f}")
        if out.test_auc > min_auc:
            return out.test_auc
    raise _fail(who, check,
                f"mean test AUC <= {min_auc} on a small simulated problem ({tasks.T} tasks, "
                f"{tasks.d} features, {tasks.sizes()[0]} samples per task) where ridge "
                f"regression scores > 0.9 ({'; '.join(tried)}); is decision_function's sign "
                "or task index wrong, or is the grid too strong for small problems?")


#: Model checks in the order :func:`check_model` runs them.
MODEL_CHECKS: dict[str, Callable[..., Any]] = {
    "metadata": check_model_metadata,
    "clone": check_clone,
    "search_space": check_search_space,
    "fit_shapes": check_fit_shapes,
    "refit": check_refit,
    "deterministic": check_deterministic,
    "pickle": check_pickle,
    "warm_start": check_warm_start,
    "objective_history": check_objective_history,
    "beats_chance": check_beats_chance,
}


def check_model(model_class: type, params: Mapping[str, Any] | None = None, *,
                min_auc: float = 0.6, max_grid: int = 24, monotone: bool | None = None,
                checks: Iterable[str] | None = None) -> dict[str, Any]:
    """Run every model check (or those named in ``checks``); raise on the first failure.

    Returns ``{check name: result}`` (the test AUC for ``beats_chance``, else None).
    """
    names = list(checks) if checks is not None else list(MODEL_CHECKS)
    unknown = [n for n in names if n not in MODEL_CHECKS]
    if unknown:
        raise ValueError(f"unknown checks {unknown}; known: {list(MODEL_CHECKS)}")
    out: dict[str, Any] = {}
    for n in names:
        out[n] = run_model_check(n, model_class, params, min_auc=min_auc, max_grid=max_grid,
                                 monotone=monotone)
    return out


def run_model_check(name: str, model_class: type, params: Mapping[str, Any] | None = None, *,
                    min_auc: float = 0.6, max_grid: int = 24,
                    monotone: bool | None = None) -> Any:
    """Run one model check by name with the options that apply to it.

    ``params`` None means the class's optional ``kit_params`` (constructor overrides a model
    may declare to keep the kit fast, e.g. fewer iterations), else the defaults."""
    fn = MODEL_CHECKS[name]
    if params is None:
        params = dict(getattr(model_class, "kit_params", None) or {})
    if name != "metadata":
        check_model_metadata(model_class, params)  # later checks assume a valid class
    if name == "search_space":
        return fn(model_class, params, max_grid=max_grid)
    if name == "beats_chance":
        return fn(model_class, params, min_auc=min_auc)
    if name == "objective_history":
        return fn(model_class, params, monotone=monotone)
    return fn(model_class, params)


# ============================================================================ dataset checks
def _dataset(obj: Any):
    from mtlbench.dataset import Dataset

    if isinstance(obj, type) and issubclass(obj, Dataset):
        obj = obj()
    if not isinstance(obj, Dataset):
        raise ConformanceError(f"{obj!r}: must be a mtlbench.Dataset subclass or instance")
    return obj


def _dwho(ds: Any) -> str:
    return f"dataset {getattr(ds, 'name', '?')} ({type(ds).__module__}.{type(ds).__qualname__})"


def check_dataset_metadata(dataset: Any) -> None:
    """``name`` is a registry name; ``description``, ``source``, ``layout_help()`` are strings."""
    ds = _dataset(dataset)
    who, check = _dwho(ds), "metadata"
    if not isinstance(ds.name, str) or not _NAME_RE.match(ds.name):
        raise _fail(who, check, f"'name' must be a lower-case registry name, got {ds.name!r}")
    for attr in ("description", "source"):
        if not isinstance(getattr(ds, attr, None), str):
            raise _fail(who, check, f"'{attr}' must be a string")
    if not isinstance(ds.layout_help(), str):
        raise _fail(who, check, "layout_help() must return a string")


def _list_problems(ds: Any, data_dir: Any = None) -> Any:
    from pathlib import Path

    try:
        takes_dir = "data_dir" in inspect.signature(ds.problems).parameters
    except (TypeError, ValueError):
        takes_dir = False
    if takes_dir:
        return ds.problems(data_dir=Path(data_dir) if data_dir else None)
    return ds.problems()


def check_dataset_problems(dataset: Any, data_dir: Any = None) -> list[str]:
    """``problems()`` is a non-empty list of distinct, non-empty names without '/'.

    A dataset that discovers its problems from its files may list none while the files are
    missing: then :class:`DataNotAvailable` is raised (a skip), not a failure."""
    ds = _dataset(dataset)
    who, check = _dwho(ds), "problems"
    probs = _list_problems(ds, data_dir)
    if not isinstance(probs, (list, tuple)):
        raise _fail(who, check, f"problems() must return a list, got {probs!r}")
    if not probs:
        avail = check_dataset_availability(ds, data_dir)
        if avail not in LOADABLE:
            raise DataNotAvailable(f"{ds.name}: problems() lists no problems while its data "
                                   f"is not available ({avail})")
        raise _fail(who, check, f"problems() is empty although availability() is {avail!r}")
    for p in probs:
        if not isinstance(p, str) or not p or "/" in p:
            raise _fail(who, check, f"problem names must be non-empty strings without '/', "
                                    f"got {p!r}")
    if len(set(probs)) != len(probs):
        raise _fail(who, check, f"problems() has duplicates: {probs!r}")
    return list(probs)


def check_dataset_params(dataset: Any) -> dict:
    """``params()`` is a dict that JSON-serialises (it is part of every result's identity)."""
    ds = _dataset(dataset)
    who, check = _dwho(ds), "params"
    p = ds.params()
    if not isinstance(p, Mapping):
        raise _fail(who, check, f"params() must return a dict, got {type(p).__name__}")
    try:
        a = json.dumps(p, sort_keys=True)
        b = json.dumps(ds.params(), sort_keys=True)
    except (TypeError, ValueError) as exc:
        raise _fail(who, check, f"params() must be JSON-able: {exc}") from exc
    if a != b:
        raise _fail(who, check, "params() changes between calls")
    return dict(p)


def check_dataset_availability(dataset: Any, data_dir: Any = None, cache_dir: Any = None) -> str:
    """``availability()`` answers one of :data:`AVAILABILITY_VALUES`, without network."""
    from pathlib import Path

    ds = _dataset(dataset)
    kw = {"data_dir": Path(data_dir) if data_dir else None,
          "cache_dir": Path(cache_dir) if cache_dir else None}
    a = ds.availability(**kw)
    if a not in AVAILABILITY_VALUES:
        raise _fail(_dwho(ds), "availability", f"availability() returned {a!r}; expected one of "
                                               f"{AVAILABILITY_VALUES}")
    return a


def _require_data(ds: Any, data_dir: Any, cache_dir: Any) -> None:
    a = check_dataset_availability(ds, data_dir, cache_dir)
    if a not in LOADABLE:
        where = f"data dir {str(data_dir)!r}" if data_dir else "no data dir (--mtlbench-data-dir)"
        raise DataNotAvailable(f"{ds.name}: data {a} ({where}); the kit never downloads")


def check_dataset_load(dataset: Any, problem: str | None = None, data_dir: Any = None,
                       cache_dir: Any = None):
    """``load(problem)`` returns a valid TaskSet the protocol can use.  Raises
    :class:`DataNotAvailable` when the data is not available locally."""
    import numpy as np

    from mtlbench.data import TaskSet
    from mtlbench.protocol import evaluable_tasks

    ds = _dataset(dataset)
    who, check = _dwho(ds), "load"
    _require_data(ds, data_dir, cache_dir)
    problem = problem or check_dataset_problems(ds, data_dir)[0]
    from pathlib import Path

    ts = ds.load(problem, data_dir=Path(data_dir) if data_dir else None,
                 cache_dir=Path(cache_dir) if cache_dir else None)
    if not isinstance(ts, TaskSet):
        raise _fail(who, check, f"load({problem!r}) returned {type(ts).__name__}, not a TaskSet")
    try:
        ts._validate()  # a TaskSet built with _validated=True is checked here once more
    except Exception as exc:  # noqa: BLE001
        raise _fail(who, check, f"load({problem!r}) returned an invalid TaskSet: {exc}") from exc
    keep, _ = evaluable_tasks(ts)
    if not keep:
        raise _fail(who, check, f"load({problem!r}): no task has >= 3 labels of each class, "
                                "so the protocol cannot split any task")
    if len(ts.task_names) != ts.T or len(set(ts.task_names)) != ts.T:
        raise _fail(who, check, "task_names must be T distinct names")
    meta = ts.meta
    for key, shape in (("true_W", (ts.d, ts.T)), ("feature_groups", (ts.d,)),
                       ("task_groups", (ts.T,))):
        if key in meta and np.shape(meta[key]) != shape:
            raise _fail(who, check, f"meta[{key!r}] has shape {np.shape(meta[key])}, "
                                    f"expected {shape}")
    return ts


def check_dataset_deterministic(dataset: Any, problem: str | None = None, data_dir: Any = None,
                                cache_dir: Any = None, first: Any = None) -> None:
    """Two loads of a problem hold identical data (same ``fingerprint()``)."""
    ds = _dataset(dataset)
    a = first if first is not None else check_dataset_load(ds, problem, data_dir, cache_dir)
    b = check_dataset_load(ds, problem, data_dir, cache_dir)
    if a.fingerprint() != b.fingerprint():
        raise _fail(_dwho(ds), "deterministic", f"two loads of {problem!r} differ; seed every "
                                                "random choice from params()")


DATASET_CHECKS: dict[str, Callable[..., Any]] = {
    "metadata": check_dataset_metadata,
    "problems": check_dataset_problems,
    "params": check_dataset_params,
    "availability": check_dataset_availability,
    "load": check_dataset_load,
    "deterministic": check_dataset_deterministic,
}


def check_dataset(dataset: Any, data_dir: Any = None, problems: Iterable[str] | None = None,
                  cache_dir: Any = None) -> dict[str, Any]:
    """Run every dataset check; loading checks run on ``problems`` (default: all) when the
    data is available locally, else they are reported as ``"skipped: <reason>"``."""
    ds = _dataset(dataset)
    out: dict[str, Any] = {}
    check_dataset_metadata(ds)
    out["params"] = check_dataset_params(ds)
    out["availability"] = check_dataset_availability(ds, data_dir, cache_dir)
    try:
        out["problems"] = check_dataset_problems(ds, data_dir)
    except DataNotAvailable as exc:
        out["problems"] = f"skipped: {exc}"
        return out
    for p in (list(problems) if problems is not None else out["problems"]):
        try:
            ts = check_dataset_load(ds, p, data_dir, cache_dir)
            check_dataset_deterministic(ds, p, data_dir, cache_dir, first=ts)
            out[f"load:{p}"] = repr(ts)
        except DataNotAvailable as exc:
            out[f"load:{p}"] = f"skipped: {exc}"
    return out


# ============================================================================ pytest classes
def _skip(reason: str) -> None:
    if pytest is None:  # pragma: no cover
        raise DataNotAvailable(reason)
    pytest.skip(reason)


def _option_data_dir(request: Any) -> Any:
    try:
        opt = request.config.getoption("mtlbench_data_dir", default=None)
    except (ValueError, AttributeError):
        opt = None
    return opt or os.environ.get("MTLBENCH_DATA_DIR") or None


class ModelConformance:
    """Subclass as ``class TestMine(ModelConformance): model_class = Mine`` in a test file.

    Attributes to set:

    model_class : the MTLModel subclass under test (required)
    params : constructor keyword arguments used by every check (default: the class's
        optional ``kit_params``, else the defaults)
    min_auc : threshold of ``beats_chance`` (0.6)
    max_grid : largest allowed grid (24)
    monotone_objective : None (use the class's ``monotone_objective``) or a bool
    """

    model_class: Any = None
    params: Mapping[str, Any] | None = None
    min_auc: float = 0.6
    max_grid: int = 24
    monotone_objective: bool | None = None

    def _run(self, name: str) -> Any:
        if self.model_class is None:
            raise ConformanceError(f"{type(self).__name__}: set model_class = YourModel")
        params = None if self.params is None else dict(self.params)
        return run_model_check(name, self.model_class, params, min_auc=self.min_auc,
                               max_grid=self.max_grid, monotone=self.monotone_objective)

    def test_mtlbench_metadata(self):
        self._run("metadata")

    def test_mtlbench_clone(self):
        self._run("clone")

    def test_mtlbench_search_space(self):
        self._run("search_space")

    def test_mtlbench_fit_shapes(self):
        self._run("fit_shapes")

    def test_mtlbench_refit(self):
        self._run("refit")

    def test_mtlbench_deterministic(self):
        self._run("deterministic")

    def test_mtlbench_pickle(self):
        self._run("pickle")

    def test_mtlbench_warm_start(self):
        if not getattr(self.model_class, "supports_warm_start", False):
            _skip("supports_warm_start is False")
        self._run("warm_start")

    def test_mtlbench_objective_history(self):
        self._run("objective_history")

    def test_mtlbench_beats_chance(self):
        self._run("beats_chance")


class DatasetConformance:
    """Subclass as ``class TestMine(DatasetConformance): dataset = MyDataset`` in a test file.

    Attributes to set:

    dataset : a Dataset subclass or instance (required)
    problems : problems to load (default None: every problem)
    data_dir : folder with the data files (default: ``--mtlbench-data-dir`` or
        ``$MTLBENCH_DATA_DIR``); loading checks skip when the data is not available locally.
    """

    dataset: Any = None
    problems: Iterable[str] | None = None
    data_dir: Any = None

    def _ds(self):
        if self.dataset is None:
            raise ConformanceError(f"{type(self).__name__}: set dataset = YourDataset")
        return _dataset(self.dataset)

    def _ddir(self, request: Any) -> Any:
        return self.data_dir or _option_data_dir(request)

    def _problems(self, ddir: Any) -> list[str]:
        if self.problems is not None:
            return list(self.problems)
        try:
            return check_dataset_problems(self._ds(), ddir)
        except DataNotAvailable as exc:
            _skip(str(exc))
            raise

    def test_mtlbench_metadata(self):
        check_dataset_metadata(self._ds())

    def test_mtlbench_problems(self, request):
        self._problems(self._ddir(request))

    def test_mtlbench_params(self):
        check_dataset_params(self._ds())

    def test_mtlbench_availability(self, request):
        check_dataset_availability(self._ds(), self._ddir(request))

    def test_mtlbench_load_deterministic(self, request):
        ds, ddir = self._ds(), self._ddir(request)
        for p in self._problems(ddir):
            try:
                ts = check_dataset_load(ds, p, ddir)
            except DataNotAvailable as exc:
                _skip(str(exc))
            check_dataset_deterministic(ds, p, ddir, first=ts)


# ============================================================================ pytest plugin
def pytest_addoption(parser: Any) -> None:
    group = parser.getgroup("mtlbench", "mtlbench conformance kit")
    group.addoption("--mtlbench-data-dir", dest="mtlbench_data_dir", default=None,
                    help="folder with dataset files for dataset conformance checks "
                         "(default: $MTLBENCH_DATA_DIR)")
    group.addoption("--mtlbench-conformance", dest="mtlbench_conformance", default=None,
                    metavar="NAMES",
                    help="run the conformance kit on installed plugins: comma-separated "
                         "model/dataset names, or all, models, datasets")


def pytest_configure(config: Any) -> None:
    config.addinivalue_line(
        "markers", "mtlbench_conformance: a check of the mtlbench plugin conformance kit")


if pytest is not None:

    @pytest.fixture
    def mtlbench_data_dir(request):
        """The data folder for dataset checks (``--mtlbench-data-dir`` / $MTLBENCH_DATA_DIR)."""
        return _option_data_dir(request)

    @pytest.fixture(scope="session")
    def mtlbench_small_problem():
        """The kit's small simulated TaskSet (10 tasks, 16 features, 60 samples per task)."""
        return small_problem()

    @pytest.fixture(scope="session")
    def mtlbench_uneven_problem():
        """The kit's TaskSet with tasks of different sizes (9 to 70 samples, 12 features)."""
        return uneven_problem()

    class ConformanceItem(pytest.Item):
        """One kit check of one installed plugin (``--mtlbench-conformance``)."""

        def __init__(self, *, kind: str, target: str, check: str, data_dir: Any = None,
                     **kwargs: Any) -> None:
            super().__init__(**kwargs)
            self.kind, self.target, self.check, self.data_dir = kind, target, check, data_dir
            self.add_marker("mtlbench_conformance")

        def runtest(self) -> None:
            from mtlbench.plugins import get_registry

            reg = get_registry()
            if self.kind == "model":
                run_model_check(self.check, reg.model_class(self.target))
                return
            ds = reg.dataset(self.target)
            if self.check in ("problems", "load_deterministic"):
                try:
                    probs = check_dataset_problems(ds, self.data_dir)
                except DataNotAvailable as exc:
                    pytest.skip(str(exc))
                for p in probs if self.check == "load_deterministic" else ():
                    try:
                        ts = check_dataset_load(ds, p, self.data_dir)
                    except DataNotAvailable as exc:
                        pytest.skip(str(exc))
                    check_dataset_deterministic(ds, p, self.data_dir, first=ts)
            elif self.check == "availability":
                check_dataset_availability(ds, self.data_dir)
            else:
                DATASET_CHECKS[self.check](ds)

        def repr_failure(self, excinfo: Any, style: Any = None) -> str:
            if isinstance(excinfo.value, ConformanceError):
                return str(excinfo.value)
            return super().repr_failure(excinfo, style=style)

        def reportinfo(self):
            return "mtlbench-conformance", None, f"{self.kind} {self.target}: {self.check}"

    def pytest_collection_modifyitems(session: Any, config: Any, items: list) -> None:
        spec = config.getoption("mtlbench_conformance", default=None)
        if not spec:
            return
        from mtlbench.plugins import get_registry

        reg = get_registry()
        names = [s.strip() for s in spec.split(",") if s.strip()]
        models, datasets = [], []
        for n in names:
            if n in ("all", "models"):
                models += reg.model_names
            if n in ("all", "datasets"):
                datasets += reg.dataset_names
            if n in ("all", "models", "datasets"):
                continue
            if n in reg.model_names:
                models.append(n)
            elif n in reg.dataset_names:
                datasets.append(n)
            else:
                known = ", ".join(reg.model_names + reg.dataset_names)
                raise pytest.UsageError(f"--mtlbench-conformance: no installed model or dataset "
                                        f"named {n!r}; installed: {known}")
        ddir = _option_data_dir(session)
        dchecks = ["metadata", "problems", "params", "availability", "load_deterministic"]
        for kind, targets, checks in (("model", models, list(MODEL_CHECKS)),
                                      ("dataset", datasets, dchecks)):
            for target in dict.fromkeys(targets):
                for check in checks:
                    items.append(ConformanceItem.from_parent(
                        session, name=f"mtlbench-conformance[{kind}:{target}:{check}]",
                        kind=kind, target=target, check=check, data_dir=ddir))

    def pytest_report_header(config: Any) -> list[str] | None:
        if config.getoption("mtlbench_conformance", default=None):
            return [f"mtlbench conformance kit: {config.getoption('mtlbench_conformance')}"]
        return None
