"""Dataset contract: what every dataset plugin implements.

A dataset provides one or more *problems* (Shoes: one per attribute); each problem loads
as a :class:`~mtlbench.data.TaskSet`, which declares its target kind (binary labels or
real-valued targets).  Problems are addressed as ``"<dataset>/<problem>"``
in the results store and on the command line (``--datasets shoes`` means every problem of
Shoes, ``--datasets shoes/brown`` one of them).

Loading never half-writes a cache and never fails with a bare traceback: missing or corrupt
files raise :class:`~mtlbench.errors.DatasetUnavailableError` saying which files were
expected, where they were looked for, where to get them and their checksums.

Dataset parameters are selectable on the command line like model overrides:
``--datasets "simulated[seed=3]"`` (the generator seed), ``"shoes[pca=200]"`` (``pca`` is
accepted for a dataset's ``n_components``), ``"shoes[pca=200]/brown"`` (one problem).  The
names are the dataset class's ``__init__`` parameters; values are checked against their
defaults' types; the configured dataset's ``params()`` enter every unit's key, and tables
show the dataset as ``NAME[param=value,...]`` with the non-default parameters only.
"""
from __future__ import annotations

import inspect
import os
from pathlib import Path
from typing import Any, ClassVar, Mapping

from .data import TaskSet
from .errors import ConfigError
from .syntax import check_type, fmt_value, init_params

__all__ = ["Dataset", "default_cache_dir", "resolve_data_dir", "problems_of", "load_tasks",
           "LOAD_BLAS_THREADS", "find_in_subfolders", "data_dir_hint",
           "configure_dataset", "COMMON_PARAM_ALIASES"]

#: Spellings accepted for a dataset parameter of another name (when the class has the target
#: parameter and no parameter of the alias's name): ``pca`` = number of PCA components.
COMMON_PARAM_ALIASES = {"pca": "n_components"}

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


#: how deep below the data folder :func:`find_in_subfolders` looks, and how many folders at
#: most (a data folder pointed at a large home folder stays a quick look)
SUBFOLDER_DEPTH, SUBFOLDER_LIMIT = 2, 2000


def find_in_subfolders(root: str | os.PathLike | None, relpaths: tuple[str, ...] | list[str],
                       skip: tuple[Path, ...] | list[Path] = ()) -> list[Path]:
    """Folders below ``root`` (not ``root`` itself, nor those in ``skip``), at most
    :data:`SUBFOLDER_DEPTH` levels down, breadth first and sorted, that hold a file at one
    of ``relpaths`` (``"school.mat"``, ``"ml-latest-small/ratings.csv"``).  Hidden folders are
    not entered; at most :data:`SUBFOLDER_LIMIT` folders are looked at."""
    if root is None:
        return []
    root = Path(root).expanduser()
    skipped = {Path(p).expanduser().resolve() for p in skip}
    found: list[Path] = []
    level, seen = [root], 0
    for _ in range(SUBFOLDER_DEPTH):
        below: list[Path] = []
        for folder in level:
            try:
                subs = sorted(p for p in folder.iterdir()
                              if p.is_dir() and not p.name.startswith("."))
            except OSError:
                continue
            for sub in subs:
                seen += 1
                if seen > SUBFOLDER_LIMIT:
                    return found
                if sub.resolve() not in skipped and any((sub / r).is_file() for r in relpaths):
                    found.append(sub)
                below.append(sub)
        level = below
    return found


def data_dir_hint(found: list[Path], what: str, data_dir: str | os.PathLike,
                  dataset: str) -> str:
    """``found school.mat in ~/data/School, a subfolder of the data folder; use --data-dir
    ~/data/School`` for the first folder :func:`find_in_subfolders` found (a folder named like
    the dataset is looked for by itself: its parent is named), or ''."""
    if not found:
        return ""
    folder = found[0]
    use = folder.parent if folder.name == dataset else folder
    more = f" (and in {len(found) - 1} other folder(s))" if len(found) > 1 else ""
    return (f"found {what} in {folder}{more}, a subfolder of the data folder {data_dir}; "
            f"use --data-dir {use}")


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
    binarized : str
        How binary labels were made from real-valued targets (e.g. ``"the exam score above
        the school's median"``); empty when the targets are as collected.  Every table of the
        data set says "binarized" with it.
    """

    name: ClassVar[str] = ""
    description: ClassVar[str] = ""
    source: ClassVar[str] = ""
    binarized: ClassVar[str] = ""
    #: Extra accepted spellings of ``__init__`` parameters on the command line.
    param_aliases: ClassVar[Mapping[str, str]] = {}

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


#: BLAS threads while a dataset plugin builds a problem's data.  The bits of generated or
#: preprocessed data (e.g. a PCA: ``synthetic-attributes``, ``shoes``) can depend on how many
#: threads the BLAS uses, by rounding (seen: ``synthetic-attributes`` loaded with 2 threads has
#: another data fingerprint than with 1).  Units load in workers with one thread, so every load
#: in the core does too (:func:`load_tasks`): local and Dask runs, races, imports and figures
#: see the same data on any machine.
LOAD_BLAS_THREADS = 1


def load_tasks(ds: Dataset, problem: str, data_dir: str | os.PathLike | None = None) -> TaskSet:
    """``ds.load(problem, data_dir=...)`` with BLAS limited to :data:`LOAD_BLAS_THREADS`
    threads: the one way the core loads a problem's data."""
    from threadpoolctl import threadpool_limits

    with threadpool_limits(limits=LOAD_BLAS_THREADS):
        return ds.load(problem, data_dir=Path(data_dir) if data_dir else None)


def problems_of(ds: Dataset, data_dir: Path | None) -> list[str]:
    """``ds.problems(data_dir=...)``, also for third-party datasets whose ``problems`` takes
    no argument."""
    return list(call_problems(ds, data_dir))


def call_problems(ds: Dataset, data_dir: str | os.PathLike | None) -> Any:
    """What ``ds.problems`` returns, unchecked (:func:`problems_of` makes it a list; the
    conformance kit checks it is one): called with ``data_dir`` only if it takes one."""
    try:
        accepts = "data_dir" in inspect.signature(ds.problems).parameters
    except (TypeError, ValueError):
        accepts = False
    if not accepts:
        return ds.problems()
    return ds.problems(data_dir=Path(data_dir) if data_dir else None)


def configure_dataset(ds: Dataset, overrides: Mapping[str, Any]) -> tuple[Dataset, str]:
    """A copy of the registered dataset ``ds`` with ``overrides`` of its ``__init__``
    parameters, and its canonical selector (``NAME`` or ``NAME[k=v,...]`` listing only the
    values that differ from ``ds``'s).  Raises :class:`~mtlbench.errors.ConfigError` naming
    the dataset and parameter for an unknown name, a value of the wrong type or a value the
    dataset rejects."""
    cls = type(ds)
    params = init_params(cls)
    aliases = {**{a: t for a, t in COMMON_PARAM_ALIASES.items()
                  if t in params and a not in params}, **dict(cls.param_aliases)}
    current = {k: getattr(ds, k) for k in params if hasattr(ds, k)}
    given: dict[str, Any] = {}
    for key, value in overrides.items():
        real = key if key in params else aliases.get(key)
        if real is None:
            known = sorted(params) + [f"{a} (= {t})" for a, t in sorted(aliases.items())]
            raise ConfigError(f"dataset {ds.name!r} has no parameter {key!r}; its parameters "
                              f"are: {', '.join(known) or '(none)'}")
        if real in given:
            raise ConfigError(f"dataset {ds.name!r}: parameter {real!r} is given twice")
        if isinstance(value, list):
            raise ConfigError(f"{ds.name}[{key}={value!r}]: a dataset parameter takes one value "
                              "(give the dataset twice to compare two settings)")
        default = params[real]
        if real in current and current[real] is not None:
            default = current[real]
        if default is not inspect.Parameter.empty and default is not None:
            check_type(ds.name, key, default, value)
        given[real] = value
    changed = {k: v for k, v in given.items() if not (k in current and current[k] == v)}
    if not changed:
        return ds, ds.name
    kwargs = {k: v for k, v in current.items()}
    kwargs.update(changed)
    label = f"{ds.name}[{','.join(f'{k}={fmt_value(v)}' for k, v in sorted(changed.items()))}]"
    try:
        new = cls(**kwargs)
    except (TypeError, ValueError) as exc:
        raise ConfigError(f"invalid dataset parameters {label}: {exc}") from None
    return new, label
