"""Landmine: detecting landmines from radar images of 29 mine fields (one binary task per field).

Source: Xue, Liao, Carin & Krishnapuram, "Multi-task learning for classification with
Dirichlet process priors", JMLR 8 (2007) (Duke, ``LandmineData.zip``).  The copy used here is
``LandmineData.mat`` of github.com/daizhongxiang/Federated_Bayesian_Optimization: cell arrays
``feature`` (1 x 29, each n_t x 9 float: moment-based, correlation-based, energy-ratio and
spatial-variance features of the radar image) and ``label`` (1 x 29, n_t x 1 in {0, 1}, 1 =
landmine).  14,820 objects, 6.1% positive; fields 1-15 are highly foliated, 16-29 bare earth
or desert.  No licence is stated; research use.

Label rule: the given label, 1 -> +1 (landmine), 0 -> -1 (clutter).

Preprocessing (label-free, recorded in ``meta``): the 9 features are z-scored with means/stds
over all 14,820 rows (their raw scales differ by an order of magnitude), then a constant 1
feature is appended (parameter ``bias``, default True; d = 10): the models have no intercept,
and with 6% positives an intercept-free least-squares fit loses much of its ranking quality
(STL ridge, 3 random 70/30 splits: mean AUC 0.67 without, 0.76 with the constant feature).
Every task keeps both classes with at least 3 labels each (the smallest field has 15
positives); a task failing that would be dropped and recorded.
"""
from __future__ import annotations

import numpy as np

from mtlbench import TaskSet, hookimpl
from mtlbench.datasets_api import DataFile, DataSource, corrupt_file_error

from ._common import (BIAS_NOTE, MIN_PER_CLASS, FileDataset, add_bias, class_count_filter,
                      no_tasks_error, read_mat, standardize)

LANDMINE_SOURCE = DataSource(
    dataset="landmine",
    files=(DataFile(
        path="landmine.mat",
        sha256="2163ab20a80e33a8b65593c48cf283c540599dcb291105e63fa4af2ce24c2bea",
        url=("https://raw.githubusercontent.com/daizhongxiang/Federated_Bayesian_Optimization/"
             "master/LandmineData.mat"),
        size=1085456,
        aliases=("LandmineData.mat",),
    ),),
    homepage=("Xue et al. 2007 (Duke LandmineData.zip); copy: "
              "https://github.com/daizhongxiang/Federated_Bayesian_Optimization "
              "(LandmineData.mat)"),
    terms="no licence stated; research use",
)


class Landmine(FileDataset):
    name = "landmine"
    description = ("29 mine fields (tasks), 14,820 radar objects, 9 features + bias; label: "
                   "landmine vs clutter")
    source = ("Xue et al., JMLR 2007 (Duke landmine data), via "
              "github.com/daizhongxiang/Federated_Bayesian_Optimization")
    data_source = LANDMINE_SOURCE

    def __init__(self, bias: bool = True):
        self.bias = bias

    def params(self) -> dict:
        return {"standardize": True, "bias": bool(self.bias)}

    def load(self, problem: str = "landmine", *, data_dir=None, cache_dir=None) -> TaskSet:
        self._check_problem(problem)
        path = self._paths(data_dir, cache_dir)["landmine.mat"]
        f = self._file("landmine.mat")
        mat = read_mat(path, "landmine", ("feature", "label"), f, self.data_source)
        Fc, Lc = mat["feature"].ravel(), mat["label"].ravel()
        if Fc.shape[0] != Lc.shape[0] or Fc.shape[0] == 0:
            raise corrupt_file_error(
                "landmine", path, f"{Fc.shape[0]} feature cells but {Lc.shape[0]} label cells",
                f, self.data_source)
        Xs = [np.asarray(x, dtype=np.float64) for x in Fc]
        raw = [np.asarray(y).ravel() for y in Lc]
        for t, (x, y) in enumerate(zip(Xs, raw)):
            if x.shape[0] != y.shape[0] or not np.isin(y, (0, 1)).all():
                raise corrupt_file_error(
                    "landmine", path, f"task {t + 1}: {x.shape[0]} rows, {y.shape[0]} labels, "
                    f"label values {np.unique(y)[:5].tolist()}", f, self.data_source)
        labels = [np.where(y == 1, 1.0, -1.0) for y in raw]
        sizes = np.array([x.shape[0] for x in Xs])
        Z, std_rec = standardize(np.vstack(Xs))
        Z = add_bias(Z, bool(self.bias))
        names = [f"field{t + 1:02d}" for t in range(len(Xs))]
        keep, dropped = class_count_filter(names, labels, MIN_PER_CLASS)
        if not keep.any():
            raise no_tasks_error("landmine", problem, f">= {MIN_PER_CLASS} labels per class",
                                 len(names))
        bounds = np.concatenate([[0], np.cumsum(sizes)])
        idx = np.flatnonzero(keep)
        return TaskSet.from_arrays(
            "landmine", [Z[bounds[t]:bounds[t + 1]] for t in idx], [labels[t] for t in idx],
            task_names=[names[t] for t in idx],
            meta={
                "label_rule": "y = +1 if the object is a landmine (label 1), -1 if clutter "
                              "(label 0)",
                "standardization": std_rec,
                "bias": BIAS_NOTE if self.bias else "no constant feature (bias=False)",
                "task_filter": {"rule": f"keep tasks with >= {MIN_PER_CLASS} labels of each class",
                                "dropped": dropped},
                "terrain": {"foliated": names[:15], "bare_earth_or_desert": names[15:]},
                "source_file": str(path),
            },
        )


@hookimpl
def register_datasets(register):
    register(Landmine)
