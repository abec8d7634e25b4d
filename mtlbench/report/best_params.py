"""``mtlbench best-params``: a finished run's selected hyperparameters as a config file.

The units are those of the one selection rule (:func:`mtlbench.report.select.select_units`:
one seed, one protocol setting, the latest code per model label).  Per model label and
problem, the finished units' selections -- the fixed values of the label plus the searched
values each repetition selected (``best_params``) -- are counted; the selection made in most
repetitions is exported, ties broken by the higher mean validation AUC of the repetitions that
made it, then by the canonical JSON of the values (deterministic; no test score is looked at).
A comment says in how many repetitions it was made.

The TOML is what ``compare --config`` reads (:mod:`mtlbench.config`): ``[compare]`` with the
models, the problems and the run's protocol settings (repetitions, seed, fractions, where
all problems share them), and one ``[models.NAME.problems."PROBLEM"]`` table per model and
problem pinning every value, so ``compare --config FILE`` fits each model at exactly those
values on each problem, nothing searched.  The text is parsed back before it is returned, and
must give the exported values exactly (floats are written with ``repr``, which round-trips).
"""
from __future__ import annotations

import json
import math
from collections import Counter
from typing import Any

from ..errors import ConfigError
from .select import Selection

__all__ = ["best_params_toml", "choose_selection", "toml_value"]


def choose_selection(units) -> tuple[dict[str, Any], int, int] | None:
    """(values, repetitions that selected them, finished repetitions) over the finished units
    of one model label and problem (rule: module docstring); None without a finished one."""
    ok = units[units["status"] == "ok"]
    if ok.empty:
        return None
    chosen: list[str] = []
    val: dict[str, list[float]] = {}
    for _, r in ok.iterrows():
        cfg = r["model_config"] if isinstance(r["model_config"], dict) else {}
        values = {**dict(cfg.get("fixed") or {}), **dict(r["best_params"] or {})}
        text = json.dumps(values, sort_keys=True)
        chosen.append(text)
        v = r["val_auc"]
        val.setdefault(text, []).append(float(v) if v is not None and v == v else -math.inf)
    counts = Counter(chosen)
    best = max(counts, key=lambda t: (counts[t], sum(val[t]) / len(val[t]), t))
    return json.loads(best), counts[best], len(ok)


def toml_value(v: Any, where: str) -> str:
    """One TOML value (a bool, an integer, a float that round-trips, a basic string);
    anything else is a :class:`ConfigError` naming ``where``."""
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        if math.isnan(v):
            return "nan"
        if math.isinf(v):
            return "inf" if v > 0 else "-inf"
        text = repr(v)
        return text if any(c in text for c in ".en") else text + ".0"
    if isinstance(v, str):
        return _toml_string(v)
    raise ConfigError(f"best-params: {where} = {v!r} cannot be written to a config file "
                      "(a pinned value is a number, a string or true/false)")


def _toml_string(text: str) -> str:
    # JSON escapes are TOML escapes, except that TOML also wants DEL escaped
    return json.dumps(text, ensure_ascii=False).replace("\x7f", "\\u007f")


def best_params_toml(sel: Selection, source: str = "") -> str:
    """The config file of a selection's selected hyperparameters (module docstring)."""
    units = sel.units
    ok = units[units["status"] == "ok"]
    if ok.empty:
        raise ConfigError(f"best-params: no finished unit in {source or 'the store'} for what "
                          "was asked")
    names: dict[str, list[str]] = {}
    for label, g in ok.groupby("model", sort=True):
        cfg = g["model_config"].iloc[0]
        name = cfg.get("name") if isinstance(cfg, dict) else str(label).split("[", 1)[0]
        names.setdefault(name, []).append(str(label))
    several = {n: ls for n, ls in names.items() if len(ls) > 1}
    if several:
        n, ls = next(iter(sorted(several.items())))
        raise ConfigError(f"best-params: model {n!r} has {len(ls)} selections here "
                          f"({', '.join(ls)}); a config file pins one per model and problem: "
                          "choose one with --models LABEL")
    problems = sorted(ok["problem"].unique())
    lines = [f"# Selected hyperparameters of {source or 'a results store'} (mtlbench "
             "best-params).",
             "# `mtlbench compare --config THIS_FILE` fits each model at these values on each "
             "problem, nothing searched.", ""]
    lines += ["[compare]", f"datasets = [{', '.join(_toml_string(p) for p in problems)}]",
              f"models = [{', '.join(_toml_string(n) for n in sorted(names))}]"]
    lines += _protocol_lines(ok, sel)
    expected: dict[str, dict[str, dict[str, Any]]] = {}
    for name in sorted(names):
        label = names[name][0]
        for problem in problems:
            g = units[(units["model"] == label) & (units["problem"] == problem)]
            picked = choose_selection(g)
            lines.append("")
            if picked is None:
                lines.append(f"# {label} on {problem}: no finished unit, nothing pinned")
                continue
            values, k, n = picked
            lines.append(f"# {label} on {problem}: selected in {k} of {n} repetition(s)")
            lines.append(f"[models.{_toml_string(name)}.problems.{_toml_string(problem)}]")
            for key, v in sorted(values.items()):
                lines.append(f"{key} = {toml_value(v, f'{label} on {problem}: {key}')}")
            expected.setdefault(name, {})[problem] = values
    text = "\n".join(lines) + "\n"
    _check_round_trip(text, expected)
    return text


def _protocol_lines(ok, sel: Selection) -> list[str]:
    """``reps``, ``seed``, ``test_fraction``, ``val_fraction`` where every exported unit
    agrees (else a comment), so the splits are the run's."""
    out = []
    reps = set(sel.planned_reps.values())
    seeds = set(sel.seeds.values())
    for key, values in (("reps", reps), ("seed", seeds)):
        if len(values) == 1:
            out.append(f"{key} = {int(next(iter(values)))}")
        elif values:
            out.append(f"# {key}: the problems differ ({sorted(values)}); give --{key}")
    for key in ("test_fraction", "val_fraction"):
        values = {p.get(key) for p in ok["protocol"] if isinstance(p, dict)}
        if len(values) == 1 and isinstance(next(iter(values)), float):
            out.append(f"{key} = {toml_value(next(iter(values)), key)}")
        elif len(values) > 1:
            out.append(f"# {key}: the problems differ ({sorted(map(str, values))})")
    return out


def _check_round_trip(text: str, expected: dict[str, dict[str, dict[str, Any]]]) -> None:
    try:
        import tomllib
    except ModuleNotFoundError:  # Python 3.10: the reader of --config is missing too
        return
    back = tomllib.loads(text)
    got = {m: t.get("problems", {}) for m, t in back.get("models", {}).items()}
    same = got == expected and all(type(v) is type(got[m][p][k]) for m in expected
                                   for p in expected[m] for k, v in expected[m][p].items())
    if not same:
        raise ConfigError("best-params: the TOML written does not read back to the selected "
                          "values (a bug: please report it)")
