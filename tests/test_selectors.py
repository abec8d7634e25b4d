"""Hyperparameter overrides without editing code: ``-m``/``--models`` selectors and
``--config`` TOML files; invalid overrides are one clear error with exit status 2."""
from __future__ import annotations

import pytest
from click.testing import CliRunner

from mtlbench.cli import cli
from mtlbench.errors import ConfigError
from mtlbench.selectors import apply_overrides, parse_selector
from mtlbench.search.space import as_param
from mtlbench.store import ResultStore
from mtlbench_models.lasso import LASSO
from mtlbench_models.stl import STL


def _run(args):
    return CliRunner().invoke(cli, args, catch_exceptions=False)


def _units(store):
    rs = ResultStore(str(store))
    try:
        return rs.units()
    finally:
        rs.close()


def _grid_values(row, key):
    return sorted({g["params"][key] for g in row["grid"]})


def test_parse_selector_forms():
    assert parse_selector("lasso[rho_ratio=[0.01,0.1]]") == ("lasso", {"rho_ratio": [0.01, 0.1]})
    assert parse_selector(" stl [ lam = 1.0 ] ") == ("stl", {"lam": 1.0})
    assert parse_selector("tfcl[loss=squared,k=3]") == ("tfcl", {"loss": "squared", "k": 3})
    assert parse_selector("x[s='a,b']") == ("x", {"s": "a,b"})


def test_apply_overrides_fixed_and_grid():
    sel = apply_overrides(LASSO, {"rho_ratio": [0.01, 0.1], "max_iter": 500})
    assert sel.space["rho_ratio"]["grid"] == [0.01, 0.1] and sel.fixed == {"max_iter": 500}
    assert sel.label == "lasso[max_iter=500,rho_ratio=[0.01,0.1]]"
    sel = apply_overrides(STL, {"lam": 1})  # an int for a real-valued parameter is fine
    assert sel.fixed == {"lam": 1} and sel.space == {}


def test_m_selector_searches_the_given_grid(tmp_path):
    store = tmp_path / "r.sqlite"
    res = _run(["compare", "-m", "lasso[rho_ratio=[0.01,0.1]]", "--reps", "1",
                "--search", "grid", "--store", str(store)])
    assert res.exit_code == 0, res.output
    (row,) = _units(store).to_dict("records")
    assert row["model"] == "lasso[rho_ratio=[0.01,0.1]]" and row["status"] == "ok"
    assert _grid_values(row, "rho_ratio") == [0.01, 0.1]


def test_models_option_mixes_fixed_and_default(tmp_path):
    store = tmp_path / "r.sqlite"
    res = _run(["compare", "--models", "stl[lam=1.0],lasso", "--reps", "1",
                "--search", "grid", "--store", str(store)])
    assert res.exit_code == 0, res.output
    df = _units(store).set_index("model")
    assert set(df.index) == {"stl[lam=1.0]", "lasso"}
    assert df.loc["stl[lam=1.0]", "best_params"] == {}  # fixed: nothing left to search
    assert len(df.loc["lasso", "grid"]) == len(as_param(LASSO.search_space["rho_ratio"]).grid)


def test_config_file_models_and_compare_sections(tmp_path):
    cfg = tmp_path / "bench.toml"
    cfg.write_text('[compare]\nmodels = ["lasso", "stl"]\nreps = 1\nsearch = "grid"\n\n'
                   '[models.lasso]\nrho_ratio = [0.03, 0.3]\n\n[models.stl]\nlam = 10.0\n')
    store = tmp_path / "r.sqlite"
    res = _run(["compare", "--config", str(cfg), "--store", str(store)])
    assert res.exit_code == 0, res.output
    df = _units(store).set_index("model")
    assert set(df.index) == {"lasso[rho_ratio=[0.03,0.3]]", "stl[lam=10.0]"}
    assert _grid_values(df.loc["lasso[rho_ratio=[0.03,0.3]]"], "rho_ratio") == [0.03, 0.3]
    assert (df.rep == 0).all()
    # the command line wins over the file for the same parameter
    res = _run(["compare", "--config", str(cfg), "-m", "lasso[rho_ratio=0.1]",
                "--store", str(store)])
    assert res.exit_code == 0, res.output
    assert "lasso[rho_ratio=0.1]" in set(_units(store).model)


BAD_SELECTORS = [
    ("lasso[nope=1]", "has no hyperparameter 'nope'"),
    ("lasso[rho_ratio=abc]", "expected a value like the default 0.03"),
    ("lasso[rho_ratio=[]]", "an empty list searches nothing"),
    ("lasso[rho_ratio=0.1", "invalid model selector"),
    ("lasso[rho_ratio=[0.1,0.2]", "unbalanced brackets"),
    ("lasso]", "invalid model selector"),
    ("lasso[rho_ratio=]", "missing value"),
    ("lasso[rho_ratio]", "expected param=value"),
    ("lasso[]", "empty brackets"),
    ("lasso[rho_ratio=0.1,rho_ratio=0.2]", "given twice"),
    ("lasso[max_iter=10.5]", "expected an integer"),
    ("lasso[rho_ratio=(1,2)]", "use a list"),
    ("lasso[rho_ratio=[0.1,[0.2]]]", "nested lists"),
    ("lasso[rho_ratio=1+]", "cannot parse hyperparameter value"),
    ("nosuchmodel", "unknown model 'nosuchmodel'"),
]


@pytest.mark.parametrize("selector,message", BAD_SELECTORS)
def test_invalid_selector_is_a_clear_error(tmp_path, selector, message):
    res = _run(["compare", "-m", selector, "--reps", "1", "--store", str(tmp_path / "r.sqlite")])
    assert res.exit_code == 2, res.output
    assert "Error:" in res.output and message in res.output
    assert "Traceback" not in res.output
    assert not (tmp_path / "r.sqlite").exists() or _units(tmp_path / "r.sqlite").empty


BAD_CONFIGS = [
    ("[models.lasso]\nrho_ratio = [\n", "is not valid TOML"),
    ("[models.lasso]\nnope = 1\n", "has no hyperparameter 'nope'"),
    ("[models.lasso]\nrho_ratio = \"high\"\n", "expected a value like the default"),
    ("[models.lasso]\nrho_ratio = []\n", "an empty list searches nothing"),
    ("[models.stll]\nlam = 1.0\n", "[models.stll]: unknown model 'stll'. Did you mean 'stl'"),
    ("[compare]\nrepz = 3\n", "unknown keys ['repz']"),
    ("[modelz.lasso]\nrho_ratio = 0.1\n", "unknown sections ['modelz']"),
    ("[models.lasso.rho_ratio]\nx = 1\n", "is a table"),
]


@pytest.mark.parametrize("text,message", BAD_CONFIGS)
def test_invalid_config_is_a_clear_error(tmp_path, text, message):
    cfg = tmp_path / "bad.toml"
    cfg.write_text(text)
    res = _run(["compare", "--config", str(cfg), "-m", "lasso", "--reps", "1",
                "--store", str(tmp_path / "r.sqlite")])
    assert res.exit_code == 2, res.output
    assert "Error:" in res.output and message in res.output.replace("\n", " ").replace("  ", " ")
    assert "Traceback" not in res.output


def test_missing_config_file(tmp_path):
    res = _run(["compare", "--config", str(tmp_path / "none.toml"), "--store",
                str(tmp_path / "r.sqlite")])
    assert res.exit_code == 2 and "does not exist" in res.output


def test_selector_errors_are_config_errors():
    with pytest.raises(ConfigError):
        parse_selector("a[b=[1,2]")
    with pytest.raises(ConfigError, match="nested"):
        apply_overrides(LASSO, {"rho_ratio": [[0.1]]})


# ---------------------------------------------------------------- dataset parameters
def test_dataset_parameters_on_the_command_line(tmp_path):
    store = tmp_path / "r.sqlite"
    for ds in ("simulated[seed=3]", "simulated", "simulated[ seed = 0 ]"):
        res = _run(["compare", "--datasets", ds, "--models", "stl", "--reps", "1",
                    "--budget", "3", "--store", str(store)])
        assert res.exit_code == 0, res.output
    units = _units(store)
    assert sorted(units["problem"]) == ["simulated", "simulated[seed=3]"]  # seed=0 is default
    params = {r["problem"]: r["dataset_params"] for r in units.to_dict("records")}
    assert params == {"simulated": {"seed": 0}, "simulated[seed=3]": {"seed": 3}}
    fps = set(units["data_fingerprint"])
    assert len(fps) == 2  # different data, not just a different label


@pytest.mark.parametrize("ds, fragment", [
    ("simulated[sed=3]", "dataset 'simulated' has no parameter 'sed'; its parameters are: seed"),
    ("simulated[seed=1.5]", "simulated[seed=1.5]: expected an integer"),
    ("simulated[seed=[1,2]]", "a dataset parameter takes one value"),
    ("simulated[seed=3", "unbalanced brackets"),
    ("nosuch[seed=3]", "unknown dataset 'nosuch'"),
])
def test_bad_dataset_parameters_are_clear_errors(tmp_path, ds, fragment):
    res = CliRunner().invoke(cli, ["compare", "--datasets", ds, "--models", "stl", "--reps",
                                   "1", "--store", str(tmp_path / "r.sqlite")])
    out = " ".join(res.output.split())
    assert res.exit_code == 2 and fragment in out, out
    assert "Traceback" not in out


def test_pca_alias_and_problem_selector():
    from mtlbench.plugins import get_registry
    from mtlbench.runner import resolve_problems

    reg = get_registry()
    ds = reg.dataset("shoes[pca=200]")
    assert ds.n_components == 200 and ds.selector == "shoes[n_components=200]"
    assert ds.params()["n_components"] == 200 and reg.dataset("shoes").n_components == 100
    assert resolve_problems(reg, ["shoes[pca=200]/brown"]) == [("shoes[n_components=200]",
                                                               "brown")]
    assert resolve_problems(reg, ["simulated[seed=3]"]) == [("simulated[seed=3]", "simulated")]


def test_overrides_of_declared_ranges_keep_kind_and_bounds():
    from mtlbench import Int, LinearMTLModel, Log

    class Ranged(LinearMTLModel):
        name = "ranged"
        search_space = {"lam": Log([0.1, 1.0], low=0.0, high=100.0), "k": Int([3], low=2)}
        param_constraints = {"tol": Log([1e-6], low=0.0)}

        def __init__(self, lam=1.0, k=3, tol=1e-6):
            self.lam, self.k, self.tol = lam, k, tol

    sel = apply_overrides(Ranged, {"lam": [3.0, 30.0]})
    assert sel.space["lam"] == {"kind": "log", "grid": [3.0, 30.0], "low": 0.0, "high": 100.0}
    assert sel.label == "ranged[lam=[3.0,30.0]]"
    for over, msg in (({"lam": 1000.0}, "lam must be <= 100"), ({"k": 1}, "k must be >= 2"),
                      ({"lam": [1.0, 500.0]}, "lam must be <= 100"),
                      ({"tol": -1.0}, "tol must be >= 0")):
        with pytest.raises(ConfigError, match=msg):
            apply_overrides(Ranged, over)


def test_a_group_name_selects_its_models_and_the_default_run_leaves_out_the_rest(tmp_path):
    """``-m classic`` is every model whose ``group`` is "classic"; ``-m all`` every model;
    without ``-m`` the models with ``default_run = False`` stay out (and say so in
    ``mtlbench models``); a group takes no hyperparameters."""
    from mtlbench.plugins import get_registry

    reg = get_registry()
    classic = [n for n in reg.model_names if reg.model_class(n).group == "classic"]
    assert {"l21", "gomtl-logistic", "mtrl"} <= set(classic)
    assert reg.expand_model_selectors(["classic"]) == classic
    assert reg.expand_model_selectors(["stl", "classic", "l21"]) == ["stl"] + classic
    assert reg.expand_model_selectors(["all"]) == reg.model_names
    assert reg.expand_model_selectors(["lasso[rho_ratio=0.1]"]) == ["lasso[rho_ratio=0.1]"]
    default = reg.default_model_names
    assert "stl" in default and "tfcl" in default and not set(classic) & set(default)
    with pytest.raises(ConfigError, match="'classic' is a group of models"):
        reg.expand_model_selectors(["classic[lam_ratio=0.1]"])
    out = _run(["compare", "-m", "classic", "--reps", "1", "--dry-run",
                "--store", str(tmp_path / "g.sqlite")]).output
    assert f"{len(classic)} model(s) x 1 problem(s)" in out
    out = _run(["compare", "--reps", "1", "--dry-run",
                "--store", str(tmp_path / "d.sqlite")]).output
    assert f"{len(default)} model(s) x 1 problem(s)" in out
    assert "group classic, not in the default run" in _run(["models"]).output
