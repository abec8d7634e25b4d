"""Shared set-up of the benchmark scripts (run them as ``python benchmarks/NAME.py``)."""
from __future__ import annotations

import os


def worker_env(tree: str | None = None) -> dict[str, str]:
    """The environment of a timed worker process: one BLAS thread (as in every unit) and, for
    the code of another git ref checked out at ``tree``, that tree's package, model and dataset
    plugins first on PYTHONPATH."""
    env = dict(os.environ, OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1", MKL_NUM_THREADS="1")
    if tree:
        env["PYTHONPATH"] = os.pathsep.join(
            [tree, f"{tree}/plugins", f"{tree}/datasets", env.get("PYTHONPATH", "")])
    return env


def simulated_specs(models: list[str], reps: int):
    """Planned units of ``models`` (selectors such as ``"stl"`` or ``"lasso[rho_ratio=0.1]"``)
    on the simulated data, ``reps`` repetitions, default protocol."""
    from mtlbench.plugins import get_registry
    from mtlbench.protocol import ProtocolConfig
    from mtlbench.runner import plan_units, resolve_problems
    from mtlbench.selectors import apply_overrides, parse_selector

    reg = get_registry()
    sels = []
    for text in models:
        name, over = parse_selector(text)
        sels.append(apply_overrides(reg.model_class(name), over, name))
    return plan_units(reg, sels, resolve_problems(reg, ["simulated"]), ProtocolConfig(reps=reps))


def sun_scale(seed: int = 0):
    """The SUN-scale stand-in of issue 13: 250 users x 50 labels x 2,048 features (205 MB),
    ``make_low_rank_tasks(seed, T=250, d=2048, n=50, rank=5, noise=0.5)``."""
    from mtlbench_datasets.simulated import make_low_rank_tasks

    return make_low_rank_tasks(seed, T=250, d=2048, n=50, rank=5, noise=0.5, name="sun-scale")
