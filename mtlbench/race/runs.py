"""What a race is made of: its entries (a model selection and a solver), the runs, the
reference optimum of a model and the result, and the race's constants."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping


from ..protocol import ProtocolConfig



#: Relative suboptimality levels of the table (time to reach each).
LEVELS = (1e-2, 1e-4, 1e-6)
RACE_FORMAT = "mtlbench-race/1"
DEFAULT_TIMEOUT = 600.0
#: seconds between two sends of the progress points a race worker has recorded
SEND_SECONDS = 0.25
#: the status of a run stopped at its time limit (its curve is what it reached)
STOPPED = "stopped"
#: Reference runs: tolerance parameters divided by this, iteration caps multiplied by it / 10.
TIGHTEN = 100.0
LONGER = 10


@dataclass(frozen=True)
class RaceEntry:
    """One run of the race: a model at fixed hyperparameters, one of its solvers."""

    model: str                     # registry name
    label: str                     # name[searched params], as in the table
    params: Mapping[str, Any]      # constructor arguments
    origin: Mapping[str, str]      # searched param -> "given" | "store" | "centre"
    solver: str                    # the solver's name
    role: str = "solver"           # "solver" | "reference" (a longer run for the reference)
    variant: str = ""              # what a reference run changes, e.g. "tol/100, max_iter*10"
    convex: bool = False


@dataclass
class SolverRun:
    """What one run produced: its progress points (solver time, iteration, objective,
    certificate), final objective (and where it came from), convergence, iterations."""

    entry: RaceEntry
    status: str                    # "ok" | "failed" | STOPPED (at the time limit)
    message: str = ""
    points: list[dict[str, Any]] = field(default_factory=list)
    elapsed: float | None = None
    final_objective: float | None = None
    objective_source: str | None = None   # "fitted_objective" | "objective_history_"
    converged: bool | None = None
    n_iter: int | None = None
    certificate: float | None = None
    host: str = ""
    started_at: str = ""
    finished_at: str = ""

    def curve(self) -> list[dict[str, Any]]:
        """The reported points, or the final point alone for a run that reported none."""
        if self.points:
            return self.points
        if self.final_objective is not None and self.elapsed is not None:
            return [{"time": self.elapsed, "iteration": self.n_iter, "objective":
                     self.final_objective, "certificate": self.certificate}]
        return []


@dataclass(frozen=True)
class Reference:
    """The reference optimum of one model selection (module docstring)."""

    value: float | None            # F_ref: the best objective found
    kind: str                      # "certified" | "independent solver" | "best found" | "none"
    lower: float | None = None     # a certified lower bound of the optimum
    note: str = ""

    @property
    def certified_to(self) -> float | None:
        """(F_ref - lower) / |F_ref|: levels below this are not certified."""
        if self.value is None or self.lower is None:
            return None
        return max(self.value - self.lower, 0.0) / max(abs(self.value), 1e-300)

    def to_json(self) -> dict[str, Any]:
        return {"value": self.value, "kind": self.kind, "lower": self.lower, "note": self.note,
                "certified_to": self.certified_to}


@dataclass
class RaceResult:
    """A race: the problem, every run, and per model label its reference and agreement."""

    dataset: str
    problem: str
    rep: int
    seed: int
    config: ProtocolConfig
    dataset_params: dict[str, Any]
    split_fingerprint: str
    data_fingerprint: str
    summary: dict[str, Any]
    runs: list[SolverRun]
    references: dict[str, Reference]
    agreements: dict[str, dict[str, Any]]
    provenance: dict[str, Any] = field(default_factory=dict)   # model name -> provenance
    #   (:func:`mtlbench.provenance.unit_provenance`: model and dataset plugin, code)
    versions: dict[str, Any] = field(default_factory=dict)
    race_id: str = ""


# ----------------------------------------------------------------------------- selections
