"""The solver race (``mtlbench race``): objective against solver time, to a certified optimum.

For one problem and one repetition's training split (:func:`mtlbench.protocol.make_split`,
exactly the data the protocol fits a unit's search on), each model is fitted at stated
hyperparameters by each of its solvers -- its own ``fit`` and the alternatives it registers in
``solvers`` (:mod:`mtlbench.model`) -- and every reported iteration is recorded with the
solver's own clock (:mod:`mtlbench.progress`).

Hyperparameters, for each searched parameter, in this order of precedence: the value given in
the selector (``-m "lasso[rho_ratio=0.05]"``), the value selected by the stored unit of the same
model, problem, repetition and seed (``--from-store``), or the centre of the starting design
(the middle of the declared start range on its scale, clipped to the bounds at this problem:
:func:`centre_params`).

Each solver run is one fresh process (forkserver, like units) with BLAS limited to one thread;
a run that raises or kills its process is recorded as failed, and the race goes on.  The run
sends its progress points as it goes (at most every :data:`SEND_SECONDS`, in time the recorder
does not charge to the solver), so one that outlives ``timeout`` is stopped with the curve it
reached (status "stopped": drawn and timed up to there, marked "stopped at the time limit").
Runs are sequential, so one cannot slow another down.

The reference optimum of each model (:func:`reference_optimum`)
----------------------------------------------------------------
* **certified** -- a run reported a certificate (an upper bound of objective - optimum, e.g. a
  duality gap): the optimum lies in [max(F - certificate), best F found];
* **independent solver** -- a convex model without certificate whose alternative solvers
  (e.g. a cvxpy conic reformulation) ran: the best of their optima, confirmed by the agreement
  check;
* **best found** -- anything else (every non-convex model): the lowest objective over all runs
  and over *reference runs* (:func:`reference_variants`: tolerance parameters divided by 100,
  iteration caps multiplied by 10, other seeds where the model has one).  Never called optimal.

Suboptimality of a run at time t is (F(t) - F_ref) / |F_ref|; the table gives the first time it
is <= 1e-2, 1e-4, 1e-6 (:data:`LEVELS`), the final objective, convergence, iterations and the
last certificate.  Before times of several solvers of one model are compared, their final
objectives must agree within the model's ``solver_agreement_rtol`` (:func:`solver_agreement`);
a disagreement is reported first and loudly.  A model that never reports progress races with its
final point only (its ``fitted_objective(tasks)``, else its last ``objective_history_`` value);
without either it is listed with its time only.

Results are rows (:func:`race_rows`, the ``races`` table of :mod:`mtlbench.store`, the JSON and
CSV output, and what :mod:`mtlbench.report.race_figures` draws).
"""
from __future__ import annotations

from .output import CSV_COLUMNS, csv_records, race_rows, to_json
from .reference import level_times, reference_optimum, solver_agreement
from .running import race_problem, run_entry, run_race, solver_class
from .runs import (DEFAULT_TIMEOUT, LEVELS, RACE_FORMAT, SEND_SECONDS, STOPPED, RaceEntry,
                   RaceResult, Reference, SolverRun)
from .selection import (centre_params, own_solvers, race_entries, race_selections,
                        reference_variants)

__all__ = ["LEVELS", "RaceEntry", "SolverRun", "Reference", "RaceResult", "centre_params",
           "race_selections", "race_entries", "reference_variants", "run_entry",
           "reference_optimum", "solver_agreement", "level_times", "run_race", "race_rows",
           "race_problem", "solver_class", "own_solvers", "csv_records", "to_json",
           "CSV_COLUMNS", "RACE_FORMAT", "DEFAULT_TIMEOUT", "STOPPED", "SEND_SECONDS"]
