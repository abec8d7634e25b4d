"""The validated configuration of a ``compare`` run, from command-line options and a TOML file.

Everything is checked before any data is loaded or any unit planned; each problem is one
clear :class:`~mtlbench.errors.ConfigError` line naming the option (or the file and key) and
the value.  Command-line options override ``[compare]`` keys of the config file, which
override the defaults of :class:`~mtlbench.protocol.ProtocolConfig`.

Limits (and why):

* ``reps``: an integer in [1, 1000] (the paper uses 15; a larger number is almost surely a
  typo and would plan millions of units before saying anything);
* ``seed``: an integer in [0, 2**63 - 1] (the split streams use
  ``numpy.random.SeedSequence``, which needs a non-negative integer, and the results store
  keeps the seed in a signed 64-bit SQLite integer);
* ``test_fraction``, ``val_fraction``: real numbers strictly between 0 and 1 (0 is an error,
  never silently the default); ``train_fraction`` too (the training-fraction protocol: the
  rest of each task is test), never together with ``test_fraction``;
* ``select_by``: a metric name (checked against the problems' target kinds when they are
  loaded);
* ``timeout``: a finite number of seconds > 0;
* ``jobs``: an integer >= 1, or -1 for every core;
* ``search``: a registered searcher name (``mtlbench plugins``); ``budget``: an integer in
  [1, 10000] fits per unit;
* ``models`` / ``datasets``: non-empty lists of names or selectors (``--models ""`` is an
  error, not "every model").

``[models.NAME]`` holds hyperparameter overrides applied whenever NAME is selected (a scalar
fixes a parameter, a list is its start range); its sub-table ``problems`` pins values on
single problems (what ``mtlbench best-params`` writes)::

    [models.lasso.problems."shoes/brown"]
    rho_ratio = 0.0123

On that problem the pinned values fix those parameters (over the ``[models.NAME]`` table; a
selector's own overrides on the command line still win); on other problems nothing changes.
A pinned value is a scalar (a list would be a search range, not a pin).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping, Sequence

from .errors import ConfigError, unknown_name_message
from .protocol import ProtocolConfig
from .search.searchers import DEFAULT_BUDGET, DEFAULT_SEARCH
from .syntax import split_top_level

__all__ = ["RunConfig", "build_run_config", "load_config", "check_config_models", "MAX_REPS",
           "MAX_SEED", "MAX_BUDGET", "COMPARE_KEYS", "PROBLEMS_KEY"]

MAX_REPS = 1000
MAX_SEED = 2 ** 63 - 1
MAX_BUDGET = 10000
COMPARE_KEYS = ("datasets", "models", "reps", "seed", "test_fraction", "val_fraction", "jobs",
                "timeout", "search", "budget", "train_fraction", "select_by")
#: the sub-table of ``[models.NAME]`` that pins values per problem
PROBLEMS_KEY = "problems"


@dataclass(frozen=True)
class RunConfig:
    """What ``mtlbench compare`` runs: validated, with defaults filled in."""

    datasets: list[str]
    selectors: list[str]  # model selectors; empty = every registered model
    protocol: ProtocolConfig
    jobs: int = 1
    timeout: float | None = None
    model_overrides: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    #: model name -> problem id -> pinned hyperparameters (``[models.NAME.problems."P"]``)
    problem_overrides: Mapping[str, Mapping[str, Mapping[str, Any]]] = \
        field(default_factory=dict)


def _where(source: str, key: str) -> str:
    return f"--{key.replace('_', '-')}" if source == "cli" else f"{source} [compare] {key}"


def _int(value: Any, key: str, source: str, low: int, high: int | None) -> int:
    w = _where(source, key)
    if isinstance(value, bool) or not isinstance(value, int):
        if isinstance(value, float) and value.is_integer() and source != "cli":
            raise ConfigError(f"{w} = {value!r}: expected an integer (write {int(value)})")
        raise ConfigError(f"{w} = {value!r}: expected an integer")
    if value < low or (high is not None and value > high):
        rng = f">= {low}" if high is None else f"between {low} and {high}"
        raise ConfigError(f"{w} = {value}: must be an integer {rng}")
    return value


def _float(value: Any, key: str, source: str) -> float:
    w = _where(source, key)
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ConfigError(f"{w} = {value!r}: expected a number")
    value = float(value)
    if not math.isfinite(value):
        raise ConfigError(f"{w} = {value!r}: expected a finite number")
    return value


def _fraction(value: Any, key: str, source: str) -> float:
    v = _float(value, key, source)
    if not 0.0 < v < 1.0:
        raise ConfigError(f"{_where(source, key)} = {v!r}: must be strictly between 0 and 1")
    return v


def _names(value: Any, key: str, source: str) -> list[str]:
    w = _where(source, key)
    if isinstance(value, str):
        items = split_top_level(value) if value.strip() else []
    elif isinstance(value, list):
        if not all(isinstance(v, str) for v in value):
            raise ConfigError(f"{w} = {value!r}: expected a list of strings")
        if any(not v.strip() for v in value):
            raise ConfigError(f"{w} = {value!r}: empty name in the list")
        items = [v.strip() for v in value]
    else:
        raise ConfigError(f"{w} = {value!r}: expected a comma-separated string or a list of "
                          "strings")
    if not items:
        raise ConfigError(f"{w} is empty; give at least one name (omit the option for the "
                          "default)")
    return items


def build_run_config(options: Mapping[str, Any], file_cfg: Mapping[str, Any] | None = None,
                     path: str | None = None, searchers: Sequence[str] | None = None,
                     metrics: Sequence[str] | None = None) -> RunConfig:
    """Validate command-line ``options`` (None = not given) over ``file_cfg`` (a loaded TOML
    config, see :func:`load_config`) and build the run configuration.

    ``searchers``, ``metrics``: registered searcher and metric names (checked when given)."""
    file_cfg = file_cfg or {}
    source = f"config file {path!r}" if path else "config file"
    compare = dict(file_cfg.get("compare", {}))
    unknown = sorted(set(compare) - set(COMPARE_KEYS))
    if unknown:
        raise ConfigError(f"{source} [compare]: unknown keys {unknown}; known: "
                          f"{sorted(COMPARE_KEYS)}")

    def check_search(value: Any, key: str, src: str) -> str:
        if not isinstance(value, str) or not value.strip():
            raise ConfigError(f"{_where(src, key)} = {value!r}: expected a searcher name")
        value = value.strip()
        if searchers is not None and value not in searchers:
            raise ConfigError(f"{_where(src, key)}: "
                              + unknown_name_message("searcher", value, searchers))
        return value

    def check_metric(value: Any, key: str, src: str) -> str:
        if not isinstance(value, str) or not value.strip():
            raise ConfigError(f"{_where(src, key)} = {value!r}: expected a metric name")
        value = value.strip()
        if metrics is not None and value not in metrics:
            raise ConfigError(f"{_where(src, key)}: "
                              + unknown_name_message("metric", value, metrics))
        return value

    def check_jobs(value: Any, key: str, src: str) -> int:
        if isinstance(value, int) and not isinstance(value, bool) and (value >= 1 or value == -1):
            return value
        if isinstance(value, int) and not isinstance(value, bool):
            raise ConfigError(f"{_where(src, key)} must be >= 1 (or -1 for all cores), "
                              f"got {value}")
        return _int(value, key, src, 1, None)

    def check_timeout(value: Any, key: str, src: str) -> float:
        v = _float(value, key, src)
        if v <= 0:
            raise ConfigError(f"{_where(src, key)} = {v!r}: must be > 0 seconds")
        return v

    checks = {
        "reps": lambda v, k, w: _int(v, k, w, 1, MAX_REPS),
        "seed": lambda v, k, w: _int(v, k, w, 0, MAX_SEED),
        "test_fraction": _fraction, "val_fraction": _fraction, "train_fraction": _fraction,
        "select_by": check_metric,
        "budget": lambda v, k, w: _int(v, k, w, 1, MAX_BUDGET),
        "search": check_search, "jobs": check_jobs, "timeout": check_timeout,
        "datasets": _names, "models": _names,
    }
    # Every value of the file is checked, also those the command line overrides.
    from_file = {k: checks[k](v, k, source) for k, v in compare.items()}
    from_cli = {k: checks[k](v, k, "cli") for k, v in options.items()
                if k in checks and v is not None}
    merged = {**from_file, **from_cli}
    if "train_fraction" in merged and "test_fraction" in merged:
        raise ConfigError("give test_fraction (the default protocol) or train_fraction (each "
                          "task's share for training and validation, the rest for test), not "
                          "both")

    d = ProtocolConfig()
    reps = merged.get("reps", d.reps)
    seed = merged.get("seed", d.seed)
    test_fraction = merged.get("test_fraction", d.test_fraction)
    val_fraction = merged.get("val_fraction", d.val_fraction)
    budget = merged.get("budget", DEFAULT_BUDGET)
    search = merged.get("search", DEFAULT_SEARCH)
    jobs = merged.get("jobs", -1)  # -1: the number of usable CPUs
    timeout = merged.get("timeout")
    datasets = merged.get("datasets", ["simulated"])
    selectors = from_cli.get("models") or from_file.get("models", [])
    protocol = ProtocolConfig(reps=reps, seed=seed, test_fraction=test_fraction,
                              val_fraction=val_fraction, search=search, budget=budget,
                              train_fraction=merged.get("train_fraction"),
                              select_by=merged.get("select_by"))
    tables = dict(file_cfg.get("models", {}))
    return RunConfig(datasets=datasets, selectors=selectors, protocol=protocol, jobs=jobs,
                     timeout=timeout,
                     model_overrides={m: {k: v for k, v in t.items() if k != PROBLEMS_KEY}
                                      for m, t in tables.items()},
                     problem_overrides={m: t[PROBLEMS_KEY] for m, t in tables.items()
                                        if PROBLEMS_KEY in t})


def load_config(path: str | Path) -> dict[str, Any]:
    """Read a TOML config file (see module docstring) with clear errors."""
    import tomllib  # standard library from Python 3.11 only; the package supports 3.10

    p = Path(path)
    try:
        with p.open("rb") as fh:
            cfg = tomllib.load(fh)
    except FileNotFoundError:
        raise ConfigError(f"config file {str(p)!r} does not exist") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"config file {str(p)!r} is not valid TOML: {exc}") from None
    except UnicodeDecodeError as exc:
        raise ConfigError(f"config file {str(p)!r} is not UTF-8 text (TOML files are UTF-8): "
                          f"byte {exc.object[exc.start]:#04x} at offset {exc.start}") from None
    except OSError as exc:
        raise ConfigError(f"cannot read config file {str(p)!r}: {exc.strerror or exc}") from None
    unknown = set(cfg) - {"compare", "models"}
    if unknown:
        raise ConfigError(f"config file {str(p)!r}: unknown sections {sorted(unknown)}; "
                          "expected [compare] and [models.NAME]")
    models = cfg.get("models", {})
    if not isinstance(models, dict) or not all(isinstance(v, dict) for v in models.values()):
        raise ConfigError(f"config file {str(p)!r}: [models.NAME] tables must hold param = value")
    for mname, table in models.items():
        for key, val in table.items():
            if key == PROBLEMS_KEY:
                _check_pins(str(p), mname, val)
            elif isinstance(val, dict):
                raise ConfigError(f"config file {str(p)!r}: [models.{mname}] {key} is a table; "
                                  "expected a value or a list of values (or the table "
                                  f"[models.{mname}.{PROBLEMS_KEY}.\"PROBLEM\"])")
    if "compare" in cfg and not isinstance(cfg["compare"], dict):
        raise ConfigError(f"config file {str(p)!r}: [compare] must be a table")
    return cfg


def _check_pins(path: str, model: str, pins: Any) -> None:
    """``[models.NAME.problems."P"]`` tables: one table of scalars per problem id."""
    where = f"config file {path!r}: [models.{model}.{PROBLEMS_KEY}]"
    if not isinstance(pins, dict):
        raise ConfigError(f"{where} must be a table of problems, e.g. "
                          f"[models.{model}.{PROBLEMS_KEY}.\"simulated\"]")
    for problem, values in pins.items():
        if not isinstance(values, dict):
            raise ConfigError(f"{where} {problem!r} must be a table of param = value")
        for key, val in values.items():
            if isinstance(val, (dict, list)):
                raise ConfigError(f"{where}.{problem!r} {key} = {val!r}: a pinned value is a "
                                  "single value (a list is a search range: put it under "
                                  f"[models.{model}])")


def check_config_models(cfg: Mapping[str, Any], known: list[str],
                        path: str | None = None) -> None:
    """Every ``[models.NAME]`` of a config file names a registered model (a typo would
    otherwise be ignored silently)."""
    for mname in cfg.get("models", {}):
        if mname not in known:
            where = f"config file {path!r}" if path else "config file"
            raise ConfigError(f"{where}: [models.{mname}]: "
                              + unknown_name_message("model", mname, known))
