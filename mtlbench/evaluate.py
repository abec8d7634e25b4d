"""A fitted model checked against the model contract: its scores on a task set (one finite
real score per row, float64), whether they are constant, its declared target kinds, what
``fit`` returned, and a failed fit's traceback in the plugin's code.  The one check of each,
used by the protocol, the fit loop of the search (:mod:`mtlbench.search.loop`), races and
the conformance kit.
"""
from __future__ import annotations

import linecache
from typing import Any

import numpy as np

from .data import TaskSet
from .errors import ConfigError, ModelContractError
from .metrics import BINARY, Metric, target_kind_text
from .model import MTLModel
from .scoring import TaskScores

#: A task's scores are constant when max - min <= CONSTANT_RTOL * (1 + max |s|): the model
#: ranks nothing (w_t = 0 or equivalent; AUC 0.5 by ties).
CONSTANT_RTOL = 1e-12
#: At most this many frames (the last ones) of a failed fit's traceback are kept in its trace
#: entry (:func:`plugin_traceback`).
TRACEBACK_FRAMES = 8


def mean_auc(model: MTLModel, tasks: TaskSet) -> tuple[float, np.ndarray]:
    """Mean over tasks of the per-task AUC of ``model`` on ``tasks``; raises on bad scores."""
    per_task, _ = task_scores(model, tasks)
    return float(per_task.mean()), per_task


def task_scores(model: MTLModel, tasks: TaskSet, metric: str | Metric = "auc"
                ) -> tuple[np.ndarray, np.ndarray]:
    """``(values, constant)``: the per-task values (T,) of ``metric`` (default: the AUC) for
    ``model`` on ``tasks`` and whether each task's scores are constant (T,) bool,
    max - min <= :data:`CONSTANT_RTOL` (1 + max |s|); raises on bad scores."""
    from .scoring import get_metric

    scores, constant = model_scores(model, tasks)
    return scores.value(get_metric(metric))[1], constant


def model_scores(model: MTLModel, tasks: TaskSet) -> tuple[TaskScores, np.ndarray]:
    """``(scores, constant)``: ``model``'s checked scores on every task of ``tasks`` with the
    tasks' targets (:class:`mtlbench.scoring.TaskScores`) and whether each task's scores are
    constant (T,) bool (:func:`task_scores`); raises on bad scores."""
    ss = []
    constant = np.zeros(tasks.T, dtype=bool)
    for t in range(tasks.T):
        X = tasks.X(t)
        s = checked_scores(model.decision_function(X, t), X.shape[0], tasks.task_names[t],
                           who=_model_name(model))
        ss.append(s)
        if s.size:
            constant[t] = s.max() - s.min() <= CONSTANT_RTOL * (1.0 + np.abs(s).max())
    return TaskScores([tasks.y(t) for t in range(tasks.T)], ss), constant


def check_target_kind(model: MTLModel | type, tasks: TaskSet) -> None:
    """A :class:`ConfigError` (one line) when ``model`` does not declare the target kind of
    ``tasks`` (``MTLModel.target_kinds``)."""
    cls = model if isinstance(model, type) else type(model)
    kinds = tuple(getattr(cls, "target_kinds", (BINARY,)))
    if tasks.target_kind not in kinds:
        name = getattr(cls, "name", "") or cls.__name__
        raise ConfigError(
            f"model {name!r} handles {' and '.join(map(target_kind_text, kinds))} targets "
            f"(its target_kinds); {tasks.name} has {target_kind_text(tasks.target_kind)} "
            "targets")


def checked_scores(raw: Any, n_rows: int, task_name: str, *, who: str = "",
                   require_float: bool = False) -> np.ndarray:
    """``decision_function``'s output ``raw`` for a task of ``n_rows`` rows, checked against
    the model contract and returned as float64 (n_rows,): one finite real score per row.

    The one score check of mtlbench (the protocol and the conformance kit both use it).
    Raises :class:`~mtlbench.errors.ModelContractError` for a wrong shape (or, with
    ``require_float``, a non-float dtype) and :class:`FloatingPointError` for NaN/inf.
    ``who`` (e.g. ``"model 'lasso'"``) prefixes the messages."""
    pre = f"{who}: " if who else ""
    s = np.asarray(raw)
    if s.shape != (n_rows,):
        raise ModelContractError(
            f"{pre}decision_function returned shape {s.shape} for task {task_name!r}, expected "
            f"({n_rows},): one real score per row")
    if require_float and not np.issubdtype(s.dtype, np.floating):
        raise ModelContractError(f"{pre}decision_function returned dtype {s.dtype} for task "
                                 f"{task_name!r}; expected float scores")
    s = np.asarray(s, dtype=np.float64)
    if not np.all(np.isfinite(s)):
        raise FloatingPointError(f"{pre}decision_function returned NaN/inf scores for task "
                                 f"{task_name!r}")
    return s


def _model_name(model: Any) -> str:
    return f"model {getattr(model, 'name', '') or type(model).__name__!r}"


def score_key(metric: str | Metric) -> str:
    """The trace entry key of a fit's validation value of ``metric``: ``val_<name>``
    (``val_auc``, ``val_rmse``)."""
    return f"val_{metric if isinstance(metric, str) else metric.name}"



def plugin_traceback(exc: BaseException, limit: int = TRACEBACK_FRAMES) -> str:
    """``exc``'s traceback without mtlbench's own frames: the frames of the plugin's code
    and of the libraries it called (the last ``limit``), each as ``module, line N, in
    function`` and its source line, then ``Type: message``.  Module names, not file paths, so
    the text is the same on every machine (it is part of the stored trace)."""
    frames = []
    tb = exc.__traceback__
    while tb is not None:
        module = str(tb.tb_frame.f_globals.get("__name__", "?"))
        if module.split(".")[0] != "mtlbench":
            code = tb.tb_frame.f_code
            line = linecache.getline(code.co_filename, tb.tb_lineno).strip()
            frames.append(f"  {module}, line {tb.tb_lineno}, in {code.co_name}"
                          + (f"\n    {line}" if line else ""))
        tb = tb.tb_next
    return "\n".join([*frames[-limit:], f"{type(exc).__name__}: {exc}"])


def check_fit_returned(returned: Any, model: MTLModel) -> None:
    """``fit`` must return the model itself (the contract); say so by name otherwise."""
    if returned is not model:
        what = "None" if returned is None else f"a {type(returned).__name__}"
        raise ModelContractError(
            f"model {getattr(model, 'name', '') or type(model).__name__!r}: fit() returned "
            f"{what}; it must return self")


def _bool_or_none(v: Any) -> bool | None:
    """A fitted ``converged_`` as recorded: a bool (numpy's, or an integer 0 / 1, too), else
    None (not recorded: a missing attribute, None, a string, an array)."""
    if isinstance(v, (bool, np.bool_)) or (isinstance(v, (int, np.integer)) and v in (0, 1)):
        return bool(v)
    return None



def _int_or_none(v: Any) -> int | None:
    try:
        return None if v is None else int(np.max(v))
    except (TypeError, ValueError):
        return None


__all__ = ["CONSTANT_RTOL", "TRACEBACK_FRAMES", "mean_auc", "task_scores", "model_scores",
           "check_target_kind", "checked_scores", "score_key", "plugin_traceback",
           "check_fit_returned"]
