"""Expected unit times: stored, else scaled from other problems by size, else the model's
cost_hint scaled to the problem and to this machine, else a default; the dry-run estimate says
which part is extrapolated, and which part comes from another kind of problem (uncertain)."""
from __future__ import annotations

from dataclasses import dataclass

import pandas as pd
import pytest

from mtlbench import api
from mtlbench.runner.cost import (DEFAULT_COST, DEFAULT_SCALING, REFERENCE_PROBLEM,
                                  REFERENCE_SIZE, REFERENCE_TASKS, SIZE_EXPONENT, Expected,
                                  expected_unit_seconds, problem_kind, scaling_exponents,
                                  spread_longest_first, unlike_reason)


@dataclass(frozen=True)
class Spec:
    model: str
    problem: str
    rep: int = 0

    @property
    def label(self) -> str:
        return self.model

    @property
    def key(self) -> str:
        return f"{self.model}/{self.problem}/{self.rep}"


def _history(rows):
    return pd.DataFrame(rows, columns=["model", "model_name", "problem", "time_total",
                                       "problem_size"])


def test_precedence_stored_scaled_hint_default():
    history = _history([("a", "a", "p", 2.0, 100.0), ("a", "a", "p", 4.0, 100.0),
                        ("a", "a", "p", 9.0, 100.0), ("b", "b", "p", 3.0, 100.0)])
    sizes = {"p": 100.0, "q": 400.0}
    hints = {"c": 5.0}
    exp = expected_unit_seconds([Spec("a", "p"), Spec("b", "q"), Spec("c", "q"),
                                 Spec("d", "q")], history, sizes, hints.get)
    assert exp["a/p/0"] == Expected(4.0, "stored")                  # median on its problem
    assert exp["b/q/0"].source == "scaled"
    assert exp["b/q/0"].seconds == pytest.approx(3.0 * 4.0 ** SIZE_EXPONENT, rel=1e-12)
    assert exp["c/q/0"].source == "hint"
    assert exp["c/q/0"].seconds == pytest.approx(5.0 * (400.0 / REFERENCE_SIZE) ** SIZE_EXPONENT,
                                                 rel=1e-12)
    assert exp["d/q/0"] == Expected(DEFAULT_COST, "default")


def test_sizes_recorded_with_stored_units_scale_to_a_new_problem():
    history = _history([("a", "a", "old", 8.0, 1.0e6)])
    exp = expected_unit_seconds([Spec("a", "new")], history, {"new": 2.5e5}, None)
    assert exp["a/new/0"].seconds == pytest.approx(8.0 * 0.25 ** SIZE_EXPONENT, rel=1e-12)
    # a problem of unknown size counts unscaled (the dispatcher knows only stored sizes)
    exp = expected_unit_seconds([Spec("a", "other")], history, None, None)
    assert exp["a/other/0"] == Expected(8.0, "scaled")


def test_hints_are_scaled_to_this_machine_by_models_timed_here():
    # model a ran 3x slower here than its hint says; b was never timed: its hint is scaled too
    size = REFERENCE_SIZE
    history = _history([("a", "a", "p", 6.0, size)])
    exp = expected_unit_seconds([Spec("b", "p")], history, {"p": size},
                                {"a": 2.0, "b": 10.0}.get)
    assert exp["b/p/0"] == Expected(pytest.approx(30.0, rel=1e-12), "hint")


def test_a_broken_hint_is_no_hint():
    def hint_of(name):
        raise RuntimeError("plugin bug")

    exp = expected_unit_seconds([Spec("x", "p")], None, {"p": 1.0}, hint_of)
    assert exp["x/p/0"] == Expected(DEFAULT_COST, "default")
    exp = expected_unit_seconds([Spec("x", "p")], None, {"p": 1.0}, {"x": -3}.get)
    assert exp["x/p/0"].source == "default"


def test_a_declared_task_exponent_scales_by_the_number_of_tasks():
    """A model whose cost grows with T (AMTL's T x T transfer matrix) declares
    cost_scaling = {"size": a, "tasks": b}: its times move between problems by
    (size ratio)^a (task ratio)^b; a model without a declaration by (size ratio)^(1/2) only."""
    history = pd.DataFrame(
        [("t", "t", "small", 10.0, 1.0e6, 200), ("s", "s", "small", 10.0, 1.0e6, 200)],
        columns=["model", "model_name", "problem", "time_total", "problem_size", "n_tasks"])
    scaling = {"t": {"size": 0.0, "tasks": 2.0}}.get
    exp = expected_unit_seconds([Spec("t", "big"), Spec("s", "big")], history,
                                {"big": 4.0e6}, None, {"big": 600.0}, scaling)
    assert exp["t/big/0"] == Expected(pytest.approx(10.0 * 3.0 ** 2, rel=1e-12), "scaled")
    assert exp["s/big/0"] == Expected(pytest.approx(10.0 * 4.0 ** 0.5, rel=1e-12), "scaled")
    # the task count recorded with stored units serves when the plan does not know it
    exp = expected_unit_seconds([Spec("t", "big")], history.assign(problem="big2"),
                                {"big": 1.0e6}, None, {"big": 100.0}, scaling)
    assert exp["t/big/0"].seconds == pytest.approx(10.0 * 0.5 ** 2, rel=1e-12)
    # a hint is scaled from the reference problem the same way
    exp = expected_unit_seconds([Spec("t", "q")], None, {"q": REFERENCE_SIZE}, {"t": 2.0}.get,
                                {"q": 2.0 * REFERENCE_TASKS}, scaling)
    assert exp["t/q/0"] == Expected(pytest.approx(8.0, rel=1e-12), "hint")


@pytest.mark.parametrize("declared", [None, "fast", {"size": "x"}, {"tasks": -1.0},
                                      {"tasks": float("nan")}, {"size": 9.0}])
def test_a_broken_cost_scaling_falls_back_to_the_default(declared):
    assert scaling_exponents(declared) == dict(DEFAULT_SCALING)

    def boom(name):
        raise RuntimeError("plugin bug")

    exp = expected_unit_seconds([Spec("x", "p")], None, {"p": REFERENCE_SIZE}, {"x": 3.0}.get,
                                {"p": 5.0 * REFERENCE_TASKS}, boom)
    assert exp["x/p/0"] == Expected(pytest.approx(3.0, rel=1e-12), "hint")


def test_a_partial_cost_scaling_keeps_the_default_for_the_rest():
    assert scaling_exponents({"tasks": 2}) == {"size": SIZE_EXPONENT, "tasks": 2.0}


@pytest.mark.parametrize("times,workers,wall", [
    ([4.0, 4.0, 3.0], 2, 7.0), ([5.0, 1.0, 1.0, 1.0], 2, 5.0), ([2.0, 2.0], 1, 4.0),
    ([], 3, 0.0)])
def test_spread_longest_first(times, workers, wall):
    assert spread_longest_first(times, workers) == pytest.approx(wall)


def test_estimate_counts_each_source_and_names_the_extrapolated_part():
    todo = [Spec("a", "p", 0), Spec("a", "p", 1), Spec("b", "p"), Spec("c", "p")]
    expected = {"a/p/0": Expected(4.0, "stored"), "a/p/1": Expected(4.0, "stored"),
                "b/p/0": Expected(3.0, "scaled"), "c/p/0": Expected(1.0, "hint")}
    est = api.estimate_wall_time(todo, expected, workers=2)
    assert est.compute_seconds == pytest.approx(12.0)
    assert est.seconds == pytest.approx(7.0)  # {4, 3} and {4, 1}
    assert est.by_source == {"stored": (2, 8.0), "scaled": (1, 3.0), "hint": (1, 1.0)}
    text = est.text()
    assert "2 unit(s) from stored times" in text
    assert "1 unit(s) extrapolated from the model's times on other problems" in text
    assert "1 unit(s) extrapolated from the model's cost_hint" in text
    assert "33 % of the compute is extrapolated" in text
    assert api.estimate_wall_time(todo, expected, workers=None).seconds is None
    assert api.estimate_wall_time([], {}, workers=2).text() == "nothing to run"


def test_every_builtin_model_has_a_cost_hint():
    from mtlbench.plugins import BUILTIN_DISTRIBUTION, get_registry

    reg = get_registry()
    for name in reg.model_names:
        if reg.model_plugin(name).distribution == BUILTIN_DISTRIBUTION:
            hint = getattr(reg.model_class(name), "cost_hint", None)
            assert isinstance(hint, float) and hint > 0, name
            declared = getattr(reg.model_class(name), "cost_scaling", None)
            if declared is not None:  # a built-in declaration must be read as written
                assert scaling_exponents(declared) == {**DEFAULT_SCALING, **declared}, name


def test_with_nothing_timed_here_hints_are_scaled_by_the_machine_probe():
    calls = []

    def speed():
        calls.append(1)
        return 0.4

    specs = [Spec("b", "p"), Spec("b", "p", 1), Spec("c", "p")]
    exp = expected_unit_seconds(specs, None, {"p": REFERENCE_SIZE}, {"b": 10.0, "c": 5.0}.get,
                                machine_speed=speed)
    assert exp["b/p/0"] == Expected(pytest.approx(4.0, rel=1e-12), "hint")
    assert exp["c/p/0"].seconds == pytest.approx(2.0, rel=1e-12)
    assert "timed probe" in exp["b/p/0"].note
    assert len(calls) == 1                                   # probed once per plan
    # nothing needs a hint: the probe is not run
    expected_unit_seconds([Spec("d", "p")], None, {"p": 1.0}, None, machine_speed=speed)
    assert len(calls) == 1


def test_models_timed_here_take_precedence_over_the_probe():
    history = _history([("a", "a", "p", 6.0, REFERENCE_SIZE)])

    def speed():
        raise AssertionError("the probe must not run when stored times give the factor")

    exp = expected_unit_seconds([Spec("b", "p")], history, {"p": REFERENCE_SIZE},
                                {"a": 2.0, "b": 10.0}.get, machine_speed=speed)
    assert exp["b/p/0"] == Expected(pytest.approx(30.0, rel=1e-12), "hint")
    assert "timed here" in exp["b/p/0"].note


@pytest.mark.parametrize("speed", [lambda: float("nan"), lambda: 0.0, lambda: 1 / 0])
def test_a_broken_probe_leaves_hints_unscaled(speed):
    exp = expected_unit_seconds([Spec("b", "p")], None, {"p": REFERENCE_SIZE}, {"b": 10.0}.get,
                                machine_speed=speed)
    assert exp["b/p/0"] == Expected(pytest.approx(10.0, rel=1e-12), "hint")
    assert "unscaled" in exp["b/p/0"].note


def test_the_machine_probe_is_a_positive_time_and_the_plan_names_it():
    from mtlbench.runner.cost import machine_probe_seconds, probed_machine_speed

    t = machine_probe_seconds()
    assert 0.0 < t < 60.0
    assert probed_machine_speed() > 0.0
    todo = [Spec("c", "p")]
    est = api.estimate_wall_time(todo, {"c/p/0": Expected(1.0, "hint", "x0.4 for this machine: "
                                                                      "a timed probe")}, 2)
    assert "cost_hint (x0.4 for this machine: a timed probe)" in est.text()


# ------------------------------------------------------------------ uncertain estimates
@pytest.mark.parametrize("problem,like", [
    ("synthetic-attributes[seed=101]/attr0", True), ("synthetic-attributes/attr3", True),
    ("synthetic-attributes[seed=7]/attr6", True),
    ("synthetic-attributes[setting=near-separable]/attr0", False),
    ("synthetic-attributes[seed=101,users=40]/attr0", False),
    ("synthetic-attributes[label_noise=0.0]/attr0", False),
    ("simulated", False), ("school", False), ("shoes/brown", False)])
def test_a_problem_is_of_the_references_kind_only_as_another_draw_of_its_generator(problem,
                                                                                     like):
    why = unlike_reason(problem, [REFERENCE_PROBLEM])
    assert (why == "") is like
    if not like:
        assert REFERENCE_PROBLEM in why
    if "users=40" in problem:
        assert "users=40" in why
    if problem == "simulated":
        assert why.startswith("another data set")


def test_problem_kinds():
    assert problem_kind("simulated[seed=3]") == problem_kind("simulated") == ("simulated", ())
    assert problem_kind("shoes[pca=200]/brown") == ("shoes", (("pca", "200"),))
    assert problem_kind("shoes[pca=200]/brown") != problem_kind("shoes/brown")


def test_hints_and_scaled_times_from_another_kind_of_problem_are_uncertain():
    family = "synthetic-attributes[setting=noisy]/attr0"
    hints = {"a": 2.0, "b": 5.0}.get
    exp = expected_unit_seconds([Spec("a", family), Spec("b", "synthetic-attributes/attr2")],
                                None, {family: REFERENCE_SIZE}, hints)
    assert exp[f"a/{family}/0"].source == "hint" and "setting='noisy'" in \
        exp[f"a/{family}/0"].unlike
    assert exp["b/synthetic-attributes/attr2/0"].unlike == ""            # the reference's kind
    # scaled from the default to a family setting: uncertain; between attributes: not
    history = _history([("a", "a", "synthetic-attributes/attr0", 4.0, REFERENCE_SIZE)])
    exp = expected_unit_seconds([Spec("a", family), Spec("a", "synthetic-attributes/attr5")],
                                history, None, hints)
    assert exp[f"a/{family}/0"].source == "scaled" and exp[f"a/{family}/0"].unlike
    assert exp["a/synthetic-attributes/attr5/0"].unlike == ""
    # once the problem has stored units, the rest comes from them and is not uncertain
    history = _history([("a", "a", family, 40.0, REFERENCE_SIZE)])
    exp = expected_unit_seconds([Spec("a", family, 1)], history, None, hints)
    assert exp[f"a/{family}/1"] == Expected(40.0, "stored") and exp[f"a/{family}/1"].unlike == ""


def test_hints_are_scaled_by_the_models_timed_on_the_same_problem_first():
    """A problem harder than the reference (every model timed on it 6x its hint, 2x elsewhere)
    scales the hints of the models not yet timed on it by its own factor."""
    hard, easy = "synthetic-attributes[setting=near-separable]/attr0", "school"
    history = _history([("a", "a", hard, 12.0, REFERENCE_SIZE),
                        ("b", "b", hard, 30.0, REFERENCE_SIZE),
                        ("a", "a", easy, 4.0, REFERENCE_SIZE),
                        ("b", "b", easy, 10.0, REFERENCE_SIZE)])
    hints = {"a": 2.0, "b": 5.0, "c": 1.0}.get

    def speed():
        raise AssertionError("timed units give the factor: no probe")

    exp = expected_unit_seconds([Spec("c", hard), Spec("c", "lenk")], history,
                                {"lenk": REFERENCE_SIZE}, hints, machine_speed=speed)
    assert exp[f"c/{hard}/0"].seconds == pytest.approx(6.0, rel=1e-12)
    assert "for this problem" in exp[f"c/{hard}/0"].note
    assert exp["c/lenk/0"].seconds == pytest.approx(4.0, rel=1e-12)   # median of 6, 6, 2, 2


def test_the_estimate_says_which_part_is_uncertain_and_why():
    todo = [Spec("a", "p"), Spec("b", "p"), Spec("c", "q")]
    why = f"other dataset parameters than {REFERENCE_PROBLEM} (setting='noisy')"
    expected = {"a/p/0": Expected(4.0, "hint", unlike=why), "b/p/0": Expected(6.0, "hint",
                                                                                unlike=why),
                "c/q/0": Expected(3.0, "stored")}
    est = api.estimate_wall_time(todo, expected, workers=2)
    assert est.uncertain == (2, pytest.approx(10.0)) and est.uncertain_why == why
    text = est.text()
    assert f"UNCERTAIN: 2 unit(s) (10 s of compute) are estimated from another kind of " \
           f"problem ({why})" in text
    assert "UNCERTAIN" not in api.estimate_wall_time(todo[2:], expected, workers=2).text()


def test_plan_on_a_family_setting_flags_its_hints_and_the_reference_does_not(tmp_path):
    small = "users=30,n_items=500,n_features=40"
    plan = api.plan(f"synthetic-attributes[setting=near-separable,{small}]/attr0", ["stl"],
                    reps=2, store=tmp_path / "s.sqlite")
    assert plan.estimate.uncertain[0] == 2
    assert "setting='near-separable'" in plan.estimate.uncertain_why
    assert "UNCERTAIN" in plan.estimate.text()
    plan = api.plan("synthetic-attributes[seed=101]/attr0", ["stl"], reps=1,
                    store=tmp_path / "s.sqlite")
    assert plan.estimate.uncertain == (0, 0.0) and set(plan.estimate.by_source) == {"hint"}


def test_the_dry_run_prints_uncertain_with_the_problem_ids_intact(tmp_path):
    from click.testing import CliRunner

    from mtlbench.cli import cli

    small = "setting=noisy,users=30,n_items=500,n_features=40"
    out = CliRunner().invoke(cli, ["compare", "--dry-run", "--reps", "1", "--models", "stl",
                                   "--datasets", f"synthetic-attributes[{small}]/attr0",
                                   "--store", str(tmp_path / "s.sqlite")], env={"COLUMNS": "300"})
    assert out.exit_code == 0, out.output
    text = " ".join(out.output.split())
    assert "UNCERTAIN (another kind of problem)" in text                     # the table
    assert "UNCERTAIN: 1 unit(s)" in text and f"than {REFERENCE_PROBLEM} (" in text
