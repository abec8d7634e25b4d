"""The MALSAR harness (benchmarks/bench_malsar.py) without its timings: MALSAR's stopping rule
as the harness reads it, the closed-form clustered-MTL term, the objective maps of the models
that exist (against the models themselves and cvxpy), and, where GNU Octave and MALSAR are
installed, one MALSAR run on a tiny problem."""
from __future__ import annotations

import argparse
import importlib.util
import shutil
import sys
from pathlib import Path

import numpy as np
import pytest

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def bench():
    spec = importlib.util.spec_from_file_location("bench_malsar",
                                                  REPO / "benchmarks" / "bench_malsar.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules["bench_malsar"] = mod          # dataclasses look their module up
    spec.loader.exec_module(mod)
    yield mod
    sys.modules.pop("bench_malsar", None)


def _problem(bench, kind="regression", T=4, d=5, seed=0):
    rng = np.random.default_rng(seed)
    Xs = [rng.standard_normal((12 + 3 * t, d)) for t in range(T)]
    w = rng.standard_normal(d)
    ys = [X @ (w + 0.5 * rng.standard_normal(d)) + 0.1 * rng.standard_normal(X.shape[0])
          for X in Xs]
    if kind == "binary":
        ys = [np.where(y > np.median(y), 1.0, -1.0) for y in ys]
    return bench.Problem("toy", kind, Xs, ys)


def test_stop_index_follows_malsar_relative_change_rule(bench):
    fv = np.array([10.0, 5.0, 4.0, 3.9, 3.899, 3.8989999])
    # |f_k - f_{k-1}| <= tol f_{k-1}, checked from the third value on
    assert bench.stop_index(fv, 0.5) == 2            # |4 - 5| = 1 <= 2.5 (k = 1 is not checked)
    assert bench.stop_index(fv, 0.03) == 3           # 0.1 <= 0.12
    assert bench.stop_index(fv, 1e-3) == 4
    assert bench.stop_index(fv, 1e-12) == fv.size - 1  # never: the run's last value
    # 3.899 is 2.6e-8 above F*: the loosest ladder tol that runs on to the last value
    # (0.001 > tol * 3.9, i.e. tol < 2.56e-4) is 2e-4
    assert bench.loosest_tol(fv, 3.8989999) == (pytest.approx(2e-4), 5)
    assert bench.loosest_tol(fv, 1.0) is None          # no stop reaches F*


def test_loosest_tol_bisects_costly_judgements(bench):
    """Where MALSAR's recorded values are not its objective, the candidate stops are judged
    by a costly callable: bisected, the same answer as a scan, in O(log n) judgements."""
    fv = 1.0 + 0.5 ** np.arange(60.0)                 # the recorded values drive the stops
    true = 1.0 + 3.0 * 0.5 ** np.arange(60.0)         # the objective at each iterate
    calls = []

    def value(tol, k):
        calls.append(k)
        return true[k]

    tol, k = bench.loosest_tol(fv, 1.0, value)
    stops = sorted({bench.stop_index(fv, t) for t in bench.LADDER + (bench.MALSAR_MIN_TOL,)})
    first = next(j for j in stops if true[j] - 1.0 <= bench.REL)
    assert k == first and bench.stop_index(fv, tol) == k
    assert k != next(j for j in stops if fv[j] - 1.0 <= bench.REL)   # fv alone would differ
    assert len(calls) <= np.ceil(np.log2(len(stops))) + 2
    assert bench.loosest_tol(fv, 0.5, value) is None                 # never close to F*


@pytest.mark.parametrize("spectrum, k", [((4.0, 1.0, 0.5, 0.2, 0.1), 3.0),
                                         ((4.0, 1.0, 0.0, 0.0, 0.0), 2.0),
                                         ((4.0, 0.0, 0.0, 0.0, 0.0), 2.0)])
def test_cmtl_term_is_the_minimum_over_the_relaxed_cluster_matrices(bench, spectrum, k):
    """Spectra of W^T W with several m_i strictly inside (0, 1), and of low rank."""
    cp = pytest.importorskip("cvxpy")
    rng = np.random.default_rng(1)
    U, _ = np.linalg.qr(rng.standard_normal((6, 5)))
    V, _ = np.linalg.qr(rng.standard_normal((5, 5)))
    W = U @ np.diag(np.sqrt(spectrum)) @ V.T
    rho1, rho2 = 0.7, 0.4
    eta = rho2 / rho1
    M = cp.Variable((5, 5), symmetric=True)
    prob = cp.Problem(cp.Minimize(rho1 * eta * (1 + eta)
                                  * cp.matrix_frac(W.T, eta * np.eye(5) + M)),
                      [M >> 0, np.eye(5) - M >> 0, cp.trace(M) == k])
    prob.solve(solver="CLARABEL")
    assert bench.cmtl_term(W, rho1, rho2, k) == pytest.approx(prob.value, rel=1e-6)


@pytest.mark.parametrize("key", ["Least_Lasso", "Least_rMTFL"])
def test_objective_map_matches_the_installed_model(bench, key):
    """MALSAR's objective / factor at the model's solution is the model's own objective, and
    the model's penalty weights are MALSAR's rho's / factor."""
    form, p = bench.FORMULATIONS[key], _problem(bench)
    rho = tuple(f * s for f, s in zip(form.points[1], form.scales(p)))
    cls = bench.registered_model(form.model)
    model, _, tasks = bench.fit_mtlbench(cls, form.to_mtlbench(p, rho), p, 1e-10, 10000)
    F = form.objective(p, rho, bench.mtlbench_solution(model), form.extras(p)) / form.factor
    assert F == pytest.approx(bench.own_objective(model, tasks), rel=1e-12)
    weights = [model.rho_] if key == "Least_Lasso" else [model.lam1_, model.lam2_]
    np.testing.assert_allclose(weights, np.array(rho) / form.factor, rtol=1e-12)


@pytest.mark.parametrize("key", ["Least_Lasso", "Least_rMTFL"])
def test_cvxpy_form_has_the_models_optimum(bench, key):
    pytest.importorskip("cvxpy")
    form, p = bench.FORMULATIONS[key], _problem(bench, seed=2)
    rho = tuple(f * s for f, s in zip(form.points[0], form.scales(p)))
    E = form.extras(p)
    sol, status = bench.cvxpy_reference(form, p, rho, E)
    assert sol is not None, status
    model, _, _ = bench.fit_mtlbench(bench.registered_model(form.model),
                                     form.to_mtlbench(p, rho), p, 1e-12, 100000)
    f_model = form.objective(p, rho, bench.mtlbench_solution(model), E)
    assert form.objective(p, rho, sol, E) == pytest.approx(f_model, rel=1e-7)


def test_logistic_scales_are_where_zero_becomes_optimal(bench):
    """G0 of the logistic term (intercepts at their optimum at W = 0): at the L1 weight
    max |G0| the intercept-only model is optimal, just below it is not (cvxpy)."""
    pytest.importorskip("cvxpy")
    form, p = bench.FORMULATIONS["Logistic_Lasso"], _problem(bench, kind="binary", seed=3)
    (scale,) = form.scales(p)
    for frac, zero in ((1.0 + 1e-6, True), (0.9, False)):
        sol, status = bench.cvxpy_reference(form, p, (frac * scale,), form.extras(p))
        assert sol is not None, status
        assert (np.abs(sol["W"]).max() < 1e-6) == zero


def test_every_entry_names_its_outputs_and_a_model(bench):
    for key, form in bench.FORMULATIONS.items():
        assert form.outputs[0] == "W" and "fv" in form.outputs, key
        assert form.model, f"{key}: no mtlbench model name in MODEL_NAMES"
        assert len(form.points[0]) == len(form.scales(_problem(
            bench, kind="binary" if form.loss == "logistic" else "regression"))), key


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("octave") is None or not (
    Path("/work/malsar") / "MALSAR" / "utils").is_dir(),
    reason="GNU Octave and MALSAR (/work/malsar) are not installed (benchmarks/README.md)")
def test_malsar_under_octave_reaches_the_models_optimum(bench, tmp_path):
    form, p = bench.FORMULATIONS["Least_Lasso"], _problem(bench, seed=4)
    args = argparse.Namespace(max_iter=20000, repeats=1, cvxpy=False)
    row = bench.run_instance(form, p, form.points[1], bench.Octave(Path("/work/malsar"),
                                                                     tmp_path), args)
    assert row["same_optimum"], row
    assert abs(row["mapping_malsar"]) < 1e-12
    assert row["malsar"]["as_predicted"]
