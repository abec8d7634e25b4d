"""Rebuild the published results store from the published leaderboard JSON files.

The store that ``scripts/publish_all.sh`` fills (``results/published.sqlite``) is not kept in
version control; ``leaderboards/<dataset>.json`` are the record, one object per unit.  On a
fresh checkout, before republishing after a change to one model, run

    python scripts/restore_store.py restore [--data-dir ../shared/data]

which puts back every published unit whose key this installation computes (same code
fingerprints, plugin versions and search rule: exactly what ``compare`` would store; a unit
published under the previous code fingerprint rule by the code installed now is put back under
its key of this rule, ``mtlbench/rekey.py``), except
repetition 0 (only a run stores the fitted arrays and convergence histories the figures draw
from).  ``compare`` then recomputes repetition 0 and every unit of changed code, and nothing
else;

    python scripts/restore_store.py check

compares every unit of the store with the published unit of the same key (selection, test AUC,
every per-task AUC, bit for bit) and prints the differences: the recomputed repetition-0 units
check that this machine reproduces the published numbers.  ``publish_all.sh`` runs both when its
store does not exist yet.

    python scripts/restore_store.py check --any-code

pairs instead each unit of the store with the published unit of the same model, problem,
repetition, split, protocol (the planned number of repetitions aside) and search space,
whatever code made either, and reports the selections and test scores that differ and the
pairs whose data fingerprints differ: after a change of model code that must keep the answers
(e.g. ``compare --reps 1`` of every model with the new code), it shows that the published
selections and test AUCs come back.

    python scripts/restore_store.py prune [--delete]

lists the store's units made by other code than is installed (superseded by a republication:
the tables leave them out and count them) and, with ``--delete``, removes them; copy the store
first if you may want them back.  Exit status: 0, or 1 if ``check`` found a difference
(``restore`` refuses each file that fails an import check -- e.g. units of generated data
whose data fingerprint this installation does not compute, after a change to the generator --
with one line naming the reason, restores the other files, and then exits with status 2).
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path


def _files(folder: Path) -> list[Path]:
    from mtlbench.report.publish import _is_leaderboard_json

    out = []
    for p in sorted(folder.glob("*.json")):
        data = _is_leaderboard_json(p)
        if data is not None and data.get("units"):
            out.append(p)
    return out


def _prune(path: str, delete: bool) -> int:
    from collections import Counter

    from mtlbench.plugins import get_registry
    from mtlbench.provenance import stale_keys
    from mtlbench.store import ResultStore

    if not Path(path).exists():
        print(f"no store {path}", file=sys.stderr)
        return 2
    with ResultStore(path, readonly=not delete) as store:
        stale = stale_keys(store, get_registry())
        units = store.units(keys=stale)
        why = {}
        for key, model, dataset in zip(units["key"], units["model"], units["dataset"]):
            why.setdefault((model, dataset), "; ".join(stale[key]))
        for (model, dataset), n in sorted(Counter(zip(units["model"], units["dataset"])).items()):
            print(f"{model} {dataset}: {n} unit(s) of other code ({why[model, dataset]})")
        if delete and stale:
            n = store.delete_units(stale)
            print(f"removed {n} unit(s) made by other code than is installed")
        else:
            print(f"{len(stale)} unit(s) made by other code than is installed"
                  + ("" if not stale else "; --delete removes them"))
    return 0


def _check_any_code(files: list[Path], store) -> int:
    """``check --any-code``: print each pair that differs and the counts."""
    from mtlbench.report.importing import check_restored_any_code

    n, same, data_differs, lines = check_restored_any_code(files, store)
    for line in lines:
        print(line)
    print(f"{n} unit(s) of the store paired with published units (any code): {same} with the "
          f"same selection and test AUC, {n - same} differ; {data_differs} pair(s) on data "
          "whose fingerprint differs")
    if not n:
        print("no unit of the store pairs with a published one", file=sys.stderr)
        return 2
    return 1 if same < n else 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("action", choices=("restore", "check", "prune"))
    ap.add_argument("--leaderboards", default="leaderboards", help="published folder")
    ap.add_argument("--store", default="results/published.sqlite")
    ap.add_argument("--data-dir", default=None,
                    help="folder of the real data sets (also $MTLBENCH_DATA_DIR)")
    ap.add_argument("--rep0", action="store_true",
                    help="restore repetition 0 too (the figures then lack their arrays)")
    ap.add_argument("--delete", action="store_true",
                    help="prune: remove the listed units (default: only list them)")
    ap.add_argument("--any-code", action="store_true",
                    help="check: pair units by model, problem, repetition, split, protocol and "
                         "search space, whatever code made them")
    args = ap.parse_args(argv)
    if args.action == "prune":
        return _prune(args.store, args.delete)

    from mtlbench.dataset import resolve_data_dir
    from mtlbench.errors import MTLBenchError
    from mtlbench.report.importing import check_restored, restore_published
    from mtlbench.store import ResultStore

    files = _files(Path(args.leaderboards))
    if not files:
        print(f"no published leaderboard JSON with units in {args.leaderboards}/", file=sys.stderr)
        return 2
    if args.action == "restore":
        ddir = resolve_data_dir(args.data_dir)
        Path(args.store).parent.mkdir(parents=True, exist_ok=True)
        refused = 0
        with ResultStore(args.store) as store:
            for p in files:
                try:
                    restore_published(p, store, data_dir=str(ddir) if ddir else None,
                                      rep0=args.rep0)
                except MTLBenchError as exc:
                    print(f"error: {exc} (its units are left for compare)", file=sys.stderr)
                    refused += 1
        return 2 if refused else 0
    if not Path(args.store).exists():
        print(f"no store {args.store}", file=sys.stderr)
        return 2
    if args.any_code:
        with ResultStore(args.store, readonly=True) as store:
            return _check_any_code(files, store)
    n_all, bad_all = 0, []
    with ResultStore(args.store, readonly=True) as store:
        for p in files:
            n, bad = check_restored(p, store)
            n_all += n
            bad_all += bad
    for line in bad_all:
        print("differs:", line)
    print(f"{n_all} unit(s) of the store compared with the published ones of the same key: "
          f"{n_all - len(bad_all)} equal, {len(bad_all)} differ")
    return 1 if bad_all else 0


if __name__ == "__main__":
    sys.exit(main())
