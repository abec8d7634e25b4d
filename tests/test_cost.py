"""Expected unit times (issue 23 item 4): stored, else scaled from other problems by size,
else the model's cost_hint scaled to the problem and to this machine, else a default; the
dry-run estimate says which part is extrapolated."""
from __future__ import annotations

from dataclasses import dataclass

import pandas as pd
import pytest

from mtlbench import api
from mtlbench.runner.cost import (DEFAULT_COST, REFERENCE_SIZE, SIZE_EXPONENT, Expected,
                                  expected_unit_seconds, spread_longest_first)


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
