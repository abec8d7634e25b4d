"""The selector syntax ``NAME[param=value,...]`` shared by model and dataset selectors.

Parsing (:func:`parse_selector`, :func:`parse_value`, :func:`split_top_level`), the canonical
way a value is written back (:func:`fmt_value`) and the type check of a value against an
``__init__`` default (:func:`init_params`, :func:`check_type`).  Depends on
:mod:`mtlbench.errors` only, so that :mod:`mtlbench.dataset`, :mod:`mtlbench.plugins` and
:mod:`mtlbench.selectors` can all use it without importing each other.
"""
from __future__ import annotations

import ast
import inspect
import re
from typing import Any

from .errors import ConfigError

__all__ = ["file_stem", "problem_name", "split_top_level", "parse_value", "parse_selector",
           "init_params", "check_type", "fmt_value"]

_NAME = re.compile(r"^\s*([A-Za-z0-9_.\-]+)\s*(?:\[(.*)\])?\s*$", re.S)


def split_top_level(text: str, sep: str = ",") -> list[str]:
    """Split on ``sep`` outside brackets and quotes."""
    out, depth, quote, cur = [], 0, None, []
    for ch in text:
        if quote:
            cur.append(ch)
            if ch == quote:
                quote = None
            continue
        if ch in "'\"":
            quote = ch
        elif ch in "[(":
            depth += 1
        elif ch in "])":
            depth -= 1
        if ch == sep and depth == 0:
            out.append("".join(cur))
            cur = []
        else:
            cur.append(ch)
    if depth != 0 or quote:
        raise ConfigError(f"unbalanced brackets or quotes in {text!r}")
    out.append("".join(cur))
    return [s.strip() for s in out if s.strip()]


def parse_value(text: str, where: str = "") -> Any:
    """A Python literal (number, string, bool, None, list); a bare word is a string."""
    text = text.strip()
    ctx = f" in {where}" if where else ""
    if not text:
        raise ConfigError(f"missing value{ctx}; expected param=value or param=[v1,v2]")
    try:
        value = ast.literal_eval(text)
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        if re.fullmatch(r"[A-Za-z_][A-Za-z0-9_\-]*", text):
            return text  # bare word: a string option such as loss=auc
        raise ConfigError(f"cannot parse hyperparameter value {text!r}{ctx}; use numbers, "
                          "quoted strings, true/false or a list like [0.1,1.0]") from None
    if value is True or value is False or value is None:
        return value
    if isinstance(value, tuple):
        raise ConfigError(f"tuple value {text!r}{ctx}; use a list [v1,v2] to search values")
    if isinstance(value, (dict, set)):
        raise ConfigError(f"unsupported value {text!r}{ctx}; use a scalar or a list")
    return value


def parse_selector(text: str) -> tuple[str, dict[str, Any]]:
    """``"tfcl[k=[3,5]]"`` -> ("tfcl", {"k": [3, 5]})."""
    m = _NAME.match(text)
    if not m:
        raise ConfigError(f"invalid model selector {text!r}; "
                          "expected NAME or NAME[param=value,...]")
    name, body = m.group(1), m.group(2)
    overrides: dict[str, Any] = {}
    if body is not None and not body.strip():
        raise ConfigError(f"empty brackets in {text!r}; expected NAME[param=value,...]")
    if body:
        try:
            items = split_top_level(body)
        except ConfigError:
            raise ConfigError(f"unbalanced brackets or quotes in model selector {text!r}") from None
        for item in items:
            if "=" not in item:
                raise ConfigError(f"invalid override {item!r} in {text!r}; expected param=value")
            key, val = item.split("=", 1)
            key = key.strip()
            if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", key):
                raise ConfigError(f"invalid parameter name {key!r} in {text!r}")
            if key in overrides:
                raise ConfigError(f"parameter {key!r} is given twice in {text!r}")
            overrides[key] = parse_value(val, where=f"{text!r}")
    return name, overrides


def init_params(cls: type) -> dict[str, Any]:
    """``{name: default}`` of ``cls.__init__``'s named parameters (``self``, ``*args`` and
    ``**kwargs`` left out; no default = ``inspect.Parameter.empty``)."""
    sig = inspect.signature(cls.__init__)
    return {p.name: p.default for p in sig.parameters.values()
            if p.name != "self" and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)}


def check_type(name: str, key: str, default: Any, value: Any) -> None:
    """Raise :class:`~mtlbench.errors.ConfigError` unless ``value`` (given as ``name[key=value]``)
    has the type of ``default`` (bool, int, real or str; anything goes for other defaults)."""
    if default is inspect.Parameter.empty or default is None or value is None:
        return
    num = (int, float)
    if isinstance(default, bool):
        ok = isinstance(value, bool)
    elif isinstance(default, int):
        ok = isinstance(value, int) and not isinstance(value, bool)
        if not ok and isinstance(value, float):
            raise ConfigError(f"{name}[{key}={value!r}]: expected an integer like the default "
                              f"{default!r}")
    elif isinstance(default, num):
        ok = isinstance(value, num) and not isinstance(value, bool)
    elif isinstance(default, str):
        ok = isinstance(value, str)
    else:
        ok = True
    if not ok:
        raise ConfigError(f"{name}[{key}={value!r}]: expected a value like the default "
                          f"{default!r} ({type(default).__name__})")


def fmt_value(v: Any) -> str:
    """A value as written in a selector: ``repr`` without spaces, strings bare."""
    return repr(v).replace(" ", "") if not isinstance(v, str) else v


def file_stem(label: str) -> str:
    """A file-name-safe stem of a dataset or problem label: ``"simulated[seed=1]"`` ->
    ``"simulated-seed-1"``, ``"shoes[pca=200]/brown"`` -> ``"shoes-pca-200-brown"`` (brackets,
    ``=``, ``,``, ``/`` and spaces become single dashes)."""
    return re.sub(r"[\[\]=,/\s]+", "-", str(label)).strip("-") or "unnamed"


def problem_name(problem: str, dataset: str | None = None) -> str:
    """A problem's name within its data set: ``"synthetic-attributes/attr0"`` -> ``"attr0"``
    (the id is ``<dataset>/<name>`` when a data set has several problems, else the data set's
    label itself, which is returned as it is).  With ``dataset`` the prefix removed is exactly
    that label (a label whose parameters hold a ``/`` stays whole)."""
    if dataset is not None:
        return problem[len(dataset) + 1:] if problem.startswith(f"{dataset}/") else problem
    return problem.split("/", 1)[1] if "/" in problem else problem
