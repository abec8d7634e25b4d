"""Plugin discovery through real entry points: resilience, strict mode, name conflicts, and
the mistakes caught when a plugin registers."""
import json
import warnings

import numpy as np
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
        self.converged_ = True
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


def test_a_plugin_taking_a_builtin_name_is_refused_and_the_builtin_kept(tmp_path, monkeypatch):
    """A third-party model named like a built-in no longer disables the
    built-in (a bare ``compare`` planned one model fewer): the built-in keeps its name, the
    newcomer is refused with a message naming it and the fix."""
    write_distribution(tmp_path / "site", "tp-clash", "9.9", {"tp_clash": CLASH},
                       {"tp-clash": "tp_clash"})
    activate(monkeypatch, tmp_path / "site")
    with pytest.warns(UserWarning, match="'lasso' is a built-in model") as caught:
        reg = Registry().load_entry_points()
    assert reg.model_plugin("lasso").distribution == "mtlbench"
    assert reg.model_class("lasso").__module__ == "mtlbench_models.lasso"
    assert reg.unusable() == {}
    (fail,) = [f for f in reg.failures if f.stage == "name clash"]
    assert fail.distribution == "tp-clash" and "rename its model (e.g. 'tp-clash-lasso')" \
        in fail.error
    assert len([w for w in caught if "tp-clash" in str(w.message)]) == 1
    builtins = set(reg.default_model_names)  # the tp-clash plugin registered nothing else
    runner = CliRunner()
    res = runner.invoke(cli, ["plugins"])
    assert res.exit_code == 0, res.output
    assert "name clash" in res.output and "tp-clash" in res.output
    res = runner.invoke(cli, ["compare", "--dry-run", "--reps", "1", "--datasets", "simulated",
                              "--store", str(tmp_path / "r.sqlite")], env={"COLUMNS": "250"})
    assert res.exit_code == 0, res.output
    assert all(name in res.output for name in builtins)


def test_the_builtin_wins_whatever_the_order_plugins_are_added_in():
    """Plugins added by hand (not through entry points): a built-in arriving after a
    third-party plugin that took its name takes it back; between third-party plugins a
    clash makes only that name unusable."""
    import warnings

    from mtlbench.plugins import PluginWarning

    reg = Registry()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PluginWarning)
        reg.add_plugin(_Plugin("same"), name="first", distribution="tp-one")
        reg.add_plugin(_Plugin("same"), name="builtin", distribution="mtlbench")
        reg.add_plugin(_Plugin("both"), name="a", distribution="tp-a")
        reg.add_plugin(_Plugin("both"), name="b", distribution="tp-b")
    assert reg.model_plugin("same").distribution == "mtlbench"
    assert [(f.distribution, f.stage) for f in reg.failures] == [
        ("tp-one", "name clash"), ("tp-b", "name clash")]
    assert "is a built-in model" in reg.failures[0].error
    with pytest.raises(PluginConflictError, match="'both' is registered twice.*tp-a.*tp-b"):
        reg.model_class("both")
    assert reg.plugins[0].models == []


def test_two_third_party_plugins_with_one_name_disable_only_that_name(tmp_path, monkeypatch):
    """The clashing name is unusable (the message names both
    distributions); every other name and ``mtlbench plugins`` keep working."""
    # (dist-info folders are named NAME-VERSION: a dash in NAME would make both "tp")
    other = GOOD.replace("Mean", "Other")
    write_distribution(tmp_path / "a", "tpone", "1.0", {"tp_one": GOOD}, {"tp-one": "tp_one"})
    write_distribution(tmp_path / "b", "tptwo", "2.0", {"tp_two": other}, {"tp-two": "tp_two"})
    activate(monkeypatch, tmp_path / "a")
    activate(monkeypatch, tmp_path / "b")
    with pytest.warns(UserWarning, match="registered twice"):
        reg = Registry().load_entry_points()
    assert "tp-mean" not in reg.model_names and "lasso" in reg.model_names
    with pytest.raises(PluginConflictError) as info:
        reg.model_class("tp-mean")
    assert "tpone 1.0" in str(info.value) and "tptwo 2.0" in str(info.value)
    res = CliRunner().invoke(cli, ["compare", "--models", "tp-mean", "--reps", "1",
                                   "--store", str(tmp_path / "r.sqlite")])
    assert res.exit_code == 2 and "registered twice" in res.output
    assert "Traceback" not in res.output


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
        self.converged_ = True
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
    """Checked at registration, reported like a plugin failure, only that
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
        self.converged_ = True
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
    """Every ordered parameter declares a start range (two distinct values) and a
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

        def fit(self, tasks, init=None):
            self.coef_ = np.zeros((tasks.d, tasks.T))
            self.converged_ = True
            return self

        cls = type(f"M_{name}", (LinearMTLModel,), {"name": name, "search_space": {},
                                                     "fit": fit})

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


# ---------------------------------------------------------------- mistakes caught at registration
MODEL = '''
import numpy as np
from mtlbench import Dataset, LinearMTLModel, Log, hookimpl

class M(LinearMTLModel):
    name = "NAME"
    search_space = {"lam": Log([0.1, 1.0], low=0.0)}
    def __init__(self, lam=1.0):
        self.lam = lam
    def fit(self, tasks, init=None):
        self.coef_ = np.zeros((tasks.d, tasks.T))
        self.converged_ = True
        return self
'''

HOOK_MISTAKES = {
    # plugin module -> (its hook code, words the failure must contain)
    "tp_spelled": ("@hookimpl\ndef register_model(register):\n    register(M)\n",
                   ["@hookimpl register_model: mtlbench has no hook 'register_model' "
                    "(did you mean 'register_models'?)", "register_models(register)"]),
    "tp_signature": ("@hookimpl\ndef register_models(reg):\n    reg(M)\n",
                     ["hook register_models(reg) takes 'reg', which mtlbench does not pass; "
                      "write def register_models(register)"]),
    "tp_unmarked": ("def register_dataset(register):\n    register(M)\n",
                    ["register_dataset looks like a hook but is none (did you mean "
                     "'register_datasets'?): name it after the hook and mark it @hookimpl"]),
    "tp_nothing": ("def helper():\n    return M\n",
                   ["implements no mtlbench hook, so it registers nothing; the hooks are "
                    "register_models(register), register_datasets(register)"]),
}


def test_hook_mistakes_make_only_that_plugin_unusable(tmp_path, monkeypatch):
    """A misspelled hook (silently ignored before: pluggy's
    ``check_pending`` finds it), a hook taking an argument mtlbench does not pass, an
    unmarked look-alike of a hook and a plugin implementing no hook fail registration with a
    message naming the plugin and the fix; the plugin registers nothing, the others work,
    ``mtlbench plugins`` shows why and strict mode makes it an error."""
    modules = {mod: MODEL.replace("NAME", mod.replace("_", "-")) + hook
               for mod, (hook, _) in HOOK_MISTAKES.items()}
    modules["tp_good"] = GOOD
    modules["tp_class"] = MODEL.replace("NAME", "tp-class")
    eps = {mod.replace("_", "-"): mod for mod in modules}
    eps["tp-class"] = "tp_class:M"  # an entry point naming the model class itself
    write_distribution(tmp_path / "site", "tp-hooks", "0.1", modules, eps)
    activate(monkeypatch, tmp_path / "site")
    with pytest.warns(UserWarning, match="failed at register"):
        reg = Registry().load_entry_points()
    failures = {f.name: f for f in reg.failures}
    for mod, (_, words) in HOOK_MISTAKES.items():
        fail = failures[mod.replace("_", "-")]
        assert fail.stage == "register" and fail.distribution == "tp-hooks"
        for w in words:
            assert w in fail.error, (mod, fail.error)
    assert "the entry point names the model class M itself; point it at the module that " \
           "registers it (e.g. 'tp_class') and add there: @hookimpl def register_models" \
           "(register): register(M)" in failures["tp-class"].error
    assert set(failures) == {"tp-spelled", "tp-signature", "tp-unmarked", "tp-nothing",
                             "tp-class"}
    assert "tp-mean" in reg.model_names and "lasso" in reg.model_names
    assert not any(n.startswith("tp-") and n != "tp-mean" for n in reg.model_names)
    assert {p.name for p in reg.plugins} >= {"tp-good"}
    assert not {p.name for p in reg.plugins} & set(failures)
    res = CliRunner().invoke(cli, ["plugins"], env={"COLUMNS": "400"})
    assert res.exit_code == 0 and "did you mean 'register_models'" in res.output
    monkeypatch.setenv("MTLBENCH_STRICT_PLUGINS", "1")
    with pytest.raises(PluginError, match="failed at register: .*STRICT_PLUGINS is set"):
        Registry().load_entry_points()


def test_a_hook_check_that_pluggy_makes_too():
    """The registry's own message comes first, but pluggy's check is the one that finds an
    unknown marked hook: an object plugin (not a module) with ``@hookimpl register_modles``."""
    import warnings

    from mtlbench import hookimpl
    from mtlbench.plugins import PluginWarning

    class Plugin:
        @hookimpl
        def register_modles(self, register):
            raise AssertionError("never called")

    reg = Registry()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PluginWarning)
        reg.add_plugin(Plugin(), name="obj")
    (fail,) = reg.failures
    assert "no hook 'register_modles' (did you mean 'register_models'?)" in fail.error
    assert reg.pm.get_plugins() == set() and reg.plugins == []
    reg.pm.check_pending()  # nothing of the refused plugin is left pending


REGISTER_MISTAKES = MODEL.replace("NAME", "tp-m") + '''
class D(Dataset):
    name = "tp-d"
    def load(self, problem="tp-d", *, data_dir=None, cache_dir=None):
        raise NotImplementedError

@hookimpl
def register_models(register):
    register(WHAT)
'''


@pytest.mark.parametrize("what, words", [
    ("M()", "register() in register_models takes the class, not an instance: register(M), "
            "not register(M(...))"),
    ("D", "register() in register_models expects an MTLModel subclass, got the class D, "
          "which is a dataset: register it in register_datasets(register)"),
    ("42", "register() in register_models expects an MTLModel subclass, got 42 (a int)"),
])
def test_register_names_what_it_was_given_and_where_it_belongs(tmp_path, monkeypatch, what,
                                                                words):
    write_distribution(tmp_path / "site", "tp-reg", "0.1",
                       {"tp_regm": REGISTER_MISTAKES.replace("WHAT", what)},
                       {"tp-regm": "tp_regm"})
    activate(monkeypatch, tmp_path / "site")
    with pytest.warns(UserWarning, match="failed at register_models"):
        reg = Registry().load_entry_points()
    (fail,) = reg.failures
    assert fail.stage == "register_models" and words in fail.error, fail.error


DECLARATIONS = '''
import numpy as np
from mtlbench import LinearMTLModel, Log, hookimpl

class Base(LinearMTLModel):
    search_space = {"lam": Log([0.1, 1.0], low=0.0)}
    def __init__(self, lam=1.0):
        self.lam = lam

class WarmNotConvex(Base):
    name = "tp-warm"
    supports_warm_start = True
    def fit(self, tasks, init=None):
        self.coef_ = np.zeros((tasks.d, tasks.T))
        self.diagnostics_ = {"converged": True}
        return self

class NoInit(Base):
    name = "tp-noinit"
    def fit(self, tasks):
        return self

class NoFit(Base):
    name = "tp-nofit"

@hookimpl
def register_models(register):
    for cls in (WarmNotConvex, NoInit, NoFit):
        register(cls)
'''


def test_declarations_that_do_not_fit_together_are_reported(tmp_path, monkeypatch):
    """``supports_warm_start`` without ``convex`` (warm starts silently off)
    warns with the model and the change, and is kept as a notice of its plugin; a ``fit``
    the protocol cannot call makes the model unusable.  Registration does not judge
    ``converged_`` (that is behaviour: the model's first unit, the kit)."""
    from mtlbench.plugins import PluginMigrationWarning

    write_distribution(tmp_path / "site", "tp-decl", "0.1", {"tp_decl": DECLARATIONS},
                       {"tp-decl": "tp_decl"})
    activate(monkeypatch, tmp_path / "site")
    with pytest.warns(UserWarning) as caught:
        reg = Registry().load_entry_points()
    notes = [str(w.message) for w in caught if issubclass(w.category, PluginMigrationWarning)]
    assert len(notes) == 1 and "model 'tp-warm': declares supports_warm_start = True but " \
        "not convex = True, so its fits are never warm-started" in notes[0], notes
    assert [(n.distribution, n.model) for n in reg.notices] == [("tp-decl", "tp-warm")]
    assert reg.model_names.count("tp-warm") == 1
    errors = {f.error.split("'")[1]: f.error for f in reg.failures if f.stage == "validate"}
    assert "NoInit.fit takes no 'init' argument, but the protocol calls fit(tasks, init=" \
           in errors["tp-noinit"]
    assert "NoFit does not implement fit(self, tasks, init=None)" in errors["tp-nofit"]


def test_a_stale_editable_install_is_named(monkeypatch):
    """An editable install keeps the version it was installed with, so after a
    version bump results would record the old one; loading says to reinstall."""
    from mtlbench.plugins import PluginWarning

    monkeypatch.setattr("mtlbench._version.__version__", "99.0.0")
    with pytest.warns(PluginWarning, match=r"installed metadata says version .* but its code "
                                           r"is 99\.0\.0: .*reinstall it \(pip install -e \.\)"):
        Registry().load_entry_points()


def test_the_release_has_a_changelog_entry_and_a_plugin_api_version():
    """Each release names its version and plugin API version in CHANGELOG.md, with what a
    plugin author must change."""
    from pathlib import Path

    import mtlbench

    text = (Path(__file__).resolve().parents[1] / "CHANGELOG.md").read_text(encoding="utf-8")
    # the newest release comes first (after the changes not yet released, if any)
    head = next(h for h in text.split("\n## ")[1:] if not h.startswith("Unreleased"))
    assert head.startswith(f"{mtlbench.__version__} ")
    assert f"plugin API version {mtlbench.PLUGIN_API_VERSION}" in head
    for change in ("Log(", "convex", "converged_", "report_progress", "min(d, T)"):
        assert change in head, change


CONVERGENCE = '''
import numpy as np
from mtlbench import LinearMTLModel, Log, hookimpl


class Mean(LinearMTLModel):
    paper = "test"
    search_space = {"lam": Log([0.1, 10.0], low=0.0)}

    def __init__(self, lam=1.0):
        self.lam = lam

    def _mean(self, tasks):
        self.coef_ = np.column_stack([tasks.X(t).T @ tasks.y(t) / (1.0 + self.lam)
                                      for t in range(tasks.T)])


class Commented(Mean):
    """Its converged_ is set by the solver (it is not)."""
    name = "tp-commented"

    def fit(self, tasks, init=None):
        self._mean(tasks)   # converged_ = True would be right here
        self.diagnostics_ = {"converged": True}
        return self


class Closed(Mean):
    """Sets converged_ in a helper of its base class."""
    name = "tp-closed"

    def _mean(self, tasks):
        super()._mean(tasks)
        self.converged_ = True

    def fit(self, tasks, init=None):
        self._mean(tasks)
        return self


@hookimpl
def register_models(register):
    register(Commented)
    register(Closed)
'''


def _first_unit_row(reg, name, tasks):
    """The stored row of a model's unit (the fields :meth:`Registry.note_unit` reads), from
    the protocol itself, run in this process."""
    from mtlbench.protocol import ProtocolConfig, run_protocol

    cls = reg.model_class(name)
    out = run_protocol(cls(), dict(cls.search_space), tasks,
                       ProtocolConfig(reps=1, budget=4), 0)
    return {"status": "ok", "model_config": {"name": name}, "problem": tasks.name, "rep": 0,
            "grid": out.grid, "diagnostics": out.diagnostics}


def test_converged_is_judged_by_behaviour_at_the_first_unit(tmp_path, monkeypatch, problem):
    """Whether a model sets ``converged_`` is seen in its first finished unit, not read from
    its source: a comment naming ``converged_`` does not hide that fit never sets it, and a
    base-class helper that sets it is seen to.  Once per model; registration fits nothing."""
    from mtlbench.plugins import PluginMigrationWarning

    write_distribution(tmp_path / "site", "tp-conv", "0.1", {"tp_conv": CONVERGENCE},
                       {"tp-conv": "tp_conv"})
    activate(monkeypatch, tmp_path / "site")
    with warnings.catch_warnings():
        warnings.simplefilter("error", PluginMigrationWarning)
        reg = Registry().load_entry_points()
    assert reg.notices == []
    with pytest.warns(PluginMigrationWarning, match=r"model 'tp-commented': no fit of its first "
                                                    r"unit \(small rep 0: \d+ search fits and "
                                                    r"the refit\) set converged_"):
        notice = reg.note_unit(_first_unit_row(reg, "tp-commented", problem))
    assert notice is not None and reg.notices == [notice]
    assert reg.note_unit(_first_unit_row(reg, "tp-commented", problem)) is None  # once
    with warnings.catch_warnings():
        warnings.simplefilter("error", PluginMigrationWarning)
        assert reg.note_unit(_first_unit_row(reg, "tp-closed", problem)) is None
    assert len(reg.notices) == 1


def test_notices_are_listed_by_plugins_and_printed_once_by_compare(tmp_path, monkeypatch):
    """An old plugin's migration notices: ``mtlbench plugins`` lists them (a column with the
    count, a section with the text); ``compare`` prints each once, and only when one of the
    plugin's models runs (never as Python warnings from its worker processes)."""
    write_distribution(tmp_path / "site", "tp-ranges", "1.0", {"tp_ranges": RANGES},
                       {"tp-ranges": "tp_ranges"})
    activate(monkeypatch, tmp_path / "site")
    runner = CliRunner()
    res = runner.invoke(cli, ["plugins", "--format", "json"])
    rows = {r["plugin"]: r for r in json.loads(res.stdout) if r["status"] == "ok"}
    notices = rows["tp-ranges"]["notices"]
    assert [n.split(":")[0] for n in notices] == ["tp-oldlist", "tp-oldlist"]
    assert all("plain list, searched as the range" in n for n in notices)
    res = runner.invoke(cli, ["plugins"], env={"COLUMNS": "400"})
    text = " ".join(res.output.split())
    assert "what plugin authors should change" in text and "tp-oldlist" in text
    store = str(tmp_path / "s.sqlite")
    res = runner.invoke(cli, ["compare", "--models", "stl", "--reps", "1", "--store", store])
    assert res.exit_code == 0 and "plain list" not in res.output, res.output
    res = runner.invoke(cli, ["compare", "--models", "tp-oldlist", "--reps", "2", "-j", "2",
                              "--store", store])
    assert res.exit_code == 0, res.output
    out = " ".join(res.output.split())
    assert out.count("search_space['lam'] = [0.1, 1.0, 10.0, 100.0] is a plain list") == 1
    assert out.count("search_space['k'] = [2, 4] is a plain list") == 1, res.output
    assert "PluginMigrationWarning" not in res.output
