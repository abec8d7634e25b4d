"""Synthetic personalized attribute labels at the paper's Shoes scale (``synthetic-attributes``).

The paper's headline job is Shoes (7 attributes) and SUN (5), each attribute a problem of about
190-260 users who labelled 50 images, features PCA-reduced to 100.  Neither data set has a
public copy; this generator lets anyone run a job of that shape and size, and goes through
exactly the same preprocessing as ``shoes`` (the loader of ``personalized.py``: duplicate
merge, PCA fitted on all items' features, minority-class filter, only labelled items kept).

Generation (:func:`mtlbench.synthetic.make_attribute_items`, ``make_attribute_labels``; not a
paper recipe):

* ``n_items`` items (default 14,658, Shoes' count) with ``n_features`` features (default 990,
  GIST + colour histogram) generated from ``latent_dim`` latent item factors whose variances
  decay as (1 + j) ** -``spectrum_decay``, plus ``feature_noise``; optionally heavy-tailed
  items (``tail`` = 1 / nu of a multivariate Student-t, 0: Gaussian) and features on unequal
  scales (``scale_decades``: feature f multiplied by 10 ** U(-a/2, a/2));
* per attribute, ``users`` annotators (default 200) label ``labels_per_user`` distinct items
  (default 50) of the attribute's annotation pool (2,000 items).  The attribute has
  ``shades`` "shades of meaning": users of a shade share a direction in the latent item space,
  plus a personal deviation of size ``personal_spread``; each user has an own threshold (a
  quantile 1 - ``positive_share`` +- 0.15 of the pool's scores), a ``one_sided`` share of
  users calls nearly every item positive or nearly none, and ``label_noise`` of the labels are
  flipped;
* preprocessing as ``shoes``: PCA to ``n_components`` (default 100), then users with fewer
  than ``min_minority`` (default 8) labels of their minority class are removed.

Settings.  ``setting`` names a point of the family below (``--datasets
"synthetic-attributes[setting=near-separable]"``); a parameter given beside it overrides the
setting's value.  Every setting keeps the paper's shape (the sizes above) and changes the
distribution of the data, to measure speed and convergence on problems nobody tuned on.  They
were fixed before any model was timed on them and are design data, like ``seed=101``: no
default, grid or constant may be chosen from a published table of them, and none is
published.  Each has a seed of its own (independent draws); unlisted values are the default's.

================  ======  ==========================================================
setting           seed    changes from ``default``
================  ======  ==========================================================
default           0       (the published ``synthetic-attributes``) latent_dim 40, shades 3,
                          one_sided 0.06, label_noise 0.1, personal_spread 0.3,
                          feature_noise 0.5, spectrum_decay 1, tail 0, scale_decades 0,
                          positive_share 0.5
near-separable    201     label_noise 0, one_sided 0.03, feature_noise 0.1: labels nearly a
                          linear function of the features, per-user fits near interpolation
noisy             202     label_noise 0.3, one_sided 0.15, feature_noise 1, personal_spread 0.6
low-rank          203     latent_dim 8, shades 2, personal_spread 0.1: strongly shared structure
many-shades       204     latent_dim 100, shades 10, personal_spread 0.5: little shared structure
gist-like         205     tail 0.25 (nu = 4), scale_decades 2, spectrum_decay 2: heavy-tailed,
                          unevenly scaled, strongly correlated features
imbalanced        206     positive_share 0.25, one_sided 0.1
================  ======  ==========================================================

``params()`` (part of every result's key) lists the shape, ``seed``, ``latent_dim``,
``shades``, ``one_sided``, ``label_noise`` and the preprocessing always, and the other generator
parameters only where they differ from the default's, so the default's results keep their keys;
the setting's name itself is not listed (the values are).

``meta`` keeps each kept user's shade (``task_groups``, scored against a model's task groups
like the simulated data's blocks) and which users were one-sided.  Every parameter is a dataset
parameter (``--datasets "synthetic-attributes[users=40,n_items=2000]"``); small settings serve
the tests.  ``seed`` is the generator seed (independent of the protocol's split seed); attribute
``attrK`` uses the random stream (seed, 1, K), so an attribute's labels do not depend on how
many attributes are generated.  The generator's products and the PCA are computed in
arithmetic whose results do not depend on the machine (:mod:`mtlbench.reproducible`): the data,
and their fingerprint, are the same bits on every CPU, BLAS kernel and thread count.
:meth:`SyntheticAttributes.write_layout` writes the generated data in the documented folder
layout (``features.npy``, ``labels.csv``, ...): loaded with ``--datasets personalized
--data-dir FOLDER`` it gives identical problems.
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


#: The generator parameters a setting fixes, with the default setting's values (those of the
#: published ``synthetic-attributes``).
GENERATOR_DEFAULTS: dict[str, Any] = {
    "seed": 0, "latent_dim": 40, "shades": 3, "one_sided": 0.06, "label_noise": 0.1,
    "personal_spread": 0.3, "feature_noise": 0.5, "spectrum_decay": 1.0, "tail": 0.0,
    "scale_decades": 0.0, "positive_share": 0.5}

#: The named settings of the family (module docstring): design data for speed and convergence
#: across problems of the paper's shape; each changes the default's values named here.
SETTINGS: dict[str, dict[str, Any]] = {
    "default": {},
    "near-separable": {"seed": 201, "label_noise": 0.0, "one_sided": 0.03,
                       "feature_noise": 0.1},
    "noisy": {"seed": 202, "label_noise": 0.3, "one_sided": 0.15, "feature_noise": 1.0,
              "personal_spread": 0.6},
    "low-rank": {"seed": 203, "latent_dim": 8, "shades": 2, "personal_spread": 0.1},
    "many-shades": {"seed": 204, "latent_dim": 100, "shades": 10, "personal_spread": 0.5},
    "gist-like": {"seed": 205, "tail": 0.25, "scale_decades": 2.0, "spectrum_decay": 2.0},
    "imbalanced": {"seed": 206, "positive_share": 0.25, "one_sided": 0.1},
}

#: Parameters recorded by ``params()`` in every setting (the published default's identity);
#: the others only where they differ from :data:`GENERATOR_DEFAULTS`, so that the default
#: keeps its stored results' keys.
_ALWAYS = ("seed", "latent_dim", "shades", "one_sided", "label_noise")

#: (lowest, highest, whether the highest is allowed) of the real-valued parameters: a flip or
#: one-sided share of 0.5 leaves no signal; tail < 0.5 is nu > 2 (finite variance);
#: positive_share in [0.2, 0.8] keeps each user's quantile 1 - share +- 0.15 inside (0, 1); the
#: upper bounds of the spread, noise, decay and decades only catch typing errors.
_RANGES: dict[str, tuple[float, float, bool]] = {
    "one_sided": (0.0, 0.5, False), "label_noise": (0.0, 0.5, False),
    "personal_spread": (0.0, 10.0, True), "feature_noise": (0.0, 100.0, True),
    "spectrum_decay": (0.0, 4.0, True), "tail": (0.0, 0.5, False),
    "scale_decades": (0.0, 6.0, True), "positive_share": (0.2, 0.8, True)}


class SyntheticAttributes(PersonalizedAttributes):
    """Generated personalized-attribute data, Shoes-sized by default (module docstring)."""

    name: ClassVar[str] = "synthetic-attributes"
    description: ClassVar[str] = ("generated personalized attribute labels at the paper's Shoes "
                                  "scale: 7 attributes x 200 users x 50 labels, 14,658 items, "
                                  "990 features -> PCA 100; named generator settings "
                                  f"({', '.join(SETTINGS)})")
    source: ClassVar[str] = ("generated (mtlbench.synthetic.make_attribute_labels: shades of "
                             "meaning, one-sided users, label noise)")

    #: ``attributes`` on the command line means ``n_attributes``
    param_aliases: ClassVar[dict[str, str]] = {"attributes": "n_attributes"}

    def __init__(self, setting: str = "default", seed: int | None = None, n_attributes: int = 7,
                 users: int = 200, labels_per_user: int = 50, n_items: int = 14658,
                 n_features: int = 990, latent_dim: int | None = None, shades: int | None = None,
                 one_sided: float | None = None, label_noise: float | None = None,
                 personal_spread: float | None = None, feature_noise: float | None = None,
                 spectrum_decay: float | None = None, tail: float | None = None,
                 scale_decades: float | None = None, positive_share: float | None = None,
                 n_components: int | None = 100, min_minority: int = 8, bias: bool = False):
        super().__init__(n_components=n_components, min_minority=min_minority, bias=bias)
        if setting not in SETTINGS:
            raise ValueError(f"{self.name}: no setting {setting!r}; its settings are: "
                             f"{', '.join(SETTINGS)}")
        self.setting = setting
        self.n_attributes = n_attributes
        self.users = users
        self.labels_per_user = labels_per_user
        self.n_items = n_items
        self.n_features = n_features
        # the generator parameters as given (None: the setting's value) ...
        given = {"seed": seed, "latent_dim": latent_dim, "shades": shades,
                 "one_sided": one_sided, "label_noise": label_noise,
                 "personal_spread": personal_spread, "feature_noise": feature_noise,
                 "spectrum_decay": spectrum_decay, "tail": tail,
                 "scale_decades": scale_decades, "positive_share": positive_share}
        for key, value in given.items():
            setattr(self, key, value)
        # ... and as used: the setting's values where none was given
        self._generator = {**GENERATOR_DEFAULTS, **SETTINGS[setting],
                           **{k: v for k, v in given.items() if v is not None}}
        self._check_parameters()

    def _check_parameters(self) -> None:
        ints = {"seed": self._generator["seed"], "latent_dim": self._generator["latent_dim"],
                "shades": self._generator["shades"], "n_attributes": self.n_attributes,
                "users": self.users, "labels_per_user": self.labels_per_user,
                "n_items": self.n_items, "n_features": self.n_features}
        for key, value in ints.items():
            low = 0 if key == "seed" else 1
            if isinstance(value, bool) or not isinstance(value, (int, np.integer)) \
                    or value < low:
                what = "a non-negative" if key == "seed" else "a positive"
                raise ValueError(f"{self.name}: {key} must be {what} integer, got {value!r}")
        for key, (low, high, closed) in _RANGES.items():
            value = self._generator[key]
            ok = isinstance(value, (int, float, np.floating, np.integer)) \
                and not isinstance(value, bool) and low <= value and \
                (value <= high if closed else value < high)
            if not ok:
                bracket = "]" if closed else ")"
                raise ValueError(f"{self.name}: {key} must be in [{low:g}, {high:g}{bracket}, "
                                 f"got {value!r}")
            self._generator[key] = float(value)
        for key in ("seed", "latent_dim", "shades"):
            self._generator[key] = int(self._generator[key])

    # ---------------------------------------------------------------- contract
    def problems(self, data_dir=None) -> list[str]:
        return [f"attr{a}" for a in range(int(self.n_attributes))]

    def params(self) -> dict:
        g = self._generator
        extra = {k: g[k] for k in GENERATOR_DEFAULTS
                 if k not in _ALWAYS and g[k] != GENERATOR_DEFAULTS[k]}
        return {"n_attributes": self.n_attributes, "users": self.users,
                "labels_per_user": self.labels_per_user, "n_items": self.n_items,
                "n_features": self.n_features, **{k: g[k] for k in _ALWAYS}, **extra,
                **super().params()}

    def availability(self, *, data_dir=None, cache_dir=None) -> str:
        return "generated"

    def layout_help(self) -> str:
        return (f"{self.name}: generated, no files needed; problems "
                f"{', '.join(self.problems())}; setting {self.setting!r} (of "
                f"{', '.join(SETTINGS)}); parameters {self.params()}")

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
        g = self._generator
        return make_attribute_items(
            g["seed"], int(self.n_items), int(self.n_features), g["latent_dim"],
            g["feature_noise"], spectrum_decay=g["spectrum_decay"], tail=g["tail"],
            scale_decades=g["scale_decades"])

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
        g = self._generator
        return make_attribute_labels(
            g["seed"], attribute, Z, users=int(self.users),
            labels_per_user=int(self.labels_per_user), pool=min(2000, Z.shape[0]),
            shades=g["shades"], personal_spread=g["personal_spread"],
            one_sided=g["one_sided"], label_noise=g["label_noise"],
            positive_share=g["positive_share"])


@hookimpl
def register_datasets(register):
    register(SyntheticAttributes)
