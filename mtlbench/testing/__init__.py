"""Conformance kit for mtlbench plugins: reusable checks plus a pytest plugin.

A plugin author gets the whole kit by subclassing in a test file::

    from mtlbench.testing import ModelConformance, DatasetConformance

    class TestMeanReg(ModelConformance):
        model_class = MeanReg          # the MTLModel subclass under test
        params = {}                    # optional constructor overrides for the checks

    class TestMyData(DatasetConformance):
        dataset = MyDataset            # a Dataset subclass or instance

and runs plain ``pytest``.  The same checks are plain functions (``check_model``,
``check_dataset`` and the ``check_*`` they call) usable from any script; each raises
:class:`ConformanceError` (an ``AssertionError``) whose message names the plugin, the check and
what to fix.

Model checks (why each matters for the benchmark):

* ``check_model_metadata`` - registry ``name``, ``paper``, ``search_space`` mapping, an
  ``__init__`` with defaults for every parameter and no ``*args``/``**kwargs``;
* ``check_clone`` - scikit-learn ``clone`` and a ``get_params``/``set_params`` round trip keep
  every hyperparameter unchanged (the protocol clones a model for every grid point);
* ``check_search_space`` - every key is an ``__init__`` parameter, every entry a declaration
  or a non-empty list of distinct JSON-able values (they are stored with results), every
  ordered parameter with a start range of two or more distinct values and bound expressions
  naming only problem dimensions and searched parameters (the registration check), and both
  ends of each start range accepted by ``fit``; the adaptive search starts every model from
  the same 12-point design (``max_grid``, if set, limits the Cartesian product of the grids
  that ``--search grid`` fits);
* ``check_fit_shapes`` - on tasks of different sizes (fewer and more samples than features),
  ``fit`` returns ``self``, leaves hyperparameters and the data untouched, and
  ``decision_function`` returns finite float scores of shape (n,) for every task (also for a
  single row); ``coef_`` is (d, T), ``feature_groups_`` (d,), ``task_groups_`` (T,),
  ``diagnostics_`` JSON-able, when present;
* ``check_refit`` - the same object refitted on a problem with another number of tasks forgets
  the first fit;
* ``check_deterministic`` - two fits give bit-identical scores even when the global numpy
  random state differs (results must be a function of data, seed and hyperparameters);
* ``check_pickle`` - the class and a fitted model survive a plain ``pickle`` round trip with
  identical scores (needed for parallel and distributed runs);
* ``check_warm_start`` - when ``supports_warm_start`` is true, ``fit(tasks, init=other)`` with a
  model fitted at another grid point works; when the model also declares ``convex = True``
  the warm-started fit reaches the cold fit's objective (or scores) within ``rtol`` (1e-3);
* ``check_objective_history`` - ``objective_history_`` (when present) holds finite floats, and is
  non-increasing (relative tolerance 1e-8) when the model declares ``monotone_objective = True``;
* ``check_beats_chance`` - mean per-task test AUC > ``min_auc`` (0.6) on a small version of the
  paper's simulated problem, with the default hyperparameters or, failing that, the model's
  own search (its 12-point starting design) under the benchmark protocol.

A model may declare ``kit_params`` (a dict of constructor overrides, e.g. fewer iterations)
that the kit uses instead of the defaults to keep the checks fast.

Dataset checks: ``check_dataset_metadata`` (name, description, source, layout_help strings),
``check_dataset_problems`` (a non-empty list of distinct names), ``check_dataset_params``
(a JSON-able dict), ``check_dataset_availability`` (one of :data:`AVAILABILITY_VALUES`),
``check_dataset_load`` (a valid :class:`~mtlbench.data.TaskSet`, at least one task the protocol
can split, consistent ground truth in ``meta``) and ``check_dataset_deterministic`` (two loads
have the same fingerprint).  Data that is not available raises :class:`DataNotAvailable`
(pytest: a skip with the reason), never a download.

The pytest plugin (entry point ``pytest11: mtlbench``) adds

* ``--mtlbench-data-dir DIR`` (default ``$MTLBENCH_DATA_DIR``): where dataset checks look for files;
* ``--mtlbench-conformance NAMES`` : run the kit on *installed* plugins by registry name
  (comma-separated model or dataset names, or ``all``/``models``/``datasets``) without writing
  a test file, e.g. ``pytest --mtlbench-conformance meanreg``;
* fixtures ``mtlbench_data_dir``, ``mtlbench_small_problem`` and ``mtlbench_uneven_problem``.

Layout: :mod:`~mtlbench.testing.model_checks` and :mod:`~mtlbench.testing.dataset_checks`
(the plain functions), :mod:`~mtlbench.testing.conformance` (the pytest classes),
:mod:`~mtlbench.testing.pytest_plugin` (the ``pytest11`` entry point: options and fixtures),
:mod:`~mtlbench.testing.problems` (the kit's test problems).  Everything public is importable
from ``mtlbench.testing``.
"""
from __future__ import annotations

from ._common import AVAILABILITY_VALUES, ConformanceError, DataNotAvailable
from .conformance import DatasetConformance, ModelConformance
from .dataset_checks import (DATASET_CHECKS, check_dataset, check_dataset_availability,
                             check_dataset_deterministic, check_dataset_load,
                             check_dataset_metadata, check_dataset_params,
                             check_dataset_problems)
from .model_checks import (MODEL_CHECKS, check_beats_chance, check_clone, check_deterministic,
                           check_fit_shapes, check_model, check_model_metadata,
                           check_objective_history, check_pickle, check_refit,
                           check_search_space, check_warm_start, run_model_check)
from .problems import small_problem, uneven_problem

__all__ = [
    "ConformanceError", "DataNotAvailable", "ModelConformance", "DatasetConformance",
    "MODEL_CHECKS", "DATASET_CHECKS", "AVAILABILITY_VALUES",
    "check_model", "check_dataset", "small_problem", "uneven_problem", "run_model_check",
    "check_model_metadata", "check_clone", "check_search_space", "check_fit_shapes",
    "check_refit", "check_deterministic", "check_pickle", "check_warm_start",
    "check_objective_history", "check_beats_chance",
    "check_dataset_metadata", "check_dataset_problems", "check_dataset_params",
    "check_dataset_availability", "check_dataset_load", "check_dataset_deterministic",
]
