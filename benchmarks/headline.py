"""The headline table of the published leaderboards: per data set the best model, TFCL, TFCL-Q,
the best competitor and STL (test AUC x 100, mean ± std over repetitions, n), with the
Holm-adjusted Wilcoxon p of each against the column's best model.

    python benchmarks/headline.py [leaderboards]        # markdown on stdout

After the table: a Friedman test across data sets (blocks = data sets, scores = each model's
mean test AUC; only models with a mean on every block), with every model's average rank, once
over all data sets and once without the extra simulated seeds (they share the generator with
seed 0, so they are not independent blocks).

Reads only the published ``<dataset>.json`` files (format ``mtlbench-leaderboard/2``); a model's
role comes from what its class declares (``is_baseline``, ``ablation_of``), so the script names
no competitor.
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

from mtlbench.report.roles import model_class_of

OURS = ("tfcl", "tfcl-q")


def role(name: str) -> str:
    cls = model_class_of(name)  # None: the model is not installed here
    if cls is None:
        return "other"
    if getattr(cls, "is_baseline", False):
        return "baseline"
    if name in OURS:
        return "ours"
    if getattr(cls, "ablation_of", None):
        return "ablation"
    return "competitor"


def cell_text(row: dict, problem: str) -> str:
    c = row["cells"][problem]
    if not c.get("n"):
        return "—"
    mark = "" if c.get("best") else (" †" if c.get("significantly_worse") else "")
    p = "" if c.get("best") or c.get("p_holm") is None else f", p={c['p_holm']:.2g}"
    return f"{row['model']} {c['mean']:.2f} ± {c['std']:.2f} (n={c['n']}{p}){mark}"


def across_datasets(cells: dict[str, dict[str, float]], title: str) -> None:
    """Friedman test over (data set x model) mean AUCs; prints average ranks (1 = best)."""
    import numpy as np

    from mtlbench.report.stats import block_ranks, friedman

    blocks = sorted(cells)
    models = sorted(set.intersection(*(set(cells[b]) for b in blocks))) if blocks else []
    left = sorted(set().union(*(set(cells[b]) for b in blocks)) - set(models)) if blocks else []
    scores = np.array([[cells[b][m] for m in models] for b in blocks])
    res = friedman(scores)
    print(f"\n**Friedman test across data sets ({title}):** {len(blocks)} blocks "
          f"({', '.join(blocks)}), {len(models)} models"
          + (f" ({', '.join(left)} left out: not on every block)" if left else "") + "; "
          + (f"chi2 = {res['statistic']:.2f}, p = {res['p_value']:.2g}." if res["p_value"] is not
             None else f"not computed: {res.get('reason')}."))
    if res["p_value"] is not None:
        ranks = block_ranks(scores).mean(axis=0)
        order = np.argsort(ranks, kind="stable")
        print("Average rank (1 = best): " + ", ".join(f"{models[j]} {ranks[j]:.2f}"
                                                      for j in order) + ".")


def main(folder: str = "leaderboards") -> None:
    cells: dict[str, dict[str, float]] = {}
    incomplete: set[str] = set()
    print("| data set | best model | TFCL | TFCL-Q | best competitor | STL |")
    print("|---|---|---|---|---|---|")
    for js in sorted(Path(folder).glob("*.json")):
        try:
            lb = json.loads(js.read_text(encoding="utf-8"))
        except ValueError:
            continue
        if not isinstance(lb, dict) or lb.get("format") != "mtlbench-leaderboard/2":
            continue
        for problem in lb["problems"]:
            rows = [r for r in lb["rows"] if r["cells"].get(problem, {}).get("n")]
            if not rows:
                continue
            label = lb["dataset"] if problem == lb["dataset"] else f"{lb['dataset']} / {problem}"
            # a model enters the cross-data-set test only with every planned repetition
            cells[label] = {r["model"]: r["cells"][problem]["mean"] for r in rows
                            if r["cells"][problem]["n"] == lb["planned_reps"]}
            incomplete.update(r["model"] for r in rows
                              if r["cells"][problem]["n"] != lb["planned_reps"])
            by = {r["model"]: r for r in rows}
            mean = lambda r: r["cells"][problem]["mean"]
            # the leaderboard's own best (highest mean among models with the most repetitions)
            best = next((r for r in rows if r["cells"][problem].get("best")), max(rows, key=mean))
            comp = [r for r in rows if role(r["model"]) == "competitor"]
            base = [r for r in rows if role(r["model"]) == "baseline"]
            pick = lambda name: cell_text(by[name], problem) if name in by else "—"
            print(f"| {label} | {cell_text(best, problem)} | {pick('tfcl')} | {pick('tfcl-q')} | "
                  f"{cell_text(max(comp, key=mean), problem) if comp else '—'} | "
                  f"{cell_text(base[0], problem) if base else '—'} |")
    print("\n† significantly worse than the best model of the data set (two-sided Wilcoxon "
          "signed-rank over paired repetitions, Holm-adjusted p < 0.05).")
    if incomplete:
        print(f"\nNot in the tests across data sets (fewer than the planned repetitions "
              f"somewhere): {', '.join(sorted(incomplete))}.")
    if cells:
        across_datasets(cells, "every data set")
        independent = {b: v for b, v in cells.items() if not b.startswith("simulated[")}
        if len(independent) < len(cells):
            across_datasets(independent, "without the extra simulated seeds")


if __name__ == "__main__":
    main(*sys.argv[1:])
