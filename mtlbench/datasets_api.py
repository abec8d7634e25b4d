"""The public, stable surface for dataset plugin authors (plugin API version
:data:`mtlbench.PLUGIN_API_VERSION`).

A dataset plugin needs the names below and the top-level ``mtlbench`` names (``Dataset``,
``TaskSet``, ``hookimpl``, the errors); the built-in dataset plugins use nothing else (a test
checks it).  Everything else in ``mtlbench.*`` is internal and may change without notice::

    from mtlbench import Dataset, TaskSet, hookimpl
    from mtlbench.datasets_api import DataFile, DataSource, locate, class_counts_ok

Building a task set
    :class:`TaskSet` ``.from_arrays(name, Xs, ys)`` (one feature matrix per task) or
    ``.from_shared_items(name, items, index, labels)`` (tasks labelling rows of one shared
    item matrix, e.g. users rating the same images); labels in {-1, +1}, or real-valued
    targets with ``target_kind=REAL`` (:data:`TARGET_KINDS`: ``"binary"``, ``"real"``).

The protocol's task rule
    Binary targets: :data:`MIN_PER_CLASS` (3: one label of each class in each of train,
    validation and test), :func:`class_counts` (``(n_pos, n_neg)``) and
    :func:`class_counts_ok`; real-valued targets: :func:`targets_ok` (at least
    :data:`MIN_TARGETS` = 4 targets, 2 for test, and not all equal).  A task that fails it is
    dropped by the protocol; a loader that filters tasks applies the same rule.

Files: finding, checking and downloading
    A :class:`DataSource` lists the :class:`DataFile` s of a dataset (path, sha256, size, url,
    how to get it); :func:`locate` finds them in the user's data folder or the cache, or
    downloads what may be downloaded, verifying every checksum; :func:`availability` says
    which without loading (``"in data-dir"``, ``"cached"``, ``"downloadable"``, ``"needs local
    files"``); :func:`describe_files` is the layout help ``mtlbench datasets --layout``
    prints; :func:`corrupt_file_error` is the error to raise for a file that does not parse.

The user's folders
    :func:`resolve_data_dir` (the ``--data-dir`` option, else ``$MTLBENCH_DATA_DIR``; None if
    neither) and :func:`default_cache_dir` (``$MTLBENCH_CACHE_DIR``, else the user cache);
    for a message about missing files, :func:`find_in_subfolders` (folders a little below the
    data folder that hold a file) and :func:`data_dir_hint` (the sentence naming the
    ``--data-dir`` to use instead).

Synthetic data
    The generators of the TFCL paper's simulated data (:func:`make_simulated`, with
    ``BLOCK_FEATURES``, ``USERS_PER_BLOCK``, ``CENTROID_UPPER``), of low-rank tasks at scale
    (:func:`make_low_rank_tasks`) and of attribute data at the Shoes scale
    (:func:`make_attribute_items`, :func:`make_attribute_labels`): seeded, so a given seed
    gives the same data in every release of the same plugin API version, and the same bits on
    every CPU, BLAS kernel and thread count.

Arithmetic that does not depend on the machine
    :func:`reproducible_matmul` (``A @ B``), :func:`reproducible_gram` (``X.T @ X``) and
    :func:`reproducible_eigh` (the k largest eigenpairs of a symmetric matrix): the same bits
    on every CPU, BLAS kernel and thread count, for data a loader computes (a PCA of item
    features; :mod:`mtlbench.reproducible`).  A plain ``@`` or ``scipy.linalg.eigh`` gives
    other last bits on another machine, and so another data fingerprint.
"""
from __future__ import annotations

from .data import Task, TaskSet
from .dataset import (CACHE_DIR_ENV, DATA_DIR_ENV, Dataset, data_dir_hint, default_cache_dir,
                      find_in_subfolders, resolve_data_dir)
from .fetch import (DataFile, DataSource, availability, corrupt_file_error, describe_files,
                    locate)
from .metrics import BINARY, REAL, TARGET_KINDS
from .protocol import MIN_PER_CLASS, MIN_TARGETS, class_counts, class_counts_ok, targets_ok
from .reproducible import reproducible_eigh, reproducible_gram, reproducible_matmul
from .synthetic import (BLOCK_FEATURES, CENTROID_UPPER, USERS_PER_BLOCK,
                        make_attribute_items, make_attribute_labels, make_low_rank_tasks,
                        make_simulated)

__all__ = [
    "Dataset", "Task", "TaskSet",
    "MIN_PER_CLASS", "class_counts", "class_counts_ok", "MIN_TARGETS", "targets_ok",
    "TARGET_KINDS", "BINARY", "REAL",
    "DataFile", "DataSource", "availability", "corrupt_file_error", "describe_files", "locate",
    "resolve_data_dir", "default_cache_dir", "DATA_DIR_ENV", "CACHE_DIR_ENV",
    "find_in_subfolders", "data_dir_hint",
    "make_simulated", "make_low_rank_tasks", "make_attribute_items", "make_attribute_labels",
    "BLOCK_FEATURES", "USERS_PER_BLOCK", "CENTROID_UPPER",
    "reproducible_matmul", "reproducible_gram", "reproducible_eigh",
]
