"""Plugin discovery through real entry points: resilience, strict mode, name conflicts."""
import pytest
from click.testing import CliRunner

from mtlbench import PluginConflictError, PluginError
from mtlbench.cli import cli
from mtlbench.plugins import Registry, get_registry

from plugin_fixtures import activate, write_distribution

GOOD = """
import numpy as np
from mtlbench import LinearMTLModel, hookimpl

class Mean(LinearMTLModel):
    name = "tp-mean"
    search_space = {"lam": [1.0]}
    def __init__(self, lam=1.0):
        self.lam = lam
    def fit(self, tasks, init=None):
        self.coef_ = np.column_stack([tasks.X(t).T @ tasks.y(t) for t in range(tasks.T)])
        return self

@hookimpl
def register_models(register):
    register(Mean)
"""

BROKEN_IMPORT = "import this_module_does_not_exist_anywhere\n"

BROKEN_REGISTER = """
from mtlbench import hookimpl

@hookimpl
def register_models(register):
    raise RuntimeError("boom while registering")
"""

CLASH = """
from mtlbench import hookimpl
from mtlbench_models.lasso import LASSO

class Other(LASSO):
    name = "lasso"

@hookimpl
def register_models(register):
    register(Other)
"""


@pytest.fixture
def broken_env(tmp_path, monkeypatch):
    write_distribution(tmp_path / "site", "tp-plugins", "0.3",
                       {"tp_good": GOOD, "tp_broken": BROKEN_IMPORT, "tp_reg": BROKEN_REGISTER},
                       {"tp-good": "tp_good", "tp-broken": "tp_broken", "tp-reg": "tp_reg"})
    activate(monkeypatch, tmp_path / "site")


def test_broken_plugins_are_reported_and_the_rest_works(broken_env):
    with pytest.warns(UserWarning, match="tp-broken"):
        reg = get_registry()
    assert "tp-mean" in reg.model_names and "lasso" in reg.model_names
    failures = {f.name: f for f in reg.failures}
    assert failures["tp-broken"].stage == "import"
    assert failures["tp-broken"].distribution == "tp-plugins"
    assert "this_module_does_not_exist_anywhere" in failures["tp-broken"].error
    assert failures["tp-reg"].stage == "register_models"
    assert "boom while registering" in failures["tp-reg"].error
    assert reg.model_plugin("tp-mean").distribution == "tp-plugins"
    assert reg.model_plugin("tp-mean").version == "0.3"


def test_broken_plugin_does_not_take_the_cli_down(broken_env, tmp_path):
    runner = CliRunner()
    res = runner.invoke(cli, ["plugins"])
    assert res.exit_code == 0, res.output
    assert "tp-broken" in res.output and "tp-plugins" in res.output
    assert "ModuleNotFoundError" in res.output
    res = runner.invoke(cli, ["compare", "--models", "tp-mean,stl", "--reps", "1",
                              "--store", str(tmp_path / "r.sqlite")])
    assert res.exit_code == 0, res.output
    assert "tp-mean" in res.output and "stl" in res.output


def test_strict_mode_turns_a_failure_into_an_error(broken_env, monkeypatch):
    monkeypatch.setenv("MTLBENCH_STRICT_PLUGINS", "1")
    with pytest.raises(PluginError, match=r"failed at .*MTLBENCH_STRICT_PLUGINS is set"):
        Registry().load_entry_points()
    res = CliRunner().invoke(cli, ["models"])
    assert res.exit_code == 2 and "Error:" in res.output and "Traceback" not in res.output


def test_a_name_clash_disables_only_that_name(tmp_path, monkeypatch):
    """Issue 14 item 16: the clashing name is unusable (the message names both
    distributions); every other name and ``mtlbench plugins`` keep working."""
    write_distribution(tmp_path / "site", "tp-clash", "9.9", {"tp_clash": CLASH},
                       {"tp-clash": "tp_clash"})
    activate(monkeypatch, tmp_path / "site")
    with pytest.warns(UserWarning, match="registered twice"):
        reg = Registry().load_entry_points()
    assert "lasso" not in reg.model_names and "stl" in reg.model_names
    with pytest.raises(PluginConflictError) as info:
        reg.model_class("lasso")
    msg = str(info.value)
    assert "'lasso'" in msg and "tp-clash 9.9" in msg and "mtlbench" in msg
    assert any(f.stage == "name clash" for f in reg.failures)
    runner = CliRunner()
    res = runner.invoke(cli, ["plugins"])
    assert res.exit_code == 0, res.output
    assert "name clash" in res.output and "tp-clash" in res.output
    res = runner.invoke(cli, ["models"])
    assert res.exit_code == 0 and "stl" in res.output
    res = runner.invoke(cli, ["compare", "--models", "lasso", "--reps", "1",
                              "--store", str(tmp_path / "r.sqlite")])
    assert res.exit_code == 2 and "registered twice" in res.output
    assert "Traceback" not in res.output
    res = runner.invoke(cli, ["compare", "--models", "stl", "--reps", "1",
                              "--store", str(tmp_path / "r.sqlite")])
    assert res.exit_code == 0, res.output


MISSPELLED = """
import numpy as np
from mtlbench import LinearMTLModel, Log, hookimpl

class Typo(LinearMTLModel):
    name = "tp-typo"
    search_space = {"lamda": Log([1.0], low=0.0)}
    def __init__(self, lam=1.0):
        self.lam = lam
    def fit(self, tasks, init=None):
        self.coef_ = np.zeros((tasks.d, tasks.T))
        return self

class Fine(Typo):
    name = "tp-fine"
    search_space = {"lam": Log([1.0], low=0.0)}

@hookimpl
def register_models(register):
    register(Typo)
    register(Fine)
"""


def test_a_misspelled_search_space_is_a_plugin_failure(tmp_path, monkeypatch):
    """Issue 14 item 17: checked at registration, reported like a plugin failure, only that
    model unusable."""
    write_distribution(tmp_path / "site", "tp-typo", "1.0", {"tp_typo": MISSPELLED},
                       {"tp-typo": "tp_typo"})
    activate(monkeypatch, tmp_path / "site")
    with pytest.warns(UserWarning, match="lamda"):
        reg = Registry().load_entry_points()
    assert "tp-fine" in reg.model_names and "tp-typo" not in reg.model_names
    fail = [f for f in reg.failures if f.stage == "validate"]
    assert fail and "'lamda'" in fail[0].error and "did you mean 'lam'" in fail[0].error
    with pytest.raises(PluginError, match="lamda"):
        reg.model_class("tp-typo")
    res = CliRunner().invoke(cli, ["plugins"])
    assert res.exit_code == 0 and "validate" in res.output


def test_builtins_are_registered_through_entry_points():
    reg = Registry().load_entry_points()
    for name in ("stl", "lasso"):
        assert reg.model_plugin(name).distribution == "mtlbench"
    assert reg.dataset_plugin("simulated").distribution == "mtlbench"


def test_builtin_searchers_are_registered():
    reg = Registry().load_entry_points()
    assert {"grid", "adaptive"} <= set(reg.searcher_names)
    assert reg.searcher_class("adaptive").name == "adaptive"
