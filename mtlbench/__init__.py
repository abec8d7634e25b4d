"""mtlbench: benchmark linear multi-task learning models under one leak-free protocol.

Public API for plugin authors (plugin API version ``PLUGIN_API_VERSION``; CHANGELOG.md)::

    from mtlbench import MTLModel, LinearMTLModel, Dataset, TaskSet, Metric, hookimpl
    from mtlbench.datasets_api import DataFile, DataSource, locate   # dataset authors

and for running and reading comparisons (notebooks, scripts)::

    from mtlbench import compare, load_results

Names are imported on first use (PEP 562), so ``import mtlbench`` and ``mtlbench --version``
stay fast: numpy, scikit-learn and the plugins load only when something needs them.
"""
from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

from ._version import PLUGIN_API_VERSION, __version__

#: public name -> module that defines it
_LAZY = {
    "Task": ".data", "TaskSet": ".data", "Dataset": ".dataset",
    "ConfigError": ".errors", "DataValidationError": ".errors",
    "DatasetUnavailableError": ".errors", "MTLBenchError": ".errors",
    "PluginConflictError": ".errors", "PluginError": ".errors", "UnknownNameError": ".errors",
    "hookimpl": ".hookspecs", "auc_score": ".metrics", "Metric": ".metrics",
    "LinearMTLModel": ".model", "MTLModel": ".model", "clone": ".model",
    "Categorical": ".search.space", "Int": ".search.space", "Linear": ".search.space",
    "Log": ".search.space",
    "Param": ".search.space",
    "compare": ".api", "load_results": ".api", "Results": ".api",
    "report_progress": ".progress", "progress_active": ".progress",
}

if TYPE_CHECKING:  # for type checkers and IDEs
    from .api import Results, compare, load_results
    from .data import Task, TaskSet
    from .dataset import Dataset
    from .errors import (ConfigError, DataValidationError, DatasetUnavailableError,
                         MTLBenchError, PluginConflictError, PluginError, UnknownNameError)
    from .hookspecs import hookimpl
    from .metrics import Metric, auc_score
    from .model import LinearMTLModel, MTLModel, clone
    from .progress import progress_active, report_progress
    from .search.space import Categorical, Int, Linear, Log, Param


#: submodules reachable as attributes after a bare ``import mtlbench`` (``mtlbench.api.plan``)
_SUBMODULES = ("api",)


def __getattr__(name: str) -> Any:
    if name in _SUBMODULES:
        return import_module(f".{name}", __name__)
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'mtlbench' has no attribute {name!r}")
    value = getattr(import_module(module, __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY) | set(_SUBMODULES))


__all__ = [
    "MTLModel", "LinearMTLModel", "clone", "Dataset", "Task", "TaskSet", "hookimpl",
    "auc_score", "Metric", "MTLBenchError", "DataValidationError", "DatasetUnavailableError",
    "PluginError", "PluginConflictError", "UnknownNameError", "ConfigError", "__version__",
    "PLUGIN_API_VERSION",
    "Param", "Log", "Linear", "Int", "Categorical", "compare", "load_results", "Results",
    "report_progress", "progress_active",
]
