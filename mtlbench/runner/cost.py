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
    machine: by the median ratio of stored to hinted times of the units of the same problem
    that have both, else of all units that have both, else (an empty store) by the machine
    probe below;
``default``
    :data:`DEFAULT_COST` (a model without a hint and never timed).

Scaling between problems.  A problem is measured by its size (labels x features: one pass
over its data) and its number of tasks T; a time moves between problems by the factor
(size / size_other) ** a * (T / T_other) ** b, with the model's exponents (a, b) from its
optional class attribute ``cost_scaling`` (a mapping with keys ``"size"`` and ``"tasks"``),
default :data:`DEFAULT_SCALING` = (1/2, 0).  The default: unit times grow sublinearly with
size across data sets (a fit's iterations and per-task work vary from one data set to
another): over 14 models on 5 data sets of sizes 3e4 - 1.4e6, a least-squares fit of log time
on log size gave a slope of 0.40 and a residual spread of a factor ~2.3, hence 1/2.  A model
whose work per iteration grows with T faster than with the data (e.g. AMTL's T x T transfer
matrix: O(d T^2) per iteration against O(N d) for the loss) declares a task exponent.  A
factor is left out where a measure of either problem is not known.

Uncertain estimates.  Size and task count do not say how hard a problem is: the same solver
can need many times more iterations on data of the same shape whose labels are nearly a linear
function of the features (a near-interpolating fit) than on noisy labels.  So an estimate that
comes from another *kind* of problem is marked uncertain (:attr:`Expected.unlike` says why): a
``hint`` on a problem not of the reference's kind, a ``scaled`` time none of whose source
problems is of the unit's kind.  Two problems are of one kind when they come from the same
data set with the same dataset parameters apart from ``seed`` (another draw of one generator:
``synthetic-attributes[seed=101]/attr0`` and ``synthetic-attributes/attr3`` are,
``synthetic-attributes[setting=noisy]/attr0``, ``simulated`` or ``shoes[pca=200]/brown`` are
not of the reference's kind) -- read from the problem id, whose dataset part lists the
parameters that differ from the dataset's defaults.  Once a model's units of a problem are
stored, its other units of that problem are estimated from them (``stored``): not uncertain.

The machine probe.  The hints are seconds on one machine; machines differ by several times (a
2-core AVX-512 EPYC runs the same units 2-5x faster than the 2-core machine the hints were
first measured on).  :func:`machine_probe_seconds` times a fixed workload of the kinds units
spend their time on (batched per-task products over a paper-scale problem, T x T and d x d
eigen-, singular-value and linear solves, a Python loop over tasks with small products), one
BLAS thread, the best of five runs (the least disturbed by other load), about 0.2 s in all,
once per process and only when a plan needs it.  The hints are scaled by its ratio to
:data:`REFERENCE_PROBE_SECONDS`, the probe's time on a machine where the hints hold.  It is a
proxy: models whose time goes to BLAS gain more from a wide-vector CPU than those whose time
goes to Python, so one factor is right on average, not per model.
"""
from __future__ import annotations

import functools
import math
import statistics
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Sequence

DEFAULT_COST = 1.0
SIZE_EXPONENT = 0.5
#: exponents of a model without ``cost_scaling``: time ~ size ** 1/2, independent of T
DEFAULT_SCALING: Mapping[str, float] = {"size": SIZE_EXPONENT, "tasks": 0.0}
#: the problem built-in models' ``cost_hint`` is measured on, its size (labels x features) and
#: its number of tasks
REFERENCE_PROBLEM = "synthetic-attributes[seed=101]/attr0"
REFERENCE_SIZE = 9500 * 100  # 190 users x 50 labels, 100 features
REFERENCE_TASKS = 190
REFERENCE_MACHINE = "2 cores (x86-64, OpenBLAS), one unit per core, nothing else running"
SOURCES = ("stored", "scaled", "hint", "default")
#: dataset parameters two problems of one kind may differ in (another draw of one generator)
SAME_KIND_PARAMS = frozenset({"seed"})
#: seconds of :func:`machine_probe_seconds` on a machine where the built-in models' cost_hints
#: hold.  Calibrated from every built-in model's unit on REFERENCE_PROBLEM
#: (``benchmarks/bench_paper_scale.py --dataset-params seed=101 --settings default``, one unit
#: per core) on a faster machine: the median ratio of unit time to hint there (0.335) times the
#: probe's time there (0.028 s, the machine idle, as the probe is meant to measure it).
REFERENCE_PROBE_SECONDS = 0.084


@dataclass(frozen=True)
class Expected:
    """Expected seconds of one unit and where the number comes from (one of :data:`SOURCES`);
    ``note``: how a hint was scaled to this machine; ``unlike``: why the number is uncertain
    (it comes from another kind of problem, module docstring), "" if it is not.  Neither is
    part of equality."""

    seconds: float
    source: str
    note: str = field(default="", compare=False)
    unlike: str = field(default="", compare=False)


@functools.lru_cache(maxsize=4096)
def problem_kind(problem: str) -> tuple[str, tuple[tuple[str, str], ...]]:
    """(dataset name, its parameters in the problem id other than :data:`SAME_KIND_PARAMS`)
    of a problem id such as ``"synthetic-attributes[seed=101,users=40]/attr0"``: two problems
    of one kind have equal kinds (module docstring)."""
    from ..errors import ConfigError
    from ..syntax import parse_selector

    dataset = problem[:problem.rindex("]") + 1] if "]" in problem else problem.split("/")[0]
    try:
        name, params = parse_selector(dataset)
    except ConfigError:           # not a selector: the id is the kind
        return problem, ()
    return name, tuple(sorted((k, repr(v)) for k, v in params.items()
                              if k not in SAME_KIND_PARAMS))


def unlike_reason(problem: str, sources: Sequence[str]) -> str:
    """Why a time measured on ``sources`` (problem ids) is uncertain for ``problem``: "" when
    one of them is of its kind, else a short reason naming the first source."""
    kind = problem_kind(problem)
    if not sources or any(problem_kind(p) == kind for p in sources):
        return ""
    other = problem_kind(sources[0])
    if other[0] != kind[0]:
        return f"another data set than {sources[0]}"
    params = ", ".join(f"{k}={v}" for k, v in sorted(set(kind[1]) ^ set(other[1])))
    return f"other dataset parameters than {sources[0]} ({params})"


def _probe_workload(rng) -> float:
    """The probe's fixed work (module docstring); returns a number so nothing is optimised
    away."""
    import numpy as np

    T, n, d = 190, 50, 100                     # the reference problem's tasks, labels, features
    X = rng.standard_normal((T, n, d))
    y = np.sign(rng.standard_normal((T, n)))
    W = np.zeros((d, T))
    XT = X.transpose(0, 2, 1)
    for _ in range(30):                        # batched per-task loss and gradient passes
        r = np.matmul(X, W.T[:, :, None])[:, :, 0] - y
        G = np.matmul(XT, r[:, :, None])[:, :, 0].T
        W -= 1e-4 * G
        np.maximum(W, 0.0, out=W)
    C = W.T @ W + np.eye(T)
    for _ in range(3):                         # T x T and d x T dense linear algebra
        np.linalg.eigh(C)
        np.linalg.svd(W, full_matrices=False)
        np.linalg.solve(C, W.T)
    acc = 0.0
    for _ in range(5):                         # a Python loop over tasks, small products
        for t in range(T):
            g = X[t].T @ (X[t] @ W[:, t] - y[t])
            acc += float(g @ g)
    return acc


@functools.lru_cache(maxsize=1)
def machine_probe_seconds(repeats: int = 5) -> float:
    """Wall seconds of the probe's workload on this machine, one BLAS thread, best of
    ``repeats`` runs (cached for the process)."""
    import numpy as np
    from threadpoolctl import threadpool_limits

    best = math.inf
    with threadpool_limits(limits=1):
        for _ in range(max(int(repeats), 1)):
            rng = np.random.default_rng(0)
            t0 = time.perf_counter()
            _probe_workload(rng)
            best = min(best, time.perf_counter() - t0)
    return best


def probed_machine_speed() -> float:
    """This machine's unit times over the hints' reference machine's, by the probe (< 1: this
    machine is faster)."""
    return machine_probe_seconds() / REFERENCE_PROBE_SECONDS


def problem_size(summary: Mapping[str, Any]) -> float:
    """Labels x features of a problem, from :meth:`mtlbench.data.TaskSet.summary`."""
    return float(summary["labels"]) * float(summary["features"])


def problem_tasks(summary: Mapping[str, Any]) -> float:
    """Number of tasks of a problem, from :meth:`mtlbench.data.TaskSet.summary`."""
    return float(summary["tasks"])


def scaling_exponents(declared: Any) -> dict[str, float]:
    """The (size, tasks) exponents of a model's ``cost_scaling``: :data:`DEFAULT_SCALING` for
    what is not declared or not a finite number in [0, 4] (a planning aid: a broken
    declaration falls back, it does not stop a run)."""
    out = dict(DEFAULT_SCALING)
    if isinstance(declared, Mapping):
        for key in out:
            try:
                v = float(declared[key])
            except (KeyError, TypeError, ValueError):
                continue
            if math.isfinite(v) and 0.0 <= v <= 4.0:
                out[key] = v
    return out


def _ratio(a: float | None, b: float | None, exponent: float) -> float:
    if not a or not b or not exponent:
        return 1.0
    return (a / b) ** exponent


def _scale(exps: Mapping[str, float], size: float | None, other_size: float | None,
           tasks: float | None = None, other_tasks: float | None = None) -> float:
    return (_ratio(size, other_size, exps["size"])
            * _ratio(tasks, other_tasks, exps["tasks"]))


def expected_unit_seconds(specs: Sequence[Any], history: Any = None,
                          sizes: Mapping[str, float] | None = None,
                          hint_of: Callable[[str], float | None] | None = None,
                          tasks: Mapping[str, float] | None = None,
                          scaling_of: Callable[[str], Any] | None = None,
                          machine_speed: Callable[[], float] | None = None
                          ) -> dict[str, Expected]:
    """Expected seconds of each unit, by key (see the module docstring for the rule).

    ``specs``: :class:`~mtlbench.runner.UnitSpec`; ``history``: a DataFrame with columns model
    (label), model_name, problem, time_total and optionally problem_size and n_tasks (as
    :meth:`mtlbench.store.ResultStore.unit_times` returns); ``sizes`` and ``tasks``: problem
    id -> size and number of tasks of the problems being planned (the measures recorded with
    stored units fill in the rest); ``hint_of``: model name -> its ``cost_hint`` or None;
    ``scaling_of``: model name -> its ``cost_scaling`` or None; ``machine_speed``: called (at
    most once, and only when a hint is used and no unit has both a stored time and a hint)
    for this machine's times over the hints' machine's, e.g. :func:`probed_machine_speed`
    (None, or a failure: 1)."""
    sizes = dict(sizes or {})
    tasks = dict(tasks or {})
    by_label: dict[tuple[str, str], float] = {}
    label_probs: dict[str, dict[str, float]] = {}
    name_probs: dict[str, dict[str, float]] = {}
    if history is not None and len(history):
        for col, known in (("problem_size", sizes), ("n_tasks", tasks)):
            if col not in history.columns:
                continue
            for prob, s in history.groupby("problem")[col]:
                s = s.dropna()
                if len(s) and prob not in known:
                    known[str(prob)] = float(s.median())
        for (label, prob), g in history.groupby(["model", "problem"]):
            by_label[(label, prob)] = float(statistics.median(g.time_total))
            label_probs.setdefault(label, {})[prob] = by_label[(label, prob)]
        for (name, prob), g in history.groupby(["model_name", "problem"]):
            name_probs.setdefault(name, {})[prob] = float(statistics.median(g.time_total))

    hints: dict[str, float | None] = {}
    exponents: dict[str, dict[str, float]] = {}

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

    def exps(name: str) -> dict[str, float]:
        if name not in exponents:
            declared = None
            if scaling_of is not None:
                try:
                    declared = scaling_of(name)
                except Exception:  # noqa: BLE001 - a planning aid only: the default
                    declared = None
            exponents[name] = scaling_exponents(declared)
        return exponents[name]

    def between(name: str, prob: str, other: str) -> float:
        return _scale(exps(name), sizes.get(prob), sizes.get(other),
                      tasks.get(prob), tasks.get(other))

    def from_reference(name: str, prob: str) -> float:
        return _scale(exps(name), sizes.get(prob), REFERENCE_SIZE,
                      tasks.get(prob), REFERENCE_TASKS)

    def scaled(name: str, timed: Mapping[str, float], prob: str) -> float | None:
        # problems of unknown measures count unscaled (e.g. the dispatcher, which knows only
        # the measures stored with finished units)
        vals = [t * between(name, prob, p) for p, t in timed.items()]
        return float(statistics.median(vals)) if vals else None

    # this machine (and problem) against the hints' reference: stored / hinted over timed pairs
    ratios: dict[str, list[float]] = {}      # problem -> ratios of the models timed on it
    name_of = dict(zip(history.model, history.model_name)) if by_label else {}
    for (label, prob), t in by_label.items():
        name = str(name_of[label])
        h = hint(name)
        if h and sizes.get(prob):
            ratios.setdefault(prob, []).append(t / (h * from_reference(name, prob)))
    factors: dict[str | None, tuple[float, str]] = {}   # filled at the first hint

    def machine_factor(prob: str) -> tuple[float, str]:
        if prob in ratios:
            if prob not in factors:
                f = float(statistics.median(ratios[prob]))
                factors[prob] = (f, f"x{f:.2g} for this problem and machine: models timed "
                                    f"here on it against their hints")
            return factors[prob]
        if None not in factors:
            every = [r for rs in ratios.values() for r in rs]
            if every:
                f = float(statistics.median(every))
                how = f"x{f:.2g} for this machine: models timed here against their hints"
            else:
                f, how = 1.0, "unscaled: nothing timed here and no machine probe"
                if machine_speed is not None:
                    try:
                        v = float(machine_speed())
                        if math.isfinite(v) and v > 0:
                            f = v
                            how = f"x{f:.2g} for this machine: a timed probe"
                    except Exception:  # noqa: BLE001 - a planning aid only: unscaled
                        pass
            factors[None] = (f, how)
        return factors[None]

    out: dict[str, Expected] = {}
    for s in specs:
        t = by_label.get((s.label, s.problem))
        if t is not None:
            out[s.key] = Expected(t, "stored")
            continue
        timed = label_probs.get(s.label) or name_probs.get(s.model) or {}
        t = scaled(s.model, timed, s.problem)
        if t is not None:
            out[s.key] = Expected(t, "scaled", unlike=unlike_reason(s.problem, sorted(timed)))
            continue
        h = hint(s.model)
        if h is not None:
            f, how = machine_factor(s.problem)
            out[s.key] = Expected(h * f * from_reference(s.model, s.problem), "hint", how,
                                  unlike_reason(s.problem, [REFERENCE_PROBLEM]))
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
