"""Fits of the built-in models, old code vs new, side by side: are the answers the same?

For every model named (default: all but AMTL) and every problem, the script fits the model at
a few points of its search's starting design (``--points``, spread over the 12-point design)
on the training part of repetition 0, once with the code of git ref ``--ref`` (extracted with
``git archive`` into a temporary folder, put first on PYTHONPATH) and once with the working
tree, each in its own process with one BLAS thread, both on the SAME pickled training data.
Printed per model and problem: max |W_new - W_old| over the points, the objectives (last
entry of ``objective_history_``, else ``fitted_objective``), iterations and ``converged_``
old / new, and a verdict: ``identical`` (every coefficient bit for bit), or the largest
relative objective difference.  Non-convex models are expected to be identical; convex ones
within ``--rtol`` (1e-8) in objective.

Problems: ``simulated`` (the paper's recipe, seed 0), ``synthetic-attributes[seed=101]``
attr0 and School binarized (``--data-dir``, default ``$MTLBENCH_DATA_DIR``; skipped when the
file is missing).

Usage:
    python benchmarks/check_equivalence.py --ref REF [--models a,b] [--points 3]
        [--problems simulated,attr0,school] [--data-dir DIR] [--rtol 1e-8]
Exit status 1 if a non-convex model is not identical or a convex one misses ``--rtol``.
"""
from __future__ import annotations

import argparse
import json
import os
import pickle
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import checkout, worker_env

REPO = Path(__file__).resolve().parents[1]
PROBLEMS = {"simulated": ("simulated", "simulated"),
            "attr0": ("synthetic-attributes[seed=101]", "attr0"),
            "school": ("school", "school")}
SKIP = {"amtl"}


def _training_sets(names: list[str], data_dir: str | None) -> dict[str, object]:
    """The training part of repetition 0 of each problem (default protocol), by name."""
    from mtlbench.errors import MTLBenchError
    from mtlbench.plugins import get_registry
    from mtlbench.protocol import ProtocolConfig, evaluable_tasks, make_split, restrict_tasks

    reg = get_registry()
    out = {}
    for name in names:
        selector, problem = PROBLEMS[name]
        ds = reg.dataset(selector)
        try:
            tasks = ds.load(problem, data_dir=data_dir)
        except MTLBenchError as exc:
            print(f"{name}: skipped ({str(exc).splitlines()[0]})")
            continue
        tasks = restrict_tasks(tasks, evaluable_tasks(tasks)[0])
        split = make_split(tasks, ProtocolConfig(), 0)
        out[name] = tasks.subset(split.train, meta={})
    return out


def _points(cls, tasks, n: int) -> list[dict]:
    """``n`` points spread over the model's starting design on ``tasks``."""
    from mtlbench.search.design import space_filling_design

    sizes = [tasks.y(t).shape[0] for t in range(tasks.T)]
    design = space_filling_design(cls.search_space, {"d": tasks.d, "T": tasks.T,
                                                     "n_min": min(sizes), "n_max": max(sizes)})
    idx = np.unique(np.linspace(0, len(design) - 1, max(1, min(n, len(design)))).astype(int))
    return [design[i] for i in idx]


def _worker(tasks_path: str, model: str, points_json: str, out_path: str) -> None:
    """Fit ``model`` at every point on the pickled training set; save the answers (npz)."""
    from threadpoolctl import threadpool_limits

    from mtlbench.plugins import get_registry

    with open(tasks_path, "rb") as fh:
        tasks = pickle.load(fh)
    cls = get_registry().model_class(model)
    res = {}
    with threadpool_limits(limits=1):
        for i, params in enumerate(json.loads(points_json)):
            m = cls(**params).fit(tasks)
            hist = getattr(m, "objective_history_", None)
            if hist:
                obj = float(hist[-1])
            elif hasattr(m, "fitted_objective"):
                obj = float(m.fitted_objective(tasks))
            else:
                obj = np.nan
            res[f"W{i}"] = np.asarray(m.coef_)
            res[f"meta{i}"] = np.array([obj, float(getattr(m, "n_iter_", -1) or -1),
                                        float(bool(getattr(m, "converged_", False)))])
    np.savez(out_path, **res)


def _run(tree: str | None, tasks_path: str, model: str, points: list[dict]) -> dict | str:
    with tempfile.NamedTemporaryFile(suffix=".npz", delete=False) as fh:
        out = fh.name
    cmd = [sys.executable, str(Path(__file__).resolve()), "--worker", tasks_path, model,
           json.dumps(points), out]
    proc = subprocess.run(cmd, env=worker_env(tree), capture_output=True, text=True,
                          cwd=tree or str(REPO))
    try:
        if proc.returncode != 0:
            return (proc.stderr.strip().splitlines() or ["(no output)"])[-1]
        with np.load(out) as z:
            return {k: z[k] for k in z.files}
    finally:
        os.unlink(out)


def _compare(convex: bool, old: dict, new: dict, n: int, rtol: float) -> tuple[str, bool]:
    diffs, rel, same, lines = [], [], True, []
    for i in range(n):
        Wo, Wn = old[f"W{i}"], new[f"W{i}"]
        mo, mn = old[f"meta{i}"], new[f"meta{i}"]
        same &= Wo.shape == Wn.shape and bool(np.array_equal(Wo, Wn))
        diffs.append(float(np.max(np.abs(Wn - Wo))) if Wo.shape == Wn.shape else np.inf)
        rel.append(abs(mn[0] - mo[0]) / max(abs(mo[0]), 1e-300))
        lines.append(f"F {mo[0]:.12g} / {mn[0]:.12g}, it {int(mo[1])}/{int(mn[1])}, "
                     f"conv {bool(mo[2])}/{bool(mn[2])}")
    if same:
        verdict, ok = "identical", True
    else:
        ok = convex and max(rel) <= rtol
        verdict = f"max rel. objective diff {max(rel):.1e}" + ("" if ok else "  <-- MISMATCH")
    head = f"  max|dW| {max(diffs):.1e}  {verdict}"
    return head + "".join(f"\n    point {i}: {s}" for i, s in enumerate(lines)), ok


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ref", required=True, help="git ref of the old code, e.g. 7f84c80")
    ap.add_argument("--models", help="comma-separated model names (default: all but amtl)")
    ap.add_argument("--problems", default="simulated,attr0,school")
    ap.add_argument("--points", type=int, default=3)
    ap.add_argument("--data-dir", default=os.environ.get("MTLBENCH_DATA_DIR"))
    ap.add_argument("--rtol", type=float, default=1e-8)
    args = ap.parse_args()

    from mtlbench.plugins import get_registry

    reg = get_registry()
    models = args.models.split(",") if args.models else sorted(set(reg.model_names) - SKIP)
    sets = _training_sets(args.problems.split(","), args.data_dir)
    failures = []
    with checkout(args.ref) as old_tree, tempfile.TemporaryDirectory() as tmp:
        print(f"old = {args.ref} (extracted to {old_tree}), new = working tree; one BLAS thread")
        _check_all(sets, models, reg, old_tree, tmp, args, failures)
    print("\nall as expected" if not failures else "\nnot as expected: " + ", ".join(failures))
    return 1 if failures else 0


def _check_all(sets, models, reg, old_tree, tmp, args, failures) -> None:
    """Fit every model on every training set with both trees; append what misses to
    ``failures``."""
    for pname, tasks in sets.items():
        path = str(Path(tmp) / f"{pname}.pkl")
        with open(path, "wb") as fh:
            pickle.dump(tasks, fh)
        print(f"\n{pname}: {tasks.T} tasks, d = {tasks.d}, {tasks.n_total} training labels")
        for model in models:
            cls = reg.model_class(model)
            points = _points(cls, tasks, args.points)
            old = _run(old_tree, path, model, points)
            new = _run(None, path, model, points)
            print(f"{model} ({'convex' if cls.convex else 'non-convex'}, "
                  f"{len(points)} points)")
            if isinstance(old, str) or isinstance(new, str):
                print(f"  failed: old: {old if isinstance(old, str) else 'ok'}; "
                      f"new: {new if isinstance(new, str) else 'ok'}")
                failures.append(f"{pname}/{model}")
                continue
            text, ok = _compare(bool(cls.convex), old, new, len(points), args.rtol)
            print(text, flush=True)
            if not ok:
                failures.append(f"{pname}/{model}")


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--worker":
        _worker(*sys.argv[2:6])
    else:
        sys.exit(main())
