"""The grid of work units and its execution (supervised local processes or a Dask cluster).

Layout (no import cycles: ``dask`` and ``local`` import ``unit`` only):

* :mod:`.unit` — one unit: :class:`UnitSpec` (its identity and key), :class:`UnitResult`,
  :func:`execute_unit` (never raises), time limits;
* :mod:`.plan` — problems, units, checks before any unit runs, expected unit times;
* :mod:`.local` — supervised worker processes (``--jobs N``; serial runs too);
* :mod:`.dask` — a Dask distributed cluster (``--scheduler``);
* :mod:`.run` — :func:`run_units` ties them to the results store: it skips finished units,
  claims the units it will compute, dispatches the longest-expected first and writes each
  result as it arrives.
"""
from __future__ import annotations

from ..protocol import PROTOCOL_VERSION
from .plan import (check_overrides, check_problems_load, expected_seconds, plan_units,
                   resolve_problems)
from .run import (Reporter, RunInterrupted, RunReport, default_jobs, longest_first_as_timed,
                  pending_units, run_units)
from .unit import (UnitResult, UnitSpec, execute_unit, failed_result, load_problem, problem_id,
                   time_limit)

__all__ = ["UnitSpec", "UnitResult", "RunReport", "Reporter", "plan_units", "execute_unit",
           "run_units", "pending_units", "resolve_problems", "check_problems_load",
           "check_overrides", "failed_result", "load_problem", "problem_id", "time_limit",
           "expected_seconds", "longest_first_as_timed", "default_jobs", "RunInterrupted",
           "PROTOCOL_VERSION"]
