"""Bound expressions: a bound of a searched parameter given as a short formula over the
problem's dimensions and the other searched parameters (``"min(d, T)"``, ``"1/k"``).

Parsed once with :mod:`ast` and evaluated by walking the tree, in floats; only numbers, the
names, ``+ - * / **``, unary ``-`` and ``min(...)`` / ``max(...)`` are accepted (nothing is
``eval``-ed), and anything else is one :class:`~mtlbench.errors.ConfigError` line.
"""
from __future__ import annotations

import ast
import functools
import math
from dataclasses import dataclass, field
from typing import Any, Mapping

import numpy as np

from ..errors import ConfigError

#: Names of the problem's dimensions a bound expression may use (besides the other searched
#: parameters): features, tasks, fewest and most training rows of a task.
PROBLEM_NAMES = ("d", "T", "n_min", "n_max")


def _is_number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) or _is_np_number(v)


def _is_np_number(v: Any) -> bool:
    return isinstance(v, (np.integer, np.floating)) and not isinstance(v, np.bool_)


_BINOPS = {ast.Add: lambda a, b: a + b, ast.Sub: lambda a, b: a - b,
           ast.Mult: lambda a, b: a * b, ast.Div: lambda a, b: a / b,
           ast.Pow: lambda a, b: a ** b}
_FUNCS = {"min": min, "max": max}
_SYNTAX_HELP = ("use numbers, the names d, T, n_min, n_max and other searched parameters, "
                "+ - * / ** and min(...) / max(...)")


@dataclass(frozen=True)
class BoundExpr:
    """A bound given as an expression, e.g. ``"min(d, T)"`` or ``"1/k"``.

    Parsed once with :mod:`ast` and evaluated by walking the tree, in floats: only numbers,
    names, ``+ - * / **``, unary ``-`` and calls of ``min`` / ``max`` are accepted (nothing
    is ``eval``-ed).  ``names`` are the names it reads."""

    text: str
    tree: Any = field(compare=False, repr=False)
    names: frozenset = field(compare=False)

    @staticmethod
    @functools.lru_cache(maxsize=256)
    def parse(text: str) -> "BoundExpr":
        """The parsed expression; a :class:`~mtlbench.errors.ConfigError` for anything else."""
        if not isinstance(text, str) or not text.strip():
            raise ConfigError(f"bound expression {text!r}: empty; {_SYNTAX_HELP}")
        try:
            tree = ast.parse(text.strip(), mode="eval").body
        except SyntaxError:
            raise ConfigError(f"bound expression {text!r} is not an expression; "
                              f"{_SYNTAX_HELP}") from None
        names: set[str] = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.Name):
                if node.id not in _FUNCS:
                    names.add(node.id)
            elif isinstance(node, ast.Call):
                if not (isinstance(node.func, ast.Name) and node.func.id in _FUNCS) \
                        or node.keywords or len(node.args) < 2 \
                        or any(isinstance(a, ast.Starred) for a in node.args):
                    raise ConfigError(f"bound expression {text!r}: only min(a, b, ...) and "
                                      f"max(a, b, ...) may be called; {_SYNTAX_HELP}")
            elif isinstance(node, ast.Constant):
                if not _is_number(node.value):
                    raise ConfigError(f"bound expression {text!r}: {node.value!r} is not a "
                                      f"number; {_SYNTAX_HELP}")
            elif isinstance(node, ast.BinOp):
                if type(node.op) not in _BINOPS:
                    raise ConfigError(f"bound expression {text!r}: operator "
                                      f"{type(node.op).__name__} is not allowed; {_SYNTAX_HELP}")
            elif isinstance(node, ast.UnaryOp):
                if not isinstance(node.op, (ast.USub, ast.UAdd)):
                    raise ConfigError(f"bound expression {text!r}: operator "
                                      f"{type(node.op).__name__} is not allowed; {_SYNTAX_HELP}")
            elif not isinstance(node, (ast.Load, ast.operator, ast.unaryop)):
                raise ConfigError(f"bound expression {text!r}: {type(node).__name__} is not "
                                  f"allowed; {_SYNTAX_HELP}")
        return BoundExpr(text.strip(), tree, frozenset(names))

    def value(self, env: Mapping[str, Any]) -> float:
        """The bound's value with the names of ``env``; a ConfigError naming what is missing
        or what failed (a division by zero, ...)."""
        missing = sorted(self.names - set(env))
        if missing:
            raise ConfigError(f"bound {self.text!r} needs {', '.join(missing)}, which "
                              f"{'is' if len(missing) == 1 else 'are'} not known here")
        try:
            v = self._eval(self.tree, env)
        except (ArithmeticError, ValueError, TypeError) as exc:
            raise ConfigError(f"bound {self.text!r} cannot be evaluated at "
                              f"{ {n: env[n] for n in sorted(self.names)} }: {exc}") from None
        if isinstance(v, complex) or not math.isfinite(v):
            raise ConfigError(f"bound {self.text!r} is not a finite number at "
                              f"{ {n: env[n] for n in sorted(self.names)} }")
        return v

    def _eval(self, node: Any, env: Mapping[str, Any]) -> Any:
        # in floats: an integer power such as d ** d ** d cannot grow without bound
        if isinstance(node, ast.Constant):
            return float(node.value)
        if isinstance(node, ast.Name):
            return float(env[node.id])
        if isinstance(node, ast.BinOp):
            return _BINOPS[type(node.op)](self._eval(node.left, env), self._eval(node.right, env))
        if isinstance(node, ast.UnaryOp):
            v = self._eval(node.operand, env)
            return -v if isinstance(node.op, ast.USub) else v
        return _FUNCS[node.func.id](*(self._eval(a, env) for a in node.args))

    def __str__(self) -> str:
        return self.text


def _check_bound(owner: str, which: str, bound: Any) -> None:
    if bound is None or _is_number(bound):
        if isinstance(bound, float) and not math.isfinite(bound):
            raise ConfigError(f"{owner}: {which} must be a finite number, an expression or "
                              f"None, got {bound!r}")
        return
    if isinstance(bound, str):
        BoundExpr.parse(bound)
        return
    raise ConfigError(f"{owner}: {which} must be a number, an expression (a string such as "
                      f"'min(d, T)') or None, got {bound!r}")


__all__ = ["BoundExpr", "PROBLEM_NAMES"]
