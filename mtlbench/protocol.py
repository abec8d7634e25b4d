"""The common evaluation protocol (the TFCL paper's Experimental Settings, made exact).

For repetition r of a run with seed s, independently per task t:

1. the labelled items of task t are split into train+validation (1 - ``test_fraction``, the
   paper's 85 %) and test (``test_fraction``, 15 %); or, with ``train_fraction`` p (the
   MALSAR-style protocol of 10 / 20 / 30 % training data), into train+validation (p) and test
   (the rest).  Binary targets are split stratified by class (per class: round(fraction x
   n_class) rows, at least one in test and two in train+validation); real-valued targets by a
   plain seeded permutation of the task's rows (at least two in test, so that a test variance
   exists, and two in train+validation);
2. a validation part (``val_fraction`` of train+validation, at least one row; stratified for
   binary targets) is carved from train+validation only;
3. a searcher (:mod:`mtlbench.search`; default ``adaptive``, ``budget`` fits) proposes
   hyperparameter points; each is fitted on train -- always the same train TaskSet object, so
   ``TaskSet.memo`` shares data-only precomputation across the search -- and scored on
   validation by the selection metric: ``select_by``, by default the primary metric of the
   problem's target kind (mean per-task AUC for binary targets, mean per-task RMSE for real
   ones; :mod:`mtlbench.metrics`).  The best point wins; validation scores within
   :data:`~mtlbench.metrics.SELECTION_RTOL` of the best are ties, won by the earliest fit
   (:func:`mtlbench.search.best_index`).  Only a model declaring ``convex`` and
   ``supports_warm_start`` is warm-started (``init`` = the earlier successful fit nearest to
   the point, :func:`mtlbench.search.loop.nearest_fit`); every other fit starts cold.  The whole trace is kept;
4. the winner is refitted on train+validation and scored on test by every metric that applies
   to the target kind (:func:`mtlbench.scoring.metrics_for`), per task and aggregated.

The random stream of (s, r, t) is ``numpy.random.SeedSequence([s, r, t])``: splits depend only
on the data, the seed and the repetition — never on the model — so every model sees identical
splits.  Their sha256 fingerprint is stored with every result.  Test labels are never passed
to any ``fit`` and never read before step 4.  A model runs only on problems of a target kind it
declares (``MTLModel.target_kinds``).
"""
from __future__ import annotations

import hashlib
import itertools
import time
from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

import numpy as np

from ._json import config_json, jsonable
from .data import TaskSet
from .evaluate import (CONSTANT_RTOL, TRACEBACK_FRAMES, _bool_or_none, _int_or_none,
                       check_fit_returned, check_target_kind, checked_scores, mean_auc,
                       model_scores, plugin_traceback, score_key, task_scores)
from .errors import ConfigError, DataValidationError, ModelContractError
from .metrics import BINARY, REAL
from .model import MTLModel, clone
from .scoring import metrics_for, score_tasks, selection_metric
from .search.loop import search
from .search.searchers import DEFAULT_BUDGET, DEFAULT_SEARCH, best_index
from .search.space import space_from_json

PROTOCOL_VERSION = 1
MIN_PER_CLASS = 3  # one per class in each of train, validation and test
#: Real-valued targets: two in test (a variance), one in validation, one in train.
MIN_TARGETS = 4
#: The ProtocolConfig fields that say how the rows are split (the key's ``split`` part).
SPLIT_FIELDS = ("seed", "test_fraction", "val_fraction", "train_fraction")
#: A selected fit with at least this share of tasks at constant validation scores is flagged
#: ``degenerate`` in the search summary.
DEGENERATE_SHARE = 0.25


@dataclass(frozen=True)
class ProtocolConfig:
    """Settings of the protocol that identify a result (part of every unit's key)."""

    reps: int = 15
    seed: int = 0
    test_fraction: float = 0.15
    val_fraction: float = 0.2
    search: str = DEFAULT_SEARCH
    budget: int = DEFAULT_BUDGET
    #: Share of each task's rows for train+validation, the rest for test (replaces
    #: ``test_fraction``); None: the default protocol (``test_fraction``).
    train_fraction: float | None = None
    #: The metric that selects hyperparameters; None: the problem's primary metric.
    select_by: str | None = None

    def __post_init__(self) -> None:
        if self.reps < 1:
            raise ConfigError(f"reps must be >= 1, got {self.reps}")
        if isinstance(self.seed, bool) or not isinstance(self.seed, (int, np.integer)) \
                or not 0 <= self.seed <= 2 ** 63 - 1:
            raise ConfigError(f"seed must be an integer in [0, 2**63 - 1] (a SeedSequence "
                              f"entropy the store keeps as a signed 64-bit integer), got "
                              f"{self.seed!r}")
        if isinstance(self.budget, bool) or not isinstance(self.budget, int) or self.budget < 1:
            raise ConfigError(f"budget must be an integer >= 1, got {self.budget!r}")
        if not isinstance(self.search, str) or not self.search:
            raise ConfigError(f"search must be a searcher name, got {self.search!r}")
        if not 0 < self.test_fraction < 1:
            raise ConfigError(f"test_fraction must be in (0, 1), got {self.test_fraction}")
        if not 0 < self.val_fraction < 1:
            raise ConfigError(f"val_fraction must be in (0, 1), got {self.val_fraction}")
        if self.train_fraction is not None and not (
                isinstance(self.train_fraction, (int, float)) and 0 < self.train_fraction < 1):
            raise ConfigError(f"train_fraction must be in (0, 1), got {self.train_fraction!r}")
        if self.select_by is not None and (not isinstance(self.select_by, str)
                                           or not self.select_by):
            raise ConfigError(f"select_by must be a metric name, got {self.select_by!r}")

    def split_settings(self) -> dict[str, Any]:
        """How the rows are split (part of every unit's key): seed, the test (or, in the
        training-fraction protocol, the train+validation) and validation fractions."""
        if self.train_fraction is not None:
            return {"seed": self.seed, "train_fraction": self.train_fraction,
                    "val_fraction": self.val_fraction, "protocol_version": PROTOCOL_VERSION}
        return {"seed": self.seed, "test_fraction": self.test_fraction,
                "val_fraction": self.val_fraction, "protocol_version": PROTOCOL_VERSION}

    def selection_settings(self) -> dict[str, Any]:
        """How hyperparameters are selected (part of every unit's key): searcher and budget,
        and the selection metric when it is not the problem's primary one."""
        out: dict[str, Any] = {"search": self.search, "budget": self.budget}
        if self.select_by is not None:
            out["select_by"] = self.select_by
        return out


@dataclass
class Split:
    """Row positions per task for one repetition (each a list of T int arrays)."""

    train: list[np.ndarray]
    val: list[np.ndarray]
    test: list[np.ndarray]

    @property
    def trainval(self) -> list[np.ndarray]:
        return [np.sort(np.concatenate([a, b])) for a, b in zip(self.train, self.val)]

    def fingerprint(self) -> str:
        h = hashlib.sha256()
        for part in (self.train, self.val, self.test):
            for rows in part:
                h.update(np.asarray(rows, dtype=np.int64).tobytes())
                h.update(b"|")
            h.update(b"#")
        return h.hexdigest()


def _take(rows: np.ndarray, k: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """(``k`` of ``rows`` drawn at random, the rest)."""
    perm = rng.permutation(rows)
    return perm[:k], perm[k:]


def _stratified_take(rows: np.ndarray, fraction: float, keep_min: int,
                     rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """Split ``rows`` (one class) into (taken, rest): about ``fraction`` taken, at least 1,
    leaving at least ``keep_min``."""
    n = rows.shape[0]
    return _take(rows, int(np.clip(round(fraction * n), 1, n - keep_min)), rng)


def _test_take(rows: np.ndarray, test_fraction: float, train_fraction: float | None,
               test_min: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """(test, train+validation) of ``rows``: ``test_fraction`` of them (at least ``test_min``,
    leaving two), or all but round(``train_fraction`` x n) (at least two, leaving
    ``test_min``)."""
    n = rows.shape[0]
    if train_fraction is None:
        return _take(rows, int(np.clip(round(test_fraction * n), test_min, n - 2)), rng)
    return _take(rows, n - int(np.clip(round(train_fraction * n), 2, n - test_min)), rng)


def task_split(y: np.ndarray, rng: np.random.Generator, test_fraction: float,
               val_fraction: float, target_kind: str = BINARY,
               train_fraction: float | None = None
               ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(train, val, test) row positions of one task's targets ``y`` (n,): stratified by class
    for binary labels, a plain seeded permutation for real-valued targets (module
    docstring)."""
    if target_kind == REAL:
        n = y.shape[0]
        if n < MIN_TARGETS:
            raise DataValidationError(f"has {n} targets; the protocol needs >= {MIN_TARGETS} "
                                      "(2 for test, 1 for validation, 1 for training)")
        te, rest = _test_take(np.arange(n), test_fraction, train_fraction, 2, rng)
        va, tr = _stratified_take(rest, val_fraction, 1, rng)
        return np.sort(tr), np.sort(va), np.sort(te)
    train, val, test = [], [], []
    for cls in (-1.0, 1.0):
        rows = np.flatnonzero(y == cls)
        if rows.shape[0] < MIN_PER_CLASS:
            raise DataValidationError(
                f"class {int(cls):+d} has {rows.shape[0]} labels; the protocol needs >= "
                f"{MIN_PER_CLASS}")
        te, rest = _test_take(rows, test_fraction, train_fraction, 1, rng)
        va, tr = _stratified_take(rest, val_fraction, 1, rng)
        train.append(tr), val.append(va), test.append(te)
    return tuple(np.sort(np.concatenate(p)) for p in (train, val, test))  # type: ignore[return-value]


def class_counts(y: np.ndarray) -> tuple[int, int]:
    """``(n_pos, n_neg)``: labels > 0 and < 0 of one task's labels ``y`` (n,)."""
    return int(np.count_nonzero(y > 0)), int(np.count_nonzero(y < 0))


def class_counts_ok(y: np.ndarray, min_per_class: int = MIN_PER_CLASS) -> bool:
    """Whether labels ``y`` (n,) hold at least ``min_per_class`` labels of each class.

    The one implementation of the protocol's task rule (default :data:`MIN_PER_CLASS` = 3:
    one label of each class in each of train, validation and test); dataset plugins that
    filter tasks when loading use it too."""
    return min(class_counts(y)) >= min_per_class


def targets_ok(y: np.ndarray, min_targets: int = MIN_TARGETS) -> bool:
    """Whether real-valued targets ``y`` (n,) make a task the protocol can use: at least
    ``min_targets`` of them (default :data:`MIN_TARGETS` = 4: two for test, one for each of
    validation and train), not all equal (a TaskSet refuses a constant task)."""
    return y.shape[0] >= min_targets and not np.all(y == y[0])


def task_rule(target_kind: str) -> str:
    """The protocol's task rule in words, for messages."""
    if target_kind == REAL:
        return f">= {MIN_TARGETS} targets"
    return f">= {MIN_PER_CLASS} labels of each class"


def evaluable_tasks(tasks: TaskSet) -> tuple[list[int], list[str]]:
    """Tasks the protocol can split, and the dropped names.

    Rule (recorded with every result): a task with fewer than 3 labels of a class (binary
    targets) cannot contribute a label of that class to each of train, validation and test; a
    task with fewer than :data:`MIN_TARGETS` real-valued targets cannot give two to test and
    one to each of validation and train; such a task is dropped.
    """
    keep, dropped = [], []
    for t in range(tasks.T):
        y = tasks.y(t)
        ok = y.shape[0] >= MIN_TARGETS if tasks.target_kind == REAL else class_counts_ok(y)
        if ok:
            keep.append(t)
        else:
            dropped.append(tasks.task_names[t])
    return keep, dropped


def restrict_tasks(tasks: TaskSet, keep: Sequence[int]) -> TaskSet:
    """The TaskSet holding only tasks ``keep`` (meta is kept, with ``kept_task_index``)."""
    if len(keep) == tasks.T:
        return tasks
    meta = dict(tasks.meta)
    meta["kept_task_index"] = list(keep)
    if "true_W" in meta:
        meta["true_W"] = np.asarray(meta["true_W"])[:, keep]
    if "task_groups" in meta:
        meta["task_groups"] = np.asarray(meta["task_groups"])[keep]
    return TaskSet(tasks.name, items=tasks.items,
                   index=None if tasks.index is None else [tasks.index[t] for t in keep],
                   Xs=None if tasks.Xs is None else [tasks.Xs[t] for t in keep],
                   labels=[tasks.labels[t] for t in keep],
                   task_names=[tasks.task_names[t] for t in keep], meta=meta,
                   target_kind=tasks.target_kind, _validated=True)


def make_split(tasks: TaskSet, config: ProtocolConfig, rep: int) -> Split:
    """The split of repetition ``rep``: a function of (targets, seed, rep) only."""
    train, val, test = [], [], []
    for t in range(tasks.T):
        rng = np.random.default_rng(np.random.SeedSequence([config.seed, rep, t]))
        try:
            tr, va, te = task_split(tasks.y(t), rng, config.test_fraction, config.val_fraction,
                                    tasks.target_kind, config.train_fraction)
        except DataValidationError as exc:
            raise DataValidationError(
                f"{tasks.name}, task {tasks.task_names[t]!r}: {exc}") from None
        train.append(tr), val.append(va), test.append(te)
    return Split(train, val, test)


def parameter_grid(space: Mapping[str, Sequence[Any]]) -> list[dict[str, Any]]:
    """Cartesian product of a search space in a stable order (keys sorted)."""
    if not space:
        return [{}]
    keys = sorted(space)
    for k in keys:
        if not isinstance(space[k], (list, tuple)) or len(space[k]) == 0:
            raise ConfigError(
                f"search space entry {k!r} must be a non-empty list, got {space[k]!r}")
    return [dict(zip(keys, vals)) for vals in itertools.product(*(space[k] for k in keys))]



@dataclass
class UnitOutcome:
    """What one (model, problem, repetition) produced.

    ``val_auc`` / ``test_auc`` / ``task_auc``: the AUC of a binary problem (None for real
    targets); ``select_by`` the selection metric and ``val_score`` its validation value;
    ``metrics`` every applicable metric on test, aggregated (None: undefined or failed) and
    ``task_metrics`` per task (in ``task_names`` order)."""

    best_params: dict[str, Any]
    val_auc: float | None
    test_auc: float | None
    task_auc: np.ndarray | None
    task_names: list[str]
    n_test: list[int]
    grid: list[dict[str, Any]]
    fit_time: float
    select_time: float
    n_iter: int | None
    split_fingerprint: str
    data_fingerprint: str
    dropped_tasks: list[str]
    history: dict[str, Any] = field(default_factory=dict)
    diagnostics: dict[str, Any] = field(default_factory=dict)
    arrays: dict[str, np.ndarray] = field(default_factory=dict)
    target_kind: str = BINARY
    select_by: str = "auc"
    val_score: float | None = None
    metrics: dict[str, float | None] = field(default_factory=dict)
    task_metrics: dict[str, list[float | None]] = field(default_factory=dict)


def run_protocol(base: MTLModel, search_space: Mapping[str, Any], tasks: TaskSet,
                 config: ProtocolConfig, rep: int, keep_arrays: bool = False) -> UnitOutcome:
    """Model selection on validation data, refit on train+validation, test per task.

    ``base`` carries the fixed hyperparameters; ``search_space`` the searched ones (Param
    declarations, their JSON form, or plain lists); ``config.search`` / ``config.budget`` say
    how they are searched, ``config.select_by`` by which metric (default: the primary metric
    of the problem's target kind).
    """
    check_target_kind(base, tasks)
    select = selection_metric(config.select_by, tasks.target_kind, tasks.name)
    keep, dropped = evaluable_tasks(tasks)
    if not keep:
        raise DataValidationError(
            f"{tasks.name}: no task has {task_rule(tasks.target_kind)}")
    tasks = restrict_tasks(tasks, keep)
    split = make_split(tasks, config, rep)
    train = tasks.subset(split.train, name=f"{tasks.name}[train]", meta={})
    val = tasks.subset(split.val, name=f"{tasks.name}[val]", meta={})

    space = space_from_json(search_space)
    t0 = time.perf_counter()
    trace, summary = search(base, space, train, val, config.search, config.budget,
                            metric=select)
    select_time = time.perf_counter() - t0
    b = best_index(trace, select)
    if b is None:
        first = trace[0].get("error", "") if trace else ""
        if first.startswith("ModelContractError: "):  # the model breaks the contract: say so
            raise ModelContractError(first[len("ModelContractError: "):])
        errors = "; ".join(e.get("error", "") for e in trace[:3])
        failed = RuntimeError(f"every grid point failed ({len(trace)} tried): {errors}")
        # the first failed fit's frames in the plugin's code, which the runner stores with
        # the unit's traceback (this one ends here, in the framework)
        first_tb = trace[0].get("traceback", "") if trace else ""
        failed.plugin_traceback = first_tb  # type: ignore[attr-defined]
        raise failed
    best_params, best_val = dict(trace[b]["params"]), float(trace[b][score_key(select)])

    # Test labels are touched only from here on.
    trainval = tasks.subset(split.trainval, name=f"{tasks.name}[train+val]", meta={})
    test = tasks.subset(split.test, name=f"{tasks.name}[test]", meta={})
    final = clone(base, **best_params)
    t1 = time.perf_counter()
    check_fit_returned(final.fit(trainval), final)
    fit_time = time.perf_counter() - t1
    scores, constant = model_scores(final, test)
    metrics, task_metrics, failed = score_tasks(scores, metrics_for(tasks.target_kind))
    binary = tasks.target_kind == BINARY
    per_task = np.asarray(task_metrics["auc"], dtype=np.float64) if binary else None
    test_auc = metrics["auc"] if binary else None

    # Every fitted ``<name>_history_`` (one value per iteration) is stored as ``<name>``.
    history = {attr[:-len("_history_")]: jsonable(val) for attr, val in sorted(vars(final).items())
               if attr.endswith("_history_") and val is not None}
    diagnostics = structure_recovery(final, tasks)
    diagnostics.update(jsonable(getattr(final, "diagnostics_", None) or {}))
    summary["selected_converged"] = trace[b].get("converged")
    summary["refit_converged"] = _bool_or_none(getattr(final, "converged_", None))
    summary["selected_constant_share"] = trace[b]["constant_share"]
    summary["refit_constant_share"] = float(constant.mean())
    summary["degenerate"] = trace[b]["constant_share"] >= DEGENERATE_SHARE
    summary["select_by"] = select.name
    diagnostics["search"] = summary
    if failed:
        diagnostics["metrics_failed"] = failed
    flat = [test.task_names[t] for t in range(test.T)
            if tasks.target_kind == REAL and np.all(test.y(t) == test.y(t)[0])]
    if flat:  # per-task nMSE / explained variance are undefined there (null)
        diagnostics["constant_test_targets"] = flat
    # labels x features: what the dispatcher and ``--dry-run`` scale unit times by
    # (mtlbench.runner.cost)
    diagnostics["problem_size"] = int(tasks.sizes().sum()) * int(tasks.d)
    arrays = {}
    if keep_arrays:
        for attr in ("coef_", "feature_groups_", "task_groups_"):
            val_ = getattr(final, attr, None)
            if isinstance(val_, np.ndarray):
                arrays[attr.rstrip("_")] = val_
        # ``embeddings_`` (optional contract attribute): per early iteration an (n, c) array,
        # e.g. a spectral embedding of tasks and features, drawn by the report.
        emb = getattr(final, "embeddings_", None)
        if emb is not None and len(emb) > 0:
            try:
                arrays["embeddings"] = np.stack([np.asarray(e, dtype=np.float64) for e in emb])
            except ValueError:  # ragged: not stored
                pass
    return UnitOutcome(
        best_params=best_params, val_auc=best_val if select.name == "auc" else None,
        test_auc=test_auc, task_auc=per_task,
        task_names=list(tasks.task_names), n_test=[int(r.shape[0]) for r in split.test],
        grid=trace, fit_time=fit_time, select_time=select_time,
        n_iter=_int_or_none(getattr(final, "n_iter_", None)),
        split_fingerprint=split.fingerprint(), data_fingerprint=tasks.fingerprint(),
        dropped_tasks=dropped, history=history, diagnostics=diagnostics, arrays=arrays,
        target_kind=tasks.target_kind, select_by=select.name, val_score=best_val,
        metrics=metrics, task_metrics=task_metrics)



def structure_recovery(model: MTLModel, tasks: TaskSet) -> dict[str, Any]:
    """On data with known structure (``meta['true_W']``, ``meta['task_groups']``): support
    precision/recall of ``coef_`` against the true support, and the adjusted Rand index of
    the model's task / feature groups against the true ones."""
    out: dict[str, Any] = {}
    true_W = tasks.meta.get("true_W")
    coef = getattr(model, "coef_", None)
    if true_W is not None and isinstance(coef, np.ndarray) and coef.shape == np.shape(true_W):
        scale = np.abs(coef).max()
        est = np.abs(coef) > 1e-6 * scale if scale > 0 else np.zeros(coef.shape, bool)
        true = np.asarray(true_W) != 0
        tp = int(np.count_nonzero(est & true))
        out["support_precision"] = tp / max(int(est.sum()), 1)
        out["support_recall"] = tp / max(int(true.sum()), 1)
    # lazy: sklearn.metrics takes ~2 s to import, and the CLI imports this module at start-up
    from sklearn.metrics import adjusted_rand_score

    for key, attr in (("task_groups", "task_groups_"), ("feature_groups", "feature_groups_")):
        truth, found = tasks.meta.get(key), getattr(model, attr, None)
        if truth is not None and found is not None and len(found) == len(truth):
            out[f"ari_{key}"] = float(adjusted_rand_score(np.asarray(truth), np.asarray(found)))
    return out




__all__ = ["ProtocolConfig", "Split", "make_split", "task_split", "evaluable_tasks",
           "MIN_PER_CLASS", "MIN_TARGETS", "SPLIT_FIELDS", "task_rule", "targets_ok",
           "class_counts",
           "class_counts_ok", "checked_scores", "check_target_kind", "model_scores",
           "score_key", "parameter_grid", "mean_auc", "task_scores", "CONSTANT_RTOL",
           "DEGENERATE_SHARE",
           "run_protocol", "search", "check_fit_returned", "UnitOutcome",
           "plugin_traceback", "TRACEBACK_FRAMES",
           "structure_recovery", "config_json"]
