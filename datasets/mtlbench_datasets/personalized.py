"""Personalized attribute data in one documented folder layout; Shoes and SUN as named instances.

Each *attribute* is a problem; each *user* (annotator) is a task; the items (images) are shared
by all users and stored once (``TaskSet.from_shared_items``).

Folder layout (what ``mtlbench import-attributes`` writes; details in docs/datasets.md)::

    <folder>/
      features.npy   float array (n_items, d): one row of features per item (np.save, no pickle)
      items.txt      n_items lines: the item id of each row of features.npy, in order
                     (optional: without it, item ids are the row numbers 0 .. n_items-1)
      labels.csv     header "user,item,attribute,label"; one row per personal label;
                     label in {-1, +1} (or {0, 1}: 0 means -1); attribute names are normalised
                     (lower case, spaces and hyphens -> "_")
      dataset.json   optional: {"name", "attributes", "source", "features"} (shown by the CLI)

Where the folder is looked for (dataset ``shoes``; ``sun`` alike): ``<data-dir>/shoes/``, then
``<data-dir>/`` itself if it holds ``labels.csv``, then ``$MTLBENCH_SHOES_DIR``, then
``<cache-dir>/shoes/``.  ``<data-dir>`` is ``--data-dir`` or ``$MTLBENCH_DATA_DIR``.

Preprocessing (the TFCL paper, Sec. "Shoes Dataset", "Pre-processing"; recorded in ``meta``):

1. duplicate labels of one (user, item, attribute) are merged by majority vote (ties dropped);
2. **PCA** of the item features, ``n_components`` (default 100; the paper does not state its
   number) - fitted on the feature rows of *all* items in ``features.npy`` (unsupervised: no
   label is looked at, so no test label leaks); scores are divided by one global scale
   sqrt(mean kept eigenvalue) so features are O(1) while the relative variances stay; the
   components' explained-variance ratios are recorded.  ``n_components=None`` only centres.
   Solver: the top k eigenpairs of the d x d covariance (or of the n x n Gram matrix when
   n < d), the covariance, the eigenpairs and the scores computed by
   :mod:`mtlbench.datasets_api`'s ``reproducible_gram`` / ``reproducible_eigh`` /
   ``reproducible_matmul`` (the method of LAPACK's ``dsyevr``, in arithmetic whose results are
   the same bits on every CPU, BLAS kernel and thread count); component signs are fixed
   (largest |loading| positive).  Accuracy: that of LAPACK's symmetric eigensolver (relative
   eigenvalue error ~ 1e-15 * lambda_max / lambda_i);
3. **minority-class filter**: users with fewer than ``min_minority`` (default 8, the paper's
   "less than 8 annotations for the minority class") labels of their minority class are
   removed; removed users are recorded.  The TaskSet keeps only the items the kept users
   labelled.
4. no constant feature by default (the paper states none); ``bias=True`` appends one.

Shoes (Kovashka & Grauman, "Discovering attribute shades of meaning with the crowd", IJCV
2015; features: GIST + colour histogram of WhittleSearch, Kovashka et al. CVPR 2012):
problems ``brown comfortable fashionable formal open ornate pointy``.  SUN (same work; SUN
Attribute images, Patterson & Hays 2012; features: 2048-d Inception-V3): problems
``cluttered modern open_area rustic soothing``.  Neither has a known public download; both
read the user's local copy.

``mtlbench import-attributes`` (registered through ``register_commands``) turns CSV, NumPy or
MATLAB files into the layout; :func:`import_attributes` is the same as a function.  Both, the
layout's file names and the ``labels.csv`` reader are in the private module ``_attributes.py``
and are re-exported here.
"""
from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, ClassVar, Iterable

import numpy as np

from mtlbench import (Dataset, DatasetUnavailableError, DataValidationError, TaskSet,
                      UnknownNameError, hookimpl)
from mtlbench.datasets_api import (data_dir_hint, default_cache_dir, find_in_subfolders,
                                   reproducible_eigh, reproducible_gram, reproducible_matmul,
                                   resolve_data_dir)

# The layout's files, the label reader and the importer live in _attributes (re-exported here).
from ._attributes import (  # noqa: F401
    FEATURES_FILE, ITEMS_FILE, LABEL_COLUMNS, LABELS_FILE, LAYOUT_HELP, META_FILE, OUTPUT_FILES,
    _NEGATIVE, _POSITIVE, _file_key, _import_command, _read_labels, _read_table, import_attributes,
    normalize_attribute)
from ._common import (BIAS_NOTE, add_bias, check_features, check_min_minority, class_count_filter,
                      load_npy, read_text_lines)

__all__ = ["PersonalizedAttributes", "Shoes", "SUN", "pca", "import_attributes",
           "normalize_attribute", "iter_datasets", "FEATURES_FILE", "ITEMS_FILE", "LABELS_FILE",
           "META_FILE", "LABEL_COLUMNS", "OUTPUT_FILES", "LAYOUT_HELP"]


# --------------------------------------------------------------------------- PCA
def pca(F: np.ndarray, n_components: int | None) -> tuple[np.ndarray, dict[str, Any]]:
    """Centre ``F`` (n x d) and project on its top principal components (label-free).

    Returns the (n x k) scores divided by sqrt(mean of the k kept eigenvalues) and a record
    with the explained-variance ratios.  ``n_components=None`` only centres (k = d).
    """
    F = np.asarray(F, dtype=np.float64)
    n, d = F.shape
    mu = F.mean(axis=0)
    Xc = F - mu
    if n_components is None:
        sd = np.sqrt(np.mean(np.sum(Xc * Xc, axis=0)) / max(n - 1, 1))
        scale = sd if sd > 0 else 1.0
        return Xc / scale, {"n_components": None, "method": "centred only (no PCA)",
                            "scale": float(scale),
                            "fitted_on": f"features of all {n} items; labels unused"}
    k = int(min(n_components, d, max(n - 1, 1)))
    total = float(np.sum(Xc * Xc) / max(n - 1, 1))
    if d <= n:
        C = reproducible_gram(Xc) / max(n - 1, 1)
        ev, V = reproducible_eigh(C, k)
        ev, V = ev[::-1], V[:, ::-1]
    else:  # fewer items than features: eigenvectors of the Gram matrix
        G = reproducible_gram(Xc.T) / max(n - 1, 1)
        ev, U = reproducible_eigh(G, k)
        ev, U = ev[::-1], U[:, ::-1]
        pos = ev > 1e-12 * max(ev[0], 1e-300)
        ev, U = ev[pos], U[:, pos]
        V = reproducible_matmul(Xc.T, U) / np.sqrt(ev * max(n - 1, 1))
        k = ev.shape[0]
    ev = np.maximum(ev, 0.0)
    flip = np.sign(V[np.argmax(np.abs(V), axis=0), np.arange(V.shape[1])])
    V = V * np.where(flip == 0, 1.0, flip)
    scores = reproducible_matmul(Xc, V)
    mean_ev = float(ev.mean()) if ev.size else 0.0
    scale = np.sqrt(mean_ev) if mean_ev > 0 else 1.0
    ratio = ev / total if total > 0 else np.zeros_like(ev)
    rec = {
        "n_components": int(k), "requested": int(n_components),
        "explained_variance_ratio": [round(float(r), 6) for r in ratio],
        "explained_total": round(float(ratio.sum()), 6),
        "scale": float(scale),
        "fitted_on": f"features of all {n} items in {FEATURES_FILE} (unsupervised; labels unused)",
        "method": "top-k eigenpairs of the covariance (reproducible_eigh: the same bits on "
                  "every CPU and BLAS), signs fixed; scores / sqrt(mean kept eigenvalue)",
    }
    return scores / scale, rec




class PersonalizedAttributes(Dataset):
    """A personalized-attribute dataset in the folder layout of this module.

    Subclass and set ``name``, ``attributes`` (problem names, normalised spelling),
    ``description``, ``source`` to make a named instance (see ``Shoes``, ``SUN``); the generic
    instance ``personalized`` reads whatever attributes its folder holds.

    Parameters
    ----------
    n_components : int or None
        PCA components of the item features (None: no PCA, only centring).
    min_minority : int
        Users with fewer labels of their minority class are removed (>= 3).
    """

    name: ClassVar[str] = "personalized"
    description: ClassVar[str] = ("any personalized-attribute data in the documented folder layout "
                                  "(--data-dir DIR holding labels.csv, features.npy)")
    source: ClassVar[str] = "your own data (see docs/datasets.md, `mtlbench import-attributes`)"
    attributes: ClassVar[tuple[str, ...]] = ()
    attribute_aliases: ClassVar[dict[str, str]] = {}
    get_it: ClassVar[str] = ("build it from your CSV, NumPy or MATLAB files with "
                             "`mtlbench import-attributes`")

    def __init__(self, n_components: int | None = 100, min_minority: int = 8, bias: bool = False):
        self.n_components = n_components
        self.min_minority = min_minority
        self.bias = bias
        self._cache: dict[tuple, Any] = {}

    # ---------------------------------------------------------------- contract
    def problems(self, data_dir=None) -> list[str]:
        """The attributes found in the data folder (``dataset.json``'s list, else the values of
        labels.csv's attribute column); without a folder, a named instance's built-in list
        (the attributes the paper used) and the generic instance none."""
        folder = self._find_folder(data_dir, None)
        if folder is None:
            return list(self.attributes)
        # a folder without any label keeps the built-in list: loading then says what is wrong
        return self._found_attributes(folder) or list(self.attributes)

    def _found_attributes(self, folder: Path) -> list[str]:
        meta = self._read_meta(folder)
        if isinstance(meta.get("attributes"), list):
            return [normalize_attribute(a) for a in meta["attributes"]]
        _, _, attrs, _ = self._labels(folder)
        return sorted(set(attrs.tolist()))

    def params(self) -> dict:
        return {"n_components": self.n_components, "min_minority": self.min_minority,
                "bias": bool(self.bias)}

    def availability(self, *, data_dir=None, cache_dir=None) -> str:
        ddir = resolve_data_dir(data_dir)
        for folder, kind in self._candidates(ddir, cache_dir):
            if ((folder / LABELS_FILE).is_file() and (folder / FEATURES_FILE).is_file()
                    and self._name_matches(folder)):
                return "cached" if kind == "cache" else "in data-dir"
        return "needs local files"

    def layout_help(self) -> str:
        where = (f"looked for in <data-dir>/{self.name}/, <data-dir>/, ${self._env_var()}, "
                 f"<cache-dir>/{self.name}/")
        probs = "problems: the attribute values found in labels.csv"
        probs += (f" (the paper used: {', '.join(self.attributes)})\n" if self.attributes else "\n")
        return f"{LAYOUT_HELP}\n{probs}{where}\nget the data: {self.get_it}"

    def load(self, problem: str, *, data_dir=None, cache_dir=None) -> TaskSet:
        folder = self._find_folder(data_dir, cache_dir)
        if folder is None:
            raise DatasetUnavailableError(self._missing_message(data_dir, cache_dir))
        attr = normalize_attribute(problem)
        attr = self.attribute_aliases.get(attr, attr)
        min_minority = check_min_minority(self.name, self.min_minority)
        k = self.n_components
        if k is not None and (int(k) != k or k < 1):
            raise ValueError(f"{self.name}: n_components must be a positive integer or None, "
                             f"got {k!r}")
        where = f"{self.name} ({folder})"
        items_feat, item_ids, pca_rec, items_note = self._features(folder, where)
        users, items, attrs, y = self._labels(folder)
        meta = self._read_meta(folder)
        return self._assemble(
            where, attr, items_feat, item_ids, pca_rec, users, items, attrs, y, min_minority,
            {"folder": str(folder), "item_ids_file": (folder / ITEMS_FILE).is_file(),
             "source": meta.get("source", self.source),
             "feature_description": meta.get("features", ""),
             **({"notes": [items_note]} if items_note else {})})

    def _assemble(self, where: str, attr: str, items_feat: np.ndarray, item_ids: list[str],
                  pca_rec: dict, users: np.ndarray, items: np.ndarray, attrs: np.ndarray,
                  y: np.ndarray, min_minority: int, extra_meta: dict) -> TaskSet:
        """The TaskSet of attribute ``attr`` from the whole layout in memory: preprocessed item
        features ``items_feat`` (n_items x d) with ids ``item_ids``, and one entry of
        ``users``, ``items``, ``attrs``, ``y`` per label.  Duplicate labels are merged, the
        minority-class filter applied, and only the items the kept users labelled are kept
        (steps 1, 3 and 4 of the module docstring; step 2, PCA, made ``items_feat``)."""
        sel = attrs == attr
        if not sel.any():
            raise UnknownNameError(self._unknown_attribute_message(where, attr, attrs,
                                                                   extra_meta.get("folder")))
        users, items, y = users[sel], items[sel], y[sel]
        pos = {iid: r for r, iid in enumerate(item_ids)}
        rows = np.fromiter((pos.get(i, -1) for i in items), dtype=np.int64, count=items.shape[0])
        if (rows < 0).any():
            bad = sorted(set(items[rows < 0].tolist()))
            raise DataValidationError(
                f"{where}: {len(bad)} item id(s) of {LABELS_FILE} have no row in {FEATURES_FILE} "
                f"(ids from {ITEMS_FILE if extra_meta.get('item_ids_file') else 'row numbers'}), "
                f"e.g. {bad[:5]}")
        # merge duplicate (user, item) labels by majority vote; ties dropped
        uniq_users, uidx = np.unique(users.astype(str), return_inverse=True)
        key = uidx.astype(np.int64) * (len(item_ids) + 1) + rows
        order = np.argsort(key, kind="stable")
        key_s, y_s = key[order], y[order]
        ukeys, start, counts = np.unique(key_s, return_index=True, return_counts=True)
        vote = np.add.reduceat(y_s, start)
        n_dup_pairs = int(np.count_nonzero(counts > 1))
        ties = vote == 0
        ukeys, vote = ukeys[~ties], vote[~ties]
        y_m = np.sign(vote)
        u_m = ukeys // (len(item_ids) + 1)
        r_m = ukeys % (len(item_ids) + 1)
        bounds = np.searchsorted(u_m, np.arange(uniq_users.shape[0] + 1))
        labels = [y_m[bounds[u]:bounds[u + 1]] for u in range(uniq_users.shape[0])]
        keep, dropped = class_count_filter(list(uniq_users), labels, min_minority)
        kept = np.flatnonzero(keep)
        if kept.size == 0:
            raise DatasetUnavailableError(
                f"{where}/{attr}: no user has >= {min_minority} labels of each class "
                f"({uniq_users.shape[0]} users before the filter); lower min_minority or add "
                f"labels")
        used_rows = np.unique(np.concatenate([r_m[bounds[u]:bounds[u + 1]] for u in kept]))
        remap = np.full(len(item_ids), -1, dtype=np.int64)
        remap[used_rows] = np.arange(used_rows.shape[0])
        index = [remap[r_m[bounds[u]:bounds[u + 1]]] for u in kept]
        extra = {k: v for k, v in extra_meta.items() if k != "item_ids_file"}
        return TaskSet.from_shared_items(
            f"{self.name}/{attr}", add_bias(items_feat[used_rows], bool(self.bias)), index,
            [labels[u] for u in kept],
            task_names=[str(uniq_users[u]) for u in kept],
            meta={
                "attribute": attr,
                "label_rule": "labels as given in labels.csv ({0,1} mapped to {-1,+1}); duplicate "
                              "(user, item) labels merged by majority vote, ties dropped",
                "duplicates": {"pairs_with_several_labels": n_dup_pairs,
                               "ties_dropped": int(ties.sum())},
                "pca": pca_rec,
                "minority_filter": {"min_minority": min_minority,
                                    "rule": f"users with < {min_minority} labels of their "
                                            f"minority class removed",
                                    "removed": dropped, "n_removed": len(dropped),
                                    "n_users_before": int(uniq_users.shape[0])},
                "item_ids": np.asarray([item_ids[r] for r in used_rows], dtype=object),
                "bias": BIAS_NOTE if self.bias
                else "no constant feature (bias=False, the paper's preprocessing)",
                **extra,
            },
        )

    # ---------------------------------------------------------------- helpers
    def _unknown_attribute_message(self, where: str, attr: str, attrs: np.ndarray,
                                   folder: str | None) -> str:
        found = sorted(set(attrs.tolist()))
        shown = ", ".join(found[:20]) + (f", ... ({len(found)} in all)" if len(found) > 20 else "")
        msg = (f"{where}: no labels for attribute {attr!r} in {LABELS_FILE}; "
               + (f"attributes found: {shown}." if found else "the file holds no labels."))
        if found:
            msg += (f" Use e.g. --datasets {self.name}/{found[0]}, or --datasets {self.name} "
                    f"for all of them")
            if self.attributes and folder:
                msg += (f" (the built-in list {', '.join(self.attributes)} is what the paper used; "
                        f"the generic dataset 'personalized' reads any attributes: "
                        f"--datasets personalized --data-dir {folder})")
            msg += "."
        return msg

    def _env_var(self) -> str:
        return f"MTLBENCH_{self.name.upper().replace('-', '_')}_DIR"

    def _candidates(self, ddir: Path | None, cache_dir) -> list[tuple[Path, str]]:
        out: list[tuple[Path, str]] = []
        if ddir is not None:
            out.append((ddir / self.name, "data"))
            out.append((ddir, "data"))
        env = os.environ.get(self._env_var())
        if env:
            out.append((Path(env).expanduser(), "data"))
        cdir = Path(cache_dir).expanduser() if cache_dir is not None else default_cache_dir()
        out.append((cdir / self.name, "cache"))
        return out

    def _find_folder(self, data_dir, cache_dir) -> Path | None:
        ddir = resolve_data_dir(data_dir)
        for folder, _ in self._candidates(ddir, cache_dir):
            if (folder / LABELS_FILE).is_file() and self._name_matches(folder):
                return folder
        return None

    def _name_matches(self, folder: Path) -> bool:
        """A folder whose dataset.json names another data set is not ours (generic: any)."""
        if not self.attributes:
            return True
        declared = self._read_meta(folder).get("name")
        return not declared or normalize_attribute(declared) == normalize_attribute(self.name)

    def _missing_message(self, data_dir, cache_dir) -> str:
        ddir = resolve_data_dir(data_dir)
        looked = [str(f) for f, _ in self._candidates(ddir, cache_dir)]
        dd = ("no data folder given (use --data-dir DIR or set $MTLBENCH_DATA_DIR)" if ddir is None
              else f"data folder: {ddir}")
        found = [f for f in find_in_subfolders(ddir, (LABELS_FILE,), skip=(ddir / self.name,)
                                               if ddir is not None else ())
                 if self._name_matches(f)]
        hint = data_dir_hint(found, LABELS_FILE, ddir, self.name) if found else ""
        return (f"{self.name}: the data is not available locally ({dd}).\n"
                + (f"  {hint}.\n" if hint else "")
                + f"  looked for {LABELS_FILE} and {FEATURES_FILE} in: {', '.join(looked)}\n"
                f"{LAYOUT_HELP}\n"
                + (f"problems: the attributes in your labels.csv (the paper used: "
                   f"{', '.join(self.attributes)})\n" if self.attributes else "")
                + f"get the data: {self.get_it}\n"
                f"no checksum is defined: this data set has no canonical public copy.\n"
                + ("" if hint else
                   "without a copy: --datasets synthetic-attributes is generated data of the "
                   "same layout and scale (users labelling shared items), to try the models "
                   "and the protocol"))

    def _read_meta(self, folder: Path) -> dict:
        p = folder / META_FILE
        if not p.is_file():
            return {}
        try:
            meta = json.loads(p.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise DatasetUnavailableError(f"{self.name}: {p} is not valid JSON ({exc})") from None
        return meta if isinstance(meta, dict) else {}

    def _labels(self, folder: Path):
        p = folder / LABELS_FILE
        key = ("labels",) + _file_key(p)
        if key not in self._cache:
            self._cache = {k: v for k, v in self._cache.items() if k[0] != "labels"}
            users, items, attrs, y = _read_labels(p, f"{self.name} ({folder})")
            if self.attribute_aliases:
                al = self.attribute_aliases
                attrs = np.array([al.get(a, a) for a in attrs], dtype=object)
            self._cache[key] = (users, items, attrs, y)
        return self._cache[key]

    def _features(self, folder: Path, where: str):
        fp = folder / FEATURES_FILE
        if not fp.is_file():
            raise DatasetUnavailableError(
                f"{where}: {FEATURES_FILE} is missing (found {LABELS_FILE}).\n{LAYOUT_HELP}")
        ip = folder / ITEMS_FILE
        key = (("features", self.n_components) + _file_key(fp)
               + (_file_key(ip) if ip.is_file() else ()))
        if key in self._cache:
            return self._cache[key]
        F = check_features(load_npy(fp, where), where, fp)
        if ip.is_file():
            ids, note = read_text_lines(ip, where)
            while ids and ids[-1] == "":
                ids.pop()
            if len(ids) != F.shape[0]:
                raise DataValidationError(
                    f"{where}: {ip} lists {len(ids)} item ids but {fp} has {F.shape[0]} rows")
            if len(set(ids)) != len(ids):
                raise DataValidationError(f"{where}: {ip} contains duplicate item ids")
        else:
            ids, note = [str(i) for i in range(F.shape[0])], None
        scores, rec = pca(F, None if self.n_components is None else int(self.n_components))
        self._cache = {k: v for k, v in self._cache.items() if k[0] != "features"}
        self._cache[key] = (scores, ids, rec, note)
        return self._cache[key]


class Shoes(PersonalizedAttributes):
    name = "shoes"
    description = ("Shoes (Kovashka & Grauman IJCV 2015): 14,658 shoe images, 7 attributes, "
                   "~90k personal labels; needs your local copy")
    source = ("Kovashka & Grauman, Discovering attribute shades of meaning with the crowd, "
              "IJCV 2015; features GIST + colour histogram (WhittleSearch, Kovashka et al. "
              "CVPR 2012)")
    attributes = ("brown", "comfortable", "fashionable", "formal", "open", "ornate", "pointy")
    attribute_aliases = {"br": "brown", "cm": "comfortable", "fa": "fashionable", "fm": "formal",
                         "op": "open", "or": "ornate", "on": "ornate", "pt": "pointy"}
    get_it = ("ask the authors of 'Discovering attribute shades of meaning with the crowd' "
              "(A. Kovashka, K. Grauman) for the per-user labels; no public address is known; "
              "convert with `mtlbench import-attributes --name shoes`")


class SUN(PersonalizedAttributes):
    name = "sun"
    description = ("SUN attributes (Kovashka & Grauman IJCV 2015): 14,340 scene images, "
                   "5 attributes, ~65k personal labels; needs your local copy")
    source = ("Kovashka & Grauman, IJCV 2015, on SUN Attribute images (Patterson & Hays 2012); "
              "features 2048-d Inception-V3")
    attributes = ("cluttered", "modern", "open_area", "rustic", "soothing")
    attribute_aliases = {"cl": "cluttered", "mo": "modern", "oa": "open_area",
                         "opening_area": "open_area", "ru": "rustic", "so": "soothing",
                         "soothe": "soothing"}
    get_it = ("ask the authors of 'Discovering attribute shades of meaning with the crowd' "
              "(A. Kovashka, K. Grauman) for the per-user labels; no public address is known; "
              "convert with `mtlbench import-attributes --name sun`")


def iter_datasets() -> Iterable[type[PersonalizedAttributes]]:
    return (PersonalizedAttributes, Shoes, SUN)


@hookimpl
def register_datasets(register):
    for cls in iter_datasets():
        register(cls)


@hookimpl
def register_commands(cli):
    cli.add_command(_import_command(PersonalizedAttributes))
