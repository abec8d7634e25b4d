"""mtlbench: benchmark linear multi-task learning models under one leak-free protocol.

Public API for plugin authors::

    from mtlbench import MTLModel, LinearMTLModel, Dataset, TaskSet, hookimpl
"""
from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version as _version

from .data import Task, TaskSet
from .dataset import Dataset
from .errors import (ConfigError, DataValidationError, DatasetUnavailableError, MTLBenchError,
                     PluginConflictError, PluginError, UnknownNameError)
from .hookspecs import hookimpl
from .metrics import auc_score
from .model import LinearMTLModel, MTLModel, clone
from .space import Categorical, Int, Linear, Log, Param

try:
    __version__ = _version("mtlbench")
except PackageNotFoundError:  # running from a source tree that was not installed
    __version__ = "0.0.0+unknown"

__all__ = [
    "MTLModel", "LinearMTLModel", "clone", "Dataset", "Task", "TaskSet", "hookimpl",
    "auc_score", "MTLBenchError", "DataValidationError", "DatasetUnavailableError",
    "PluginError", "PluginConflictError", "UnknownNameError", "ConfigError", "__version__",
    "Param", "Log", "Linear", "Int", "Categorical",
]
