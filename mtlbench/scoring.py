"""The registered metrics (built-in and plugins) and scoring a fitted model with them.

The built-in metrics of :mod:`mtlbench.metrics` register through the ``register_metrics`` hook
like any plugin's; a third-party metric is a :class:`~mtlbench.metrics.Metric` subclass::

    from mtlbench import Metric, hookimpl

    class MedianAE(Metric):
        name = "median-ae"
        label = "median AE"
        description = "mean over tasks of the median absolute error"
        reference = "..."
        higher_is_better = False
        target_kinds = ("real",)

        def task_value(self, y, s):
            return float(np.median(np.abs(y - s)))

    @hookimpl
    def register_metrics(register):
        register(MedianAE)

Every unit records every registered metric that applies to its problem's target kind
(:func:`metrics_for`); a metric that raises is recorded as failed for that unit (its message
kept in the unit's diagnostics), the others are kept.
"""
from __future__ import annotations

import functools
from typing import Any, Sequence

import numpy as np

from .errors import ConfigError
from .hookspecs import hookimpl
from .metrics import (BUILTIN_METRICS, PRIMARY_METRIC, SCORE_ZERO_RTOL, TARGET_KINDS, Metric,
                      target_kind_text)
from .plugins import get_registry

__all__ = ["register_metrics", "get_metric", "metric_names", "metrics_for", "primary_metric",
           "selection_metric", "score_tasks", "TaskScores"]


@hookimpl
def register_metrics(register):
    """The built-in metrics register through the same hook as third-party ones."""
    for cls in BUILTIN_METRICS.values():
        register(cls)


@functools.lru_cache(maxsize=256)
def _instance(cls: type[Metric]) -> Metric:
    return cls()


def get_metric(name: str | Metric) -> Metric:
    """The metric named ``name`` (an instance; built-ins as fallback when the registry does
    not hold it); an :class:`~mtlbench.errors.UnknownNameError` naming the known metrics."""
    if isinstance(name, Metric):
        return name
    reg = get_registry()
    if name in reg.metric_names:
        return _instance(reg.metric_class(name))
    if name in BUILTIN_METRICS:
        return _instance(BUILTIN_METRICS[name])
    return _instance(reg.metric_class(name))  # raises UnknownNameError with the known names


def metric_names() -> list[str]:
    """Every usable metric: the built-ins in their table order, then plugins' by name."""
    reg = get_registry()
    return list(BUILTIN_METRICS) + sorted(n for n in reg.metric_names if n not in BUILTIN_METRICS)


def metrics_for(kind: str) -> list[Metric]:
    """The metrics that apply to target kind ``kind``, in :func:`metric_names` order."""
    return [m for m in map(get_metric, metric_names()) if kind in m.target_kinds]


def primary_metric(kind: str) -> str:
    """The name of the metric that selects and ranks by default for target kind ``kind``."""
    return PRIMARY_METRIC[kind]


def selection_metric(select_by: str | None, kind: str, where: str = "") -> Metric:
    """The metric that selects hyperparameters on a problem of target kind ``kind``:
    ``select_by`` or, if None, the primary metric.  A :class:`ConfigError` (one line) when
    the metric does not apply to ``kind``; ``where`` names the problem in it."""
    if kind not in TARGET_KINDS:
        raise ConfigError(f"unknown target kind {kind!r}")
    metric = get_metric(select_by or primary_metric(kind))
    if kind not in metric.target_kinds:
        ok = ", ".join(m.name for m in metrics_for(kind))
        raise ConfigError(f"--select-by {metric.name}: the metric applies to "
                          f"{' and '.join(map(target_kind_text, metric.target_kinds))} targets, "
                          f"but {where or 'the problem'} has {target_kind_text(kind)} targets; "
                          f"metrics for them: {ok}")
    return metric


class TaskScores:
    """One fitted model's scores on every task of a TaskSet: ``ys`` and ``ss`` (T arrays).
    Scores at most :data:`~mtlbench.metrics.SCORE_ZERO_RTOL` of the largest |score| over the
    tasks are numerically zero and held as 0 (``mtlbench.metrics``, "Ties of scores")."""

    def __init__(self, ys: Sequence[np.ndarray], ss: Sequence[np.ndarray]) -> None:
        self.ys = list(ys)
        ss = [np.asarray(s, dtype=np.float64) for s in ss]
        mags = [np.abs(s) for s in ss]
        zero = SCORE_ZERO_RTOL * max(
            (float(np.max(a, initial=0.0, where=np.isfinite(a))) for a in mags), default=0.0)
        self.ss = [np.where(small, 0.0, s) if zero > 0 and (small := a <= zero).any() else s
                   for s, a in zip(ss, mags)]

    def value(self, metric: Metric) -> tuple[float, np.ndarray]:
        """(aggregated value, per-task values (T,)) of ``metric`` (NaN: undefined)."""
        per_task = np.array([float(metric.task_value(y, s)) for y, s in zip(self.ys, self.ss)],
                            dtype=np.float64)
        return float(metric.aggregate(self.ys, self.ss, per_task)), per_task


def score_tasks(scores: TaskScores, metrics: Sequence[Metric]
                ) -> tuple[dict[str, float | None], dict[str, list[float | None]],
                           dict[str, str]]:
    """Every metric of ``metrics`` on ``scores``: (aggregated values, per-task values, failures
    ``{metric: "Type: message"}``).  Undefined values (NaN) are None; a metric that raises is
    left out of the values and named in the failures."""
    values: dict[str, float | None] = {}
    per_task: dict[str, list[float | None]] = {}
    failed: dict[str, str] = {}
    for m in metrics:
        try:
            v, pt = scores.value(m)
        except Exception as exc:  # noqa: BLE001 - one plugin metric must not fail the unit
            failed[m.name] = f"{type(exc).__name__}: {exc}"
            continue
        values[m.name] = _finite(v)
        per_task[m.name] = [_finite(x) for x in pt]
    return values, per_task, failed


def _finite(v: Any) -> float | None:
    v = float(v)
    return v if np.isfinite(v) else None
