"""The leaderboard as typed records: these dataclasses ARE the published JSON schema.

:func:`mtlbench.report.leaderboard.build_leaderboard` returns a :class:`Leaderboard`; the
markdown, JSON and CSV are rendered from it (:mod:`mtlbench.report.render`), ``publish`` writes
its JSON and ``import-results`` reads the JSON back (:meth:`Leaderboard.from_json`).  Every
record turns into JSON with ``to_json()`` (a dict whose keys are the field names, in field
order) and back with ``from_json(data)``; ``from_json(x.to_json())`` equals ``x``.  A key a
record does not know is ignored when reading; a key it knows but the file lacks (a file
written by an older version) reads as the field's default, else None ("not recorded").

Records also read like the JSON they define (``lb["rows"][0]["cells"]["lenk"]["mean"]`` is
``lb.rows[0].cells["lenk"].mean``), so code written against the published dict keeps working;
the report itself uses attributes.  The schema is documented in ``docs/reports.md``.
"""
from __future__ import annotations

import dataclasses
import types
import typing
from dataclasses import dataclass, field
from typing import Any, ClassVar, Mapping

#: the format written by this version; ``ACCEPTED_FORMATS`` are read back
#: 2: per-unit records, search columns; 3: the selected search fit's and the refit's
#: convergence counted apart, degenerate selections, search fits that raised; 4: a table
#: per metric (``metric``, cells' ``values``, rows' ``mean`` and ``delta_vs_baseline``), every
#: unit's ``target_kind``, ``metrics`` and ``task_metrics``
FORMAT_VERSION = "mtlbench-leaderboard/4"
ACCEPTED_FORMATS = (FORMAT_VERSION, "mtlbench-leaderboard/3", "mtlbench-leaderboard/2")


class JsonRecord:
    """Base of the leaderboard's records: JSON out and back, read access by JSON key.

    ``OPTIONAL_KEYS``: fields written only when not None (a key whose absence means
    something, e.g. a unit's own ``task_names`` only when they differ from the table's)."""

    OPTIONAL_KEYS: ClassVar[frozenset[str]] = frozenset()

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for f in dataclasses.fields(self):  # type: ignore[arg-type]
            value = getattr(self, f.name)
            if value is None and f.name in self.OPTIONAL_KEYS:
                continue
            out[f.name] = _encode(value)
        return out

    @classmethod
    def from_json(cls, data: Mapping[str, Any]):
        if not isinstance(data, Mapping):
            raise TypeError(f"{cls.__name__}.from_json needs a JSON object, got "
                            f"{type(data).__name__}")
        hints = _hints(cls)
        kwargs = {}
        for f in dataclasses.fields(cls):  # type: ignore[arg-type]
            if f.name in data:
                kwargs[f.name] = _decode(hints[f.name], data[f.name])
            elif f.default is not dataclasses.MISSING:
                kwargs[f.name] = f.default
            elif f.default_factory is not dataclasses.MISSING:
                kwargs[f.name] = f.default_factory()
            else:
                kwargs[f.name] = None
        return cls(**kwargs)

    # read like the published JSON
    def __getitem__(self, key: str) -> Any:
        if key in _names(type(self)):
            return getattr(self, key)
        raise KeyError(key)

    def get(self, key: str, default: Any = None) -> Any:
        return getattr(self, key) if key in _names(type(self)) else default

    def __contains__(self, key: object) -> bool:
        return key in _names(type(self))


_HINTS: dict[type, dict[str, Any]] = {}


def _hints(cls: type) -> dict[str, Any]:
    if cls not in _HINTS:
        _HINTS[cls] = typing.get_type_hints(cls)
    return _HINTS[cls]


_NAMES: dict[type, frozenset[str]] = {}


def _names(cls: type) -> frozenset[str]:
    if cls not in _NAMES:
        _NAMES[cls] = frozenset(f.name for f in dataclasses.fields(cls))  # type: ignore[arg-type]
    return _NAMES[cls]


def _encode(value: Any) -> Any:
    if isinstance(value, JsonRecord):
        return value.to_json()
    if isinstance(value, list):
        return [_encode(v) for v in value]
    if isinstance(value, dict):
        return {k: _encode(v) for k, v in value.items()}
    return value


def _decode(tp: Any, value: Any) -> Any:
    """``value`` read from JSON as the annotated type ``tp`` (records, lists and dicts of
    records; anything else passes unchanged)."""
    if value is None:
        return None
    origin = typing.get_origin(tp)
    if origin in (typing.Union, types.UnionType):
        for arg in typing.get_args(tp):
            if arg is not type(None):
                return _decode(arg, value)
    if isinstance(tp, type) and issubclass(tp, JsonRecord) and isinstance(value, Mapping):
        return tp.from_json(value)
    if origin is list and isinstance(value, list):
        (item,) = typing.get_args(tp) or (Any,)
        return [_decode(item, v) for v in value]
    if origin is dict and isinstance(value, Mapping):
        _, item = typing.get_args(tp) or (str, Any)
        return {k: _decode(item, v) for k, v in value.items()}
    return value


# ================================================================================ records
@dataclass
class Cell(JsonRecord):
    """One (model, problem): the table's metric over repetitions and the test against the best.

    ``values``: the metric per finished repetition (aligned with ``reps``), in the table's
    units (x 100 for a share or an AUC); ``test_auc_x100`` the same in an AUC table (the only
    field of files of format 3 and earlier: :attr:`scores` reads either).  ``not_recorded``:
    finished units without a value of the metric (stored before it was recorded, undefined
    or failed).  ``p_value``: two-sided Wilcoxon signed-rank p of best - model over the
    ``n_pairs`` repetitions both finished (:func:`mtlbench.report.stats.wilcoxon_p`);
    ``p_holm`` its Holm-adjusted value within the column; ``significantly_worse``:
    ``p_holm < alpha`` (None for the best cell and untested cells)."""

    OPTIONAL_KEYS: ClassVar[frozenset[str]] = frozenset({"test_auc_x100"})

    n: int
    failed: int
    mean: float | None
    std: float | None
    reps: list[int]
    test_auc_x100: list[float] | None = None
    best: bool = False
    p_value: float | None = None
    p_holm: float | None = None
    n_pairs: int = 0
    significantly_worse: bool | None = None
    values: list[float] = field(default_factory=list)
    not_recorded: int = 0

    @property
    def scores(self) -> list[float]:
        """The values per repetition (``values``, or ``test_auc_x100`` of an older file)."""
        return self.values or list(self.test_auc_x100 or [])


@dataclass
class SearchSummary(JsonRecord):
    """Per model, the hyperparameter searches of its finished units (read from each unit's
    stored trace): fits per unit, selections at a declared bound or at a non-bound edge,
    convergence of the selected search fit and of the refit (each counted apart, with the
    units that recorded nothing), degenerate selections and search fits that raised.  A
    count is None when no unit recorded it (and in files of format 2, which did not count
    it); ``*_units`` name the units (``"<problem> rep <r>"``)."""

    units: int
    budget: list[int]
    fits_min: int | None
    fits_max: int | None
    at_bound: int | None
    at_bound_params: list[str]
    at_edge: int | None
    at_edge_params: list[str]
    selected_not_converged: int | None = None
    selected_converged_unknown: int | None = None
    refit_not_converged: int | None = None
    refit_converged_unknown: int | None = None
    degenerate: int | None = None
    degenerate_unknown: int | None = None
    degenerate_units: list[str] = field(default_factory=list)
    failed_fits: int | None = None
    failed_fit_units: list[str] = field(default_factory=list)
    #: search fits (of every unit) that did not converge, of those that recorded it; the
    #: units with such fits and their counts
    search_not_converged: int | None = None
    search_converged_recorded: int | None = None
    search_not_converged_units: list[str] = field(default_factory=list)


@dataclass
class TaskCounts(JsonRecord):
    """Per (problem, repetition, task) pairs: the model's task test AUC higher / equal
    (|diff| <= 1e-12) / lower than the baseline's."""

    win: int
    tie: int
    loss: int


@dataclass
class WinTieLoss(TaskCounts):
    """:class:`TaskCounts` over every problem, and per problem."""

    per_problem: dict[str, TaskCounts] = field(default_factory=dict)


@dataclass
class Row(JsonRecord):
    """One model of the table (rows are sorted by ``avg_rank``)."""

    model: str
    avg_rank: float | None
    reps_finished: int
    search: SearchSummary
    failed: int
    fewer_reps: bool
    planned_units: int
    finished_units: int
    missing_units: int
    mean_test_auc_x100: float | None
    near_chance: bool
    win_tie_loss: WinTieLoss | None
    time_total_s: float
    plugin: list[str]
    cells: dict[str, Cell]
    #: units imported from published files (``import-results``), and those of them recomputed
    #: and found equal (``--verify``); 0 in files written before imports were marked
    imported_units: int = 0
    verified_units: int = 0
    #: the mean over problems of the table's metric (its units); ``mean_test_auc_x100`` the
    #: same in an AUC table (None otherwise)
    mean: float | None = None
    #: Δ% over the baseline (LibMTL's Δp, docs/reports.md): 100 x the mean relative
    #: improvement of the metric over the baseline's on paired repetitions, signed so that
    #: positive is better, averaged over problems; None for the baseline or without pairs
    delta_vs_baseline: float | None = None
    #: the model's loss is invariant to a shift of its scores (``MTLModel.shift_invariant_loss``):
    #: a threshold metric's value is not a decision it learned
    shift_invariant: bool = False


@dataclass
class WeakComparison(JsonRecord):
    """A comparison that cannot reach significance: too few pairs for the test."""

    model: str
    pairs: int
    min_attainable_p: float


@dataclass
class SmallNColumn(JsonRecord):
    """A column with comparisons that cannot be marked (``all``: none of its cells can)."""

    problem: str
    models: list[WeakComparison]
    comparisons: int
    all: bool


@dataclass
class FriedmanResult(JsonRecord):
    """Friedman test on a (blocks x models) array; ``reason`` says why it was not computed."""

    OPTIONAL_KEYS: ClassVar[frozenset[str]] = frozenset({"reason", "blocks_are"})

    blocks: int
    models: int
    statistic: float | None
    p_value: float | None
    reason: str | None = None
    blocks_are: str | None = None


@dataclass
class Tests(JsonRecord):
    """The statistics of a table and how to read them."""

    alpha: float
    pairwise_test: str
    correction: str
    marker: str
    marker_meaning: str
    small_n_columns: list[SmallNColumn]
    friedman_over_problem_reps: FriedmanResult
    friedman_over_problems: FriedmanResult | None
    ranked_models: list[str]


@dataclass
class Machine(JsonRecord):
    host: str
    cpu_count: Any
    platform: Any
    units: int
    # the CPU's model name and widest vector ISA (written only where the units recorded it;
    # units of older mtlbench versions did not)
    cpu: Any = None

    OPTIONAL_KEYS: ClassVar[frozenset[str]] = frozenset({"cpu"})


@dataclass
class Provenance(JsonRecord):
    """Where the table's numbers come from: versions, protocol, fingerprints, machines, times."""

    generated_at: str
    dataset: str
    mtlbench_versions: list[Any]
    plugin_versions: list[Any]
    numpy_versions: list[Any]
    scipy_versions: list[Any]
    python_versions: list[Any]
    protocol: dict[str, Any]
    seed: Any
    planned_reps: list[Any]
    dataset_params: dict[str, Any] | None
    data_fingerprints: dict[str, list[str]]
    split_fingerprints: dict[str, list[str]]
    split_fingerprints_consistent: bool
    split_digest: str
    machines: list[Machine]
    units: int
    units_ok: int
    units_failed: int
    time_total_s: float
    first_started_at: str | None
    last_finished_at: str | None


#: the unit columns a published unit record carries (what ``import-results`` writes back)
UNIT_FIELDS = ("key", "model", "problem", "rep", "seed", "status", "best_params", "val_auc",
               "test_auc", "n_tasks", "dropped_tasks", "split_fingerprint", "data_fingerprint",
               "protocol", "dataset_params", "model_config", "versions", "n_iter", "time_total",
               "time_select", "time_fit", "diagnostics", "message", "started_at", "finished_at",
               "host", "provenance", "origin", "target_kind", "metrics")


@dataclass
class UnitRecord(JsonRecord):
    """One unit as published: its store columns (``UNIT_FIELDS``), the search trace and its
    summary, what the report read from them (the selected search fit's and the refit's
    convergence, a degenerate selection, the number of search fits that raised), and per task the
    test AUC and number of test labels (in the order of the table's ``task_names[problem]``;
    ``task_names`` here only when this unit's tasks differ); ``origin`` only for a unit the
    store had imported."""

    OPTIONAL_KEYS: ClassVar[frozenset[str]] = frozenset({"task_auc", "n_test", "task_names",
                                                          "origin", "task_metrics",
                                                          "target_kind", "metrics"})

    key: str
    model: str
    problem: str
    rep: int
    seed: Any
    status: str
    best_params: Any
    val_auc: float | None
    test_auc: float | None
    n_tasks: Any
    dropped_tasks: Any
    split_fingerprint: str | None
    data_fingerprint: str | None
    protocol: Any
    dataset_params: Any
    model_config: Any
    versions: Any
    n_iter: Any
    time_total: Any
    time_select: Any
    time_fit: Any
    diagnostics: Any
    message: str | None
    started_at: str | None
    finished_at: str | None
    host: str | None
    provenance: Any
    search: dict[str, Any]
    trace: list[dict[str, Any]]
    selected_fit_converged: bool | None = None
    refit_converged: bool | None = None
    degenerate: bool | None = None
    failed_fits: int | None = None
    target_kind: str | None = None
    metrics: dict[str, Any] | None = None
    task_auc: list[float] | None = None
    n_test: list[int] | None = None
    task_names: list[str] | None = None
    #: None: computed in the store published; "imported" / "verified": the store had it from
    #: another published file (``import-results``; "verified": recomputed there and equal)
    origin: str | None = None
    #: per metric, the test value of every task (``task_names`` order; null: undefined)
    task_metrics: dict[str, list[float | None]] | None = None


@dataclass
class Leaderboard(JsonRecord):
    """The leaderboard of one dataset: the single source of its markdown, JSON and CSV."""

    format: str
    dataset: str
    problems: list[str]
    models: list[str]
    baseline: str | None
    sort_key: str
    seed: Any
    planned_reps: int | None
    absent_models: list[str]
    complete: bool
    left_out: dict[str, int]
    scale: str
    reps_differ: bool
    reps_per_cell: list[int]
    rows: list[Row]
    tests: Tests
    notes: list[str]
    provenance: Provenance
    #: the metric of the table (files before format 4: the AUC), its direction, and how the
    #: data set's targets were binarized ("" when they were not)
    metric: str = "auc"
    higher_is_better: bool = True
    binarized: str = ""
    #: the other metrics recorded for the data set's target kind (their tables beside)
    other_metrics: list[str] = field(default_factory=list)
    task_names: dict[str, list[str]] = field(default_factory=dict)
    units: list[UnitRecord] = field(default_factory=list)

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> "Leaderboard":
        """Read a published leaderboard (``ValueError`` when ``data`` is not one of the
        formats this version reads)."""
        fmt = data.get("format") if isinstance(data, Mapping) else None
        if fmt not in ACCEPTED_FORMATS:
            raise ValueError(f"not a leaderboard this version reads: format {fmt!r} (reads "
                             f"{', '.join(ACCEPTED_FORMATS)})")
        return super().from_json(data)

    def row(self, model: str) -> Row | None:
        return next((r for r in self.rows if r.model == model), None)


__all__ = ["FORMAT_VERSION", "ACCEPTED_FORMATS", "JsonRecord", "Cell", "SearchSummary",
           "TaskCounts", "WinTieLoss", "Row", "WeakComparison", "SmallNColumn",
           "FriedmanResult", "Tests", "Machine", "Provenance", "UNIT_FIELDS", "UnitRecord",
           "Leaderboard"]
