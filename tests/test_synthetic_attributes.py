"""The paper-scale synthetic attribute dataset: same preprocessing as ``shoes``, deterministic,
small settings for tests."""
import numpy as np
import pytest

from mtlbench.errors import UnknownNameError
from mtlbench_datasets.personalized import PersonalizedAttributes
from mtlbench_datasets.synthetic_attributes import SyntheticAttributes

SMALL = dict(n_items=400, n_features=30, latent_dim=8, users=30, labels_per_user=40,
             n_components=10)


def test_defaults_are_the_papers_shoes_scale():
    ds = SyntheticAttributes()
    assert ds.problems() == [f"attr{a}" for a in range(7)]
    p = ds.params()
    assert (p["n_items"], p["n_features"], p["users"], p["labels_per_user"], p["n_components"],
            p["min_minority"]) == (14658, 990, 200, 50, 100, 8)


def test_small_setting_goes_through_pca_and_the_minority_filter():
    ds = SyntheticAttributes(one_sided=0.3, **SMALL)
    tasks = ds.load("attr1")
    assert tasks.d == 10                                   # PCA to n_components
    assert tasks.meta["pca"]["n_components"] == 10
    filt = tasks.meta["minority_filter"]
    assert filt["n_users_before"] == 30
    assert tasks.T == 30 - filt["n_removed"] and filt["n_removed"] > 0
    for t in range(tasks.T):                               # the filter's rule holds
        y = tasks.y(t)
        assert min((y > 0).sum(), (y < 0).sum()) >= 8
        assert y.shape[0] == 40
    # removed users are mostly the one-sided ones
    removed = {r["task"] for r in filt["removed"]}
    assert len(removed & set(tasks.meta["one_sided_users"])) >= len(removed) // 2
    assert tasks.meta["task_groups"].shape == (tasks.T,)


def test_deterministic_and_an_attribute_does_not_depend_on_how_many_there_are():
    a = SyntheticAttributes(n_attributes=2, **SMALL).load("attr1")
    b = SyntheticAttributes(n_attributes=5, **SMALL).load("attr1")
    assert a.fingerprint() == b.fingerprint()
    c = SyntheticAttributes(seed=1, n_attributes=2, **SMALL).load("attr1")
    assert c.fingerprint() != a.fingerprint()


def test_unknown_problem_and_bad_parameters_are_named():
    ds = SyntheticAttributes(n_attributes=2, **SMALL)
    with pytest.raises(UnknownNameError, match="attr5.*attr0, attr1"):
        ds.load("attr5")
    with pytest.raises(ValueError, match="users must be a positive integer"):
        SyntheticAttributes(**{**SMALL, "users": 0}).load("attr0")
    with pytest.raises(ValueError, match="label_noise must be in"):
        SyntheticAttributes(label_noise=0.7, **SMALL).load("attr0")


def test_written_layout_loads_identically_through_the_personalized_reader(tmp_path):
    ds = SyntheticAttributes(n_attributes=2, **SMALL)
    folder = ds.write_layout(tmp_path / "synth")
    generic = PersonalizedAttributes(n_components=10)
    assert generic.problems(data_dir=folder) == ["attr0", "attr1"]
    for problem in ("attr0", "attr1"):
        mine, theirs = ds.load(problem), generic.load(problem, data_dir=folder)
        assert mine.task_names == theirs.task_names
        assert mine.T == theirs.T and mine.d == theirs.d
        for t in range(mine.T):
            np.testing.assert_array_equal(mine.y(t), theirs.y(t))
            np.testing.assert_allclose(mine.X(t), theirs.X(t), rtol=0, atol=1e-12)


def test_selectable_on_the_command_line_with_the_attributes_alias():
    from mtlbench.dataset import configure_dataset

    ds, label = configure_dataset(SyntheticAttributes(), {"attributes": 2, "users": 40})
    assert ds.problems() == ["attr0", "attr1"] and ds.users == 40
    assert "n_attributes=2" in label and "users=40" in label
