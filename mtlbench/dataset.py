"""Dataset contract: what every dataset plugin implements.

A dataset provides one or more *problems* (Shoes: one per attribute); each problem loads
as a :class:`~mtlbench.data.TaskSet`.  Problems are addressed as ``"<dataset>/<problem>"``
in the results store and on the command line (``--datasets shoes`` means every problem of
Shoes, ``--datasets shoes/brown`` one of them).

Loading never half-writes a cache and never fails with a bare traceback: missing or corrupt
files raise :class:`~mtlbench.errors.DatasetUnavailableError` saying which files were
expected, where they were looked for, where to get them and their checksums.
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import Any, ClassVar

from .data import TaskSet

__all__ = ["Dataset", "default_cache_dir", "resolve_data_dir", "problems_of"]

DATA_DIR_ENV = "MTLBENCH_DATA_DIR"
CACHE_DIR_ENV = "MTLBENCH_CACHE_DIR"


def default_cache_dir() -> Path:
    """Where downloads are kept: ``$MTLBENCH_CACHE_DIR`` or ``~/.cache/mtlbench``."""
    env = os.environ.get(CACHE_DIR_ENV)
    return Path(env).expanduser() if env else Path.home() / ".cache" / "mtlbench"


def resolve_data_dir(data_dir: str | os.PathLike | None) -> Path | None:
    """The user-given data folder: the argument, else ``$MTLBENCH_DATA_DIR``, else None."""
    if data_dir is not None:
        return Path(data_dir).expanduser()
    env = os.environ.get(DATA_DIR_ENV)
    return Path(env).expanduser() if env else None


class Dataset:
    """Base class of dataset plugins.

    Class attributes
    ----------------
    name : str
        Registry name (``--datasets NAME``).
    description : str
        One line for ``mtlbench datasets``.
    source : str
        Where the data comes from (citation / URL / "generated").
    """

    name: ClassVar[str] = ""
    description: ClassVar[str] = ""
    source: ClassVar[str] = ""

    def problems(self, data_dir: Path | None = None) -> list[str]:
        """Names of the problems in this dataset (default: one problem named like the dataset).

        A dataset whose problems are defined by its files (the generic personalized-attribute
        layout) reads them from ``data_dir``; call through :func:`problems_of`."""
        return [self.name]

    def load(self, problem: str, *, data_dir: Path | None = None,
             cache_dir: Path | None = None) -> TaskSet:  # pragma: no cover - abstract
        """Load one problem as a TaskSet.  ``problem`` is one of :meth:`problems`."""
        raise NotImplementedError

    def availability(self, *, data_dir: Path | None = None, cache_dir: Path | None = None) -> str:
        """One of: "generated", "cached", "in data-dir", "downloadable", "needs local files"."""
        return "generated"

    def params(self) -> dict[str, Any]:
        """Parameters that change the loaded data (part of every result's identity)."""
        return {}

    def layout_help(self) -> str:
        """Which files are expected, in which layout (shown by ``mtlbench datasets``)."""
        return ""


def problems_of(ds: Dataset, data_dir: Path | None) -> list[str]:
    """``ds.problems(data_dir=...)``, also for third-party datasets whose ``problems`` takes
    no argument."""
    import inspect

    try:
        accepts = "data_dir" in inspect.signature(ds.problems).parameters
    except (TypeError, ValueError):
        accepts = False
    return list(ds.problems(data_dir=data_dir) if accepts else ds.problems())
