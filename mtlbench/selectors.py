"""Model selectors with hyperparameter overrides, from the command line or a config file.

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

import ast
import inspect
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

from .errors import ConfigError
from .model import MTLModel

_NAME = re.compile(r"^\s*([A-Za-z0-9_.\-]+)\s*(?:\[(.*)\])?\s*$", re.S)


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
        return f"{self.name}[{','.join(f'{k}={_fmt(v)}' for k, v in sorted(overrides.items()))}]"


def split_top_level(text: str, sep: str = ",") -> list[str]:
    """Split on ``sep`` outside brackets and quotes."""
    out, depth, quote, cur = [], 0, None, []
    for ch in text:
        if quote:
            cur.append(ch)
            if ch == quote:
                quote = None
            continue
        if ch in "'\"":
            quote = ch
        elif ch in "[(":
            depth += 1
        elif ch in "])":
            depth -= 1
        if ch == sep and depth == 0:
            out.append("".join(cur))
            cur = []
        else:
            cur.append(ch)
    if depth != 0 or quote:
        raise ConfigError(f"unbalanced brackets or quotes in {text!r}")
    out.append("".join(cur))
    return [s.strip() for s in out if s.strip()]


def parse_value(text: str, where: str = "") -> Any:
    """A Python literal (number, string, bool, None, list); a bare word is a string."""
    text = text.strip()
    ctx = f" in {where}" if where else ""
    if not text:
        raise ConfigError(f"missing value{ctx}; expected param=value or param=[v1,v2]")
    try:
        value = ast.literal_eval(text)
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        if re.fullmatch(r"[A-Za-z_][A-Za-z0-9_\-]*", text):
            return text  # bare word: a string option such as loss=auc
        raise ConfigError(f"cannot parse hyperparameter value {text!r}{ctx}; use numbers, "
                          "quoted strings, true/false or a list like [0.1,1.0]") from None
    if value is True or value is False or value is None:
        return value
    if isinstance(value, tuple):
        raise ConfigError(f"tuple value {text!r}{ctx}; use a list [v1,v2] to search values")
    if isinstance(value, (dict, set)):
        raise ConfigError(f"unsupported value {text!r}{ctx}; use a scalar or a list")
    return value


def parse_selector(text: str) -> tuple[str, dict[str, Any]]:
    """``"tfcl[k=[3,5]]"`` -> ("tfcl", {"k": [3, 5]})."""
    m = _NAME.match(text)
    if not m:
        raise ConfigError(f"invalid model selector {text!r}; expected NAME or NAME[param=value,...]")
    name, body = m.group(1), m.group(2)
    overrides: dict[str, Any] = {}
    if body is not None and not body.strip():
        raise ConfigError(f"empty brackets in {text!r}; expected NAME[param=value,...]")
    if body:
        try:
            items = split_top_level(body)
        except ConfigError:
            raise ConfigError(f"unbalanced brackets or quotes in model selector {text!r}") from None
        for item in items:
            if "=" not in item:
                raise ConfigError(f"invalid override {item!r} in {text!r}; expected param=value")
            key, val = item.split("=", 1)
            key = key.strip()
            if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", key):
                raise ConfigError(f"invalid parameter name {key!r} in {text!r}")
            if key in overrides:
                raise ConfigError(f"parameter {key!r} is given twice in {text!r}")
            overrides[key] = parse_value(val, where=f"{text!r}")
    return name, overrides


def apply_overrides(cls: type[MTLModel], overrides: Mapping[str, Any],
                    name: str | None = None) -> ModelSelection:
    """Validate overrides against ``cls``'s hyperparameters and build the selection.

    A scalar fixes the parameter (removing it from the search); a list becomes its starting
    grid, keeping the declared kind and bounds (so ``tfcl[k=[3,5]]`` still searches k from 3
    and 5 under the adaptive searcher; a list for an undeclared parameter is searched exactly
    as listed).  Values are checked against the declarations (``search_space`` and
    ``param_constraints``) without fitting anything.  ``space`` of the result is the JSON form
    of the search space (:func:`mtlbench.search.space_json`).
    """
    from .search import space_json
    from .space import Categorical, as_param

    name = name or cls.name
    params = _init_params(cls)
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
            _check_type(name, key, reference, v)
            why = decl.check(v) if decl is not None else None
            if why:
                raise ConfigError(f"invalid hyperparameter override {name}[{key}={v!r}]: "
                                  f"{key} {why}")
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


def _init_params(cls: type[MTLModel]) -> dict[str, Any]:
    sig = inspect.signature(cls.__init__)
    return {p.name: p.default for p in sig.parameters.values()
            if p.name != "self" and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)}


def _check_type(name: str, key: str, default: Any, value: Any) -> None:
    if default is inspect.Parameter.empty or default is None or value is None:
        return
    num = (int, float)
    if isinstance(default, bool):
        ok = isinstance(value, bool)
    elif isinstance(default, int):
        ok = isinstance(value, int) and not isinstance(value, bool)
        if not ok and isinstance(value, float):
            raise ConfigError(f"{name}[{key}={value!r}]: expected an integer like the default "
                              f"{default!r}")
    elif isinstance(default, num):
        ok = isinstance(value, num) and not isinstance(value, bool)
    elif isinstance(default, str):
        ok = isinstance(value, str)
    else:
        ok = True
    if not ok:
        raise ConfigError(f"{name}[{key}={value!r}]: expected a value like the default "
                          f"{default!r} ({type(default).__name__})")


def _fmt(v: Any) -> str:
    return repr(v).replace(" ", "") if not isinstance(v, str) else v


def load_config(path: str | Path) -> dict[str, Any]:
    """Read a TOML config file (see module docstring) with clear errors."""
    import tomllib

    p = Path(path)
    try:
        with p.open("rb") as fh:
            cfg = tomllib.load(fh)
    except FileNotFoundError:
        raise ConfigError(f"config file {str(p)!r} does not exist") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"config file {str(p)!r} is not valid TOML: {exc}") from None
    unknown = set(cfg) - {"compare", "models"}
    if unknown:
        raise ConfigError(f"config file {str(p)!r}: unknown sections {sorted(unknown)}; "
                          "expected [compare] and [models.NAME]")
    models = cfg.get("models", {})
    if not isinstance(models, dict) or not all(isinstance(v, dict) for v in models.values()):
        raise ConfigError(f"config file {str(p)!r}: [models.NAME] tables must hold param = value")
    for mname, table in models.items():
        for key, val in table.items():
            if isinstance(val, dict):
                raise ConfigError(f"config file {str(p)!r}: [models.{mname}] {key} is a table; "
                                  "expected a value or a list of values")
    if "compare" in cfg and not isinstance(cfg["compare"], dict):
        raise ConfigError(f"config file {str(p)!r}: [compare] must be a table")
    return cfg


def check_config_models(cfg: Mapping[str, Any], known: list[str],
                        path: str | None = None) -> None:
    """Every ``[models.NAME]`` of a config file names a registered model (a typo would
    otherwise be ignored silently)."""
    from .plugins import unknown_name_message

    for mname in cfg.get("models", {}):
        if mname not in known:
            where = f"config file {path!r}" if path else "config file"
            raise ConfigError(f"{where}: [models.{mname}]: "
                              + unknown_name_message("model", mname, known))
