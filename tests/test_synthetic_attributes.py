"""The paper-scale synthetic attribute dataset: same preprocessing as ``shoes``, deterministic,
small settings for tests; the named settings of its family, and the published default kept."""
import hashlib
import json
import re
from pathlib import Path

import numpy as np
import pytest

from mtlbench.errors import ConfigError, UnknownNameError
from mtlbench.synthetic import make_attribute_items
from mtlbench_datasets import synthetic_attributes as sa_module
from mtlbench_datasets.personalized import PersonalizedAttributes
from mtlbench_datasets.synthetic_attributes import (GENERATOR_DEFAULTS, SETTINGS,
                                                    SyntheticAttributes)

PUBLISHED = Path(__file__).resolve().parents[1] / "leaderboards" / "synthetic-attributes.json"

SHAPE = dict(n_items=400, n_features=30, users=30, labels_per_user=40, n_components=10)
SMALL = dict(latent_dim=8, **SHAPE)


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


# ---------------------------------------------------------------- the published default
def test_the_default_setting_is_the_published_data():
    """The default's labels, users and items are those of the published leaderboard (its task
    names and split fingerprints: functions of the labels only) and of a hash of the labels
    and item indices taken before the settings existed; the features' last bits depend on the
    machine's BLAS kernels, so they are compared with statistics to 1e-9 relative."""
    from mtlbench.dataset import load_tasks
    from mtlbench.protocol import ProtocolConfig, evaluable_tasks, make_split, restrict_tasks

    published = json.loads(PUBLISHED.read_text(encoding="utf-8"))
    tasks = load_tasks(SyntheticAttributes(), "attr0")
    assert tasks.task_names == list(published["task_names"]["synthetic-attributes/attr0"])
    h = hashlib.sha256()
    for name, ix, y in zip(tasks.task_names, tasks.index, tasks.labels):
        h.update(name.encode())
        h.update(np.asarray(ix, np.int64).tobytes())
        h.update(np.asarray(y).tobytes())
    assert h.hexdigest() == "a26d4dc162052c1dac2bbc8dcacad9b2bc470a94442ea457ad088ee2db5ef72c"
    kept = restrict_tasks(tasks, evaluable_tasks(tasks)[0])
    splits = {u["rep"]: u["split_fingerprint"] for u in published["units"]
              if u["problem"] == "synthetic-attributes/attr0" and u["rep"] < 3}
    for rep, fp in splits.items():
        assert make_split(kept, ProtocolConfig(), rep).fingerprint() == fp
    X = tasks.items
    assert X.shape == (1987, 100)
    stats = [np.abs(X).sum(), (X * X).sum(), X[:, 0].sum(), (X[:, :10] ** 3).sum(), *X[0, :3]]
    np.testing.assert_allclose(stats, [129477.13019828219, 198954.46358195497, 101.77124525812351,
                                       9268.143045327808, 4.2046301363162675, 3.254956328956525,
                                       2.408085309376042], rtol=1e-9)


def test_the_default_keeps_the_published_parameters_and_unit_keys():
    """Apart from the code fingerprints (which change with any edit of the plugin), the units
    planned today on the default have the published keys: same dataset parameters, problems,
    protocol and model selections."""
    import dataclasses

    from mtlbench.plugins import get_registry
    from mtlbench.protocol import ProtocolConfig, config_json
    from mtlbench.runner import plan_units, resolve_problems
    from mtlbench.selectors import apply_overrides

    published = json.loads(PUBLISHED.read_text(encoding="utf-8"))
    units = {(u["model"], u["problem"], u["rep"]): u for u in published["units"]}
    reg = get_registry()
    assert {config_json(u["dataset_params"]) for u in units.values()} == \
        {config_json(reg.dataset("synthetic-attributes").params())}
    sels = [apply_overrides(reg.model_class(m), {}, m) for m in ("stl", "lasso")]
    proto = {k: v for k, v in published["units"][0]["protocol"].items()
             if k in {f.name for f in dataclasses.fields(ProtocolConfig)}}
    specs = plan_units(reg, sels, resolve_problems(reg, ["synthetic-attributes/attr3"]),
                       ProtocolConfig(**{**proto, "reps": 2}))
    assert len(specs) == 4
    for spec in specs:
        unit = units[(spec.label, spec.problem, spec.rep)]
        if config_json(unit["model_config"]["space"]) != spec.space_json:
            pytest.skip(f"{spec.label}'s search space changed since the publication")
        search_version = str(unit["protocol"].get("search_version", "1"))
        same_code = dataclasses.replace(spec, provenance_json=config_json(unit["provenance"]))
        assert same_code.key_under(search_version) == unit["key"]


# ---------------------------------------------------------------- the family of settings
def test_the_docstring_table_lists_every_setting_with_its_seed_and_values():
    doc = sa_module.__doc__
    for name, changes in SETTINGS.items():
        row = re.search(rf"^{re.escape(name)} +(\d+) +(.*?)(?=^\S|^=)", doc, re.M | re.S)
        assert row, f"setting {name!r} is not in the module docstring's table"
        seed, text = int(row.group(1)), " ".join(row.group(2).split())
        assert seed == changes.get("seed", GENERATOR_DEFAULTS["seed"])
        for key, value in changes.items():
            if key != "seed":
                assert re.search(rf"\b{key} {value:g}\b", text), (name, key, value, text)


@pytest.mark.parametrize("setting", sorted(SETTINGS))
def test_a_setting_sets_its_values_and_a_given_parameter_overrides_it(setting):
    ds = SyntheticAttributes(setting=setting, **SHAPE)
    expected = {**GENERATOR_DEFAULTS, **SETTINGS[setting]}
    p = ds.params()
    for key, value in expected.items():
        assert p.get(key, GENERATOR_DEFAULTS[key]) == value
    tasks = ds.load("attr0")
    assert tasks.d == 10 and tasks.T > 0
    mine = SyntheticAttributes(setting=setting, label_noise=0.2, **SHAPE)
    assert mine.params()["label_noise"] == 0.2
    assert mine.params()["seed"] == expected["seed"]


def test_settings_are_selected_by_name_and_bad_names_or_values_are_named():
    from mtlbench.plugins import get_registry

    reg = get_registry()
    ds = reg.dataset("synthetic-attributes[setting=near-separable]")
    assert ds.selector == "synthetic-attributes[setting=near-separable]"
    assert ds.params()["label_noise"] == 0.0 and ds.params()["seed"] == 201
    ds = reg.dataset("synthetic-attributes[setting=noisy,label_noise=0.2]")
    assert ds.params()["label_noise"] == 0.2 and ds.params()["personal_spread"] == 0.6
    with pytest.raises(ConfigError, match="no setting 'sharp'.*near-separable"):
        reg.dataset("synthetic-attributes[setting=sharp]")
    with pytest.raises(ConfigError, match="tail must be in \\[0, 0.5\\)"):
        reg.dataset("synthetic-attributes[tail=0.5]")
    with pytest.raises(ConfigError, match="positive_share must be in"):
        reg.dataset("synthetic-attributes[positive_share=high]")
    with pytest.raises(ConfigError, match="seed must be a non-negative integer"):
        reg.dataset("synthetic-attributes[seed=1.5]")
    # a float parameter given as an integer is the same data, with the same parameters
    assert reg.dataset("synthetic-attributes[setting=noisy,feature_noise=1]").params() == \
        reg.dataset("synthetic-attributes[setting=noisy]").params()


def test_neutral_generator_options_are_not_recorded_and_the_others_are():
    assert "tail" not in SyntheticAttributes().params()
    assert SyntheticAttributes(tail=0.25).params()["tail"] == 0.25
    assert "tail" not in SyntheticAttributes(tail=0.0).params()


def test_heavy_tails_scales_and_spectrum_do_what_they_say():
    kw = dict(n_items=3000, n_features=40, latent_dim=8)
    F0, Z0 = make_attribute_items(3, **kw)

    def kurtosis(v):
        v = v - v.mean()
        return float((v ** 4).mean() / (v ** 2).mean() ** 2)

    norms0 = np.linalg.norm(F0, axis=1)
    F1, Z1 = make_attribute_items(3, tail=0.25, **kw)
    assert kurtosis(F1[:, 0]) > 2 * kurtosis(F0[:, 0])           # Gaussian: about 3
    assert np.linalg.norm(F1, axis=1).max() > 3 * norms0.max()
    F2, _ = make_attribute_items(3, scale_decades=2.0, **kw)
    spread = F2.std(axis=0) / F0.std(axis=0)
    assert spread.max() / spread.min() > 10                      # 10 ** U(-1, 1) per feature
    _, Z3 = make_attribute_items(3, spectrum_decay=2.0, **kw)
    var0, var3 = Z0.var(axis=0), Z3.var(axis=0)
    assert var3[-1] / var3[0] < 0.5 * var0[-1] / var0[0]          # (1 + j) ** -2 vs ** -1


def test_positive_share_sets_the_class_balance():
    shares = []
    for share in (0.25, 0.5, 0.75):
        tasks = SyntheticAttributes(positive_share=share, label_noise=0.0, one_sided=0.0,
                                    **SMALL).load("attr0")
        y = np.concatenate(tasks.labels)
        shares.append(float((y > 0).mean()))
    assert shares[0] < 0.35 < shares[1] < 0.65 < shares[2]
