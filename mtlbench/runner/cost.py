"""Expected seconds of units: stored, scaled from other problems, or from a model's cost hint.

One rule serves the dispatcher (longest expected first, the progress ETA) and the plan's
wall-time estimate (``compare --dry-run``).  For each pending unit, in order of preference:

``stored``
    the median ``time_total`` of finished units of the same model label on the same problem;
``scaled``
    the same label (else the same model under any label) timed on other problems: the median
    over those problems of ``t * (size / size_other) ** SIZE_EXPONENT`` (unscaled where a
    size is not known);
``hint``
    the model class's ``cost_hint`` (seconds of one unit on the reference problem
    :data:`REFERENCE_PROBLEM`, default search and budget, one BLAS thread, on the machine of
    :data:`REFERENCE_MACHINE`), scaled to the unit's problem by size as above and to this
    machine by the median ratio of stored to hinted times of units that have both;
``default``
    :data:`DEFAULT_COST` (a model without a hint and never timed).

The size of a problem is its number of labels times its number of features (one pass over
its data).  Unit times grow sublinearly with it across data sets (a fit's iterations and
per-task work vary from one data set to another): over 14 models on 5 data sets of sizes
3e4 - 1.4e6, a least-squares fit of log time on log size with one intercept per model gave a
slope of 0.40 and a residual spread of a factor ~2.3 (data of the first release's
timings), so :data:`SIZE_EXPONENT` is 1/2 and an extrapolated time is marked as such: between
problems of one data set (e.g. the attributes of Shoes) sizes differ little and the scaled
times are close; across data sets they are a rough guess.
"""
from __future__ import annotations

import statistics
from dataclasses import dataclass
from typing import Any, Callable, Mapping, Sequence

DEFAULT_COST = 1.0
SIZE_EXPONENT = 0.5
#: the problem built-in models' ``cost_hint`` is measured on, and its size (labels x features)
REFERENCE_PROBLEM = "synthetic-attributes[seed=101]/attr0"
REFERENCE_SIZE = 9500 * 100  # 190 users x 50 labels, 100 features
REFERENCE_MACHINE = "2 cores (x86-64, OpenBLAS), one unit per core, nothing else running"
SOURCES = ("stored", "scaled", "hint", "default")


@dataclass(frozen=True)
class Expected:
    """Expected seconds of one unit and where the number comes from (one of :data:`SOURCES`)."""

    seconds: float
    source: str


def problem_size(summary: Mapping[str, Any]) -> float:
    """Labels x features of a problem, from :meth:`mtlbench.data.TaskSet.summary`."""
    return float(summary["labels"]) * float(summary["features"])


def _scale(size: float | None, other: float | None) -> float:
    if not size or not other:
        return 1.0
    return (size / other) ** SIZE_EXPONENT


def expected_unit_seconds(specs: Sequence[Any], history: Any = None,
                          sizes: Mapping[str, float] | None = None,
                          hint_of: Callable[[str], float | None] | None = None
                          ) -> dict[str, Expected]:
    """Expected seconds of each unit, by key (see the module docstring for the rule).

    ``specs``: :class:`~mtlbench.runner.UnitSpec`; ``history``: a DataFrame with columns model
    (label), model_name, problem, time_total and optionally problem_size (as
    :meth:`mtlbench.store.ResultStore.unit_times` returns); ``sizes``: problem id -> size of
    the problems being planned (sizes recorded with stored units fill in the rest);
    ``hint_of``: model name -> its ``cost_hint`` or None."""
    sizes = dict(sizes or {})
    by_label: dict[tuple[str, str], float] = {}
    label_probs: dict[str, dict[str, float]] = {}
    name_probs: dict[str, dict[str, float]] = {}
    if history is not None and len(history):
        if "problem_size" in history.columns:
            for prob, s in history.groupby("problem")["problem_size"]:
                s = s.dropna()
                if len(s) and prob not in sizes:
                    sizes[str(prob)] = float(s.median())
        for (label, prob), g in history.groupby(["model", "problem"]):
            by_label[(label, prob)] = float(statistics.median(g.time_total))
            label_probs.setdefault(label, {})[prob] = by_label[(label, prob)]
        for (name, prob), g in history.groupby(["model_name", "problem"]):
            name_probs.setdefault(name, {})[prob] = float(statistics.median(g.time_total))

    hints: dict[str, float | None] = {}

    def hint(name: str) -> float | None:
        if name not in hints:
            h = None
            if hint_of is not None:
                try:
                    h = hint_of(name)
                    h = float(h) if h is not None and float(h) > 0 else None
                except Exception:  # noqa: BLE001 - a planning aid only: no hint
                    h = None
            hints[name] = h
        return hints[name]

    def scaled(timed: Mapping[str, float], prob: str) -> float | None:
        # problems of unknown size count unscaled (e.g. the dispatcher, which knows only the
        # sizes stored with finished units)
        size = sizes.get(prob)
        vals = [t * _scale(size, sizes.get(p)) for p, t in timed.items()]
        return float(statistics.median(vals)) if vals else None

    # this machine against the hints' reference machine: stored / hinted over timed pairs
    ratios = []
    name_of = dict(zip(history.model, history.model_name)) if by_label else {}
    for (label, prob), t in by_label.items():
        h = hint(str(name_of[label]))
        if h and sizes.get(prob):
            ratios.append(t / (h * _scale(sizes[prob], REFERENCE_SIZE)))
    machine = float(statistics.median(ratios)) if ratios else 1.0

    out: dict[str, Expected] = {}
    for s in specs:
        t = by_label.get((s.label, s.problem))
        if t is not None:
            out[s.key] = Expected(t, "stored")
            continue
        t = scaled(label_probs.get(s.label, {}), s.problem)
        if t is None:
            t = scaled(name_probs.get(s.model, {}), s.problem)
        if t is not None:
            out[s.key] = Expected(t, "scaled")
            continue
        h = hint(s.model)
        if h is not None:
            size = sizes.get(s.problem)
            out[s.key] = Expected(h * machine * _scale(size, REFERENCE_SIZE), "hint")
            continue
        out[s.key] = Expected(DEFAULT_COST, "default")
    return out


def spread_longest_first(seconds: Sequence[float], workers: int) -> float:
    """Wall time of running jobs of these durations on ``workers`` processes, each next
    longest job going to the least loaded process (the local runner's dispatch order)."""
    import heapq

    loads = [0.0] * max(int(workers), 1)
    heapq.heapify(loads)
    for t in sorted(seconds, reverse=True):
        heapq.heappush(loads, heapq.heappop(loads) + t)
    return max(loads) if seconds else 0.0
