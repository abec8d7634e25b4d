"""The protocol: deterministic stratified splits, validation-only selection, no test leak."""
import numpy as np
import pytest
from hypothesis import given, strategies as st

from mtlbench import LinearMTLModel, MTLModel, TaskSet
from mtlbench.protocol import (ProtocolConfig, evaluable_tasks, make_split, parameter_grid,
                               run_protocol)
from mtlbench_models.stl import STL

from conftest import small_problem


def _rows_as_sets(split):
    return [(set(a), set(b), set(c)) for a, b, c in zip(split.train, split.val, split.test)]


def test_split_is_stratified_disjoint_and_complete(problem):
    cfg = ProtocolConfig(seed=7)
    split = make_split(problem, cfg, rep=0)
    for t, (tr, va, te) in enumerate(_rows_as_sets(split)):
        y = problem.y(t)
        assert not (tr & va or tr & te or va & te)
        assert tr | va | te == set(range(len(y)))
        for part in (tr, va, te):
            assert {-1.0, 1.0} <= set(y[list(part)])
        n_pos = (y > 0).sum()
        assert (y[list(te)] > 0).sum() == max(1, round(0.15 * n_pos))
        assert len(te) == pytest.approx(0.15 * len(y), abs=2)


def test_split_depends_only_on_data_seed_and_rep(problem):
    cfg = ProtocolConfig(seed=1)
    a = make_split(problem, cfg, rep=2)
    b = make_split(small_problem(), ProtocolConfig(seed=1, reps=3), rep=2)  # reps irrelevant
    assert a.fingerprint() == b.fingerprint()
    assert a.fingerprint() != make_split(problem, cfg, rep=3).fingerprint()
    assert a.fingerprint() != make_split(problem, ProtocolConfig(seed=2), rep=2).fingerprint()


def test_every_model_sees_identical_splits(problem):
    from mtlbench_models.lasso import LASSO

    cfg = ProtocolConfig(reps=1)
    a = run_protocol(STL(), {"lam": [1.0]}, problem, cfg, rep=0)
    b = run_protocol(LASSO(), {"rho_ratio": [0.1]}, problem, cfg, rep=0)
    assert a.split_fingerprint == b.split_fingerprint
    assert a.data_fingerprint == b.data_fingerprint


class Spy(LinearMTLModel):
    """Ridge that records the exact (features, label) rows it was fitted on."""

    name = "spy"
    seen: list = []

    def __init__(self, lam=1.0):
        self.lam = lam

    def fit(self, tasks, init=None):
        Spy.seen.append({(t, tuple(np.round(x, 12)), y)
                         for t in range(tasks.T) for x, y in zip(tasks.X(t), tasks.y(t))})
        assert tasks.meta == {}, "ground truth must not reach the model"
        self.coef_ = STL(lam=self.lam).fit(tasks).coef_
        return self


def test_no_test_row_ever_reaches_fit(problem):
    Spy.seen = []
    cfg = ProtocolConfig(seed=4)
    out = run_protocol(Spy(), {"lam": [0.1, 1.0, 10.0]}, problem, cfg, rep=1)
    split = make_split(problem, cfg, rep=1)
    test_rows = {(t, tuple(np.round(problem.X(t)[i], 12)), problem.y(t)[i])
                 for t in range(problem.T) for i in split.test[t]}
    val_rows = {(t, tuple(np.round(problem.X(t)[i], 12)), problem.y(t)[i])
                for t in range(problem.T) for i in split.val[t]}
    # every fit of the search (a list space is a range searched with the full budget since
    # version 4 of the rule), then the refit
    assert len(Spy.seen) == len(out.grid) + 1 >= 20
    for seen in Spy.seen[:-1]:
        assert not seen & test_rows and not seen & val_rows
    assert not Spy.seen[-1] & test_rows and val_rows <= Spy.seen[-1]
    assert out.best_params["lam"] in [e["params"]["lam"] for e in out.grid]


class Peeker(MTLModel):
    """Wins only by peeking: ``mode='peek'`` memorises labels of the items it was fitted on
    and scores those perfectly (and everything else at random).  If validation or test labels
    reached ``fit`` during selection, 'peek' would win the selection."""

    name = "peeker"

    def __init__(self, mode="honest"):
        self.mode = mode

    def fit(self, tasks, init=None):
        self.ridge_ = STL(lam=1.0).fit(tasks)
        self.memory_ = {(t, tuple(x)): y for t in range(tasks.T)
                        for x, y in zip(tasks.X(t), tasks.y(t))}
        return self

    def decision_function(self, X, task):
        if self.mode == "honest":
            return self.ridge_.decision_function(X, task)
        rng = np.random.default_rng(0)
        return np.array([self.memory_.get((task, tuple(x)), rng.uniform(-0.5, 0.5)) for x in X])


def test_a_model_that_wins_only_by_peeking_is_never_selected():
    ts = small_problem(T=5, n=60, seed=2)
    out = run_protocol(Peeker(), {"mode": ["peek", "honest"]}, ts, ProtocolConfig(), rep=0)
    assert out.best_params == {"mode": "honest"}
    peek = next(g for g in out.grid if g["params"]["mode"] == "peek")
    assert abs(peek["val_auc"] - 0.5) < 0.15  # no better than chance on unseen validation rows


def test_test_labels_cannot_influence_selection():
    """Flip every test label: the chosen hyperparameters and validation scores are unchanged."""
    ts = small_problem(T=5, n=50, seed=5)
    cfg = ProtocolConfig(seed=3)
    split = make_split(ts, cfg, rep=0)
    flipped = [y.copy() for y in ts.labels]
    for t, rows in enumerate(split.test):
        flipped[t][rows] *= -1
    ts2 = TaskSet.from_arrays("small", [ts.X(t) for t in range(ts.T)], flipped)
    # stratification by class makes the flipped data's split differ; pin the original split
    space = {"lam": [0.01, 1.0, 100.0]}
    a = run_protocol(STL(), space, ts, cfg, rep=0)
    import mtlbench.protocol as protocol

    orig = protocol.make_split
    protocol.make_split = lambda tasks, config, rep: split
    try:
        b = run_protocol(STL(), space, ts2, cfg, rep=0)
    finally:
        protocol.make_split = orig
    assert a.best_params == b.best_params
    assert [g["val_auc"] for g in a.grid] == [g["val_auc"] for g in b.grid]
    assert a.test_auc == pytest.approx(1 - b.test_auc, abs=1e-12)  # test really was flipped


def test_tasks_with_too_few_labels_of_a_class_are_dropped_and_recorded():
    ts = small_problem(T=4, n=30)
    y = ts.labels[1].copy()
    pos = np.flatnonzero(y > 0)
    y[pos[2:]] = -1.0  # only 2 positives left
    ts2 = TaskSet.from_arrays("p", [ts.X(t) for t in range(4)],
                              [ts.labels[0], y, ts.labels[2], ts.labels[3]])
    keep, dropped = evaluable_tasks(ts2)
    assert keep == [0, 2, 3] and dropped == ["task1"]
    out = run_protocol(STL(), {"lam": [1.0]}, ts2, ProtocolConfig(), rep=0)
    assert out.dropped_tasks == ["task1"] and len(out.task_auc) == 3


def test_parameter_grid_is_stable_and_validated():
    assert parameter_grid({"b": [1, 2], "a": [3]}) == [{"a": 3, "b": 1}, {"a": 3, "b": 2}]
    assert parameter_grid({}) == [{}]
    from mtlbench import ConfigError

    with pytest.raises(ConfigError, match="non-empty list"):
        parameter_grid({"a": []})


def test_structure_recovery_on_simulated_truth():
    from mtlbench_datasets.simulated import make_simulated

    ts = make_simulated(seed=0)
    sub = ts  # use the true W as a "model": perfect support recovery

    class Oracle(LinearMTLModel):
        name = "oracle"

        def fit(self, tasks, init=None):
            self.coef_ = sub.meta["true_W"]
            self.task_groups_ = sub.meta["task_groups"]
            return self

    from mtlbench.protocol import structure_recovery

    m = Oracle().fit(ts)
    rec = structure_recovery(m, ts)
    assert rec["support_precision"] == 1.0 and rec["support_recall"] == 1.0
    assert rec["ari_task_groups"] == 1.0


# ---------------------------------------------------------------- model contract
def _contract_problem():
    from mtlbench import TaskSet

    rng = np.random.default_rng(0)
    Xs = [rng.standard_normal((40, 3)) for _ in range(3)]
    ys = [np.where(X[:, 0] > 0, 1.0, -1.0) for X in Xs]
    return TaskSet.from_arrays("contract", Xs, ys)


def test_fit_returning_none_is_a_named_contract_error():
    from mtlbench import LinearMTLModel
    from mtlbench.errors import ModelContractError

    class ReturnsNone(LinearMTLModel):
        name = "returns-none"

        def __init__(self, lam=1.0):
            self.lam = lam

        def fit(self, tasks, init=None):
            self.coef_ = np.ones((tasks.d, tasks.T))

    with pytest.raises(ModelContractError, match="'returns-none': fit\\(\\) returned None"):
        run_protocol(ReturnsNone(), {"lam": [1.0, 2.0]}, _contract_problem(),
                     ProtocolConfig(reps=1), rep=0)


def test_decision_function_shape_is_a_named_contract_error():
    from mtlbench import LinearMTLModel
    from mtlbench.errors import ModelContractError

    class BadShape(LinearMTLModel):
        name = "bad-shape"

        def fit(self, tasks, init=None):
            self.coef_ = np.ones((tasks.d, tasks.T))
            return self

        def decision_function(self, X, task):
            return np.ones((X.shape[0], 2))

    with pytest.raises(ModelContractError, match="'bad-shape': decision_function returned shape"):
        run_protocol(BadShape(), {}, _contract_problem(), ProtocolConfig(reps=1), rep=0)


# ------------------------------------------------------------------ rules kept in one place

@given(st.integers(0, 8), st.integers(0, 8))
def test_class_counts_ok_is_the_protocol_rule(n_pos, n_neg):
    from mtlbench.protocol import MIN_PER_CLASS, class_counts, class_counts_ok

    y = np.array([1.0] * n_pos + [-1.0] * n_neg)
    assert class_counts(y) == (n_pos, n_neg)
    assert class_counts_ok(y) == (min(n_pos, n_neg) >= MIN_PER_CLASS)
    assert class_counts_ok(y, 1) == (min(n_pos, n_neg) >= 1)


def test_checked_scores_names_the_problem():
    from mtlbench.errors import ModelContractError
    from mtlbench.protocol import checked_scores

    assert checked_scores([1, 2, 3], 3, "t").dtype == np.float64  # ints accepted by the protocol
    with pytest.raises(ModelContractError, match=r"model 'm': decision_function returned shape "
                                                 r"\(3, 1\) for task 't'"):
        checked_scores(np.ones((3, 1)), 3, "t", who="model 'm'")
    with pytest.raises(ModelContractError, match="dtype int64 for task 't'; expected float"):
        checked_scores(np.arange(3), 3, "t", require_float=True)
    with pytest.raises(FloatingPointError, match="NaN/inf scores for task 't'"):
        checked_scores([0.0, np.inf, 1.0], 3, "t")
