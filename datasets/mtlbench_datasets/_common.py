"""Helpers shared by the built-in dataset plugins (not part of the public API).

* :class:`FileDataset` - base of datasets whose files are described by a
  :class:`~mtlbench.fetch.DataSource` (found in the data folder / cache, or downloaded);
* :func:`read_mat` - ``scipy.io.loadmat`` with user-facing errors for corrupt files;
* :func:`standardize` - label-free z-scoring of feature columns, with a record for ``meta``;
* :func:`class_count_filter` - the minority-class filter every loader applies (a task keeps
  only if it has at least ``min_per_class`` labels of each class), with a record of what it
  dropped.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Sequence

import numpy as np

from mtlbench import Dataset
from mtlbench.errors import DatasetUnavailableError
from mtlbench.fetch import DataFile, DataSource, availability, corrupt_file_error, describe_files, locate

#: The protocol needs at least this many labels of each class per task (stratified
#: train / validation / test splits); loaders never return a task with fewer.
MIN_PER_CLASS = 3


class FileDataset(Dataset):
    """A dataset whose raw files are listed in ``data_source``."""

    data_source: DataSource

    def availability(self, *, data_dir=None, cache_dir=None) -> str:
        return availability(self.data_source, data_dir=data_dir, cache_dir=cache_dir)

    def layout_help(self) -> str:
        return describe_files(self.data_source)

    def _paths(self, data_dir, cache_dir) -> dict[str, Path]:
        return locate(self.data_source, data_dir=data_dir, cache_dir=cache_dir)

    def _file(self, path: str) -> DataFile:
        return next(f for f in self.data_source.files if f.path == path)

    def _check_problem(self, problem: str) -> None:
        if problem not in self.problems():
            from mtlbench.errors import UnknownNameError
            raise UnknownNameError(
                f"{self.name}: unknown problem {problem!r}; problems: {', '.join(self.problems())}")


def read_mat(path: Path, dataset: str, keys: Sequence[str], f: DataFile | None = None,
             source: DataSource | None = None) -> dict[str, Any]:
    """Load a MATLAB file, raising a user-facing error if it is corrupt or lacks ``keys``."""
    from scipy.io import loadmat

    try:
        mat = loadmat(str(path))
    except Exception as exc:  # noqa: BLE001 - any parse failure of a corrupt file
        raise corrupt_file_error(dataset, path, f"not a readable MATLAB file: {type(exc).__name__}: {exc}",
                                 f, source) from None
    missing = [k for k in keys if k not in mat]
    if missing:
        have = sorted(k for k in mat if not k.startswith("__"))
        raise corrupt_file_error(dataset, path, f"variables {missing} missing; it holds {have}", f, source)
    return mat


def standardize(X: np.ndarray, *, columns: np.ndarray | None = None) -> tuple[np.ndarray, dict[str, Any]]:
    """Z-score the given columns of ``X`` (all by default) with statistics of ``X`` itself.

    Uses features only, never labels.  Columns with zero variance are centred, not scaled.
    Returns the new matrix and a record (means, standard deviations) for ``TaskSet.meta``.
    """
    X = np.array(X, dtype=np.float64, copy=True)
    cols = np.arange(X.shape[1]) if columns is None else np.asarray(columns)
    mu = X[:, cols].mean(axis=0)
    sd = X[:, cols].std(axis=0)
    sd_safe = np.where(sd > 0, sd, 1.0)
    X[:, cols] = (X[:, cols] - mu) / sd_safe
    rec = {"method": "z-score per column (mean 0, std 1), statistics over all rows, labels unused",
           "columns": cols.tolist(), "mean": mu.round(6).tolist(), "std": sd.round(6).tolist()}
    return X, rec


BIAS_NOTE = ("a constant 1 feature is appended (the models have no intercept; with it each task "
             "learns an offset, penalised like any weight); bias=False leaves it out")


def add_bias(X: np.ndarray, bias: bool) -> np.ndarray:
    """``X`` with a constant-1 column appended when ``bias`` is true."""
    if not bias:
        return X
    return np.hstack([X, np.ones((X.shape[0], 1))])


def class_count_filter(task_names: Sequence[str], labels: Sequence[np.ndarray],
                       min_per_class: int) -> tuple[np.ndarray, list[dict[str, Any]]]:
    """Which tasks have at least ``min_per_class`` labels of each class.

    Returns a boolean keep-mask and, for each dropped task, ``{"task", "n_pos", "n_neg"}``.
    """
    keep = np.zeros(len(labels), dtype=bool)
    dropped = []
    for t, y in enumerate(labels):
        n_pos = int(np.count_nonzero(y > 0))
        n_neg = int(y.shape[0] - n_pos)
        if min(n_pos, n_neg) >= min_per_class:
            keep[t] = True
        else:
            dropped.append({"task": str(task_names[t]), "n_pos": n_pos, "n_neg": n_neg})
    return keep, dropped


def check_min_minority(dataset: str, value: Any) -> int:
    """Validate a ``min_minority`` parameter (at least :data:`MIN_PER_CLASS`)."""
    try:
        v = int(value)
    except (TypeError, ValueError):
        raise ValueError(f"{dataset}: min_minority must be an integer, got {value!r}") from None
    if v != value or v < MIN_PER_CLASS:
        raise ValueError(f"{dataset}: min_minority must be an integer >= {MIN_PER_CLASS} "
                         f"(the protocol's minimum per class), got {value!r}")
    return v


def no_tasks_error(dataset: str, problem: str, rule: str, n_before: int) -> DatasetUnavailableError:
    return DatasetUnavailableError(
        f"{dataset}/{problem}: no task is left after the filter ({rule}); {n_before} tasks before it")
