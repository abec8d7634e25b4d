"""Model selectors with hyperparameter overrides, from the command line or a config file
(the file is read by :func:`mtlbench.config.load_config`).

``tfcl``                      the model with its declared search space
``tfcl[k=5]``                 k fixed to 5 (removed from the search)
``tfcl[k=[3,5],lam=0.1]``     k searched over [3, 5], lam fixed

A config file (``--config FILE``, TOML) may hold the same overrides and compare defaults::

    [compare]
    datasets = ["simulated"]
    reps = 3

    [models.tfcl]
    k = [3, 5]
"""
from __future__ import annotations

import inspect
from dataclasses import dataclass
from typing import Any, Mapping

from .errors import ConfigError
from .model import MTLModel
from .search.space import Categorical, as_param, space_json
# Re-exported where users of the first release imported them from: the selector syntax
# (mtlbench.syntax, shared with dataset selectors) and the config file reader (mtlbench.config).
from .config import check_config_models, load_config
from .syntax import check_type, fmt_value, init_params, parse_selector, parse_value, \
    split_top_level

__all__ = ["ModelSelection", "apply_overrides", "load_config", "check_config_models",
           "parse_selector", "parse_value", "split_top_level"]


@dataclass(frozen=True)
class ModelSelection:
    """A registered model name plus fixed hyperparameters and the search space to use."""

    name: str
    fixed: Mapping[str, Any]
    space: Mapping[str, Any]  # JSON form: {param: {"kind", "grid", "low", "high"}}
    grid_overrides: Mapping[str, list]

    @property
    def label(self) -> str:
        """Name shown in tables and stored in results: the name plus any overrides."""
        overrides = {**self.fixed, **self.grid_overrides}
        if not overrides:
            return self.name
        params = ','.join(f'{k}={fmt_value(v)}' for k, v in sorted(overrides.items()))
        return f"{self.name}[{params}]"


def apply_overrides(cls: type[MTLModel], overrides: Mapping[str, Any],
                    name: str | None = None) -> ModelSelection:
    """Validate overrides against ``cls``'s hyperparameters and build the selection.

    A scalar fixes the parameter (removing it from the search); a list becomes its starting
    grid, keeping the declared kind and bounds (so ``tfcl[k=[3,5]]`` still searches k from 3
    and 5 under the adaptive searcher; a list for an undeclared parameter is searched exactly
    as listed).  Values are checked against the declarations (``search_space`` and
    ``param_constraints``) without fitting anything.  ``space`` of the result is the JSON form
    of the search space (:func:`mtlbench.search.space.space_json`).
    """
    name = name or cls.name
    params = init_params(cls)
    declared = {k: as_param(v, k) for k, v in dict(cls.search_space).items()}
    constraints = {k: as_param(v, k) for k, v in dict(cls.param_constraints).items()}
    space: dict[str, Any] = dict(declared)
    fixed: dict[str, Any] = {}
    grid_over: dict[str, list] = {}
    for key, val in overrides.items():
        if key not in params:
            raise ConfigError(
                f"model {name!r} has no hyperparameter {key!r}; its hyperparameters are: "
                f"{', '.join(sorted(params)) or '(none)'}")
        default = params[key]
        values = val if isinstance(val, list) else [val]
        if not values:
            raise ConfigError(f"{name}[{key}=...]: an empty list searches nothing")
        if isinstance(val, list) and any(isinstance(v, list) for v in val):
            raise ConfigError(f"{name}[{key}={val!r}]: nested lists are not hyperparameter values")
        reference = default
        decl = declared.get(key) or constraints.get(key)
        grid = [g for g in (decl.grid if decl is not None else ()) if g is not None]
        if default is inspect.Parameter.empty or default is None:
            reference = grid[0] if grid else default
        elif type(default) is int and any(isinstance(g, float) for g in grid):
            reference = float(default)  # an int default of a real-valued parameter
        for v in values:
            check_type(name, key, reference, v)
            why = decl.check(v) if decl is not None else None
            if why:
                raise ConfigError(f"invalid hyperparameter override {name}[{key}={v!r}]: "
                                  f"{name}: {key} {why}")
        if isinstance(val, list):
            base = declared.get(key)
            if base is None or isinstance(base, Categorical):
                space[key] = Categorical(tuple(val))
            else:
                try:
                    space[key] = type(base)(tuple(val), low=base.low, high=base.high)
                except ConfigError as exc:
                    raise ConfigError(f"{name}[{key}={val!r}]: {exc}") from None
            grid_over[key] = list(val)
        else:
            space.pop(key, None)
            fixed[key] = val
    return ModelSelection(name=name, fixed=fixed, space=space_json(space),
                          grid_overrides=grid_over)
