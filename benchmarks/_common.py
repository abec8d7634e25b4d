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
