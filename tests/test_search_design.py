"""Version 4 of the adaptive search: the
space-filling starting design, bounds given as expressions of the problem and of the other
parameters, plain-list spaces searched as ranges, and the degenerate-fit fields."""
from __future__ import annotations

import importlib.util
import math
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from mtlbench import Categorical, Int, Linear, LinearMTLModel, Log, TaskSet
from mtlbench.search.design import (START_DESIGN_SIZE, lattice_generators, lattice_levels,
                             space_filling_design)
from mtlbench.errors import ConfigError
from mtlbench.protocol import ProtocolConfig, run_protocol
from mtlbench.search import AdaptiveSearcher, GridSearcher, edge_report, space_json
from mtlbench.search.space import (BoundExpr, as_param, bound_order, clip_point, list_to_param,
                            space_problems)

REPO = Path(__file__).resolve().parents[1]


# ------------------------------------------------------------------ the starting design
def test_the_lattice_generators_are_pinned():
    """The maximin / projection criterion's choices (mtlbench.search.design docstring): a change of
    the construction changes every unit's trace, so it must be deliberate."""
    assert [lattice_generators(p) for p in range(1, 9)] == [
        (1,), (1, 5), (1, 3, 4), (1, 2, 3, 5), (1, 2, 3, 4, 5), (1, 2, 3, 4, 5, 6),
        (1, 2, 3, 4, 5, 6, 7), (1, 2, 3, 4, 5, 6, 7, 9)]
    assert lattice_generators(13) == tuple(range(1, 13)) + (1,)  # reused cyclically


def test_the_design_of_a_three_parameter_space_is_pinned():
    """Exact points, compared with ==: the design is a pure function of the declarations,
    computed in integers and correctly rounded decimal arithmetic (no platform libm)."""
    space = {"a": Log([1e-3, 1.0], low=0.0), "b": Int([2, 8], low=2),
             "c": Linear([0.0, 1.0], low=0.0, high=1.0)}
    assert space_filling_design(space) == [
        {"a": 0.001, "b": 3, "c": 0.272727272727},
        {"a": 0.00187381742286, "b": 4, "c": 0.636363636364},
        {"a": 0.00351119173422, "b": 5, "c": 1.0},
        {"a": 0.00657933224658, "b": 8, "c": 0.181818181818},
        {"a": 0.0123284673944, "b": 2, "c": 0.545454545455},
        {"a": 0.0231012970008, "b": 3, "c": 0.909090909091},
        {"a": 0.0432876128108, "b": 5, "c": 0.0909090909091},
        {"a": 0.081113083079, "b": 7, "c": 0.454545454545},
        {"a": 0.151991108295, "b": 2, "c": 0.818181818182},
        {"a": 0.284803586844, "b": 3, "c": 0.0},
        {"a": 0.533669923121, "b": 4, "c": 0.363636363636},
        {"a": 1.0, "b": 6, "c": 0.727272727273}]
    assert AdaptiveSearcher(space).start() == space_filling_design(space)


@pytest.mark.parametrize("n_params", range(1, 13))
def test_the_lattice_is_a_latin_hypercube(n_params):
    levels = lattice_levels(n_params)
    assert len(levels) == START_DESIGN_SIZE == 12
    for j in range(n_params):
        assert sorted(p[j] for p in levels) == list(range(1, 13))


def test_one_parameter_gets_evenly_spread_points_from_end_to_end():
    """No model is disadvantaged by the design's shape: a single Log parameter gets 12
    points at equal log spacing, both ends of its range included; a Linear one equal steps."""
    lam = [p["lam"] for p in space_filling_design({"lam": Log([0.1, 1.0, 10.0], low=0.0)})]
    assert lam[0] == 0.1 and lam[-1] == 10.0 and lam == sorted(lam)
    gaps = np.diff(np.log10(lam))
    np.testing.assert_allclose(gaps, 2 / 11, rtol=1e-10)
    w = [p["w"] for p in space_filling_design({"w": Linear([0.0, 1.0], low=0.0)})]
    np.testing.assert_allclose(np.diff(w), 1 / 11, rtol=1e-10)


@pytest.mark.parametrize("n_values", [2, 3, 4, 5, 6, 7])
def test_categorical_parameters_are_balanced(n_values):
    space = {"c": Categorical([f"v{i}" for i in range(n_values)]),
             "lam": Log([0.1, 10.0], low=0.0)}
    counts = Counter(p["c"] for p in space_filling_design(space))
    assert len(counts) == n_values and max(counts.values()) - min(counts.values()) <= 1
    if 12 % n_values == 0:
        assert set(counts.values()) == {12 // n_values}


_ORDERED = st.sampled_from(["log", "linear", "int"])


@settings(max_examples=60, deadline=None)
@given(kinds=st.lists(_ORDERED, min_size=1, max_size=7),
       lows=st.lists(st.integers(1, 50), min_size=7, max_size=7),
       spans=st.lists(st.integers(3, 40), min_size=7, max_size=7))
def test_every_ordered_parameter_takes_at_least_3_values_in_the_design(kinds, lows, spans):
    """Every searched parameter varies over its range in the start design
    (a range holding at least 3 integers for Int)."""
    space = {}
    for i, kind in enumerate(kinds):
        lo, hi = lows[i], lows[i] + spans[i]
        space[f"p{i}"] = (Int([lo, hi], low=1) if kind == "int" else
                          Log([float(lo), float(hi) * 10], low=0.0) if kind == "log" else
                          Linear([float(lo), float(hi)]))
    design = space_filling_design(space)
    assert 3 <= len(design) <= START_DESIGN_SIZE
    for key, par in space.items():
        values = {p[key] for p in design}
        assert len(values) >= 3, (key, par, values)
        assert all(min(par.grid) <= v <= max(par.grid) for v in values)
    assert space_filling_design(space) == design  # deterministic


def test_the_adaptive_searcher_starts_from_the_design_and_grid_from_the_product():
    space = {"a": Log([0.1, 1.0, 10.0], low=0.0), "k": Int([2, 4], low=1)}
    assert AdaptiveSearcher(space).propose([]) == ("start", space_filling_design(space))
    assert GridSearcher(space).propose([])[1] == [
        {"a": a, "k": k} for a in (0.1, 1.0, 10.0) for k in (2, 4)]


# ------------------------------------------------------------------ bound expressions
def test_bound_expressions_parse_and_evaluate_without_eval():
    b = BoundExpr.parse("min(d, T) / 2 + 1 / k - n_min ** 0")
    assert b.names == {"d", "T", "k", "n_min"}
    assert b.value({"d": 6, "T": 9, "k": 4, "n_min": 5}) == pytest.approx(2.25, rel=1e-15)
    for bad in ['__import__("os").system("x")', "d.real", "lambda: 1", "[d, T]", "d if T else 1",
                "abs(d)", "min(d)", "min(*d)", "d < T", "'x'", "True", "d; T", ""]:
        with pytest.raises(ConfigError, match="bound expression"):
            BoundExpr.parse(bad)
    with pytest.raises(ConfigError, match=r"bound '1/k' cannot be evaluated at \{'k': 0\}"):
        BoundExpr.parse("1/k").value({"k": 0})
    with pytest.raises(ConfigError, match="needs k"):
        BoundExpr.parse("1/k").value({})
    with pytest.raises(ConfigError, match="cannot be evaluated"):
        BoundExpr.parse("d ** d ** d").value({"d": 50})  # floats: overflow, not a huge int


def test_bounds_are_validated_against_the_space():
    ok = {"n_bases": Int([5, 20], low=1, high="min(d, T)"),
          "k": Int([1, 5], low=1, high="n_bases"), "lam": Log([0.01, 0.1], high="1/k")}
    assert space_problems(ok) == []
    assert bound_order(ok) == ["n_bases", "k", "lam"]
    unknown = {"k": Int([2, 8], low=1, high="min(d, tasks)")}
    (msg,) = space_problems(unknown)
    assert "k: bound high='min(d, tasks)' uses 'tasks', which is neither a problem dimension " \
           "(d, T, n_min, n_max) nor another searched parameter" in msg
    circle = {"a": Log([0.1, 1.0], high="b"), "b": Log([0.1, 1.0], high="a")}
    assert "depend on each other in a circle" in space_problems(circle)[0]
    shadow = {"T": Linear([0.1, 1.0]), "k": Int([2, 8], high="min(d, T)")}
    assert "T: a searched parameter named like the problem dimension 'T'" in \
        space_problems(shadow)[0]
    single = {"lam": Log([1e-3], low=0.0)}
    assert "lam = Log([0.001], low=0, high=None) starts from one value" in \
        space_problems(single)[0]
    with pytest.raises(ConfigError, match="bound expression"):
        Log([0.1, 1.0], high="1/")


def test_a_point_is_clipped_to_its_bounds_in_dependency_order():
    space = {"n_bases": Int([5, 20], low=1, high="min(d, T)"),
             "k": Int([1, 5], low=1, high="n_bases"), "lam": Log([0.01, 0.1], high="1/k")}
    dims = {"d": 3, "T": 40}
    assert clip_point(space, {"n_bases": 20, "k": 5, "lam": 0.9}, dims) == \
        {"n_bases": 3, "k": 3, "lam": 1 / 3}
    assert clip_point(space, {"n_bases": 2, "k": 1, "lam": 0.5}, dims) == \
        {"n_bases": 2, "k": 1, "lam": 0.5}
    # a data-only bound narrows the start range before the design spreads over it
    design = space_filling_design({"k": Int([2, 8], low=2, high="min(d, T)")},
                                  {"d": 5, "T": 30})
    assert sorted({p["k"] for p in design}) == [2, 3, 4, 5]


def _tasks(T: int = 6, d: int = 4, n: int = 400, seed: int = 3) -> TaskSet:
    """Labels = sign of feature 0: only scores along feature 0 reach validation AUC 1."""
    rng = np.random.default_rng(seed)
    Xs, ys = [], []
    for _ in range(T):
        X = rng.standard_normal((n, d))
        ys.append(np.where(X[:, 0] > 0, 1.0, -1.0))
        Xs.append(X)
    return TaskSet.from_arrays("bounded", Xs, ys)


class Refuses(LinearMTLModel):
    """Scores at angle pi/2 (1 - k lam) from the signal: validation AUC grows with k and
    lam up to the joint bound lam = 1/k; ``fit`` refuses k > min(d, T) and lam > 1/k, the
    limits its search space declares."""

    name = "refuses"
    search_space = {"k": Int([2, 8], low=1, high="min(d, T)"),
                    "lam": Log([0.01, 0.1], low=0.0, high="1/k")}

    def __init__(self, k: int = 2, lam: float = 0.01):
        self.k = k
        self.lam = lam

    def fit(self, tasks, init=None):
        if self.k > min(tasks.d, tasks.T):
            raise ValueError(f"k must be <= min(d, T) = {min(tasks.d, tasks.T)}")
        if self.lam > 1.0 / self.k * (1 + 1e-12):
            raise ValueError(f"lam must be <= 1/k = {1 / self.k}")
        a = math.pi / 2 * (1 - self.k * self.lam)  # 0 at the joint bound
        w = np.zeros(tasks.d)
        w[0], w[1] = math.cos(a), math.sin(a)
        self.coef_ = np.tile(w[:, None], (1, tasks.T))
        self.converged_ = True
        return self


def test_a_step_the_model_would_refuse_is_never_proposed_and_the_bound_is_reported():
    """Design points and steps past a data-dependent or joint bound are
    clipped to it (never a failed fit), and a selection there counts as at_bound; the
    unit stores the bounds resolved at its selected point."""
    tasks = _tasks()  # d = 4 < T = 6: k <= 4
    out = run_protocol(Refuses(), space_json(Refuses.search_space), tasks,
                       ProtocolConfig(reps=1), rep=0)
    assert not any("error" in e for e in out.grid)
    assert all(e["params"]["k"] <= 4 and e["params"]["lam"] <= 1 / e["params"]["k"]
               for e in out.grid)
    assert out.best_params == {"k": 4, "lam": 0.25}
    s = out.diagnostics["search"]
    assert sorted(s["at_bound"]) == ["k", "lam"] and s["at_edge"] == []
    assert s["bounds"] == {"k": {"low": 1, "high": 4}, "lam": {"low": 0.0, "high": 0.25}}
    assert s["problem_dims"]["d"] == 4 and s["problem_dims"]["T"] == 6


def test_a_bound_may_read_a_parameter_the_user_fixed():
    """``refuses[k=3]``: k leaves the search, lam's bound 1/k reads the fixed value."""
    space = {"lam": Refuses.search_space["lam"]}
    out = run_protocol(Refuses(k=3), space_json(space), _tasks(), ProtocolConfig(reps=1), 0)
    assert not any("error" in e for e in out.grid)
    assert out.best_params == {"lam": pytest.approx(1 / 3, rel=1e-15)}
    assert out.diagnostics["search"]["at_bound"] == ["lam"]


def test_edge_report_evaluates_expression_bounds_at_the_selected_point():
    space = {"k": Int([2, 8], low=1, high="min(d, T)"), "lam": Log([0.01, 0.1], high="1/k")}
    trace = [{"params": {"k": 2, "lam": 0.01}}, {"params": {"k": 5, "lam": 0.2}}]
    assert edge_report(space, trace, {"k": 5, "lam": 0.2}, {"d": 5, "T": 9}) == \
        (["k", "lam"], [])
    assert edge_report(space, trace, {"k": 5, "lam": 0.2}, {"d": 50, "T": 90}) == \
        (["lam"], ["k"])


# ------------------------------------------------------------------ old-style list spaces
@pytest.mark.parametrize("values,expected", [
    ([0.1, 1.0, 10.0, 100.0], Log((0.1, 1.0, 10.0, 100.0), low=0.0)),
    ([1, 2, 4], Int((1, 2, 4), low=0)),
    ([-2, 3], Int((-2, 3), low=None)),
    ([0.5, 1.0, 2.0], Linear((0.5, 1.0, 2.0), low=0.0)),
    ([-1.0, 1.0], Linear((-1.0, 1.0), low=None)),
    ([0.0, 10.0], Linear((0.0, 10.0), low=0.0)),
    (["auc", "squared"], Categorical(("auc", "squared"))),
    ([True, False], Categorical((True, False))),
    ([3.0], Categorical((3.0,))),
])
def test_a_plain_list_is_read_by_the_documented_rule(values, expected):
    assert list_to_param(values) == expected == as_param(values)


def test_a_plain_list_space_gets_the_same_budget_as_a_declared_one():
    """The first release's list form is searched under the same rule and
    budget (20 fits), not "exactly as listed" (4 fits)."""
    class OldStyle(Refuses):
        search_space = {"lam": [0.01, 0.03, 0.1, 0.3]}

    out = run_protocol(OldStyle(k=2), space_json(OldStyle.search_space), _tasks(),
                       ProtocolConfig(reps=1), rep=0)
    assert len(out.grid) >= 20 and out.diagnostics["search"]["n_fits"] >= 20


def test_the_scaffold_and_the_example_declare_ranges():
    from mtlbench.plugins import model_declaration_notices, model_declaration_problems

    spec = importlib.util.spec_from_file_location(
        "mtlbench_meanreg", REPO / "examples" / "mtlbench-meanreg" / "mtlbench_meanreg.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    cls = mod.MeanRegularizedMTL
    assert model_declaration_problems(cls) == [] and model_declaration_notices(cls) == []
    assert all(isinstance(p, Log) for p in cls.search_space.values())


# ------------------------------------------------------------------ degenerate fits
class ZeroesTasks(LinearMTLModel):
    """Task t's weights are 0 (constant scores) for t < n_zero."""

    name = "zeroes"
    search_space = {"lam": Log([0.1, 10.0], low=0.0)}

    def __init__(self, lam: float = 1.0, n_zero: int = 2):
        self.lam = lam
        self.n_zero = n_zero

    def fit(self, tasks, init=None):
        w = np.zeros(tasks.d)
        w[0] = 1.0 / (1.0 + abs(math.log10(self.lam)))
        self.coef_ = np.tile(w[:, None], (1, tasks.T))
        self.coef_[:, :self.n_zero] = 0.0
        return self


@pytest.mark.parametrize("n_zero,degenerate", [(0, False), (1, False), (2, True), (6, True)])
def test_constant_share_and_the_degenerate_flag(n_zero, degenerate):
    """The share of tasks with constant scores, per fit (validation), for
    the selected fit and the refit (test); degenerate when the selected share >= 0.25."""
    out = run_protocol(ZeroesTasks(n_zero=n_zero), space_json(ZeroesTasks.search_space),
                       _tasks(T=6), ProtocolConfig(reps=1), rep=0)
    share = n_zero / 6
    assert all(e["constant_share"] == pytest.approx(share, abs=1e-15) for e in out.grid)
    s = out.diagnostics["search"]
    assert s["selected_constant_share"] == pytest.approx(share, abs=1e-15)
    assert s["refit_constant_share"] == pytest.approx(share, abs=1e-15)
    assert s["degenerate"] is degenerate
