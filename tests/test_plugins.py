"""Plugin discovery through real entry points: resilience, strict mode, name conflicts."""
import pytest
from click.testing import CliRunner

from mtlbench import PluginConflictError, PluginError
from mtlbench.cli import cli
from mtlbench.plugins import Registry, get_registry

from plugin_fixtures import activate, write_distribution

GOOD = """
import numpy as np
from mtlbench import LinearMTLModel, Log, hookimpl

class Mean(LinearMTLModel):
    name = "tp-mean"
    search_space = {"lam": Log([0.1, 1.0], low=0.0)}
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
    search_space = {"lamda": Log([0.1, 1.0], low=0.0)}
    def __init__(self, lam=1.0):
        self.lam = lam
    def fit(self, tasks, init=None):
        self.coef_ = np.zeros((tasks.d, tasks.T))
        return self

class Fine(Typo):
    name = "tp-fine"
    search_space = {"lam": Log([0.1, 1.0], low=0.0)}

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


RANGES = """
import numpy as np
from mtlbench import Int, LinearMTLModel, Log, hookimpl

class Base(LinearMTLModel):
    def __init__(self, lam=1.0, k=2):
        self.lam = lam
        self.k = k
    def fit(self, tasks, init=None):
        self.coef_ = np.column_stack([tasks.X(t).T @ tasks.y(t) for t in range(tasks.T)])
        return self

class OneValue(Base):
    name = "tp-one"
    search_space = {"lam": Log([1e-3], low=0.0), "k": Int([2, 8], low=1)}

class UnknownName(Base):
    name = "tp-unknown"
    search_space = {"lam": Log([0.1, 1.0], low=0.0, high="1/kk"), "k": Int([2, 8], low=1)}

class Ranged(Base):
    name = "tp-ranged"
    search_space = {"lam": Log([0.1, 1.0], low=0.0, high="1/k"),
                    "k": Int([2, 8], low=1, high="min(d, T)")}

class OldList(Base):
    name = "tp-oldlist"
    search_space = {"lam": [0.1, 1.0, 10.0, 100.0], "k": [2, 4]}

@hookimpl
def register_models(register):
    for cls in (OneValue, UnknownName, Ranged, OldList):
        register(cls)
"""


def test_a_parameter_without_a_start_range_or_with_an_unknown_bound_name_is_refused(
        tmp_path, monkeypatch):
    """Issue 24: every ordered parameter declares a start range (two distinct values) and a
    bound expression names only problem dimensions and searched parameters; checked at
    registration for third-party models, reported like a plugin failure naming the model,
    the parameter and the fix; the plugin's other models keep working."""
    from mtlbench.plugins import PluginMigrationWarning

    write_distribution(tmp_path / "site", "tp-ranges", "1.0", {"tp_ranges": RANGES},
                       {"tp-ranges": "tp_ranges"})
    activate(monkeypatch, tmp_path / "site")
    with pytest.warns(UserWarning) as caught:
        reg = Registry().load_entry_points()
    assert {"tp-ranged", "tp-oldlist"} <= set(reg.model_names)
    assert not {"tp-one", "tp-unknown"} & set(reg.model_names)
    errors = {f.error.split("'")[1]: f.error for f in reg.failures if f.stage == "validate"}
    assert "lam = Log([0.001], low=0, high=None) starts from one value; declare a start range " \
           "of at least two distinct values, e.g. Log([0.0001, 0.01]" in errors["tp-one"]
    assert "lam: bound high='1/kk' uses 'kk', which is neither a problem dimension" \
        in errors["tp-unknown"]
    with pytest.raises(PluginError, match="tp-one.*starts from one value"):
        reg.model_class("tp-one")
    # the old list form works, with a warning naming the model and the migration
    notes = [str(w.message) for w in caught if issubclass(w.category, PluginMigrationWarning)]
    assert len(notes) == 2 and all("model 'tp-oldlist'" in n for n in notes)
    assert any("searched as the range Log([0.1, 1, 10, 100], low=0, high=None) under the same "
               "rule and budget" in n and "'lam': Log([0.1, 1.0, 10.0, 100.0], low=..., "
               "high=...)" in n for n in notes)
    res = CliRunner().invoke(cli, ["plugins"])
    assert res.exit_code == 0 and "starts from one value" in " ".join(res.output.split())


def test_builtins_are_registered_through_entry_points():
    reg = Registry().load_entry_points()
    for name in ("stl", "lasso"):
        assert reg.model_plugin(name).distribution == "mtlbench"
    assert reg.dataset_plugin("simulated").distribution == "mtlbench"


def test_builtin_searchers_are_registered():
    reg = Registry().load_entry_points()
    assert {"grid", "adaptive"} <= set(reg.searcher_names)
    assert reg.searcher_class("adaptive").name == "adaptive"


class _Plugin:
    """A plugin object (not a module) for in-process registry tests."""

    def __init__(self, name, model=None, fail=False, marked=True):
        from mtlbench import hookimpl, LinearMTLModel

        cls = type(f"M_{name}", (LinearMTLModel,), {"name": name, "search_space": {}})

        def register_models(register):
            if fail:
                raise RuntimeError(f"{name} fails")
            register(cls)

        self.register_models = hookimpl(register_models) if marked else register_models


def test_hooks_are_called_through_pluggy_one_plugin_at_a_time():
    import warnings

    from mtlbench.plugins import PluginWarning

    reg = Registry()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PluginWarning)
        reg.add_plugin(_Plugin("p-first"), name="first")
        reg.add_plugin(_Plugin("p-bad", fail=True), name="bad")
        reg.add_plugin(_Plugin("p-last"), name="last")
    # each plugin's models are attributed to it; the failing one is reported, the others work
    assert reg.model_names == ["p-first", "p-last"]
    assert reg.model_plugin("p-last").name == "last"
    assert [(f.name, f.stage) for f in reg.failures] == [("bad", "register_models")]
    # the hooks are pluggy hook implementations of the registry's plugin manager
    impls = reg.pm.hook.register_models.get_hookimpls()
    assert len(impls) == 3


def test_an_unmarked_hook_function_is_still_called():
    reg = Registry()
    reg.add_plugin(_Plugin("p-unmarked", marked=False), name="unmarked")
    assert reg.model_names == ["p-unmarked"] and reg.failures == []
