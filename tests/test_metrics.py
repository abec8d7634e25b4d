import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from mtlbench import DataValidationError, auc_score
from mtlbench.metrics import (BUILTIN_METRICS, PRIMARY_METRIC, SCORE_TIE_RTOL, SELECTION_RTOL,
                              average_ranks)
from mtlbench.scoring import TaskScores, get_metric, metrics_for, score_tasks, selection_metric


def brute_force_auc(y, s):
    pos, neg = s[y > 0], s[y < 0]
    wins = (pos[:, None] > neg[None, :]).sum() + 0.5 * (pos[:, None] == neg[None, :]).sum()
    return wins / (len(pos) * len(neg))


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.booleans(), st.integers(-5, 5)), min_size=2, max_size=60))
def test_auc_equals_brute_force_pair_count_with_ties(pairs):
    y = np.array([1.0 if p else -1.0 for p, _ in pairs])
    s = np.array([float(v) for _, v in pairs])  # small integer range: many ties
    if len(set(y)) < 2:
        with pytest.raises(DataValidationError):
            auc_score(y, s)
        return
    assert auc_score(y, s) == pytest.approx(brute_force_auc(y, s), abs=1e-12)


def test_auc_extremes_and_constant_scores():
    y = np.array([1, 1, -1, -1.0])
    assert auc_score(y, np.array([4, 3, 2, 1.0])) == 1.0
    assert auc_score(y, np.array([1, 2, 3, 4.0])) == 0.0
    assert auc_score(y, np.zeros(4)) == 0.5


def test_auc_rejects_bad_scores():
    with pytest.raises(DataValidationError, match="NaN"):
        auc_score(np.array([1, -1.0]), np.array([np.nan, 0.0]))
    with pytest.raises(DataValidationError, match="shapes"):
        auc_score(np.array([1, -1.0]), np.array([0.0]))


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(-4, 4) | st.floats(-1e3, 1e3, allow_nan=False), min_size=1,
                max_size=80))
def test_average_ranks_without_tolerance_reproduce_scipy_rankdata_exactly(values):
    from scipy.stats import rankdata

    s = np.array(values, dtype=np.float64)
    np.testing.assert_array_equal(average_ranks(s, rtol=0.0), rankdata(s))


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.booleans(), st.integers(-5, 5)), min_size=2, max_size=60),
       st.integers(0, 2 ** 31 - 1))
def test_auc_is_the_same_when_tied_scores_move_in_their_last_bits(pairs, seed):
    """What another BLAS kernel does to rows with equal features: tied scores come out
    different in the last bits.  Within the tie tolerance they are still ties, so the AUC is
    the exact-tie AUC (the brute-force count with equal scores counted 1/2)."""
    y = np.array([1.0 if p else -1.0 for p, _ in pairs])
    if len(set(y)) < 2:
        return
    exact = np.array([10.0 + v for _, v in pairs])     # scale ~10, integer gaps of 1
    rng = np.random.default_rng(seed)
    noisy = exact * (1.0 + rng.uniform(-8, 8, exact.shape) * np.finfo(float).eps)
    assert auc_score(y, noisy) == auc_score(y, exact) == brute_force_auc(y, exact)
    # a real gap far above the tolerance is not a tie
    gap = exact.copy()
    gap[0] += 1e3 * SCORE_TIE_RTOL * np.abs(exact).max()
    assert auc_score(y, gap, rtol=SCORE_TIE_RTOL) == auc_score(y, gap, rtol=0.0)


def test_builtin_metrics_by_hand():
    """Two tasks, small enough to compute every metric by hand."""
    y = [np.array([1.0, -1.0, 1.0, -1.0]), np.array([1.0, 1.0, -1.0])]
    s = [np.array([0.9, 0.2, 0.1, -0.5]), np.array([-0.2, 0.4, 0.3])]
    sc = TaskScores(y, s)
    # task 0: pairs (0.9 > 0.2, 0.9 > -0.5, 0.1 < 0.2, 0.1 > -0.5) -> 3/4; task 1: 0.4 > 0.3,
    # -0.2 < 0.3 -> 1/2
    assert sc.value(get_metric("auc")) == (pytest.approx(0.625), pytest.approx([0.75, 0.5]))
    # signs: task 0 (+, +, +, -) vs (+, -, +, -): 3/4 right; task 1 (-, +, +) vs (+, +, -): 1/3
    acc, acc_t = sc.value(get_metric("accuracy"))
    assert acc_t == pytest.approx([0.75, 1 / 3]) and acc == pytest.approx((0.75 + 1 / 3) / 2)
    err, err_t = sc.value(get_metric("error-rate"))
    assert err_t == pytest.approx([0.25, 2 / 3]) and err == pytest.approx(1 - acc)
    # pooled: 4 positives (0.9, 0.1, -0.2, 0.4) x 3 negatives (0.2, -0.5, 0.3): 3 + 1 + 1 + 3
    assert sc.value(get_metric("pooled-auc"))[0] == pytest.approx(8 / 12)

    yr = [np.array([1.0, 2.0, 3.0]), np.array([0.0, 4.0])]
    sr = [np.array([1.0, 1.0, 4.0]), np.array([1.0, 3.0])]
    rs = TaskScores(yr, sr)
    rmse, rmse_t = rs.value(get_metric("rmse"))
    assert rmse_t == pytest.approx([np.sqrt(2 / 3), 1.0]) and rmse == pytest.approx(
        (np.sqrt(2 / 3) + 1) / 2)
    assert rs.value(get_metric("mae"))[1] == pytest.approx([2 / 3, 1.0])
    # pooled: SSE = 1 + 1 + 1 + 1 = 4 over the 5 targets (mean 2): SST = 1 + 0 + 1 + 4 + 4 = 10
    nmse, nmse_t = rs.value(get_metric("nmse"))
    assert nmse == pytest.approx(0.4) and nmse_t == pytest.approx([2 / 2, 2 / 8])
    assert rs.value(get_metric("explained-variance"))[0] == pytest.approx(0.6)


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 2 ** 31 - 1), st.integers(1, 4))
def test_builtin_metrics_agree_with_scikit_learn(seed, T):
    from sklearn.metrics import (accuracy_score, mean_absolute_error, mean_squared_error,
                                 r2_score, roc_auc_score)

    rng = np.random.default_rng(seed)
    n = rng.integers(4, 30, T)
    yb = [np.where(np.arange(k) % 2 == 0, 1.0, -1.0) for k in n]
    ss = [rng.normal(size=k) for k in n]
    b = TaskScores(yb, ss)
    assert b.value(get_metric("auc"))[1] == pytest.approx(
        [roc_auc_score(y, s) for y, s in zip(yb, ss)], abs=1e-12)
    assert b.value(get_metric("pooled-auc"))[0] == pytest.approx(
        roc_auc_score(np.concatenate(yb), np.concatenate(ss)), abs=1e-12)
    assert b.value(get_metric("accuracy"))[1] == pytest.approx(
        [accuracy_score(y, np.where(s > 0, 1.0, -1.0)) for y, s in zip(yb, ss)])
    yr = [rng.normal(3.0, 2.0, k) for k in n]
    r = TaskScores(yr, ss)
    assert r.value(get_metric("rmse"))[1] == pytest.approx(
        [np.sqrt(mean_squared_error(y, s)) for y, s in zip(yr, ss)])
    assert r.value(get_metric("mae"))[1] == pytest.approx(
        [mean_absolute_error(y, s) for y, s in zip(yr, ss)])
    pooled_r2 = r2_score(np.concatenate(yr), np.concatenate(ss))
    assert r.value(get_metric("explained-variance"))[0] == pytest.approx(pooled_r2)
    assert r.value(get_metric("nmse"))[0] == pytest.approx(1.0 - pooled_r2)
    assert r.value(get_metric("explained-variance"))[1] == pytest.approx(
        [r2_score(y, s) for y, s in zip(yr, ss)])


def test_a_task_with_constant_test_targets_has_undefined_normalised_metrics():
    rs = TaskScores([np.array([2.0, 2.0]), np.array([0.0, 1.0])],
                    [np.array([1.0, 2.0]), np.array([0.0, 1.0])])
    values, per_task, failed = score_tasks(rs, metrics_for("real"))
    assert not failed
    assert per_task["nmse"][0] is None and per_task["explained-variance"][0] is None
    assert per_task["nmse"][1] == 0.0 and values["nmse"] is not None   # pooled: defined
    assert per_task["rmse"] == pytest.approx([np.sqrt(0.5), 0.0])


def test_a_score_at_the_threshold_counts_half():
    sc = TaskScores([np.array([1.0, -1.0])], [np.zeros(2)])
    assert sc.value(get_metric("accuracy"))[0] == 0.5
    assert sc.value(get_metric("error-rate"))[0] == 0.5


def test_metrics_declare_kinds_and_directions():
    assert PRIMARY_METRIC == {"binary": "auc", "real": "rmse"}
    assert [m.name for m in metrics_for("binary")] == ["auc", "pooled-auc", "accuracy",
                                                       "error-rate"]
    assert [m.name for m in metrics_for("real")] == ["rmse", "mae", "nmse",
                                                     "explained-variance"]
    lower = {n for n, cls in BUILTIN_METRICS.items() if not cls.higher_is_better}
    assert lower == {"error-rate", "rmse", "mae", "nmse"}
    assert get_metric("rmse").oriented(2.0) == -2.0 and get_metric("auc").oriented(0.7) == 0.7
    assert selection_metric(None, "real").name == "rmse"
    with pytest.raises(Exception, match="applies to real-valued targets, but .* binary"):
        selection_metric("rmse", "binary", "simulated")


def test_selection_ties_within_the_tolerance_go_to_the_earliest_fit():
    from mtlbench.search import best_index

    a = 0.7
    trace = [{"val_auc": a}, {"val_auc": a * (1 + SELECTION_RTOL / 2)}, {"val_auc": 0.6},
             {}, {"val_auc": a * (1 + 10 * SELECTION_RTOL)}]
    assert best_index(trace) == 4                        # a real improvement wins
    assert best_index(trace[:4]) == 0                    # last-bit noise does not
    assert best_index([{}, {"error": "x"}]) is None
    rmse = [{"val_rmse": 2.0}, {"val_rmse": 1.5}, {"val_rmse": 1.5 * (1 - SELECTION_RTOL / 3)},
            {"val_rmse": 3.0}]
    assert best_index(rmse, "rmse") == 1                 # lower is better; tie -> earlier
    assert best_index(rmse, "rmse") != best_index([{"val_auc": v["val_rmse"]} for v in rmse])


@settings(max_examples=30, deadline=None)
@given(st.integers(0, 2**31 - 1))
def test_a_task_of_rounding_noise_scores_as_a_constant_on_every_machine(seed):
    """A task whose scores are a cancellation residue (|s| ~ 1e-18 beside order-1 scores of the
    other tasks) gets AUC 1/2 and accuracy 1/2 whatever the residue's signs, and the other
    tasks keep their values."""
    rng = np.random.default_rng(seed)
    y = np.array([1.0, 1.0, -1.0, -1.0, 1.0, -1.0])
    good = rng.normal(size=6)
    noise = rng.normal(size=6) * 1e-18
    auc, accuracy = get_metric("auc"), get_metric("accuracy")
    scores = TaskScores([y, y], [good, noise])
    assert auc.task_value(y, scores.ss[1]) == 0.5
    assert accuracy.task_value(y, scores.ss[1]) == 0.5
    assert scores.value(auc)[1][0] == auc.task_value(y, good)
    # alone, the residue is its own scale: then it is ranked as it falls
    alone = TaskScores([y], [noise])
    assert np.array_equal(alone.ss[0], noise)
