"""Lenk computer survey: 180 people rate the same 20 computers (one task per person).

Two data sets of the same file: ``lenk`` (binarized by the label rule below, scored by AUC as
the TFCL paper's attribute data) and ``lenk-regression`` (the 0..10 rating itself, a
real-valued target: the literature's "computer survey" regression problem, reported as RMSE by
Argyriou, Evgeniou & Pontil 2008 and Kumar & Daumé 2012).

Source: Lenk, DeSarbo, Green & Young, "Hierarchical Bayes conjoint analysis: recovery of
partworth heterogeneity from reduced experimental designs", Marketing Science 15(2), 1996;
the MTL form used by Argyriou, Evgeniou & Pontil (2008) and later work.  The copy used here is
``data/lenk_data.mat`` of github.com/prolearner/onlineLTL (stored as
``lenk_computer_survey.mat``): ``Traindata`` (2880 x 15) and ``Testdata`` (720 x 15), 180
consecutive blocks of 16 and 4 rows, one block per person.  Column 1 is a constant 1, columns
2-14 are the 13 binary attributes of a computer profile coded -1/+1 (telephone hot line,
RAM, screen size, CPU speed, hard disk, CD-ROM, cache, colour, availability, warranty,
software, guarantee, price), column 15 the person's likelihood-of-purchase rating 0..10.
No licence stated; research use.

This is personal preference over shared items: the 20 profiles are the same for everyone
(the rows come in a different order per person), so the data is stored as one 20 x 13 item
matrix plus, per person, the item indices and labels (``TaskSet.from_shared_items``).  The
file's 16/4 train/test division is ignored: mtlbench's protocol makes its own splits.

Label rule of ``lenk`` (parameter ``threshold``):
    ``threshold=None`` (default): y = +1 if the person's rating is strictly above that person's
    median rating over the 20 computers, else -1 (people use the 0..10 scale differently);
    a number r: y = +1 if rating >= r, else -1 (one threshold for everybody).
People with fewer than ``min_minority`` (default 3, the protocol's minimum) ratings of either
class (e.g. someone who rates everything the same) are removed and recorded in ``meta``.

Preprocessing: the -1/+1 attribute codes are kept as they are (already centred and on one
scale); the file's constant column is kept as a constant 1 feature (parameter ``bias``, default
True; the models have no intercept), so d = 14.

``lenk-regression``: the same items and features, the rating (0..10) as the target; a person
who gave every computer the same rating has nothing to fit and is removed (recorded in
``meta``).
"""
from __future__ import annotations

from typing import Any

import numpy as np

from mtlbench import TaskSet, hookimpl
from mtlbench.datasets_api import REAL, DataFile, DataSource, corrupt_file_error

from ._common import (BIAS_NOTE, MIN_TARGETS, FileDataset, add_bias, check_min_minority,
                      class_count_filter, no_tasks_error, read_mat, target_filter)

LENK_SOURCE = DataSource(
    dataset="lenk",
    files=(DataFile(
        path="lenk_computer_survey.mat",
        sha256="e6cc1029fa15ba8135dfca0f6a4bfa75599b4d43fe77224ce6b07bf9cdeb3e0b",
        url="https://raw.githubusercontent.com/prolearner/onlineLTL/master/lenk_data.mat",
        size=10469,
        aliases=("lenk_data.mat",),
    ),),
    homepage=("Lenk et al., Marketing Science 1996; copy: https://github.com/prolearner/onlineLTL "
              "(lenk_data.mat at the repository root)"),
    terms="no licence stated; research use",
)

ATTRIBUTES = ("hot_line", "ram", "screen_size", "cpu_speed", "hard_disk", "cd_rom", "cache",
              "color", "availability", "warranty", "software", "guarantee", "price")
N_PEOPLE, N_TRAIN, N_TEST = 180, 16, 4


class Lenk(FileDataset):
    name = "lenk"
    description = ("180 people (tasks) rating the same 20 computers, 13 attributes; label: "
                   "liked above own median")
    source = ("Lenk et al. 1996 conjoint survey, via github.com/prolearner/onlineLTL "
              "data/lenk_data.mat")
    data_source = LENK_SOURCE
    binarized = "the 0..10 rating above the person's median (threshold)"

    def __init__(self, threshold: float | None = None, min_minority: int = 3, bias: bool = True):
        self.threshold = threshold
        self.min_minority = min_minority
        self.bias = bias

    def params(self) -> dict:
        return {"threshold": self.threshold, "min_minority": self.min_minority,
                "bias": bool(self.bias)}

    def load(self, problem: str = "lenk", *, data_dir=None, cache_dir=None) -> TaskSet:
        self._check_problem(problem)
        min_minority = check_min_minority("lenk", self.min_minority)
        if self.threshold is not None and not np.isfinite(float(self.threshold)):
            raise ValueError(f"lenk: threshold must be None or a finite number, got "
                             f"{self.threshold!r}")
        path, items, index, ratings = self._ratings(data_dir, cache_dir)
        if self.threshold is None:
            med = np.median(ratings, axis=1, keepdims=True)
            y_all = np.where(ratings > med, 1.0, -1.0)
            rule = "y = +1 if rating > the person's median rating over the 20 computers, else -1"
        else:
            y_all = np.where(ratings >= float(self.threshold), 1.0, -1.0)
            rule = f"y = +1 if rating >= {float(self.threshold):g} (on 0..10), else -1"
        names = [f"person{p + 1:03d}" for p in range(N_PEOPLE)]
        labels = list(y_all)
        keep, dropped = class_count_filter(names, labels, min_minority)
        if not keep.any():
            raise no_tasks_error("lenk", problem, f">= {min_minority} ratings per class", N_PEOPLE)
        idx = np.flatnonzero(keep)
        return TaskSet.from_shared_items(
            "lenk", items, [index[p] for p in idx], [labels[p] for p in idx],
            task_names=[names[p] for p in idx],
            meta={
                "label_rule": rule,
                "feature_names": list(ATTRIBUTES) + (["bias"] if self.bias else []),
                "preprocessing": "-1/+1 attribute codes unchanged; the file's 16/4 train/test "
                                 "division ignored; "
                                 + (BIAS_NOTE if self.bias else "no constant feature"),
                "minority_filter": {"min_minority": min_minority, "removed": dropped,
                                    "n_removed": len(dropped)},
                "n_distinct_profiles": int(items.shape[0]),
                "source_file": str(path),
            },
        )

    def _ratings(self, data_dir, cache_dir) -> tuple[Any, np.ndarray, np.ndarray, np.ndarray]:
        """(path, the distinct profiles as items (bias appended), per person the item index
        of each of the 20 rows (180 x 20), the ratings (180 x 20))."""
        path = self._paths(data_dir, cache_dir)["lenk_computer_survey.mat"]
        f = self._file("lenk_computer_survey.mat")
        mat = read_mat(path, self.name, ("Traindata", "Testdata"), f, self.data_source)
        tr = np.asarray(mat["Traindata"], dtype=np.float64)
        te = np.asarray(mat["Testdata"], dtype=np.float64)
        if tr.shape != (N_PEOPLE * N_TRAIN, 15) or te.shape != (N_PEOPLE * N_TEST, 15):
            raise corrupt_file_error(
                self.name, path, f"Traindata {tr.shape}, Testdata {te.shape}; expected "
                f"({N_PEOPLE * N_TRAIN}, 15) and ({N_PEOPLE * N_TEST}, 15)", f, self.data_source)
        rows = np.concatenate([tr.reshape(N_PEOPLE, N_TRAIN, 15),
                               te.reshape(N_PEOPLE, N_TEST, 15)], axis=1)
        profiles = rows[:, :, 1:14].reshape(-1, 13)
        items, inverse = np.unique(profiles, axis=0, return_inverse=True)
        items = add_bias(items, bool(self.bias))
        return path, items, inverse.reshape(N_PEOPLE, N_TRAIN + N_TEST), rows[:, :, 14]


class LenkRegression(Lenk):
    name = "lenk-regression"
    description = ("180 people (tasks) rating the same 20 computers, 13 attributes; target: "
                   "the 0..10 rating")
    binarized = ""

    def __init__(self, bias: bool = True):
        self.bias = bias

    def params(self) -> dict:
        return {"target": "rating", "bias": bool(self.bias)}

    def load(self, problem: str = "lenk-regression", *, data_dir=None,
             cache_dir=None) -> TaskSet:
        self._check_problem(problem)
        path, items, index, ratings = self._ratings(data_dir, cache_dir)
        names = [f"person{p + 1:03d}" for p in range(N_PEOPLE)]
        keep, dropped = target_filter(names, list(ratings))
        if not keep.any():
            raise no_tasks_error(self.name, problem, f">= {MIN_TARGETS} ratings, not all "
                                 "equal", N_PEOPLE)
        idx = np.flatnonzero(keep)
        return TaskSet.from_shared_items(
            self.name, items, [index[p] for p in idx], [ratings[p] for p in idx],
            task_names=[names[p] for p in idx], target_kind=REAL,
            meta={
                "target": "likelihood-of-purchase rating 0..10 as in the file",
                "feature_names": list(ATTRIBUTES) + (["bias"] if self.bias else []),
                "preprocessing": "-1/+1 attribute codes unchanged; the file's 16/4 train/test "
                                 "division ignored; "
                                 + (BIAS_NOTE if self.bias else "no constant feature"),
                "task_filter": {"rule": f"keep people with >= {MIN_TARGETS} ratings, not all "
                                        "equal", "removed": dropped},
                "n_distinct_profiles": int(items.shape[0]),
                "source_file": str(path),
            },
        )


@hookimpl
def register_datasets(register):
    register(Lenk)
    register(LenkRegression)
