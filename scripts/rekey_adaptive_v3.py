"""Move a results store's units of the adaptive search version 2 to version 3 without refitting
the units whose result version 3 cannot change.  A store-maintenance script, run once for the
republication of 2026-11-26; kept because any store of that time needs the same step.

Version 3 differs from version 2 only after the budget is spent: it goes on extending while
the best point sits at a non-bound edge.  At the budget, version 2 records exactly that case as
``budget_exhausted`` (the rule still asked to extend).  So a version-2 unit that did *not*
exhaust its budget has, under version 3, the same trace, selection, refit and scores: it is the
version-3 result (``tests/test_search.py::test_version_3_is_version_2_whenever_version_2_did_not_
exhaust_the_budget`` checks the premise).  This script

1. plans the units of ``--datasets`` (``--reps``, ``--seed``) twice, with the searcher's version
   set to "2" and to "3", which pairs every version-2 key with its version-3 key;
2. for each pair whose version-2 unit is in the store, finished, and did not exhaust its
   budget, moves the unit (row, per-task scores, arrays) to the version-3 key and says so in
   its ``message`` ("re-keyed from ... without refitting ...");
3. deletes the version-2 units that did exhaust their budget (``compare`` then computes them
   under version 3) and leaves everything else alone.

    cp results/published.sqlite /tmp/v3.sqlite          # work on a copy
    python scripts/rekey_adaptive_v3.py /tmp/v3.sqlite --data-dir ../shared/data \\
        --datasets simulated "simulated[seed=1]" "simulated[seed=2]" school landmine lenk movielens
"""
from __future__ import annotations

import argparse
import json
import sqlite3
import sys


def plan_keys(datasets, reps, seed, data_dir, version):
    import os
    import tempfile

    from mtlbench import api
    from mtlbench.search import AdaptiveSearcher

    tmp_store = os.path.join(tempfile.mkdtemp(), "plan.sqlite")  # planning only: stays empty

    old = AdaptiveSearcher.version
    AdaptiveSearcher.version = version
    try:  # UnitSpec.key is computed when read: read it while the version is set
        p = api.plan(datasets, reps=reps, seed=seed, data_dir=data_dir, jobs=1,
                     store=tmp_store, search="adaptive")
        return {(s.label, s.problem, s.rep): s.key for s in p.specs}
    finally:
        AdaptiveSearcher.version = old


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("store")
    ap.add_argument("--datasets", nargs="+", required=True)
    ap.add_argument("--reps", type=int, default=15)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--data-dir", default=None)
    a = ap.parse_args()
    from mtlbench.search import AdaptiveSearcher

    if AdaptiveSearcher.version != "3":
        sys.exit(f"this mtlbench's adaptive search is version {AdaptiveSearcher.version}, not 3")
    v2 = plan_keys(a.datasets, a.reps, a.seed, a.data_dir, "2")
    v3 = plan_keys(a.datasets, a.reps, a.seed, a.data_dir, "3")
    assert v2.keys() == v3.keys()
    con = sqlite3.connect(a.store)
    moved = dropped = absent = already = 0
    with con:
        for ident, old in v2.items():
            new = v3[ident]
            row = con.execute("SELECT status, diagnostics FROM units WHERE key = ?",
                              (old,)).fetchone()
            if row is None:
                absent += 1
                continue
            if con.execute("SELECT 1 FROM units WHERE key = ?", (new,)).fetchone():
                already += 1
                continue
            status, diag = row
            search = (json.loads(diag) if diag else {}).get("search") or {}
            if status != "ok" or search.get("budget_exhausted") is not False:
                for table in ("units", "task_scores", "arrays"):
                    con.execute(f"DELETE FROM {table} WHERE key = ?", (old,))
                dropped += 1
                continue
            note = (f"re-keyed from {old} (adaptive search v2 -> v3) without refitting: the v2 "
                    "search did not exhaust its budget, so v3 gives the same result")
            con.execute("UPDATE units SET key = ?, message = CASE WHEN message IS NULL OR "
                        "message = '' THEN ? ELSE message || ' | ' || ? END WHERE key = ?",
                        (new, note, note, old))
            for table in ("task_scores", "arrays"):
                con.execute(f"UPDATE {table} SET key = ? WHERE key = ?", (new, old))
            moved += 1
    con.close()
    print(f"{len(v2)} planned units: {moved} re-keyed to v3, {dropped} v2 units removed "
          f"(budget exhausted or not ok: compute them under v3), {absent} not in the store, "
          f"{already} already under v3")


if __name__ == "__main__":
    main()
