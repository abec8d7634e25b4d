"""Helpers shared by the built-in dataset plugins (not part of the public API).

* :class:`FileDataset` - base of datasets whose files are described by a
  :class:`~mtlbench.datasets_api.DataSource` (found in the data folder / cache, or downloaded);
* :func:`read_mat` - ``scipy.io.loadmat`` with user-facing errors for corrupt files;
* :func:`standardize` - label-free z-scoring of feature columns, with a record for ``meta``;
* :func:`class_count_filter` - the minority-class filter every loader of binary targets
  applies (a task keeps only if it has at least ``min_per_class`` labels of each class), with
  a record of what it dropped; :func:`target_filter` - the same for real-valued targets (at
  least ``MIN_TARGETS``, not all equal).
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Sequence

import numpy as np

from mtlbench import Dataset, DatasetUnavailableError, DataValidationError, UnknownNameError
# MIN_PER_CLASS, class_counts: the protocol's rule (>= MIN_PER_CLASS labels of each class per
# task), defined once in the core
from mtlbench.datasets_api import (MIN_PER_CLASS, MIN_TARGETS, DataFile, DataSource,
                                   availability, class_counts, corrupt_file_error,
                                   describe_files, locate, targets_ok)


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
            raise UnknownNameError(
                f"{self.name}: unknown problem {problem!r}; problems: {', '.join(self.problems())}")


def read_mat(path: Path, dataset: str, keys: Sequence[str], f: DataFile | None = None,
             source: DataSource | None = None) -> dict[str, Any]:
    """Load a MATLAB file, raising a user-facing error if it is corrupt or lacks ``keys``."""
    from scipy.io import loadmat

    try:
        mat = loadmat(str(path))
    except Exception as exc:  # noqa: BLE001 - any parse failure of a corrupt file
        raise corrupt_file_error(dataset, path, f"not a readable MATLAB file: "
                                 f"{type(exc).__name__}: {exc}", f, source) from None
    missing = [k for k in keys if k not in mat]
    if missing:
        have = sorted(k for k in mat if not k.startswith("__"))
        raise corrupt_file_error(dataset, path, f"variables {missing} missing; it holds {have}",
                                 f, source)
    return mat


def standardize(X: np.ndarray, *, columns: np.ndarray | None = None
                ) -> tuple[np.ndarray, dict[str, Any]]:
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
        n_pos, n_neg = class_counts(y)
        if min(n_pos, n_neg) >= min_per_class:
            keep[t] = True
        else:
            dropped.append({"task": str(task_names[t]), "n_pos": n_pos, "n_neg": n_neg})
    return keep, dropped


def target_filter(task_names: Sequence[str], targets: Sequence[np.ndarray]
                  ) -> tuple[np.ndarray, list[dict[str, Any]]]:
    """Which tasks of real-valued ``targets`` the protocol can use (``targets_ok``: at least
    ``MIN_TARGETS``, not all equal).  Returns a boolean keep-mask and, for each dropped task,
    ``{"task", "n", "why"}``."""
    keep = np.zeros(len(targets), dtype=bool)
    dropped = []
    for t, y in enumerate(targets):
        if targets_ok(y):
            keep[t] = True
        else:
            why = (f"fewer than {MIN_TARGETS} targets" if y.shape[0] < MIN_TARGETS
                   else f"all targets equal ({y[0]:g})")
            dropped.append({"task": str(task_names[t]), "n": int(y.shape[0]), "why": why})
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
        f"{dataset}/{problem}: no task is left after the filter ({rule}); {n_before} tasks "
        f"before it")


# --------------------------------------------------------------------------- user files
_BOMS = ((b"\xef\xbb\xbf", "utf-8-sig"), (b"\xff\xfe", "utf-16"), (b"\xfe\xff", "utf-16"))


def text_encoding(path: Path, where: str) -> tuple[str, str | None]:
    """The encoding to read a user's text file with, and a note when it is not plain UTF-8.

    A byte-order mark makes the intent unambiguous: UTF-8 with a BOM and UTF-16 with a BOM are
    accepted (noted).  Anything else must be UTF-8; bytes that are not (Latin-1, UTF-16
    without a BOM, ...) are a :class:`DataValidationError` naming the file, the first bad
    byte's offset and how to convert it."""
    raw = Path(path).read_bytes()
    for bom, enc in _BOMS:
        if raw.startswith(bom):
            try:
                raw.decode(enc)
            except UnicodeDecodeError as exc:
                raise DataValidationError(
                    f"{where}: {path} starts with a {enc} byte-order mark but is not valid "
                    f"{enc} (byte {exc.start}); save it as UTF-8") from None
            return enc, f"{path.name} read as {enc} (byte-order mark)"
    if b"\x00" in raw:  # valid UTF-8 bytes, but no text file of ids or labels holds NULs
        at = raw.index(b"\x00")
        raise DataValidationError(
            f"{where}: {path} is not UTF-8 text (a NUL byte at offset {at}; it looks like "
            "UTF-16 without a byte-order mark). Save it as UTF-8, e.g. "
            f"`iconv -f UTF-16LE -t UTF-8 {path.name} > fixed && mv fixed {path.name}`")
    try:
        raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        guess = ("UTF-16 without a byte-order mark" if raw[1:2] == b"\x00" or raw[:1] == b"\x00"
                 else "Latin-1 / Windows-1252 or another 8-bit encoding")
        raise DataValidationError(
            f"{where}: {path} is not UTF-8 (byte 0x{raw[exc.start]:02x} at offset {exc.start}; "
            f"it looks like {guess}). Save it as UTF-8, e.g. "
            f"`iconv -f LATIN1 -t UTF-8 {path.name} > fixed && mv fixed {path.name}`") from None
    return "utf-8", None


def read_text_lines(path: Path, where: str) -> tuple[list[str], str | None]:
    """Stripped lines of a user's text file (see :func:`text_encoding`) and the note."""
    enc, note = text_encoding(path, where)
    return [ln.strip() for ln in Path(path).read_text(encoding=enc).splitlines()], note


def load_npy(path: Path, where: str) -> np.ndarray:
    """``numpy.load`` of a user's ``.npy`` array without pickles, with clear errors for a
    truncated file, a non-numpy file or an ``.npz`` archive saved under an ``.npy`` name."""
    try:
        obj = np.load(path, allow_pickle=False)
    except Exception as exc:  # noqa: BLE001 - truncated / not an .npy file / object array
        raise DatasetUnavailableError(
            f"{where}: {path} cannot be read ({type(exc).__name__}: {exc}); it is truncated or "
            "not a numpy .npy file (write it with numpy.save)") from None
    if isinstance(obj, np.lib.npyio.NpzFile):
        names = list(obj.files)
        obj.close()
        raise DataValidationError(
            f"{where}: {path} is an .npz archive (numpy.savez) holding {names[:5]}, not one "
            "array; save the feature matrix with numpy.save(path, array)")
    return obj


def check_features(F: np.ndarray, where: str, path: Path | str) -> np.ndarray:
    """The feature matrix as float64, or a :class:`DataValidationError` saying what is wrong.

    Rejected: not 2-d / empty, non-numeric, complex (the imaginary part is never dropped),
    NaN/inf, and values so large that the covariance used by PCA overflows float64
    (max|F|^2 * n_rows * n_cols must stay finite)."""
    F = np.asarray(F)
    if np.iscomplexobj(F):
        raise DataValidationError(
            f"{where}: {path} holds complex numbers (dtype {F.dtype}); features must be real. "
            "If the imaginary part matters, store real and imaginary parts as separate columns")
    if F.ndim != 2 or F.shape[0] == 0 or F.shape[1] == 0 or not (
            np.issubdtype(F.dtype, np.number) or F.dtype == np.bool_):
        raise DataValidationError(f"{where}: {path} must be a non-empty 2-d numeric array, got "
                                  f"shape {F.shape}, dtype {F.dtype}")
    F = F.astype(np.float64, copy=False)
    if not np.all(np.isfinite(F)):
        r, c = np.argwhere(~np.isfinite(F))[0]
        raise DataValidationError(f"{where}: {path} contains NaN/inf (row {r}, column {c})")
    big = float(np.max(np.abs(F)))
    with np.errstate(over="ignore"):
        overflow = not np.isfinite(np.float64(big) * big * F.shape[0] * F.shape[1])
    if overflow:
        r, c = np.unravel_index(int(np.argmax(np.abs(F))), F.shape)
        raise DataValidationError(
            f"{where}: {path} has values too large for float64 arithmetic (|{F[r, c]:.3g}| at "
            f"row {r}, column {c}: squares of such values overflow the covariance used by PCA); "
            "rescale the features")
    return F
