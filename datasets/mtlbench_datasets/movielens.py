"""MovieLens ml-latest-small (2016 edition): users as tasks, movies as shared items.

Source: GroupLens, F. M. Harper & J. A. Konstan, "The MovieLens Datasets: History and Context",
ACM TiiS 5(4), 2015.  ``ratings.csv`` (userId, movieId, rating 0.5..5, timestamp; 100,004
ratings by 671 users with >= 20 ratings each) and ``movies.csv`` (movieId, title, genres joined
by "|").  The live ``ml-latest-small.zip`` on files.grouplens.org is a newer edition with
other counts and checksums; the 2016 files are downloaded from a public copy
(github.com/ElenaXu98/movie-ranking-list).  Terms: research use, no endorsement, cite Harper &
Konstan 2015, redistribution under the same terms, no commercial use without permission.

Label rule: y = +1 ("liked") if rating >= ``like_threshold`` (default 4.0 stars), else -1.

Item features (label-free; parameter ``features``):
    * the 19 genres as 0/1 indicators (Action ... Western, incl. IMAX; "(no genres listed)" is
      the all-zero row);
    * the release year parsed from the title's trailing "(YYYY)" (movies without one get the
      mean year);
then every column is z-scored over the movies that appear in the kept users' ratings, and a
constant 1 feature is appended (parameter ``bias``, default True: the models have no
intercept).  Rating values are never used for features (no mean-rating or popularity feature:
those would leak the test labels of other splits).

Users (tasks) with fewer than ``min_minority`` (default 8, the TFCL paper's rule for Shoes /
SUN) ratings of their minority class are removed; the removed users are recorded in ``meta``.
"""
from __future__ import annotations

import re

import numpy as np

from mtlbench import TaskSet, hookimpl
from mtlbench.datasets_api import DataFile, DataSource, corrupt_file_error

from ._common import (BIAS_NOTE, FileDataset, add_bias, check_min_minority, class_count_filter,
                      no_tasks_error, standardize)

_BASE = "https://raw.githubusercontent.com/ElenaXu98/movie-ranking-list/master/ml-latest-small"
MOVIELENS_SOURCE = DataSource(
    dataset="movielens",
    files=(
        DataFile(path="ml-latest-small/ratings.csv",
                 sha256="c86fa992e6ef23a8e099bca9a15dfd97ec78e15f42bb85707f3e7275112bed42",
                 url=f"{_BASE}/ratings.csv", size=2289254),
        DataFile(path="ml-latest-small/movies.csv",
                 sha256="a87480009b75ecd8d1e8f70700c534b6aefd57eed31b087ce8268ef6061a166c",
                 # No confirmed public address of the 2016 movies.csv: the copy repository holds
                 # only a tab-separated movies.txt (another file), and GroupLens serves a newer
                 # edition.  The file must come from the user's --data-dir.
                 url=None, size=458390),
    ),
    homepage=("GroupLens ml-latest-small, 2016 edition "
              "(https://grouplens.org/datasets/movielens/); "
              "copy: https://github.com/ElenaXu98/movie-ranking-list"),
    terms=("GroupLens terms: research use, cite Harper & Konstan 2015, redistribute only under the "
           "same terms, no commercial use without permission"),
)

GENRES = ("Action", "Adventure", "Animation", "Children", "Comedy", "Crime", "Documentary",
          "Drama", "Fantasy", "Film-Noir", "Horror", "IMAX", "Musical", "Mystery", "Romance",
          "Sci-Fi", "Thriller", "War", "Western")
FEATURE_SETS = ("genres+year", "genres")
_YEAR = re.compile(r"\((\d{4})\)\s*$")


class MovieLens(FileDataset):
    name = "movielens"
    description = ("MovieLens ml-latest-small (2016): users (tasks) x movies, genre+year "
                   "features; liked = rating >= 4")
    source = ("GroupLens ml-latest-small 2016 (Harper & Konstan 2015), via "
              "github.com/ElenaXu98/movie-ranking-list")
    data_source = MOVIELENS_SOURCE

    def __init__(self, like_threshold: float = 4.0, min_minority: int = 8,
                 features: str = "genres+year", bias: bool = True):
        self.like_threshold = like_threshold
        self.min_minority = min_minority
        self.features = features
        self.bias = bias

    def params(self) -> dict:
        return {"like_threshold": self.like_threshold, "min_minority": self.min_minority,
                "features": self.features, "standardize": True, "bias": bool(self.bias)}

    def load(self, problem: str = "movielens", *, data_dir=None, cache_dir=None) -> TaskSet:
        import pandas as pd

        self._check_problem(problem)
        min_minority = check_min_minority("movielens", self.min_minority)
        if self.features not in FEATURE_SETS:
            raise ValueError(f"movielens: features must be one of {FEATURE_SETS}, got "
                             f"{self.features!r}")
        thr = float(self.like_threshold)
        paths = self._paths(data_dir, cache_dir)
        rpath, mpath = paths["ml-latest-small/ratings.csv"], paths["ml-latest-small/movies.csv"]
        try:
            ratings = pd.read_csv(rpath, usecols=["userId", "movieId", "rating"],
                                  dtype={"userId": np.int64, "movieId": np.int64,
                                         "rating": np.float64})
        except Exception as exc:  # noqa: BLE001
            raise corrupt_file_error("movielens", rpath, f"{type(exc).__name__}: {exc}",
                                     self._file("ml-latest-small/ratings.csv"),
                                     self.data_source) from None
        try:
            movies = pd.read_csv(mpath, usecols=["movieId", "title", "genres"],
                                 dtype={"movieId": np.int64, "title": str, "genres": str})
        except Exception as exc:  # noqa: BLE001
            raise corrupt_file_error("movielens", mpath, f"{type(exc).__name__}: {exc}",
                                     self._file("ml-latest-small/movies.csv"),
                                     self.data_source) from None

        unknown = np.setdiff1d(ratings["movieId"].unique(), movies["movieId"].to_numpy())
        if unknown.size:
            raise corrupt_file_error("movielens", rpath, f"{unknown.size} movieIds are not in "
                                     f"movies.csv (e.g. {unknown[:5].tolist()})")
        ratings = ratings.sort_values(["userId", "movieId"], kind="stable")
        ratings = ratings.drop_duplicates(["userId", "movieId"], keep="last")
        y_all = np.where(ratings["rating"].to_numpy() >= thr, 1.0, -1.0)
        users = ratings["userId"].to_numpy()
        user_ids, starts = np.unique(users, return_index=True)
        bounds = np.append(starts, users.shape[0])
        names = [f"user{u}" for u in user_ids]
        labels = [y_all[bounds[i]:bounds[i + 1]] for i in range(user_ids.shape[0])]
        keep, dropped = class_count_filter(names, labels, min_minority)
        if not keep.any():
            raise no_tasks_error("movielens", problem, f">= {min_minority} ratings per class",
                                 len(names))
        kept_rows = np.concatenate([np.arange(bounds[i], bounds[i + 1])
                                    for i in np.flatnonzero(keep)])
        movie_of_row = ratings["movieId"].to_numpy()
        item_ids, inverse = np.unique(movie_of_row[kept_rows], return_inverse=True)

        movies = movies.drop_duplicates("movieId").set_index("movieId").loc[item_ids]
        genre_lists = movies["genres"].fillna("").str.split("|")
        G = np.zeros((item_ids.shape[0], len(GENRES)))
        col = {g: j for j, g in enumerate(GENRES)}
        for i, gl in enumerate(genre_lists):
            for g in gl:
                j = col.get(g)
                if j is not None:
                    G[i, j] = 1.0
        feature_names = list(GENRES)
        cols = [G]
        year_missing = 0
        if self.features == "genres+year":
            years = movies["title"].fillna("").map(lambda s: _YEAR.search(s)).map(
                lambda m: float(m.group(1)) if m else np.nan).to_numpy(dtype=np.float64)
            year_missing = int(np.isnan(years).sum())
            years = np.where(np.isnan(years), np.nanmean(years), years)
            cols.append(years[:, None])
            feature_names.append("year")
        Z, std_rec = standardize(np.hstack(cols))
        Z = add_bias(Z, bool(self.bias))
        if self.bias:
            feature_names.append("bias")

        # per kept user: positions of their rows within kept_rows
        sizes = np.array([bounds[i + 1] - bounds[i] for i in np.flatnonzero(keep)])
        cuts = np.concatenate([[0], np.cumsum(sizes)])
        index = [inverse[cuts[k]:cuts[k + 1]] for k in range(sizes.shape[0])]
        kept_labels = [labels[i] for i in np.flatnonzero(keep)]
        return TaskSet.from_shared_items(
            "movielens", Z, index, kept_labels, task_names=[names[i] for i in np.flatnonzero(keep)],
            meta={
                "label_rule": f"y = +1 (liked) if rating >= {thr:g} stars, else -1",
                "feature_names": feature_names,
                "features": (f"{self.features}: genre 0/1 indicators"
                             + (f" + release year from the title ({year_missing} missing -> "
                                f"mean year)" if self.features == "genres+year" else "")
                             + "; z-scored over the kept movies; ratings never used; "
                             + (BIAS_NOTE if self.bias else "no constant feature")),
                "standardization": std_rec,
                "minority_filter": {"min_minority": min_minority,
                                    "rule": f"users with < {min_minority} ratings of their "
                                            f"minority class removed",
                                    "removed": dropped, "n_removed": len(dropped)},
                "item_ids": item_ids,
                "source_files": [str(rpath), str(mpath)],
            },
        )


@hookimpl
def register_datasets(register):
    register(MovieLens)
