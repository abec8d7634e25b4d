"""Checks of a model plugin against the model contract (see :mod:`mtlbench.testing`).

Each ``check_*`` takes the model class (and optional constructor ``params``) and raises
:class:`~mtlbench.testing.ConformanceError` naming the model, the check and what to fix.
"""
from __future__ import annotations

import json
import pickle
import warnings
from typing import Any, Callable, Iterable, Mapping

import numpy as np
from sklearn.base import clone

from mtlbench.model import MTLModel
from mtlbench.plugins import NO_CONVERGED, PluginMigrationWarning, space_notices
from mtlbench.protocol import ProtocolConfig, make_split, mean_auc, run_protocol
from mtlbench.search.design import START_DESIGN_SIZE
from mtlbench.search.searchers import problem_context
from mtlbench.search.space import Param, normalise_space, resolve, space_problems

from ._common import MONOTONE_RTOL, _NAME_RE, ConformanceError, _fail, _label
from ._model_fit import (_equal, _fit, _fitted, _init_signature, _json_ok, _make, _same_scores,
                         _scores)
from .problems import _problem

__all__ = ["MODEL_CHECKS", "check_model", "run_model_check", "check_model_metadata",
           "check_clone", "check_search_space", "check_fit_shapes", "check_refit",
           "check_deterministic", "check_pickle", "check_warm_start",
           "check_objective_history", "check_beats_chance"]


# ============================================================================ model checks
def check_model_metadata(model_class: type, params: Mapping[str, Any] | None = None) -> None:
    """Class attributes and constructor follow the contract."""
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
    for flag in ("supports_warm_start", "convex"):
        if not isinstance(getattr(model_class, flag, False), bool):
            raise _fail(who, check, f"class attribute {flag!r} must be a bool")
    if model_class.supports_warm_start and not model_class.convex:
        warnings.warn(f"{who}: {check}: supports_warm_start = True without convex = True: the "
                      "protocol never warm-starts this model (only convex models, where the "
                      "start cannot change the answer); declare convex = True if fit "
                      "minimises a convex problem, else remove supports_warm_start",
                      PluginMigrationWarning, stacklevel=2)
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
    check = "clone"
    who = _label(model_class)
    model = _make(model_class, params, check)
    init_names = set(_init_signature(model_class))
    try:
        got = model.get_params(deep=False)
    except Exception as exc:
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
    except Exception as exc:
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
            except Exception as exc:
                raise _fail(who, check, f"set_params({key}={values[-1]!r}) raised "
                                        f"{type(exc).__name__}: {exc}") from exc
            if not _equal(m2.get_params(deep=False)[key], values[-1]):
                raise _fail(who, check, f"set_params({key}=...) did not store the value")


def check_search_space(model_class: type, params: Mapping[str, Any] | None = None,
                       max_grid: int | None = None, fit_values: str | bool = "extremes") -> None:
    """The declared search space is usable under the search rule (``docs/tuning.md``): keys
    are ``__init__`` parameters; every entry is a declaration (``Log``, ``Linear``, ``Int``,
    ``Categorical``) or a non-empty list of distinct JSON-able values; every ordered
    parameter declares a start range of at least two distinct values and its bound
    expressions name only problem dimensions and other searched parameters
    (:func:`mtlbench.search.space.space_problems`, the check made at registration); and ``fit``
    accepts values of it (one parameter at a time, the others at their defaults): both ends
    of each start range, clipped to the bounds evaluated on the kit's small problem
    (``fit_values="extremes"``), every grid value (``"all"``) or none (False).

    A plain list (the first release's form) is searched as a range, not as the listed
    values (:func:`mtlbench.search.space.list_to_param`: its smallest and largest values are the
    start range, the sign of the values its only bound): the check warns
    (:class:`~mtlbench.plugins.PluginMigrationWarning`, the declaration to write) and, unless
    ``fit_values`` is False, fits the value one extension step past each end of the list
    (clipped to those bounds), which the search proposes when the best listed value is at an
    end; a fit that refuses it fails the check, naming the bound to declare.

    The adaptive search starts every model from the same 12-point design
    (:data:`mtlbench.search.design.START_DESIGN_SIZE`), whatever the grids; ``max_grid``, when
    given, also limits the Cartesian product of the grids, which only ``--search grid``
    fits."""
    check = "search_space"
    who = _label(model_class)
    declared = dict(model_class.search_space)
    init_names = set(_init_signature(model_class))
    size = 1
    for key, decl in declared.items():
        if key not in init_names:
            raise _fail(who, check, f"search_space key {key!r} is not an __init__ parameter "
                                    f"(parameters: {sorted(init_names)})")
        values = list(decl.grid) if isinstance(decl, Param) else decl
        if isinstance(values, (str, bytes)) or not isinstance(values, (list, tuple)):
            raise _fail(who, check, f"search_space[{key!r}] must be a declaration (Log, Linear, "
                                    f"Int, Categorical) or a list of values, got {values!r}")
        if len(values) == 0:
            raise _fail(who, check, f"search_space[{key!r}] is empty")
        if len({json.dumps(v, sort_keys=True, default=repr) for v in values}) != len(values):
            raise _fail(who, check, f"search_space[{key!r}] has repeated values: {values!r}")
        if not _json_ok(list(values)):
            raise _fail(who, check, f"search_space[{key!r}] values must be JSON-able "
                                    f"(they are stored with results), got {values!r}")
        size *= len(values)
    problems = space_problems(declared)
    if problems:
        raise _fail(who, check, "; ".join(problems))
    if max_grid is not None and size > max_grid:
        raise _fail(who, check, f"the Cartesian product of the grids (what --search grid "
                                f"fits) has {size} points (> {max_grid})")
    for note in space_notices(model_class):
        warnings.warn(f"{who}: {check}: {note}", PluginMigrationWarning, stacklevel=2)
    if not fit_values:
        return
    tasks = _problem("small")
    context = problem_context(tasks)
    defaults = _make(model_class, params, check).get_params(deep=False)
    for key, par in normalise_space(declared).items():
        if params and key in params:
            continue  # fixed by the author for the kit
        if fit_values == "all" or not par.ordered:
            chosen = list(par.grid) if fit_values == "all" else [par.grid[0], par.grid[-1]]
        else:
            chosen = list(par.start_range)
        for v in dict.fromkeys(chosen):
            if par.ordered:
                v = resolve(par, {**defaults, key: v}, context).clip(v)
            where = f"{check} ({key}={v!r})"
            if _equal(defaults.get(key), v):
                model = _fitted(model_class, params, "small", where)
            else:
                model = _fit(_make(model_class, params, where, **{key: v}), tasks, where)
            _scores(model, tasks, where)
        if isinstance(declared[key], (list, tuple)) and par.ordered:
            _fit_past_the_list(model_class, params, key, par, tasks, defaults, context)


def _fit_past_the_list(model_class: type, params: Mapping[str, Any] | None, key: str,
                       par: Param, tasks: Any, defaults: Mapping[str, Any],
                       context: Mapping[str, Any]) -> None:
    """Fit the values one extension step past each end of a plain-list entry (what the
    search proposes when the best listed value is at that end); a refusal names the bound
    to declare."""
    who = _label(model_class)
    listed = list(model_class.search_space[key])
    for end, direction in zip(par.start_range, (-1, 1)):
        bounded = resolve(par, {**defaults, key: end}, context)
        v = bounded.step_out(end, direction)
        if v is None:
            continue
        where = f"search_space ({key}={v!r}, past the plain list {listed!r})"
        try:
            _scores(_fit(_make(model_class, params, where, **{key: v}), tasks, where), tasks,
                    where)
        except ConformanceError as exc:
            side = "low" if direction < 0 else "high"
            raise _fail(who, "search_space",
                        f"search_space[{key!r}] = {listed!r} is a plain list, searched as the "
                        f"range {par}: the search proposes {key}={v!r} when the best listed "
                        f"value is {end!r}, and that fit failed ({exc}); declare the real "
                        f"bounds, e.g. {key!r}: {type(par).__name__}({listed!r}, {side}="
                        f"{end!r})") from exc


def check_fit_shapes(model_class: type, params: Mapping[str, Any] | None = None) -> None:
    """Finite scores of the right shape on tasks of different sizes; fitted attributes valid;
    neither the hyperparameters nor the data change during ``fit``.  A fit that leaves
    ``converged_`` unset (or not a bool) warns (:class:`~mtlbench.plugins.PluginMigrationWarning`):
    its convergence would be recorded as unknown."""
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
    converged = getattr(model, "converged_", None)
    if not isinstance(converged, (bool, np.bool_)):
        what = "not set" if converged is None else f"{converged!r}, not a bool"
        warnings.warn(f"{who}: {check}: " + NO_CONVERGED.format(
            what=f"converged_ is {what} after fit"), PluginMigrationWarning, stacklevel=2)
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
    except Exception as exc:
        raise _fail(who, check, f"pickle round trip raised {type(exc).__name__}: {exc}; keep "
                                "fitted state in plain attributes (arrays, numbers, lists), not "
                                "lambdas, open files or locks") from exc
    same, diff = _same_scores(_scores(model, tasks, check), _scores(copy, tasks, check))
    if not same:
        raise _fail(who, check, f"scores differ after a pickle round trip (max {diff:.3g})")


WARM_START_RTOL = 1e-3


def _grid_of(decl: Any) -> list:
    """The starting grid of a search-space entry (a Param or a plain list)."""
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
    check = "beats_chance"
    tasks = tasks if tasks is not None else _problem("small60")
    # the fallback below: the model's own starting design (12 fits; more only while the best
    # point sits at an edge), to keep the kit fast
    config = ProtocolConfig(reps=1, seed=0, test_fraction=0.25, val_fraction=0.25,
                            budget=START_DESIGN_SIZE)
    who = _label(model_class)
    try:  # defaults: one fit on train+validation, scored on test
        split = make_split(tasks, config, rep=0)
        trainval = tasks.subset(split.trainval, meta={})
        test = tasks.subset(split.test, meta={})
        model = _fit(_make(model_class, params, check), trainval, check)
        auc = mean_auc(model, test)[0]
    except ConformanceError:
        raise
    except Exception as exc:
        raise _fail(who, check, f"scoring failed on the small simulated problem: "
                                f"{type(exc).__name__}: {exc}") from exc
    if auc > min_auc:
        return auc
    tried = [f"defaults: {auc:.3f}"]
    space = {k: v for k, v in dict(model_class.search_space).items() if k not in (params or {})}
    if space:  # the model's own search under the protocol (validation-based selection)
        try:
            out = run_protocol(_make(model_class, params, check), space, tasks, config, rep=0)
        except Exception as exc:
            raise _fail(who, check, f"the protocol failed on the small simulated problem: "
                                    f"{type(exc).__name__}: {exc}") from exc
        tried.append(f"search: {out.test_auc:.3f}")
        if out.test_auc > min_auc:
            return out.test_auc
    raise _fail(who, check,
                f"mean test AUC <= {min_auc} on a small simulated problem ({tasks.T} tasks, "
                f"{tasks.d} features, {tasks.sizes()[0]} samples per task) where ridge "
                f"regression scores > 0.9 ({'; '.join(tried)}); is decision_function's sign "
                "or task index wrong, or are the start ranges too strong for small problems?")


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
                min_auc: float = 0.6, max_grid: int | None = None,
                monotone: bool | None = None,
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
                    min_auc: float = 0.6, max_grid: int | None = None,
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
