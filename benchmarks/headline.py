"""The headline table of the published leaderboards: per data set the best model, TFCL, TFCL-Q,
the best competitor and STL (test AUC x 100, mean ± std over repetitions, n), with the
Holm-adjusted Wilcoxon p of each against the column's best model.

    python benchmarks/headline.py [leaderboards]        # markdown on stdout

Reads only the published ``<dataset>.json`` files (format ``mtlbench-leaderboard/2``); a model's
role comes from what its class declares (``is_baseline``, ``ablation_of``), so the script names
no competitor.
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

from mtlbench.plugins import get_registry

OURS = ("tfcl", "tfcl-q")


def role(name: str) -> str:
    try:
        cls = get_registry().model_class(name)
    except Exception:  # noqa: BLE001 - a model not installed here
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


def main(folder: str = "leaderboards") -> None:
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
            by = {r["model"]: r for r in rows}
            mean = lambda r: r["cells"][problem]["mean"]
            # the leaderboard's own best (highest mean among models with the most repetitions)
            best = next((r for r in rows if r["cells"][problem].get("best")), max(rows, key=mean))
            comp = [r for r in rows if role(r["model"]) == "competitor"]
            base = [r for r in rows if role(r["model"]) == "baseline"]
            pick = lambda name: cell_text(by[name], problem) if name in by else "—"
            label = lb["dataset"] if problem == lb["dataset"] else f"{lb['dataset']} / {problem}"
            print(f"| {label} | {cell_text(best, problem)} | {pick('tfcl')} | {pick('tfcl-q')} | "
                  f"{cell_text(max(comp, key=mean), problem) if comp else '—'} | "
                  f"{cell_text(base[0], problem) if base else '—'} |")
    print("\n† significantly worse than the best model of the data set (two-sided Wilcoxon "
          "signed-rank over paired repetitions, Holm-adjusted p < 0.05).")


if __name__ == "__main__":
    main(*sys.argv[1:])
