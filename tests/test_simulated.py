import numpy as np

from mtlbench_datasets.simulated import make_simulated


def test_paper_recipe_shapes_blocks_and_labels():
    ts = make_simulated(seed=3)
    assert ts.T == 100 and ts.d == 80
    W = ts.meta["true_W"]
    assert W.shape == (80, 100)
    fg, tg = ts.meta["feature_groups"], ts.meta["task_groups"]
    assert np.bincount(fg).tolist() == [20, 20, 10, 20, 10]
    assert np.bincount(tg).tolist() == [20] * 5
    # block diagonal: nonzero exactly where feature group == task group
    np.testing.assert_array_equal(W != 0, fg[:, None] == tg[None, :])
    for t in range(ts.T):
        assert ts.X(t).shape == (200, 80)
        assert ts.n_total == 20000
        assert np.count_nonzero(ts.y(t) > 0) == 50
    # centroids C_b ~ U(0, K_b)
    assert np.all(ts.meta["centroids"] >= 0)
    assert np.all(ts.meta["centroids"] <= np.array([5, 5, 10, 15, 20]))


def test_labels_are_top_50_of_noisy_scores():
    ts = make_simulated(seed=1)
    W = ts.meta["true_W"]
    for t in range(0, 100, 17):
        s = ts.X(t) @ W[:, t]
        # noise std 0.1 is tiny next to the score scale: the top 50 clean scores are positive
        pos = ts.y(t) > 0
        assert s[pos].min() > np.sort(s)[-60]


def test_seeded_and_deterministic():
    a, b, c = make_simulated(seed=0), make_simulated(seed=0), make_simulated(seed=1)
    assert a.fingerprint() == b.fingerprint()
    assert a.fingerprint() != c.fingerprint()
