"""Synthetic personalized attribute labels at the paper's Shoes scale (``synthetic-attributes``).

The paper's headline job is Shoes (7 attributes) and SUN (5), each attribute a problem of about
190-260 users who labelled 50 images, features PCA-reduced to 100.  Neither data set has a
public copy; this generator lets anyone run a job of that shape and size, and goes through
exactly the same preprocessing as ``shoes`` (the loader of ``personalized.py``: duplicate
merge, PCA fitted on all items' features, minority-class filter, only labelled items kept).

Generation (:func:`mtlbench.synthetic.make_attribute_items`, ``make_attribute_labels``; not a
paper recipe):

* ``n_items`` items (default 14,658, Shoes' count) with ``n_features`` features (default 990,
  GIST + colour histogram) generated from ``latent_dim`` latent item factors with a decaying
  spectrum plus feature noise;
* per attribute, ``users`` annotators (default 200) label ``labels_per_user`` distinct items
  (default 50) of the attribute's annotation pool (2,000 items).  The attribute has
  ``shades`` "shades of meaning" (default 3): users of a shade share a direction in the
  latent item space, plus a personal deviation; each user has an own threshold (a quantile
  0.5 +- 0.15 of the pool's scores), a ``one_sided`` share of users (default 0.06) calls
  nearly every item positive or nearly none, and ``label_noise`` (default 0.1) of the labels
  are flipped;
* preprocessing as ``shoes``: PCA to ``n_components`` (default 100), then users with fewer
  than ``min_minority`` (default 8) labels of their minority class are removed -- with the
  defaults about 190 of the 200 users of an attribute remain.

``meta`` keeps each kept user's shade (``task_groups``, scored against a model's task groups
like the simulated data's blocks) and which users were one-sided.  Every parameter is a dataset
parameter (``--datasets "synthetic-attributes[users=40,n_items=2000]"``); small settings serve
the tests.  ``seed`` is the generator seed (independent of the protocol's split seed); attribute
``attrK`` uses the random stream (seed, 1, K), so an attribute's labels do not depend on how
many attributes are generated.  :meth:`SyntheticAttributes.write_layout` writes the generated
data in the documented folder layout (``features.npy``, ``labels.csv``, ...): loaded with
``--datasets personalized --data-dir FOLDER`` it gives identical problems.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from mtlbench import TaskSet, UnknownNameError, hookimpl
from mtlbench.datasets_api import make_attribute_items, make_attribute_labels

from ._common import check_min_minority
from .personalized import (FEATURES_FILE, ITEMS_FILE, LABELS_FILE, META_FILE,
                           PersonalizedAttributes, pca)

__all__ = ["SyntheticAttributes"]


class SyntheticAttributes(PersonalizedAttributes):
    """Generated personalized-attribute data, Shoes-sized by default (module docstring)."""

    name: ClassVar[str] = "synthetic-attributes"
    description: ClassVar[str] = ("generated personalized attribute labels at the paper's Shoes "
                                  "scale: 7 attributes x 200 users x 50 labels, 14,658 items, "
                                  "990 features -> PCA 100")
    source: ClassVar[str] = ("generated (mtlbench.synthetic.make_attribute_labels: shades of "
                             "meaning, one-sided users, label noise)")

    #: ``attributes`` on the command line means ``n_attributes``
    param_aliases: ClassVar[dict[str, str]] = {"attributes": "n_attributes"}

    def __init__(self, seed: int = 0, n_attributes: int = 7, users: int = 200,
                 labels_per_user: int = 50, n_items: int = 14658, n_features: int = 990,
                 latent_dim: int = 40, shades: int = 3, one_sided: float = 0.06,
                 label_noise: float = 0.1, n_components: int | None = 100,
                 min_minority: int = 8, bias: bool = False):
        super().__init__(n_components=n_components, min_minority=min_minority, bias=bias)
        self.seed = seed
        self.n_attributes = n_attributes
        self.users = users
        self.labels_per_user = labels_per_user
        self.n_items = n_items
        self.n_features = n_features
        self.latent_dim = latent_dim
        self.shades = shades
        self.one_sided = one_sided
        self.label_noise = label_noise

    # ---------------------------------------------------------------- contract
    def problems(self, data_dir=None) -> list[str]:
        return [f"attr{a}" for a in range(int(self.n_attributes))]

    def params(self) -> dict:
        return {"seed": self.seed, "n_attributes": self.n_attributes, "users": self.users,
                "labels_per_user": self.labels_per_user, "n_items": self.n_items,
                "n_features": self.n_features, "latent_dim": self.latent_dim,
                "shades": self.shades, "one_sided": self.one_sided,
                "label_noise": self.label_noise, **super().params()}

    def availability(self, *, data_dir=None, cache_dir=None) -> str:
        return "generated"

    def layout_help(self) -> str:
        return (f"{self.name}: generated, no files needed; problems "
                f"{', '.join(self.problems())}; parameters {self.params()}")

    def load(self, problem: str, *, data_dir=None, cache_dir=None) -> TaskSet:
        a = self._attribute_index(problem)
        min_minority = check_min_minority(self.name, self.min_minority)
        feats, ids, pca_rec, Z = self._items()
        lab = self._generate_labels(a, Z)
        users = np.array([f"user{u:03d}" for u in lab["user"]], dtype=object)
        items = np.asarray(ids, dtype=object)[lab["item"]]
        attrs = np.full(users.shape[0], problem, dtype=object)
        tasks = self._assemble(
            self.name, problem, feats, ids, pca_rec, users, items, attrs, lab["label"],
            min_minority, {"source": self.source, "generator": self.params()})
        # the shade of each kept user (task names are "userNNN"): structure-recovery ARI
        kept = np.array([int(n[4:]) for n in tasks.task_names], dtype=np.int64)
        tasks.meta["task_groups"] = lab["shade"][kept]
        tasks.meta["one_sided_users"] = [f"user{u:03d}" for u in np.flatnonzero(lab["one_sided"])]
        return tasks

    def write_layout(self, folder: str | Path) -> Path:
        """Write the generated (raw, not PCA-reduced) data in the personalized-attribute
        folder layout: ``features.npy``, ``items.txt``, ``labels.csv``, ``dataset.json``."""
        import json

        import pandas as pd

        folder = Path(folder)
        folder.mkdir(parents=True, exist_ok=True)
        F, Z = self._raw_items()
        np.save(folder / FEATURES_FILE, F, allow_pickle=False)
        (folder / ITEMS_FILE).write_text("".join(f"item{i:05d}\n" for i in range(F.shape[0])),
                                         encoding="utf-8")
        frames = []
        for a, problem in enumerate(self.problems()):
            lab = self._generate_labels(a, Z)
            frames.append(pd.DataFrame({"user": [f"user{u:03d}" for u in lab["user"]],
                                        "item": [f"item{i:05d}" for i in lab["item"]],
                                        "attribute": problem,
                                        "label": lab["label"].astype(np.int64)}))
        pd.concat(frames).to_csv(folder / LABELS_FILE, index=False)
        (folder / META_FILE).write_text(json.dumps(
            {"name": "personalized", "attributes": self.problems(), "source": self.source,
             "features": f"generated, {F.shape[1]} dimensions"}), encoding="utf-8")
        return folder

    # ---------------------------------------------------------------- generation
    def _attribute_index(self, problem: str) -> int:
        names = self.problems()
        if problem not in names:
            raise UnknownNameError(f"{self.name}: no problem {problem!r}; its problems are "
                                   f"{', '.join(names)} (parameter "
                                   f"n_attributes={self.n_attributes})")
        return names.index(problem)

    def _raw_items(self) -> tuple[np.ndarray, np.ndarray]:
        for key, value in (("n_items", self.n_items), ("n_features", self.n_features),
                           ("latent_dim", self.latent_dim), ("users", self.users),
                           ("labels_per_user", self.labels_per_user), ("shades", self.shades),
                           ("n_attributes", self.n_attributes)):
            if isinstance(value, bool) or int(value) != value or value < 1:
                raise ValueError(f"{self.name}: {key} must be a positive integer, got {value!r}")
        for key, value in (("one_sided", self.one_sided), ("label_noise", self.label_noise)):
            if not 0.0 <= float(value) < 0.5:
                raise ValueError(f"{self.name}: {key} must be in [0, 0.5), got {value!r}")
        return make_attribute_items(int(self.seed), int(self.n_items), int(self.n_features),
                                    int(self.latent_dim))

    def _items(self) -> tuple[np.ndarray, list[str], dict[str, Any], np.ndarray]:
        """PCA-reduced features, item ids, the PCA record and the latent factors (cached)."""
        key = ("generated",) + tuple(sorted(self.params().items()))
        if key not in self._cache:
            F, Z = self._raw_items()
            k = self.n_components
            if k is not None and (int(k) != k or k < 1):
                raise ValueError(f"{self.name}: n_components must be a positive integer or "
                                 f"None, got {k!r}")
            scores, rec = pca(F, None if k is None else int(k))
            rec["fitted_on"] = f"features of all {F.shape[0]} generated items; labels unused"
            ids = [f"item{i:05d}" for i in range(F.shape[0])]
            self._cache = {key: (scores, ids, rec, Z)}  # one setting at a time
        return self._cache[key]

    def _generate_labels(self, attribute: int, Z: np.ndarray) -> dict[str, np.ndarray]:
        return make_attribute_labels(
            int(self.seed), attribute, Z, users=int(self.users),
            labels_per_user=int(self.labels_per_user), pool=min(2000, Z.shape[0]),
            shades=int(self.shades), one_sided=float(self.one_sided),
            label_noise=float(self.label_noise))


@hookimpl
def register_datasets(register):
    register(SyntheticAttributes)
