"""School: exam scores of 15,362 students in 139 London secondary schools (one task per school).

Two data sets of the same file: ``school`` (binarized: the label rule below; the TFCL
paper's setting, scored by AUC) and ``school-regression`` (the exam score itself, a
real-valued target: how the multi-task literature evaluates School, by RMSE, nMSE or explained
variance).

Source: Inner London Education Authority data (Goldstein 1991), in the MTL form distributed
with MALSAR (Zhou, Chen & Ye 2011), ``data/school.mat``: cell arrays ``X`` and ``Y`` of 139
tasks; ``X{t}`` is n_t x 28 (uint8): year of the exam (3 one-hot columns), % of the school's
pupils eligible for free meals, % in VR band 1, gender, VR band (3), ethnic group (11), school
gender (3), school denomination (3) and a constant 1 in column 28; ``Y{t}`` is the exam score
(1..70).  Redistributed widely in MTL libraries; see docs/datasets.md.

Label rule of ``school`` (the score is a regression target, binarized):
    y = +1 if the student's exam score is strictly above the median score of the student's
    school (task), else -1.
The median is a per-task definition of the label (each school is its own reference), so tasks
are near-balanced.  Parameter ``label_rule``: ``"task_median"`` (default) or
``"global_median"`` (one median over all 15,362 students).

Preprocessing (label-free, recorded in ``meta``): the 27 non-constant columns are z-scored with
means/stds over all rows; the file's constant column is kept as a constant 1 feature (parameter
``bias``, default True: the models have no intercept, and without an offset the squared loss
fits the label mean through the features), so d = 28.  Tasks with fewer than 3 labels of a
class would be dropped and recorded (none are with the default rule).

``school-regression``: the same features (the same preprocessing, parameter ``bias``) and the
exam score (1..70) as it is in the file, a real-valued target; a school with fewer than 4
students or with one score for all would be dropped and recorded (none is).
"""
from __future__ import annotations

from typing import Any

import numpy as np

from mtlbench import TaskSet, hookimpl
from mtlbench.datasets_api import REAL, DataFile, DataSource, corrupt_file_error

from ._common import (BIAS_NOTE, MIN_PER_CLASS, MIN_TARGETS, FileDataset, add_bias,
                      class_count_filter,
                      no_tasks_error, read_mat, standardize, target_filter)

SCHOOL_SOURCE = DataSource(
    dataset="school",
    files=(DataFile(
        path="school.mat",
        sha256="57fb3238fdd03a9aa17276e2ce18d9bbb5d128c3261e794fe6233b58b6909068",
        url="https://raw.githubusercontent.com/jiayuzhou/MALSAR/master/data/school.mat",
        size=44759,
    ),),
    homepage="https://github.com/jiayuzhou/MALSAR (data/school.mat)",
    terms=("ILEA exam data (Goldstein 1991) as redistributed with MALSAR; widely used in MTL "
           "research"),
)

LABEL_RULES = ("task_median", "global_median")


class School(FileDataset):
    name = "school"
    description = ("139 London schools (tasks), 15,362 students, 27 features + bias; label: "
                   "score above the school's median")
    source = "ILEA exam scores via MALSAR data/school.mat (github.com/jiayuzhou/MALSAR)"
    data_source = SCHOOL_SOURCE
    binarized = "the exam score above the school's median (label_rule)"

    def __init__(self, label_rule: str = "task_median", bias: bool = True):
        self.label_rule = label_rule
        self.bias = bias

    def params(self) -> dict:
        return {"label_rule": self.label_rule, "standardize": True, "bias": bool(self.bias)}

    def load(self, problem: str = "school", *, data_dir=None, cache_dir=None) -> TaskSet:
        self._check_problem(problem)
        if self.label_rule not in LABEL_RULES:
            raise ValueError(f"school: label_rule must be one of {LABEL_RULES}, got "
                             f"{self.label_rule!r}")
        path, Zs, scores, feature_meta = self._features(data_dir, cache_dir)
        if self.label_rule == "task_median":
            labels = [np.where(s > np.median(s), 1.0, -1.0) for s in scores]
            rule = "y = +1 if exam score > median score of the task (school), else -1"
        else:
            med = float(np.median(np.concatenate(scores)))
            labels = [np.where(s > med, 1.0, -1.0) for s in scores]
            rule = f"y = +1 if exam score > global median score ({med:g}), else -1"
        names = [f"school{t + 1:03d}" for t in range(len(Zs))]
        keep, dropped = class_count_filter(names, labels, MIN_PER_CLASS)
        if not keep.any():
            raise no_tasks_error("school", problem, f">= {MIN_PER_CLASS} labels per class",
                                 len(names))
        return TaskSet.from_arrays(
            "school", [Zs[t] for t in np.flatnonzero(keep)],
            [labels[t] for t in np.flatnonzero(keep)],
            task_names=[names[t] for t in np.flatnonzero(keep)],
            meta={
                "label_rule": rule, **feature_meta,
                "task_filter": {"rule": f"keep tasks with >= {MIN_PER_CLASS} labels of each class",
                                "dropped": dropped},
                "source_file": str(path),
            },
        )

    def _features(self, data_dir, cache_dir) -> tuple[Any, list, list, dict]:
        """(path, per-task standardized features, per-task exam scores, preprocessing record)
        of ``school.mat``."""
        path = self._paths(data_dir, cache_dir)["school.mat"]
        f = self._file("school.mat")
        mat = read_mat(path, self.name, ("X", "Y"), f, self.data_source)
        Xc, Yc = mat["X"].ravel(), mat["Y"].ravel()
        if Xc.shape[0] != Yc.shape[0] or Xc.shape[0] == 0:
            raise corrupt_file_error(
                self.name, path, f"{Xc.shape[0]} feature cells but {Yc.shape[0]} score cells",
                f, self.data_source)
        Xs = [np.asarray(x, dtype=np.float64) for x in Xc]
        scores = [np.asarray(y, dtype=np.float64).ravel() for y in Yc]
        sizes = np.array([x.shape[0] for x in Xs])
        X_all = np.vstack(Xs)
        const = np.flatnonzero(np.all(X_all == X_all[0], axis=0))
        keep_cols = np.setdiff1d(np.arange(X_all.shape[1]), const)
        Z, std_rec = standardize(X_all[:, keep_cols])
        Z = add_bias(Z, bool(self.bias))
        bounds = np.concatenate([[0], np.cumsum(sizes)])
        Zs = [Z[bounds[t]:bounds[t + 1]] for t in range(len(Xs))]
        meta = {"constant_columns": {"columns": const.tolist(),
                                     "handling": "removed before z-scoring; "
                                     + (BIAS_NOTE if self.bias
                                        else "bias=False: no constant feature")},
                "standardization": std_rec}
        return path, Zs, scores, meta


class SchoolRegression(School):
    name = "school-regression"
    description = ("139 London schools (tasks), 15,362 students, 27 features + bias; target: "
                   "the exam score (1..70)")
    binarized = ""

    def __init__(self, bias: bool = True):
        self.bias = bias

    def params(self) -> dict:
        return {"target": "exam score", "standardize": True, "bias": bool(self.bias)}

    def load(self, problem: str = "school-regression", *, data_dir=None,
             cache_dir=None) -> TaskSet:
        self._check_problem(problem)
        path, Zs, scores, feature_meta = self._features(data_dir, cache_dir)
        names = [f"school{t + 1:03d}" for t in range(len(Zs))]
        keep, dropped = target_filter(names, scores)
        if not keep.any():
            raise no_tasks_error(self.name, problem, f">= {MIN_TARGETS} scores, not all equal",
                                 len(names))
        idx = np.flatnonzero(keep)
        return TaskSet.from_arrays(
            self.name, [Zs[t] for t in idx], [scores[t] for t in idx],
            task_names=[names[t] for t in idx], target_kind=REAL,
            meta={"target": "exam score (1..70) as in the file", **feature_meta,
                  "task_filter": {"rule": f"keep tasks with >= {MIN_TARGETS} scores, not all "
                                          "equal",
                                  "dropped": dropped},
                  "source_file": str(path)})


@hookimpl
def register_datasets(register):
    register(School)
    register(SchoolRegression)
