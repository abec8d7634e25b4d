"""Reading a user's MATLAB files for ``import-attributes``: numeric matrices and lists of names.

Private helper of ``_attributes.py``.  Files up to MATLAB v7.2 are read with
``scipy.io.loadmat``; a v7.3 file is HDF5 and is read with ``h5py`` (the optional extra
``pip install 'mtlbench[mat]'``; without it the error says so).  Both readers give the same
values for the variables used here, in MATLAB's orientation (an m x n matrix is m rows):

* numeric and logical arrays as float arrays (h5py stores them transposed: turned back);
* char arrays as text (a char matrix: one string per row, trailing blanks removed);
* cell arrays as object arrays of their converted elements (MATLAB order is column-major:
  :func:`names` flattens that way).

Structs are not read (the error names the variable and says to save its fields as variables).
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from mtlbench import DataValidationError

__all__ = ["load_mat", "describe", "matrix", "names", "is_mat"]

_HDF5_SIGNATURE = b"\x89HDF\r\n\x1a\n"


def is_mat(path: Path) -> bool:
    return path.suffix.lower() == ".mat"


def load_mat(path: Path, where: str) -> dict[str, Any]:
    """The variables of a MATLAB file (name -> value as in the module docstring)."""
    try:
        with open(path, "rb") as fh:
            head = fh.read(520)
    except OSError as exc:
        raise DataValidationError(f"{where}: cannot read {path}: {exc.strerror or exc}") from None
    if head[512:520] == _HDF5_SIGNATURE or head[:8] == _HDF5_SIGNATURE:
        return _load_hdf5(path, where)
    from scipy.io import loadmat

    try:
        raw = loadmat(str(path))
    except NotImplementedError:  # a v7.3 file without the usual header
        return _load_hdf5(path, where)
    except Exception as exc:  # noqa: BLE001 - any parse failure of a file that is not MATLAB
        raise DataValidationError(f"{where}: {path} is not a readable MATLAB file "
                                  f"({type(exc).__name__}: {exc})") from None
    return {k: _from_scipy(v) for k, v in raw.items() if not k.startswith("__")}


def _from_scipy(v: Any) -> Any:
    if isinstance(v, np.ndarray) and v.dtype.kind == "U":  # a char array: one string per row
        rows = [str(s).rstrip() for s in v.reshape(-1)]
        if len(rows) <= 1:
            return rows[0] if rows else ""
        return np.array(rows, dtype=object)
    if isinstance(v, np.ndarray) and v.dtype == object:
        out = np.empty(v.shape, dtype=object)
        for idx in np.ndindex(v.shape):
            out[idx] = _from_scipy(v[idx])
        return out
    if isinstance(v, np.ndarray) and v.dtype.names:
        return _Struct()
    return v


class _Struct:
    """A MATLAB struct (not read)."""


def _load_hdf5(path: Path, where: str) -> dict[str, Any]:
    try:
        import h5py
    except ModuleNotFoundError:
        raise DataValidationError(
            f"{where}: {path} is a MATLAB v7.3 file (HDF5); reading it needs h5py: "
            "pip install 'mtlbench[mat]' (or save it in MATLAB with -v7)") from None
    try:
        with h5py.File(path, "r") as f:
            return {k: _from_h5(f, f[k], h5py) for k in f if not k.startswith("#")}
    except OSError as exc:
        raise DataValidationError(f"{where}: {path} is not a readable MATLAB v7.3 (HDF5) file "
                                  f"({exc})") from None


def _from_h5(f: Any, obj: Any, h5py: Any) -> Any:
    if isinstance(obj, h5py.Group):
        return _Struct()
    cls = obj.attrs.get("MATLAB_class", b"")
    cls = cls.decode() if isinstance(cls, bytes) else str(cls)
    if obj.attrs.get("MATLAB_empty", 0):
        return np.zeros((0, 0)) if cls != "char" else ""
    data = obj[()]
    if cls == "cell":
        refs = np.asarray(data).T
        out = np.empty(refs.shape, dtype=object)
        for idx in np.ndindex(refs.shape):
            out[idx] = _from_h5(f, f[refs[idx]], h5py)
        return out
    arr = np.asarray(data).T
    if cls == "char":
        rows = ["".join(map(chr, r)).rstrip() for r in np.atleast_2d(arr).astype(np.uint32)]
        return rows[0] if len(rows) == 1 else np.array(rows, dtype=object)
    return arr


def describe(variables: dict[str, Any]) -> list[str]:
    """One line per variable: name, what it is, its shape (for ``--inspect``)."""
    out = []
    for k, v in sorted(variables.items()):
        if isinstance(v, _Struct):
            what = "struct (not read)"
        elif isinstance(v, str):
            what = f"text {v[:40]!r}"
        elif isinstance(v, np.ndarray) and v.dtype == object:
            kinds = {type(x).__name__ for x in v.reshape(-1)[:50]}
            first = next((x for x in v.reshape(-1) if isinstance(x, str)), None)
            what = (f"cell/text {'x'.join(map(str, v.shape))}"
                    + (f", e.g. {first[:40]!r}" if first is not None else
                       f" of {', '.join(sorted(kinds))}"))
        else:
            a = np.asarray(v)
            what = f"numeric {'x'.join(map(str, a.shape))} {a.dtype}"
            if a.size:
                what += f", values {a.min():g} .. {a.max():g}" if a.dtype.kind in "biuf" else ""
        out.append(f"  {k}: {what}")
    return out


def _pick(variables: dict[str, Any], name: str | None, what: str, ok, path: Path,
          where: str, option: str) -> tuple[str, Any]:
    if name is not None:
        if name not in variables:
            raise DataValidationError(f"{where}: {path} has no variable {name!r}; it holds "
                                      f"{', '.join(sorted(variables)) or 'none'}")
        return name, variables[name]
    found = [k for k, v in sorted(variables.items()) if ok(v)]
    if len(found) != 1:
        raise DataValidationError(
            f"{where}: {path} holds {len(found) or 'no'} {what} variable(s)"
            + (f" ({', '.join(found)})" if found else "") + f"; name the one to use with "
            f"{option} (see --inspect {path})")
    return found[0], variables[found[0]]


def _is_matrix(v: Any) -> bool:
    return isinstance(v, np.ndarray) and v.dtype != object and v.ndim == 2 and v.size > 1 \
        and v.dtype.kind in "biuf"


def matrix(variables: dict[str, Any], name: str | None, path: Path, where: str,
           option: str) -> tuple[str, np.ndarray]:
    """A 2-D numeric variable (``name``, else the only one) as float64."""
    key, v = _pick(variables, name, "2-D numeric", _is_matrix, path, where, option)
    if not _is_matrix(v):
        raise DataValidationError(f"{where}: variable {key!r} of {path} is not a 2-D numeric "
                                  "matrix")
    return key, np.asarray(v, dtype=np.float64)


def _is_names(v: Any) -> bool:
    return (isinstance(v, np.ndarray) and v.dtype == object and v.size > 0
            and all(isinstance(x, str) for x in v.reshape(-1)))


def names(variables: dict[str, Any], name: str | None, path: Path, where: str,
          option: str) -> tuple[str, list[str]]:
    """A cell array of text or a char matrix (``name``, else the only one) as a list of
    strings, in MATLAB's (column-major) order; a numeric vector gives its numbers as text."""
    key, v = _pick(variables, name, "text (cell array or char matrix)", _is_names, path, where,
                   option)
    if isinstance(v, str):
        return key, [v]
    arr = np.asarray(v)
    if arr.dtype == object:
        flat = arr.reshape(-1, order="F")
        bad = [i for i, x in enumerate(flat) if not isinstance(x, str)]
        if bad:
            raise DataValidationError(f"{where}: variable {key!r} of {path}: element {bad[0] + 1} "
                                      "is not text")
        return key, [x.strip() for x in flat]
    if arr.dtype.kind in "biuf" and (arr.ndim <= 1 or 1 in arr.shape):
        flat = arr.reshape(-1)
        if np.all(np.isfinite(flat)) and np.all(flat == np.round(flat)):
            return key, [str(int(x)) for x in flat]
        return key, [repr(float(x)) for x in flat]
    raise DataValidationError(f"{where}: variable {key!r} of {path} is not a list of names "
                              f"(a cell array of text or a char matrix)")
