"""Which solvers race at which hyperparameters: the selectors' values, a stored unit's
selection or the centre of the starting design, and the reference runs of a model."""
from __future__ import annotations

import inspect
import math
from typing import Any, Mapping, Sequence


from ..errors import ConfigError
from ..model import MTLModel
from ..search.space import Int, Log, clip_point, normalise_space
from ..syntax import fmt_value, init_params

from .runs import LONGER, TIGHTEN, RaceEntry


def centre_params(cls: type[MTLModel], context: Mapping[str, Any] | None = None,
                  decided: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The centre of the starting design for every searched parameter not in ``decided``:
    the middle of its start range on its own scale (geometric for Log, and for Int from 1 up;
    arithmetic otherwise; Int rounded), the middle listed value of a categorical parameter;
    then clipped to the bounds, whose expressions read ``context`` (the problem's dimensions,
    fixed parameters) and the ``decided`` values of the other searched parameters."""
    space = normalise_space(cls.search_space)
    decided = dict(decided or {})
    point: dict[str, Any] = {}
    for key, par in space.items():
        if not par.ordered:
            point[key] = par.grid[(len(par.grid) - 1) // 2]
            continue
        lo, hi = par.start_range
        geometric = isinstance(par, Log) or (isinstance(par, Int) and lo >= 1)
        mid = math.sqrt(lo * hi) if geometric else (lo + hi) / 2.0
        point[key] = int(round(mid)) if isinstance(par, Int) else float(f"{mid:.12g}")
    clipped = clip_point(space, {**point, **decided}, dict(context or {}))
    return {k: clipped[k] for k in point if k not in decided}


def _stored_selection(store, problem: str, rep: int, seed: int, name: str,
                      label: str | None, split_fingerprint: str | None = None
                      ) -> tuple[dict[str, Any], str] | None:
    """(fixed + selected hyperparameters, description) of the latest finished unit of model
    ``name`` (preferably the plain label ``label``) on ``problem``, ``rep``, ``seed``; a unit
    whose split differs from ``split_fingerprint`` (other data or split settings) is an
    error."""
    df = store.units(problems=[problem], status="ok")
    if df.empty:
        return None
    df = df[(df["rep"] == rep) & (df["seed"] == seed)]
    names = [(c or {}).get("name") if isinstance(c, dict) else None for c in df["model_config"]]
    df = df[[n == name for n in names]]
    if df.empty:
        return None
    if label is not None and (df["model"] == label).any():
        df = df[df["model"] == label]
    row = df.sort_values("finished_at").iloc[-1]
    if split_fingerprint and row["split_fingerprint"] != split_fingerprint:
        raise ConfigError(
            f"race: the stored unit of {row['model']} on {problem} rep {rep} was fitted on "
            f"another split (fingerprint {str(row['split_fingerprint'])[:12]}..., here "
            f"{split_fingerprint[:12]}...): other data or split settings; race with the "
            "store's settings (--test-fraction/--val-fraction) or give the values with -m")
    params = {**(row["model_config"].get("fixed") or {}), **(row["best_params"] or {})}
    return params, f"unit {row['key'][:12]} ({row['model']}, finished {row['finished_at']})"


def race_selections(registry, selectors: Sequence[str], *, problem: str, rep: int, seed: int,
                    store=None, split_fingerprint: str | None = None,
                    context: Mapping[str, Any] | None = None
                    ) -> list[tuple[str, str, dict[str, Any], dict[str, str], str]]:
    """(name, label, params, origin per searched parameter, note) for each selector.

    Every searched parameter gets one value (given > stored > centre, the centre clipped to
    the bounds at the problem's dimensions ``context``, :func:`centre_params`); a list in a
    selector is an error (the race fits one point).  Raises :class:`ConfigError` naming the
    selector."""
    from ..selectors import apply_overrides, parse_selector

    out = []
    seen = set()
    for text in selectors:
        name, overrides = parse_selector(text)
        cls = registry.model_class(name)
        sel = apply_overrides(cls, overrides, name)
        if sel.grid_overrides:
            raise ConfigError(f"race: {text!r} lists several values for "
                              f"{', '.join(sorted(sel.grid_overrides))}; the race fits one "
                              "point per model: give one value each")
        params: dict[str, Any] = {}
        origin: dict[str, str] = {}
        note = ""
        stored = None
        if store is not None:
            stored = _stored_selection(store, problem, rep, seed, name,
                                       name if not overrides else None, split_fingerprint)
            if stored is None:
                note = (f"no finished unit of {name} for {problem} rep {rep} seed {seed} in the "
                        "store: starting-design centre")
            else:
                note = f"selected by {stored[1]}"
        searched = list(normalise_space(cls.search_space))
        for key in searched:
            if key in sel.fixed:
                params[key], origin[key] = sel.fixed[key], "given"
            elif stored is not None and key in stored[0]:
                params[key], origin[key] = stored[0][key], "store"
        centre = centre_params(cls, {**dict(context or {}), **sel.fixed}, params)
        for key in searched:
            if key in centre:
                params[key], origin[key] = centre[key], "centre"
        for key, value in (stored[0] if stored else {}).items():   # fixed at that unit
            if key not in params and key in init_params(cls):
                params[key] = value
        params.update({k: v for k, v in sel.fixed.items() if k not in searched})
        label = name + ("[" + ",".join(f"{k}={fmt_value(params[k])}" for k in sorted(params))
                        + "]" if params else "")
        if label in seen:
            raise ConfigError(f"race: the model selection {label} is given twice")
        seen.add(label)
        out.append((name, label, params, origin, note))
    return out


def race_entries(registry, selections) -> list[RaceEntry]:
    """The model's own solver and each alternative of ``solvers`` for every selection.
    An alternative must subclass the model (same hyperparameters, same objective)."""
    out = []
    for name, label, params, origin, _ in selections:
        cls = registry.model_class(name)
        convex = bool(getattr(cls, "convex", False))
        out.append(RaceEntry(name, label, params, origin, _solver_name(cls), convex=convex))
        for alt_name, alt in own_solvers(cls).items():
            if not (isinstance(alt, type) and issubclass(alt, cls)):
                raise ConfigError(f"model {name!r}: solver {alt_name!r} is {alt!r}, not a "
                                  f"subclass of {cls.__name__} (an alternative solver overrides "
                                  "fit only; docs/race.md)")
            out.append(RaceEntry(name, label, params, origin, str(alt_name), convex=convex))
    return out


def own_solvers(cls: type) -> dict[str, type]:
    """The alternative solvers ``cls`` declares itself: a ``solvers`` mapping inherited from
    a parent model belongs to the parent's objective, not to a subclass (an ablation)."""
    return dict(vars(cls).get("solvers") or {})


def _solver_name(cls: type) -> str:
    return str(getattr(cls, "solver_name", "default") or "default")


def reference_variants(cls: type[MTLModel], entry: RaceEntry) -> list[RaceEntry]:
    """Longer runs of the model's own solver for a best-found reference: every constructor
    parameter named ``tol`` or ``*_tol``/``*tol`` divided by :data:`TIGHTEN`, every
    ``max_iter``/``max_*`` integer multiplied by :data:`LONGER`; and, for a model with a
    ``seed`` or ``random_state`` parameter, two other seeds (other cold starts)."""
    defaults = {k: v for k, v in init_params(cls).items() if v is not inspect.Parameter.empty}
    current = {**defaults, **dict(entry.params)}
    longer: dict[str, Any] = {}
    what = []
    for key, value in sorted(current.items()):
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            continue
        if (key == "tol" or key.endswith("tol")) and isinstance(value, float) and value > 0:
            longer[key] = value / TIGHTEN
            what.append(f"{key}/{TIGHTEN:g}")
        elif (key == "max_iter" or key.startswith("max_")) and isinstance(value, int):
            longer[key] = value * LONGER
            what.append(f"{key}*{LONGER}")
    out = []
    if longer:
        out.append(RaceEntry(entry.model, entry.label, {**entry.params, **longer}, entry.origin,
                             entry.solver, role="reference", variant=", ".join(what),
                             convex=entry.convex))
    for key in ("seed", "random_state"):
        if isinstance(current.get(key), int) and not isinstance(current.get(key), bool):
            for k in (1, 2):
                out.append(RaceEntry(entry.model, entry.label,
                                     {**entry.params, key: current[key] + k}, entry.origin,
                                     entry.solver, role="reference",
                                     variant=f"{key}={current[key] + k}", convex=entry.convex))
    return out


# ----------------------------------------------------------------------------- one run
