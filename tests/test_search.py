"""The fair search: searchers as plugins, the adaptive rule, the budget, the trace,
warm starts only for convex models, one train TaskSet object per unit."""
from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import example, given, settings, strategies as st

from mtlbench import Categorical, Int, LinearMTLModel, Linear, Log, TaskSet
from mtlbench.protocol import ProtocolConfig, parameter_grid, run_protocol
from mtlbench.search.loop import nearest_fit, param_distance
from mtlbench.search import (AdaptiveSearcher, GridSearcher, best_index, edge_report,
                             space_from_json, space_json)

OPT = 1e4  # the validation optimum of the synthetic model, far outside its starting grid


def _data(seed: int = 7, T: int = 3, n: int = 160) -> TaskSet:
    """Feature 0 carries the label, feature 1 is noise: the AUC of the score
    cos(a) x0 + sin(a) x1 falls as the angle a grows."""
    rng = np.random.default_rng(seed)
    Xs, ys = [], []
    for _ in range(T):
        X = rng.standard_normal((n, 2))
        y = np.where(X[:, 0] + 0.3 * rng.standard_normal(n) > 0, 1.0, -1.0)
        Xs.append(X), ys.append(y)
    return TaskSet.from_arrays("synthetic", Xs, ys)


class FarOptimum(LinearMTLModel):
    """Weights at angle 0.35 * |log10(lam / 1e4)| from the signal direction: validation AUC is
    unimodal in log(lam) with its peak at lam = 1e4."""

    name = "far-optimum"
    search_space = {"lam": Log([0.1, 1.0, 10.0], low=0.0)}
    inits: list = []

    def __init__(self, lam: float = 1.0, mu: float = 1.0):
        self.lam = lam
        self.mu = mu

    def fit(self, tasks, init=None):
        type(self).inits.append(init)
        a = min(0.35 * abs(math.log10(self.lam / OPT)), math.pi / 2)
        self.coef_ = np.tile([[math.cos(a)], [math.sin(a)]], (1, tasks.T))
        self.converged_ = True
        self.n_iter_ = 1
        return self


class ConvexWarm(FarOptimum):
    name = "convex-warm"
    convex = True
    supports_warm_start = True


class NonConvexWarm(FarOptimum):
    name = "nonconvex-warm"
    convex = False
    supports_warm_start = True


def _run(model, space=None, search="adaptive", budget=20, tasks=None):
    cfg = ProtocolConfig(reps=1, search=search, budget=budget)
    space = type(model).search_space if space is None else space
    return run_protocol(model, space_json(space), tasks or _data(), cfg, rep=0)


def test_adaptive_finds_an_optimum_far_outside_the_starting_grid_and_grid_does_not():
    ad = _run(FarOptimum())
    gr = _run(FarOptimum(), search="grid")
    assert math.isclose(ad.best_params["lam"], OPT, rel_tol=1e-9)
    assert gr.best_params["lam"] == 10.0
    assert ad.val_auc > gr.val_auc
    s = ad.diagnostics["search"]
    assert s["search"] == "adaptive" and s["budget"] == 20 and s["n_fits"] == 20
    assert s["at_edge"] == [] and s["at_bound"] == [] and not s["budget_exhausted"]
    phases = [e["phase"] for e in ad.grid]
    assert phases[:3] == ["start"] * 3 and "extend" in phases and phases[-1] == "refine"
    # the grid searcher fits exactly the declared grid and records the edge it stopped at
    assert [e["params"] for e in gr.grid] == parameter_grid({"lam": [0.1, 1.0, 10.0]})
    assert gr.diagnostics["search"]["at_edge"] == ["lam"]


def _drive(searcher, score, budget):
    """Run ``searcher`` on a known validation score (a function of the params) for ``budget``
    fits, as the protocol does; returns the trace."""
    trace: list = []
    while len(trace) < budget:
        phase, batch = searcher.propose(trace)
        if not batch:
            break
        for p in batch[:budget - len(trace)]:
            trace.append({"params": p, "phase": phase, "val_auc": score(p)})
    return trace


def test_a_single_valued_parameter_whose_step_out_wins_is_extended_within_the_budget():
    """The TFCL-Q situation of the first fair run: 2 parameters start with 3 values, 3 with one
    value (start = 9 fits), and the optimum of the last single-valued one lies two steps below
    its start.  Refinement used to propose a whole batch (every parameter's step outs and
    midpoints) and the 20 fits ran out before the winning step out was extended."""
    space = {"a": Log([0.1, 1.0, 10.0], low=0.0), "b": Int([2, 4, 8], low=1),
             "c": Log([1.0], low=0.0), "d": Log([1.0], low=0.0), "e": Log([1.0], low=0.0)}
    opt = {"a": 1.0, "b": 4, "c": 1.0, "d": 1.0, "e": 0.01}

    def score(p):
        return -sum(abs(math.log10(p[k] / opt[k])) for k in opt)

    trace = _drive(AdaptiveSearcher(space), score, 20)
    b = best_index(trace)
    assert trace[b]["params"]["e"] == pytest.approx(0.01, rel=1e-9)
    at_bound, at_edge = edge_report(space, trace, trace[b]["params"])
    assert at_edge == [] and at_bound == []


def test_refinement_splits_the_wider_side_first_and_reaches_both_sides():
    space = {"lam": Log([0.1, 1.0, 10.0], low=0.0)}
    # version 4: 12 design points, then 4 refinement fits
    trace = _drive(AdaptiveSearcher(space), lambda p: -abs(math.log10(p["lam"])), 16)
    refined = [t["params"]["lam"] for t in trace if t["phase"] == "refine"]
    assert any(v < 1.0 for v in refined) and any(v > 1.0 for v in refined)


def test_every_trace_entry_has_the_documented_fields():
    out = _run(FarOptimum(), budget=12)
    s = out.diagnostics["search"]
    for e in out.grid:
        assert set(e) == {"params", "phase", "val_auc", "converged", "n_iter", "constant_share"}
        assert e["converged"] is True and e["n_iter"] == 1 and e["constant_share"] == 0.0
    assert len(s["fit_times"]) == len(out.grid) and min(s["fit_times"]) >= 0
    assert s["selected_converged"] is True and s["refit_converged"] is True
    assert s["selected_constant_share"] == 0.0 and s["refit_constant_share"] == 0.0
    assert s["degenerate"] is False
    assert s["problem_dims"] == {"d": 2, "T": 3, "n_min": 109, "n_max": 109}
    assert s["bounds"] == {"lam": {"low": 0.0, "high": None}}
    # 12 design points (0.1 .. 10), then extension past the budget to 1e5: interior at 1e4
    assert s["n_fits"] == 16 and not s["budget_exhausted"] and s["at_edge"] == []


def test_models_with_different_starting_grids_get_the_same_number_of_fits():
    class OneStart(FarOptimum):
        search_space = {"lam": Log([1.0], low=0.0), "mu": Linear([0.5], low=0.0, high=1.0)}

    class NineStart(FarOptimum):
        search_space = {"lam": Log([0.1, 1.0, 10.0], low=0.0),
                        "mu": Linear([0.2, 0.5, 0.8], low=0.0, high=1.0)}

    for budget in (12, 20):
        for out in (_run(OneStart(), budget=budget), _run(NineStart(), budget=budget)):
            # the budget for both; past it only extension fits, while the best is at an edge
            assert len(out.grid) >= budget
            assert all(e["phase"] == "extend" for e in out.grid[budget:])
            s = out.diagnostics["search"]
            assert s["at_edge"] == [] or s["budget_exhausted"]
            if len(out.grid) > budget:
                assert any(e["phase"] != "extend" for e in out.grid[:budget])


def test_bounds_are_respected_and_a_selection_at_a_bound_is_reported():
    space = {"lam": Log([0.1, 1.0, 10.0], low=0.0, high=300.0)}
    out = _run(FarOptimum(), space=space)
    tried = [e["params"]["lam"] for e in out.grid]
    assert max(tried) == 300.0 and all(v <= 300.0 for v in tried)
    assert out.best_params["lam"] == 300.0
    s = out.diagnostics["search"]
    assert s["at_bound"] == ["lam"] and s["at_edge"] == []


def test_non_convex_models_are_never_handed_init_and_convex_ones_are():
    NonConvexWarm.inits = []
    out = _run(NonConvexWarm(), budget=14)
    n = len(out.grid)
    assert len(NonConvexWarm.inits) == n + 1 and all(i is None for i in NonConvexWarm.inits)
    ConvexWarm.inits = []
    _run(ConvexWarm(), budget=14)
    grid_inits = ConvexWarm.inits[:n]
    assert grid_inits[0] is None and all(isinstance(i, ConvexWarm) for i in grid_inits[1:])
    assert ConvexWarm.inits[n] is None  # the refit on train+validation is always cold


class ConvexWarm2D(ConvexWarm):
    name = "convex-warm-2d"
    search_space = {"lam": Log([0.1, 1.0, 10.0], low=0.0), "mu": Log([0.1, 1.0, 10.0], low=0.0)}


def test_a_convex_fit_is_warm_started_from_the_nearest_earlier_fit():
    """Each fit's init is the fitted model of the earlier point nearest in grid steps (decades
    here; the latest of equally near ones), not merely the previous fit."""
    ConvexWarm2D.inits = []
    out = _run(ConvexWarm2D(), budget=20)
    points = [(e["params"]["lam"], e["params"]["mu"]) for e in out.grid]
    inits = ConvexWarm2D.inits[:len(points)]
    not_previous = 0
    for i in range(1, len(points)):
        dists = [math.hypot(math.log10(points[i][0] / points[j][0]),
                            math.log10(points[i][1] / points[j][1])) for j in range(i)]
        want = max(j for j in range(i) if dists[j] <= min(dists) + 1e-9)
        assert (inits[i].lam, inits[i].mu) == pytest.approx(points[want], rel=1e-12), i
        not_previous += want != i - 1
    assert not_previous > 0          # the design is such that the rule matters
    space = space_from_json(space_json(ConvexWarm2D.search_space))
    assert nearest_fit(space, {"lam": 1.0, "mu": 1.0}, []) is None


_log_values = st.floats(1e-6, 1e6, allow_nan=False, allow_infinity=False)


@settings(max_examples=200, deadline=None)
@given(a=_log_values, b=_log_values, c=_log_values, k=st.integers(1, 8), m=st.integers(1, 8))
def test_param_distance_is_a_metric_in_grid_steps(a, b, c, k, m):
    space = space_from_json(space_json({"lam": Log([0.1, 1.0, 10.0], low=0.0),
                                        "k": Int([1, 3, 5], low=1),
                                        "kind": Categorical(["x", "y"])}))
    p, q, r = ({"lam": a, "k": k, "kind": "x"}, {"lam": b, "k": m, "kind": "x"},
               {"lam": c, "k": k, "kind": "x"})
    assert param_distance(space, p, p) == 0.0
    assert param_distance(space, p, q) == pytest.approx(param_distance(space, q, p), rel=1e-12)
    assert param_distance(space, p, r) <= (param_distance(space, p, q)
                                           + param_distance(space, q, r)) * (1 + 1e-12) + 1e-12
    # one decade of lam is one grid step; two of k are one step
    assert param_distance(space, {**p, "lam": 1.0}, {**p, "lam": 10.0}) == pytest.approx(1.0)
    assert param_distance(space, {**p, "k": 1}, {**p, "k": 3}) == pytest.approx(1.0)
    assert param_distance(space, p, {**p, "kind": "y"}) == math.inf


def test_the_search_is_deterministic():
    a, b = _run(FarOptimum()), _run(FarOptimum())
    assert a.grid == b.grid and a.best_params == b.best_params


def test_ties_go_to_the_earlier_point():
    class Flat(FarOptimum):
        def fit(self, tasks, init=None):
            self.coef_ = np.tile([[1.0], [0.0]], (1, tasks.T))
            return self

    out = _run(Flat(), budget=7)
    assert out.best_params == out.grid[0]["params"] == {"lam": 0.1}
    assert best_index([{"val_auc": 0.7}, {"val_auc": 0.9}, {"val_auc": 0.9}]) == 1
    assert best_index([{"error": "x"}, {"val_auc": 0.5}]) == 1


def test_every_fit_of_a_search_uses_the_same_train_object():
    """One data-only precomputation per unit for the whole search (+1 for the refit)."""
    computed = []

    class Memo(FarOptimum):
        def fit(self, tasks, init=None):
            tasks.memo(("gram",), lambda: computed.append(id(tasks)) or 1)
            return super().fit(tasks, init)

    out = _run(Memo(), budget=14)
    assert len(out.grid) >= 14
    assert len(computed) == 2  # the train object of the search, the train+val of the refit


def test_integer_and_categorical_parameters():
    class IntModel(FarOptimum):
        search_space = {"k": Int([2, 3], low=1, high=40), "loss": Categorical(["a", "b"])}

        def __init__(self, k=2, loss="a", lam=1.0, mu=1.0):
            self.k, self.loss, self.lam, self.mu = k, loss, lam, mu

        def fit(self, tasks, init=None):
            self.lam = 10.0 ** (4 - abs(self.k - 12) / 3) * (1.0 if self.loss == "b" else 1e-3)
            return super().fit(tasks, init)

    out = _run(IntModel(), budget=20)
    assert out.best_params == {"k": 12, "loss": "b"}
    assert all(isinstance(e["params"]["k"], int) for e in out.grid)


def test_grid_searcher_ignores_the_budget():
    space = {"a": [1, 2, 3], "b": [1, 2, 3, 4, 5, 6, 7, 8]}
    g = GridSearcher(space)
    assert g.propose([])[1] == parameter_grid(space)
    assert g.propose([{}] * 24) == ("start", [])


def test_space_json_round_trip():
    space = {"lam": Log([0.1, 1.0], low=0.0, high=5.0), "k": Int([3], low=2),
             "w": Linear([0.5], low=0.0, high=1.0), "loss": ["auc", "sq"]}
    back = space_from_json(space_json(space))
    assert space_json(back) == space_json(space)
    assert back["loss"].grid == ("auc", "sq") and back["k"].low == 2


@settings(max_examples=40, deadline=None)
@given(grid=st.lists(st.floats(1e-3, 1e3), min_size=1, max_size=3,
                    # distinct starting values (1000.0 and 999.9999999999999 are one point)
                    unique_by=lambda v: round(math.log(v), 6)),
       peak=st.floats(-6, 6), budget=st.integers(4, 25),
       high=st.one_of(st.none(), st.floats(1e3, 1e5)))
# a start value within rounding of the bound is that bound; the bound itself, exactly
@example(grid=[999.9999999999999], peak=3.0, budget=4, high=1000.0)
@example(grid=[11.0], peak=3.0, budget=4, high=1000.6224371040516)
def test_adaptive_properties(grid, peak, budget, high):
    """Whatever the grid, peak, budget and bound: at most ``budget`` fits (unless the start
    is larger: it is fitted in full, as by the protocol), no point twice, every point within
    bounds, no selection at a non-bound edge unless the budget ran out."""
    space = {"lam": Log(sorted(grid), low=0.0, high=high)}
    s = AdaptiveSearcher(space)
    cap = max(budget, len(s.start()))
    trace: list = []
    while len(trace) < cap:
        phase, batch = s.propose(trace)
        if not batch:
            break
        for p in batch[: cap - len(trace)]:
            val = -abs(math.log10(p["lam"]) - peak)
            trace.append({"params": p, "val_auc": val, "phase": phase})
    lams = [t["params"]["lam"] for t in trace]
    assert len(trace) <= cap
    assert len({round(math.log(v), 9) for v in lams}) == len(lams)
    assert all(v > 0 and (high is None or v <= high) for v in lams)
    phase, batch = s.propose(trace)
    exhausted = phase == "extend" and bool(batch)
    b = best_index(trace)
    _, at_edge = edge_report(space, trace, trace[b]["params"])
    assert not at_edge or exhausted


def test_unknown_searcher_is_a_clear_error():
    with pytest.raises(Exception, match="unknown searcher 'nope'"):
        _run(FarOptimum(), search="nope")


# Per-repetition test AUC (x100) of the first published simulated table (grid search, seed 0),
# as committed before the adaptive search existed.
OLD_SPACES = {"lasso": {"rho_ratio": [0.003, 0.01, 0.03, 0.1, 0.3]},
              "stl": {"lam": [1e-1, 1.0, 10.0, 100.0, 1e3, 1e4]}}
OLD_SIMULATED = {"lasso": [90.76136363636364, 89.89772727272728, 90.21590909090908],
                 "stl": [84.77272727272727, 84.33522727272727, 83.55681818181819]}


@pytest.mark.parametrize("name", sorted(OLD_SIMULATED))
def test_grid_search_reproduces_the_old_simulated_numbers(name):
    from mtlbench.plugins import get_registry
    from mtlbench.search import space_json as sj

    reg = get_registry()
    cls = reg.model_class(name)
    tasks = reg.dataset("simulated").load("simulated")
    cfg = ProtocolConfig(reps=2, search="grid")
    got = [100 * run_protocol(cls(), sj(OLD_SPACES[name]), tasks, cfg, r).test_auc
           for r in range(2)]
    assert got == pytest.approx(OLD_SIMULATED[name][:2], rel=0, abs=1e-9)


FAR_PLUGIN = '''
import math
import numpy as np
from mtlbench import LinearMTLModel, Log, hookimpl

class Far(LinearMTLModel):
    """Scores at angle 0.35 |log10(lam / 1e4)| from feature 0 of the simulated data."""
    name = "tp-far"
    search_space = {"lam": Log([0.1, 1.0, 10.0], low=0.0, high=1e6)}
    def __init__(self, lam=1.0):
        self.lam = lam
    def fit(self, tasks, init=None):
        w = np.linalg.lstsq(np.vstack([tasks.X(t) for t in range(tasks.T)]),
                            np.concatenate([tasks.y(t) for t in range(tasks.T)]), rcond=None)[0]
        a = min(0.35 * abs(math.log10(self.lam / 1e4)), math.pi / 2)
        noise = np.random.default_rng(0).standard_normal(w.shape)
        v = math.cos(a) * w / np.linalg.norm(w) + math.sin(a) * noise / np.linalg.norm(noise)
        self.coef_ = np.tile(v[:, None], (1, tasks.T))
        self.converged_ = True
        return self

@hookimpl
def register_models(register):
    register(Far)
'''


def test_compare_end_to_end_stores_the_trace(tmp_path, monkeypatch):
    from click.testing import CliRunner
    from plugin_fixtures import activate, write_distribution

    from mtlbench.cli import cli
    from mtlbench.store import ResultStore

    write_distribution(tmp_path / "site", "tp-far", "1.0", {"tp_far": FAR_PLUGIN},
                       {"tp-far": "tp_far"})
    activate(monkeypatch, tmp_path / "site")
    store = tmp_path / "r.sqlite"
    res = CliRunner().invoke(cli, ["compare", "--models", "tp-far", "--reps", "1",
                                   "--budget", "20", "--store", str(store)])
    assert res.exit_code == 0, res.output
    assert "search adaptive (budget 20 fits per unit)" in " ".join(res.output.split())
    rs = ResultStore(str(store))
    (u,) = rs.units().to_dict("records")
    rs.close()
    s = u["diagnostics"]["search"]
    assert s["n_fits"] == len(u["grid"]) == 20 and s["search"] == "adaptive"
    assert u["protocol"]["search"] == "adaptive" and u["protocol"]["budget"] == 20
    assert u["protocol"]["search_version"] == AdaptiveSearcher.version == "4"
    assert math.isclose(u["best_params"]["lam"], 1e4, rel_tol=1e-9)
    assert s["at_edge"] == [] and s["selected_converged"] is True
    assert u["model_config"]["space"]["lam"] == {"kind": "log", "grid": [0.1, 1.0, 10.0],
                                                 "low": 0.0, "high": 1e6}


def test_a_searcher_proposing_outside_the_declared_space_is_a_clear_error(monkeypatch):
    from mtlbench import search as search_mod
    from mtlbench.errors import ConfigError

    class Rogue(search_mod.Searcher):
        name = "rogue"

        def propose(self, trace):
            return "start", [{"lam": -1.0}]

    monkeypatch.setitem(search_mod.BUILTIN_SEARCHERS, "rogue", Rogue)
    with pytest.raises(ConfigError, match="searcher 'rogue' proposed lam=-1.0.*must be >= 0"):
        _run(FarOptimum(), search="rogue")


@settings(max_examples=40, deadline=None)
@given(kind=st.sampled_from(["int", "linear"]),
       start=st.lists(st.integers(2, 20), min_size=1, max_size=3, unique=True),
       peak=st.floats(-50, 80), budget=st.integers(3, 25),
       high=st.one_of(st.none(), st.integers(21, 60)))
def test_adaptive_properties_int_and_linear(kind, start, peak, budget, high):
    """Int and Linear parameters: integers stay integers, bounds hold (low = 1), no repeats,
    and an interior optimum within reach is selected with an empty at_edge."""
    cls = Int if kind == "int" else Linear
    grid = sorted(start) if kind == "int" else sorted(float(v) for v in start)
    space = {"x": cls(grid, low=1, high=high)}
    s = AdaptiveSearcher(space)
    cap = max(budget, len(s.start()))  # the start is fitted in full, as by the protocol
    trace: list = []
    while len(trace) < cap:
        phase, batch = s.propose(trace)
        if not batch:
            break
        for p in batch[: cap - len(trace)]:
            trace.append({"params": p, "val_auc": -abs(p["x"] - peak), "phase": phase})
    xs = [t["params"]["x"] for t in trace]
    assert len(set(xs)) == len(xs)
    assert all(x >= 1 and (high is None or x <= high) for x in xs)
    if kind == "int":
        assert all(isinstance(x, int) for x in xs)
    phase, batch = s.propose(trace)
    b = best_index(trace)
    at_bound, at_edge = edge_report(space, trace, trace[b]["params"])
    assert not at_edge or (phase == "extend" and batch)


SEARCHER_PLUGIN = '''
from mtlbench import hookimpl
from mtlbench.search import Searcher

class FirstOnly(Searcher):
    """Fits the first point of the starting design only."""
    name = "tp-first"
    def propose(self, trace):
        return ("start", self.start()[:1]) if not trace else ("start", [])

@hookimpl
def register_searchers(register):
    register(FirstOnly)
'''


def test_a_searcher_plugin_is_used_through_search(tmp_path, monkeypatch):
    from click.testing import CliRunner
    from plugin_fixtures import activate, write_distribution

    from mtlbench.cli import cli
    from mtlbench.store import ResultStore

    write_distribution(tmp_path / "site", "tp-searcher", "0.1", {"tp_searcher": SEARCHER_PLUGIN},
                       {"tp-searcher": "tp_searcher"})
    activate(monkeypatch, tmp_path / "site")
    runner = CliRunner()
    res = runner.invoke(cli, ["plugins"])
    assert res.exit_code == 0 and "tp-first" in res.output
    store = tmp_path / "r.sqlite"
    res = runner.invoke(cli, ["compare", "--models", "stl", "--reps", "1", "--search", "tp-first",
                              "--store", str(store)])
    assert res.exit_code == 0, res.output
    rs = ResultStore(str(store))
    (u,) = rs.units().to_dict("records")
    rs.close()
    assert len(u["grid"]) == 1 and u["protocol"]["search"] == "tp-first"


def test_a_starting_design_larger_than_the_budget_is_fitted_and_flagged():
    space = {"lam": Log([0.1, 1.0, 10.0, 100.0], low=0.0),
             "mu": Categorical([1.0, 2.0, 3.0])}  # 12 starting points
    out = _run(FarOptimum(), space=space, budget=5)
    s = out.diagnostics["search"]
    # all 12 starting points, then (best at the lam edge) at most 5 extension fits
    assert 12 <= s["n_fits"] <= 17 and s["start_exceeds_budget"] and s["budget"] == 5
    assert all(e["phase"] == "extend" for e in out.grid[12:])
    g = _run(FarOptimum(), space=space, search="grid", budget=5).diagnostics["search"]
    assert g["n_fits"] == 12 and g["budget"] is None and not g["start_exceeds_budget"]


def test_a_searcher_version_is_part_of_the_unit_key_and_version_1_adds_nothing():
    from mtlbench.runner.unit import protocol_key_settings

    ad = protocol_key_settings(ProtocolConfig(search="adaptive"))
    gr = protocol_key_settings(ProtocolConfig(search="grid"))
    assert ad["search_version"] == AdaptiveSearcher.version != "1"
    assert "search_version" not in gr  # grid's rule is unchanged: old grid stores stay valid


def _search_trace(budget, monkeypatch, past_budget):
    from mtlbench.search.loop import search

    monkeypatch.setattr(AdaptiveSearcher, "extends_past_budget", past_budget)
    tasks = _data()
    trace, summary = search(FarOptimum(), space_json(FarOptimum.search_space), tasks, tasks,
                            "adaptive", budget)
    return [(e["phase"], e["params"], e["val_auc"]) for e in trace], summary


def test_extension_goes_on_past_the_budget_until_the_best_is_interior(monkeypatch):
    """Version 3: with 12 fits (the design) the far optimum (lam = 1e4, start 0.1-10) is
    still at the edge; the search extends on, for at most the budget again, and ends
    interior."""
    old, s_old = _search_trace(12, monkeypatch, past_budget=False)
    new, s_new = _search_trace(12, monkeypatch, past_budget=True)
    assert s_old["budget_exhausted"] and s_old["at_edge"] == ["lam"] and len(old) == 12
    assert not s_new["budget_exhausted"] and s_new["at_edge"] == [] and 12 < len(new) <= 24
    assert new[:12] == old                                   # the same search up to the budget
    assert all(phase == "extend" for phase, _, _ in new[12:])  # past it: extension only
    best = max(new, key=lambda e: e[2])[1]["lam"]
    assert math.isclose(best, OPT, rel_tol=1e-9)


def test_past_the_budget_the_search_stops_at_the_budget_again_and_says_so(monkeypatch):
    # a budget of 2 below the 12-point design: the design in full, then 2 extension fits
    new, s_new = _search_trace(2, monkeypatch, past_budget=True)
    assert len(new) == 14 and s_new["n_fits"] == 14 and s_new["budget_exhausted"]
    assert s_new["start_exceeds_budget"] and s_new["at_edge"] == ["lam"]


@pytest.mark.parametrize("budget", [10, 14, 20, 30])
def test_version_3_is_version_2_whenever_version_2_did_not_exhaust_the_budget(monkeypatch,
                                                                              budget):
    """Why a store's version-2 units that did not end budget-exhausted are the version-3
    results: below the budget both rules fit the same points, and at the budget both stop
    unless the rule asks to extend, which is what ``budget_exhausted`` records."""
    old, s_old = _search_trace(budget, monkeypatch, past_budget=False)
    new, s_new = _search_trace(budget, monkeypatch, past_budget=True)
    if not s_old["budget_exhausted"]:
        assert new == old and {k: v for k, v in s_new.items() if k != "fit_times"} == \
            {k: v for k, v in s_old.items() if k != "fit_times"}
    else:
        assert new[:len(old)] == old and len(new) > len(old)
