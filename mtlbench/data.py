"""Data contract: a benchmark problem is a set of tasks (users) over one feature space.

Two storage layouts, one interface:

* **shared items** (personalized data): one item-feature matrix ``items`` (n_items x d) and,
  per task, the indices of the items that user labelled plus the labels.  Nothing is copied
  per user until a task's ``X`` is asked for.
* **per-task arrays**: each task owns its ``X`` (n_t x d).

A problem declares its target kind (``target_kind``, :data:`mtlbench.metrics.TARGET_KINDS`):
``"binary"`` (the default), labels float64 in {-1, +1}, every task holding both classes; or
``"real"``, real-valued float64 targets (exam scores, ratings), finite and not all equal
within a task.  ``TaskSet.subset`` selects rows per task (what the protocol does to make
train / validation / test views) without copying the item matrix.
"""
from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any, Callable, Iterator, Mapping, Sequence

import numpy as np

from .errors import DataValidationError
from .metrics import BINARY, REAL, TARGET_KINDS


@dataclass(frozen=True)
class Task:
    """One task (user).

    Attributes
    ----------
    X : ndarray of shape (n_t, d), float64
        Features of the items this task labelled.
    y : ndarray of shape (n_t,), float64: labels in {-1, +1} or real-valued targets
    name : str
    """

    X: np.ndarray
    y: np.ndarray
    name: str

    @property
    def n_pos(self) -> int:
        return int(np.count_nonzero(self.y > 0))

    @property
    def n_neg(self) -> int:
        return int(np.count_nonzero(self.y < 0))


class TaskSet(Sequence[Task]):
    """T tasks over one d-dimensional feature space: the input of ``MTLModel.fit``.

    Build with :meth:`from_shared_items` or :meth:`from_arrays`; both validate their input
    and raise :class:`DataValidationError` naming the task and the problem.

    Attributes
    ----------
    name : str
        Problem name, e.g. ``"simulated"`` or ``"shoes/brown"``.
    d : int
        Feature dimension.
    T : int
        Number of tasks.
    task_names : list of str
    target_kind : str
        ``"binary"`` (labels in {-1, +1}) or ``"real"`` (real-valued targets).
    meta : dict
        Free-form metadata (ground truth of simulated data, preprocessing record, ...).
    """

    def __init__(
        self,
        name: str,
        *,
        items: np.ndarray | None,
        index: Sequence[np.ndarray] | None,
        Xs: Sequence[np.ndarray] | None,
        labels: Sequence[np.ndarray],
        task_names: Sequence[str],
        meta: Mapping[str, Any] | None = None,
        target_kind: str = BINARY,
        _validated: bool = False,
    ) -> None:
        if target_kind not in TARGET_KINDS:
            raise DataValidationError(f"{name}: target_kind must be one of {TARGET_KINDS}, got "
                                      f"{target_kind!r}")
        self.name = name
        self.target_kind = target_kind
        self.items = items
        self.index = None if index is None else [np.asarray(i, dtype=np.intp) for i in index]
        self.Xs = None if Xs is None else list(Xs)
        self.task_names = [str(n) for n in task_names]
        self.labels = ([np.asarray(y, dtype=np.float64) for y in labels] if _validated
                       else _as_targets(labels, self.task_names, name))
        self.meta = dict(meta or {})
        self._memo: dict[Any, Any] = {}
        if not _validated:
            self._validate()

    # ----------------------------------------------------------------- per-data cache
    def memo(self, key: Any, compute: Callable[[], Any]) -> Any:
        """``compute()``, computed once per TaskSet object and ``key``.

        The protocol fits every point of a unit's search on the *same* train TaskSet object,
        so what a fit derives from the data alone (per-task Gram matrices X_t^T X_t and
        X_t^T y_t, Lipschitz constants, lambda_max scales, factorizations, SVDs) can be
        computed once per unit: ``G = tasks.memo(("gram",), lambda: ...)``.  ``key`` must
        name everything the value depends on besides the data (e.g. a ridge constant).
        The cached value is shared: treat it as read-only.  Results are bit-identical to
        computing it afresh (the same code runs once instead of many times).  Subsets and
        copies start with an empty memo; it is never pickled.
        """
        try:
            return self._memo[key]
        except KeyError:
            value = self._memo[key] = compute()
            return value

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        state["_memo"] = {}
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        state.setdefault("_memo", {})
        state.setdefault("target_kind", BINARY)
        self.__dict__.update(state)

    # ----------------------------------------------------------------- constructors
    @classmethod
    def from_shared_items(
        cls,
        name: str,
        items: np.ndarray,
        index: Sequence[Sequence[int]],
        labels: Sequence[Sequence[float]],
        task_names: Sequence[str] | None = None,
        meta: Mapping[str, Any] | None = None,
        target_kind: str = BINARY,
    ) -> "TaskSet":
        """Tasks over shared items.

        Parameters
        ----------
        items : array of shape (n_items, d)
        index : T sequences of item indices (task t labelled ``items[index[t]]``)
        labels : T sequences of labels in {-1, +1} (``target_kind="binary"``) or of
            real-valued targets (``target_kind="real"``), aligned with ``index``
        """
        items = _as_float_matrix(items, f"{name}: item features")
        if len(index) != len(labels):
            raise DataValidationError(
                f"{name}: {len(index)} index arrays but {len(labels)} label arrays"
            )
        names = _task_names(task_names, len(labels), name)
        idx = []
        for t, ix in enumerate(index):
            ix = np.asarray(ix)
            if ix.ndim != 1 or (ix.size and not np.issubdtype(ix.dtype, np.integer)):
                raise DataValidationError(
                    f"{name}, task {names[t]!r}: item indices must be a 1-d integer array"
                )
            if ix.size and (ix.min() < 0 or ix.max() >= items.shape[0]):
                raise DataValidationError(
                    f"{name}, task {names[t]!r}: item index out of range "
                    f"[0, {items.shape[0]}) (min {ix.min()}, max {ix.max()})"
                )
            idx.append(ix.astype(np.intp))
        return cls(name, items=items, index=idx, Xs=None, labels=labels,
                   task_names=names, meta=meta, target_kind=target_kind)

    @classmethod
    def from_arrays(
        cls,
        name: str,
        Xs: Sequence[np.ndarray],
        ys: Sequence[np.ndarray],
        task_names: Sequence[str] | None = None,
        meta: Mapping[str, Any] | None = None,
        target_kind: str = BINARY,
    ) -> "TaskSet":
        """Tasks with their own feature matrices ``Xs[t]`` (n_t x d) and targets ``ys[t]``
        (labels in {-1, +1}, or real-valued with ``target_kind="real"``)."""
        if len(Xs) != len(ys):
            raise DataValidationError(
                f"{name}: {len(Xs)} feature matrices but {len(ys)} label arrays")
        names = _task_names(task_names, len(ys), name)
        mats = [_as_float_matrix(X, f"{name}, task {names[t]!r}: features")
                for t, X in enumerate(Xs)]
        return cls(name, items=None, index=None, Xs=mats, labels=ys, task_names=names, meta=meta,
                   target_kind=target_kind)

    # ----------------------------------------------------------------- validation
    def _validate(self) -> None:
        name = self.name
        if len(self.labels) == 0:
            raise DataValidationError(f"{name}: the data set has no tasks")
        if self.items is not None:
            if not np.all(np.isfinite(self.items)):
                bad = np.argwhere(~np.isfinite(self.items))[0]
                raise DataValidationError(
                    f"{name}: item features contain NaN/inf "
                    f"(first at item row {bad[0]}, column {bad[1]})"
                )
        d = self.d
        for t, y in enumerate(self.labels):
            tn = self.task_names[t]
            where = f"{name}, task {tn!r}"
            if y.ndim != 1:
                raise DataValidationError(f"{where}: labels must be 1-d, got shape {y.shape}")
            n = y.shape[0]
            if n == 0:
                raise DataValidationError(f"{where}: the task is empty (no labelled items)")
            if self.Xs is not None:
                X = self.Xs[t]
                if X.shape[1] != d:
                    raise DataValidationError(
                        f"{where}: has {X.shape[1]} features, the first task has {d}"
                    )
                if X.shape[0] != n:
                    raise DataValidationError(
                        f"{where}: shape mismatch, {X.shape[0]} feature rows but {n} labels"
                    )
                if not np.all(np.isfinite(X)):
                    r, c = np.argwhere(~np.isfinite(X))[0]
                    raise DataValidationError(
                        f"{where}: features contain NaN/inf (row {r}, column {c})")
            else:
                if self.index[t].shape[0] != n:
                    raise DataValidationError(
                        f"{where}: shape mismatch, "
                        f"{self.index[t].shape[0]} item indices but {n} labels"
                    )
            if not np.all(np.isfinite(y)):
                r = int(np.flatnonzero(~np.isfinite(y))[0])
                what = "labels" if self.target_kind == BINARY else "targets"
                raise DataValidationError(f"{where}: {what} contain NaN/inf (first at row {r}: "
                                          f"{y[r]})")
            if self.target_kind == REAL:
                if np.all(y == y[0]):
                    raise DataValidationError(
                        f"{where}: all {n} targets equal {y[0]:g}; a task with constant "
                        "real-valued targets has nothing to learn and no variance to normalise "
                        "by (nMSE, explained variance): drop the task")
                continue
            bad = ~np.isin(y, (-1.0, 1.0))
            if bad.any():
                vals = sorted(set(np.unique(y[bad]).tolist()))[:5]
                binary01 = set(np.unique(y).tolist()) <= {0.0, 1.0}
                hint = (" (labels in {0, 1}? map 0 to -1)" if binary01 else
                        " (real-valued targets? build the TaskSet with target_kind='real')")
                raise DataValidationError(
                    f"{where}: labels must be in {{-1, +1}}, found {vals}{hint}"
                )
            if np.all(y == y[0]):
                raise DataValidationError(
                    f"{where}: has only one class ({int(y[0]):+d}, {n} labels); "
                    "AUC is undefined; drop the task or filter users by minority-class count"
                )

    # ----------------------------------------------------------------- sequence protocol
    def __len__(self) -> int:
        return len(self.labels)

    def __getitem__(self, t: int) -> Task:  # type: ignore[override]
        return Task(X=self.X(t), y=self.labels[t], name=self.task_names[t])

    def __iter__(self) -> Iterator[Task]:
        for t in range(len(self)):
            yield self[t]

    def __repr__(self) -> str:
        kind = "" if self.target_kind == BINARY else f", target_kind={self.target_kind!r}"
        return f"TaskSet({self.name!r}, T={self.T}, d={self.d}, n={self.n_total}{kind})"

    # ----------------------------------------------------------------- accessors
    @property
    def T(self) -> int:
        return len(self.labels)

    @property
    def d(self) -> int:
        if self.items is not None:
            return int(self.items.shape[1])
        return int(self.Xs[0].shape[1])

    @property
    def n_total(self) -> int:
        return int(sum(y.shape[0] for y in self.labels))

    def X(self, t: int) -> np.ndarray:
        """Features of task ``t``, shape (n_t, d)."""
        if self.items is not None:
            return self.items[self.index[t]]
        return self.Xs[t]

    def y(self, t: int) -> np.ndarray:
        """Targets of task ``t``, shape (n_t,): labels in {-1, +1}, or real values."""
        return self.labels[t]

    def sizes(self) -> np.ndarray:
        return np.array([y.shape[0] for y in self.labels])

    def subset(self, rows: Sequence[np.ndarray], name: str | None = None,
               meta: Mapping[str, Any] | None = None) -> "TaskSet":
        """The same tasks restricted to ``rows[t]`` (positions within task t).

        ``meta`` replaces the metadata (default: keep it); the protocol passes ``{}`` so that no
        model can read ground truth.  Raises :class:`DataValidationError` when a task would
        be empty or, for binary targets, lose a class.
        """
        meta = self.meta if meta is None else meta
        if len(rows) != self.T:
            raise DataValidationError(
                f"{self.name}: subset needs {self.T} row arrays, got {len(rows)}")
        labels = [self.labels[t][r] for t, r in enumerate(rows)]
        if self.items is not None:
            out = TaskSet(name or self.name, items=self.items,
                          index=[self.index[t][r] for t, r in enumerate(rows)], Xs=None,
                          labels=labels, task_names=self.task_names, meta=meta,
                          target_kind=self.target_kind, _validated=True)
        else:
            out = TaskSet(name or self.name, items=None, index=None,
                          Xs=[self.Xs[t][r] for t, r in enumerate(rows)],
                          labels=labels, task_names=self.task_names, meta=meta,
                          target_kind=self.target_kind, _validated=True)
        for t, y in enumerate(labels):
            if y.size == 0:
                raise DataValidationError(
                    f"{out.name}, task {self.task_names[t]!r}: a subset is empty")
            if self.target_kind == BINARY and np.all(y == y[0]):
                raise DataValidationError(
                    f"{out.name}, task {self.task_names[t]!r}: a subset has only one class"
                )
        return out

    def stacked(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """All rows stacked: (X of shape (n_total, d), y of shape (n_total,), task id per row)."""
        X = np.vstack([self.X(t) for t in range(self.T)])
        y = np.concatenate(self.labels)
        tid = np.repeat(np.arange(self.T), self.sizes())
        return X, y, tid

    def fingerprint(self) -> str:
        """sha256 of features and targets (identifies the data a split was drawn from; the
        target kind too, when it is not binary)."""
        h = hashlib.sha256()
        h.update(f"{self.T}:{self.d}".encode())
        if self.target_kind != BINARY:
            h.update(f"targets:{self.target_kind}".encode())
        if self.items is not None:
            h.update(np.ascontiguousarray(self.items).tobytes())
            for ix in self.index:
                h.update(np.ascontiguousarray(ix, dtype=np.int64).tobytes())
        else:
            for X in self.Xs:
                h.update(np.ascontiguousarray(X).tobytes())
        for y in self.labels:
            h.update(np.ascontiguousarray(y).tobytes())
        return h.hexdigest()

    def summary(self) -> dict[str, Any]:
        """Counts the CLI and closing notes print: tasks, items, features, target kind, label
        balance (binary: ``positive_share``) or the targets' mean and standard deviation
        (real-valued: ``target_mean``, ``target_std``; ``positive_share`` None)."""
        sizes = self.sizes()
        out = {
            "problem": self.name,
            "tasks": self.T,
            "items": int(self.items.shape[0]) if self.items is not None else int(sizes.sum()),
            "features": self.d,
            "labels": int(sizes.sum()),
            "labels_per_task_min": int(sizes.min()),
            "labels_per_task_max": int(sizes.max()),
            "target_kind": self.target_kind,
            "positive_share": None,
        }
        if self.target_kind == BINARY:
            pos = sum(int(np.count_nonzero(y > 0)) for y in self.labels)
            out["positive_share"] = round(pos / max(int(sizes.sum()), 1), 4)
        else:
            y = np.concatenate(self.labels)
            out.update(target_mean=round(float(y.mean()), 4), target_std=round(float(y.std()), 4))
        return out


def _as_float_matrix(a: Any, where: str) -> np.ndarray:
    try:
        arr = np.asarray(a, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise DataValidationError(f"{where}: not numeric ({exc})") from None
    if arr.ndim != 2:
        raise DataValidationError(f"{where}: expected a 2-d array, got shape {arr.shape}")
    if arr.shape[1] == 0:
        raise DataValidationError(f"{where}: has no feature columns")
    if not np.all(np.isfinite(arr)):
        r, c = np.argwhere(~np.isfinite(arr))[0]
        raise DataValidationError(f"{where}: contains NaN/inf (row {r}, column {c})")
    return arr


def _as_targets(labels: Sequence[Any], names: Sequence[str], problem: str) -> list[np.ndarray]:
    """Each task's targets as float64, or one :class:`DataValidationError` naming the task
    whose targets are not numbers (strings, objects)."""
    out = []
    for t, y in enumerate(labels):
        try:
            arr = np.asarray(y, dtype=np.float64)
        except (TypeError, ValueError) as exc:
            tn = names[t] if t < len(names) else str(t)
            raise DataValidationError(f"{problem}, task {tn!r}: targets are not numbers "
                                      f"({exc})") from None
        out.append(arr)
    return out


def _task_names(names: Sequence[str] | None, T: int, problem: str) -> list[str]:
    if names is None:
        return [f"task{t}" for t in range(T)]
    if len(names) != T:
        raise DataValidationError(f"{problem}: {len(names)} task names for {T} tasks")
    return [str(n) for n in names]
