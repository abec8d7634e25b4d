"""Replay a finished run's unit times through the local runner's dispatch policies.

Reads the units of one data set from a results store (their measured ``time_total``), plans the
same units as a fresh ``mtlbench compare`` would (plan order: repetition by repetition), and
simulates ``--jobs`` workers that each take the next queued unit when free, under

* plan order (what a fresh store got before: no stored times, no cost hints), and
* plan order re-sorted by :func:`mtlbench.runner.longest_first_as_timed` (the runner's policy:
  once a model label has been timed in this run, the queue is sorted longest expected first),
  with the store growing as the simulated units finish.

It prints each policy's makespan beside the lower bound ``sum of unit times / jobs``.  A replay,
not a timing: worker start-up and load effects are left out, so it isolates what the dispatch
order costs.  Example (a finished run of the default job):

    mtlbench compare --store /tmp/default.sqlite
    python benchmarks/bench_dispatch.py /tmp/default.sqlite --dataset simulated --jobs 2
"""
from __future__ import annotations

import argparse
import heapq
import sqlite3

import pandas as pd


class _GrowingStore:
    """The part of a ResultStore the policy reads (unit_times), filled as units finish."""

    def __init__(self) -> None:
        self.rows: list[tuple[str, str, str, float]] = []

    def unit_times(self) -> pd.DataFrame:
        return pd.DataFrame(self.rows, columns=["model", "model_name", "problem", "time_total"])


class _Done:
    def __init__(self, spec) -> None:
        self.spec, self.ok = spec, True


def replay(specs, seconds: dict, jobs: int, reorder=None, store=None) -> float:
    queue, running, clock, n = list(specs), [], 0.0, 0
    while queue or running:
        while len(running) < jobs and queue:
            s = queue.pop(0)
            heapq.heappush(running, (clock + seconds[(s.label, s.problem, s.rep)], n, s))
            n += 1
        clock, _, s = heapq.heappop(running)
        if store is not None:
            store.rows.append((s.label, s.model, s.problem, seconds[(s.label, s.problem, s.rep)]))
        if reorder is not None and queue:
            queue = reorder(queue, _Done(s))
    return clock


def main() -> None:
    from mtlbench.plugins import get_registry
    from mtlbench.protocol import ProtocolConfig
    from mtlbench.runner import longest_first_as_timed, plan_units, resolve_problems
    from mtlbench.selectors import apply_overrides

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("store")
    ap.add_argument("--dataset", default="simulated")
    ap.add_argument("--jobs", type=int, default=2)
    args = ap.parse_args()

    con = sqlite3.connect(f"file:{args.store}?mode=ro", uri=True)
    rows = con.execute("SELECT model, problem, rep, time_total FROM units WHERE dataset = ? AND "
                       "status = 'ok'", (args.dataset,)).fetchall()
    if not rows:
        raise SystemExit(f"no finished units of {args.dataset!r} in {args.store}")
    seconds = {(m, p, r): t for m, p, r, t in rows}
    models = sorted({m for m, *_ in rows})
    reps = 1 + max(r for *_, r, _ in rows)
    reg = get_registry()
    sels = [apply_overrides(reg.model_class(m), {}, m) for m in models]
    specs = [s for s in plan_units(reg, sels, resolve_problems(reg, [args.dataset]),
                                   ProtocolConfig(reps=reps))
             if (s.label, s.problem, s.rep) in seconds]
    total = sum(seconds[(s.label, s.problem, s.rep)] for s in specs)
    plan = replay(specs, seconds, args.jobs)
    store = _GrowingStore()
    timed = replay(specs, seconds, args.jobs,
                   longest_first_as_timed(store, reg, store.unit_times(), specs), store)
    print(f"{len(specs)} units of {len(models)} models on {args.dataset}, {reps} repetitions, "
          f"{args.jobs} workers; sum of unit times {total:.1f} s")
    print(f"{'policy':<44}{'makespan (s)':>14}{'vs bound':>10}")
    print(f"{'lower bound (sum / jobs)':<44}{total / args.jobs:>14.1f}{1.0:>10.3f}")
    for name, t in [("plan order (fresh store before)", plan),
                    ("longest first as timed (runner now)", timed)]:
        print(f"{name:<44}{t:>14.1f}{t / (total / args.jobs):>10.3f}")


if __name__ == "__main__":
    main()
