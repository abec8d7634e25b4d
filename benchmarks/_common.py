"""Shared set-up of the benchmark scripts (run them as ``python benchmarks/NAME.py``)."""
from __future__ import annotations


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
