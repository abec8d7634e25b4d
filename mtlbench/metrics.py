"""The metrics a unit is scored with: definitions, directions, target kinds, tie tolerance.

A :class:`Metric` maps one task's targets ``y`` (n,) and scores ``s`` (n,) (the model's
``decision_function``) to a number, and the T tasks of a problem to one aggregated number; it
declares whether higher is better and which target kinds it applies to (:data:`BINARY`:
labels in {-1, +1}; :data:`REAL`: real-valued targets).  Every unit records every metric
that applies to its problem's target kind, per task and aggregated; model selection uses the
problem's primary metric (:data:`PRIMARY_METRIC`) unless the protocol names another.
Third-party metrics subclass :class:`Metric` and register through the ``register_metrics``
hook (:mod:`mtlbench.scoring`).

Built-in metrics (n_t test rows of task t, T tasks, sums over the rows of a task or of all
tasks pooled)

=====================  ======  ======  ==================================================
name                   kinds   better  definition
=====================  ======  ======  ==================================================
``auc``                binary  higher  mean over tasks of the per-task AUC (Mann-Whitney
                                       statistic, ties count 1/2): the TFCL paper's score
``pooled-auc``         binary  higher  AUC of the rows of all tasks pooled (scores compared
                                       across tasks; micro-averaged)
``accuracy``           binary  higher  mean over tasks of the share of rows with
                                       sign(s) = y (s > 0: +1, s < 0: -1; a score within
                                       the tie tolerance of 0 counts 1/2)
``error-rate``         binary  lower   1 - accuracy, per task and aggregated
``rmse``               real    lower   mean over tasks of sqrt(1/n_t sum (y - s)^2): the
                                       per-task RMSE averaged, as the School script of the
                                       VSTG-MTL code (Jeong & Jun, KDD 2018)
``mae``                real    lower   mean over tasks of 1/n_t sum |y - s|
``nmse``               real    lower   sum (y - s)^2 / sum (y - ybar)^2 over all test rows
                                       pooled, ybar their mean: the total MSE over the
                                       pooled variance of the test targets (the
                                       normalised MSE of Chen, Zhou & Ye, KDD 2011, who
                                       divide the MSE by the variance of the targets)
``explained-variance`` real    higher  1 - nmse: "the total variance minus the sum of
                                       squared test errors, as a share of the total
                                       variance" (Bakker & Heskes, JMLR 2003), the School
                                       score of Argyriou, Evgeniou & Pontil (MLJ 2008);
                                       scikit-learn's ``r2_score`` of the pooled rows, not
                                       its ``explained_variance_score``
=====================  ======  ======  ==================================================

Per task, ``pooled-auc`` is the task's AUC, ``nmse`` is MSE_t / Var_t and
``explained-variance`` 1 - MSE_t / Var_t (Var_t: the variance of the task's test targets);
the last two are undefined (NaN, stored as null) for a task whose test targets are all equal.
Shown in tables x 100: ``auc``, ``pooled-auc``, ``accuracy``, ``error-rate``,
``explained-variance`` (:attr:`Metric.percent`).

Ties of scores (rank-based metrics and the sign threshold)
-----------------------------------------------------------
Two scores of one task are tied when they differ by at most :data:`SCORE_TIE_RTOL` (1e-9)
times the task's score scale, max |s| over its scored rows; sorted scores are grouped into
runs whose consecutive gaps are at most that (a run spans at most (n - 1) x 1e-9 of the
scale).  Why: rows with the same features (School: 57 % of the test rows share their feature
vector with another row of their task) get exactly equal scores from one computation and
scores differing in the last bits from another (BLAS kernel, summation order; measured: up to
1e-15 of the scale), and an AUC that counts those pairs as ties in one case and as ordered in
the other changes with the CPU.  1e-9 is six orders of magnitude above that noise and more
than two below the smallest gap between the scores of different feature vectors measured on
the built-in data sets (6e-7 of the scale, Landmine).  A score within the tolerance of 0 is on
the sign threshold: ``accuracy`` counts it 1/2, like a tied pair.

A task's tolerance is relative to its own scale, which is itself rounding noise when the
model's coefficients for that task are zero in exact arithmetic but computed as a cancellation
residue (measured: rMTFL's W = P + Q, a column of about 6.5e-18 where other tasks' scores are
of order 1, whose AUC was 0 under one BLAS kernel and 0.5 under another).  So before any metric
sees them, the scores of a fitted model on a problem whose magnitude is at most
:data:`SCORE_ZERO_RTOL` (1e-12) times the largest |score| over all its tasks are set to 0
(``mtlbench.scoring.TaskScores``): numerically zero; such a task then scores as a constant
predictor (AUC 1/2) on every machine.  1e-12 is three orders of magnitude above the rounding of
sums of order-1 terms in float64 and far below any score that carries information.
"""
from __future__ import annotations

from typing import ClassVar, Sequence

import numpy as np

from .errors import DataValidationError

__all__ = ["Metric", "AUC", "PooledAUC", "Accuracy", "ErrorRate", "RMSE", "MAE", "NMSE",
           "ExplainedVariance", "BUILTIN_METRICS", "PRIMARY_METRIC", "TARGET_KINDS", "BINARY",
           "REAL", "SCORE_TIE_RTOL", "SCORE_ZERO_RTOL", "SELECTION_RTOL", "auc_score",
           "average_ranks", "tie_tolerance", "target_kind_text"]

BINARY = "binary"
REAL = "real"
#: The target kinds a problem can declare: labels in {-1, +1}, or real-valued targets.
TARGET_KINDS = (BINARY, REAL)
#: Scores of one task within this share of its score scale (max |s|) are ties (module
#: docstring: six orders of magnitude above the floating-point noise of a score, two below
#: the smallest real gap measured).
SCORE_TIE_RTOL = 1e-9
#: Scores at most this share of the largest |score| over all tasks of a problem are set to 0
#: before scoring (module docstring).
SCORE_ZERO_RTOL = 1e-12
#: Validation scores within this share of the best one (in absolute value) are ties in model
#: selection, which then takes the earliest fit of the search
#: (:func:`mtlbench.search.best_index`).  A mean of per-task AUCs is a sum of fractions whose
#: denominators are at most n_pos * n_neg, so two different values differ by far more; a
#: validation RMSE moves in the last bits with the arithmetic (1e-15 relative).
SELECTION_RTOL = 1e-9
#: The metric that selects hyperparameters and ranks models by default, per target kind.
PRIMARY_METRIC = {BINARY: "auc", REAL: "rmse"}


def target_kind_text(kind: str) -> str:
    """``"binary ({-1, +1})"`` / ``"real-valued"``: a target kind as sentences name it."""
    return {BINARY: "binary ({-1, +1})", REAL: "real-valued"}.get(kind, repr(kind))


def tie_tolerance(s: np.ndarray, rtol: float = SCORE_TIE_RTOL) -> float:
    """The largest difference of two scores of ``s`` (n,) that still counts as a tie:
    ``rtol`` x max |s| (0 for an empty or all-zero ``s``)."""
    return float(rtol * np.abs(s).max()) if s.size else 0.0


def average_ranks(s: np.ndarray, rtol: float = SCORE_TIE_RTOL) -> np.ndarray:
    """1-based ranks of ``s`` (n,), tied values sharing the mean of their ranks.

    Ties: sorted values whose gap to the previous one is at most :func:`tie_tolerance`
    (``rtol`` x max |s|) join its group.  With ``rtol=0`` only equal values are tied and the
    ranks are exactly those of ``scipy.stats.rankdata`` (method ``average``; every rank is a
    whole or half number).  Plain numpy: the protocol scores every task of every fit, and
    scipy's per-call overhead was most of a LASSO unit's time at the paper's scale."""
    n = s.shape[0]
    order = np.argsort(s, kind="mergesort")
    sorted_s = s[order]
    first = np.empty(n, dtype=bool)
    first[:1] = True
    np.greater(np.diff(sorted_s), tie_tolerance(s, rtol), out=first[1:])
    starts = np.flatnonzero(first)
    counts = np.diff(np.append(starts, n))
    ranks = np.empty(n)
    ranks[order] = np.repeat(starts + (counts + 1) / 2.0, counts)
    return ranks


def auc_score(y: np.ndarray, scores: np.ndarray, rtol: float = SCORE_TIE_RTOL) -> float:
    """Rank-based AUC of ``scores`` for labels ``y`` in {-1, +1}: the share of (positive,
    negative) pairs ranked correctly, ties (scores within ``rtol`` of the scale: module
    docstring) counting 1/2.  O(n log n) from average ranks, never from the n+ x n- pairs.

    Parameters
    ----------
    y : array of shape (n,), values in {-1, +1}
    scores : array of shape (n,)
    """
    y = np.asarray(y)
    s = np.asarray(scores, dtype=np.float64)
    if y.shape != s.shape or y.ndim != 1:
        raise DataValidationError(
            f"auc_score: labels {y.shape} and scores {s.shape} must be equal 1-d shapes")
    if not np.all(np.isfinite(s)):
        raise DataValidationError("auc_score: scores contain NaN/inf")
    pos = y > 0
    n_pos = int(pos.sum())
    n_neg = y.shape[0] - n_pos
    if n_pos == 0 or n_neg == 0:
        raise DataValidationError("auc_score: AUC needs both classes")
    ranks = average_ranks(s, rtol)  # ties share the mean rank, i.e. count half
    return float((ranks[pos].sum() - n_pos * (n_pos + 1) / 2.0) / (n_pos * n_neg))


class Metric:
    """Base class of metrics (built-in and plugins).

    Class attributes
    ----------------
    name : str
        What users type (``--metric NAME``, ``--select-by NAME``): lower case, dashes allowed.
    label : str
        Short name for table headers (``"RMSE"``).
    description : str
        The definition in one line (shown by ``mtlbench plugins`` and the tables).
    reference : str
        The paper whose definition it follows.
    higher_is_better : bool
        The direction: tables rank, mark the best and test against it accordingly.
    target_kinds : tuple of str
        The target kinds (:data:`TARGET_KINDS`) it applies to.
    percent : bool
        Shown x 100 in tables (a share or an AUC).
    chance : float or None
        The value of a model that ranks at random, where there is one (AUC: 0.5); tables
        flag models within 2 points of it.
    threshold : bool
        The value depends on where scores cross 0 (the sign of the decision function), not
        only on their order or distance to the targets; tables flag models that declare a
        loss invariant to a shift of the scores (``MTLModel.shift_invariant_loss``).

    Implement :meth:`task_value`; :meth:`aggregate` defaults to the mean over tasks.
    """

    name: ClassVar[str] = ""
    label: ClassVar[str] = ""
    description: ClassVar[str] = ""
    reference: ClassVar[str] = ""
    higher_is_better: ClassVar[bool] = True
    target_kinds: ClassVar[tuple[str, ...]] = ()
    percent: ClassVar[bool] = False
    chance: ClassVar[float | None] = None
    threshold: ClassVar[bool] = False

    def task_value(self, y: np.ndarray, s: np.ndarray) -> float:
        """The metric of one task: targets ``y`` (n,) and scores ``s`` (n,), float64; NaN
        when it is undefined for these targets."""
        raise NotImplementedError

    def aggregate(self, ys: Sequence[np.ndarray], ss: Sequence[np.ndarray],
                  per_task: np.ndarray) -> float:
        """The metric of the problem from its T tasks' targets ``ys``, scores ``ss`` and
        :meth:`task_value` s ``per_task`` (T,): by default their mean (NaN if a task's value
        is undefined)."""
        return float(per_task.mean())

    def oriented(self, value: float) -> float:
        """``value`` with the sign that makes higher better (for ranking and tests)."""
        return value if self.higher_is_better else -value

    @property
    def arrow(self) -> str:
        return "↑" if self.higher_is_better else "↓"

    def heading(self) -> str:
        """``"test RMSE ↓"``, ``"test AUC x 100 ↑"``: what a table's numbers are."""
        return f"test {self.label or self.name}{' x 100' if self.percent else ''} {self.arrow}"


class AUC(Metric):
    name = "auc"
    label = "AUC"
    description = ("mean over tasks of the per-task AUC (Mann-Whitney statistic; ties within "
                   "1e-9 of the task's score scale count 1/2)")
    reference = "Yang et al., TFCL, IEEE TPAMI (Experimental Settings): mean per-user AUC"
    higher_is_better = True
    target_kinds = (BINARY,)
    percent = True
    chance = 0.5

    def task_value(self, y, s):
        return auc_score(y, s)


class PooledAUC(AUC):
    name = "pooled-auc"
    label = "pooled AUC"
    description = "AUC of the test rows of all tasks pooled (scores compared across tasks)"
    reference = "micro-averaged AUC (the rows of every task in one ranking)"

    def aggregate(self, ys, ss, per_task):
        return auc_score(np.concatenate(ys), np.concatenate(ss))


class Accuracy(Metric):
    name = "accuracy"
    label = "accuracy"
    description = ("mean over tasks of the share of test rows with sign(score) = label "
                   "(a score within 1e-9 of the scale from 0 counts 1/2)")
    reference = "classification accuracy at the sign of the decision function"
    higher_is_better = True
    target_kinds = (BINARY,)
    percent = True
    threshold = True

    def task_value(self, y, s):
        tol = tie_tolerance(s)
        right = np.where(np.abs(s) <= tol, 0.5, (np.sign(s) == np.sign(y)).astype(float))
        return float(right.mean())


class ErrorRate(Accuracy):
    name = "error-rate"
    label = "error rate"
    description = "1 - accuracy: mean over tasks of the share of misclassified test rows"
    reference = "classification error at the sign of the decision function"
    higher_is_better = False

    def task_value(self, y, s):
        return 1.0 - super().task_value(y, s)


class RMSE(Metric):
    name = "rmse"
    label = "RMSE"
    description = "mean over tasks of the per-task root mean squared error"
    reference = ("per-task RMSE averaged over tasks, as the School script of VSTG-MTL "
                 "(Jeong & Jun, KDD 2018)")
    higher_is_better = False
    target_kinds = (REAL,)

    def task_value(self, y, s):
        return float(np.sqrt(np.mean((y - s) ** 2)))


class MAE(Metric):
    name = "mae"
    label = "MAE"
    description = "mean over tasks of the per-task mean absolute error"
    reference = "mean absolute error, averaged over tasks like the RMSE"
    higher_is_better = False
    target_kinds = (REAL,)

    def task_value(self, y, s):
        return float(np.mean(np.abs(y - s)))


def _residual_share(y: np.ndarray, s: np.ndarray) -> float:
    """sum (y - s)^2 / sum (y - mean y)^2; NaN when the targets are all equal."""
    total = float(np.sum((y - y.mean()) ** 2))
    return float(np.sum((y - s) ** 2)) / total if total > 0 else float("nan")


class NMSE(Metric):
    name = "nmse"
    label = "nMSE"
    description = ("total squared test error over the total variance of the test targets, "
                   "all tasks' rows pooled")
    reference = ("normalised MSE: the MSE divided by the variance of the targets (Chen, Zhou "
                 "& Ye, KDD 2011), over the pooled test rows")
    higher_is_better = False
    target_kinds = (REAL,)

    def task_value(self, y, s):
        return _residual_share(y, s)

    def aggregate(self, ys, ss, per_task):
        return _residual_share(np.concatenate(ys), np.concatenate(ss))


class ExplainedVariance(Metric):
    name = "explained-variance"
    label = "explained variance"
    description = "1 - nMSE: the share of the pooled test targets' variance the model explains"
    reference = ("Bakker & Heskes, JMLR 2003; Argyriou, Evgeniou & Pontil, MLJ 2008 (School): "
                 "1 - sum of squared test errors / total variance")
    higher_is_better = True
    target_kinds = (REAL,)
    percent = True

    def task_value(self, y, s):
        return 1.0 - _residual_share(y, s)

    def aggregate(self, ys, ss, per_task):
        return 1.0 - _residual_share(np.concatenate(ys), np.concatenate(ss))


#: The built-in metrics, in the order tables list them (primary metrics first).
BUILTIN_METRICS: dict[str, type[Metric]] = {
    cls.name: cls for cls in (AUC, PooledAUC, Accuracy, ErrorRate, RMSE, MAE, NMSE,
                              ExplainedVariance)}
