"""Forms that work but that a plugin's author should change, read from a model's
declarations; the registry warns of each once (:class:`PluginMigrationWarning`) and keeps it
as a :class:`PluginNotice` (``Registry.notices``, listed by ``mtlbench plugins``): a search
space of plain lists (the first release's form; searched under the same rule and budget as
declared ranges, :func:`mtlbench.search.space.list_to_param`), ``supports_warm_start``
without ``convex`` (warm starts stay off).

Whether a model sets ``converged_`` is seen by behaviour, never read from its source: at its
first use, the first finished unit of a model (:meth:`Registry.note_unit`) shows whether any of
its fits set it; when none did, a notice says that its convergence is "not recorded".
Registration fits nothing (``compare`` starts in a moment); the conformance kit fits and looks
too (:mod:`mtlbench.testing`).
"""
from __future__ import annotations

from dataclasses import dataclass

from ..model import MTLModel
from ..search.space import list_to_param


@dataclass
class PluginNotice:
    """A form the author of a working model should change (one
    :class:`PluginMigrationWarning`): the plugin, the model and what to write instead."""

    name: str
    distribution: str
    version: str
    model: str
    message: str



class PluginMigrationWarning(UserWarning):
    """A plugin works but uses a form its author should migrate (a plain-list search space,
    ``supports_warm_start`` without ``convex``, fits that set no ``converged_``); the message
    names the model and says what to write instead."""


NO_CONVERGED = ("{what}, so the results record its convergence as unknown (\"not "
                "recorded\"; diagnostics_['converged'] is not read): set self.converged_ = "
                "True / False in fit (whether the solver met its stated tolerance; True for "
                "a closed-form fit)")


def model_declaration_notices(cls: type[MTLModel]) -> list[str]:
    """What an author should change in model ``cls`` (the model works as it is), read from
    its declarations:

    * each plain-list ``search_space`` entry, with the declaration it is read as and the one
      to write;
    * ``supports_warm_start = True`` without ``convex = True``: the protocol warm-starts only
      convex models, so its fits start cold.

    (Whether ``fit`` sets ``converged_`` is behaviour: :meth:`Registry.note_unit` and the
    conformance kit look at fitted models.)"""
    out = space_notices(cls)
    if getattr(cls, "supports_warm_start", False) and not getattr(cls, "convex", False):
        out.append("declares supports_warm_start = True but not convex = True, so its fits "
                   "are never warm-started (the protocol warm-starts only convex models, "
                   "where the start cannot change the answer); declare convex = True if fit "
                   "minimises a convex problem, else remove supports_warm_start")
    return out


def space_notices(cls: type[MTLModel]) -> list[str]:
    """Each plain-list entry of ``cls.search_space``: the declaration it is read as and the
    one to write (registration and the conformance kit warn with these)."""
    out = []
    for key, decl in (getattr(cls, "search_space", None) or {}).items():
        if not isinstance(decl, (list, tuple)) or not decl:
            continue
        par = list_to_param(decl)
        kind = type(par).__name__
        if par.ordered:
            lo, hi = par.start_range
            out.append(f"search_space[{key!r}] = {list(decl)!r} is a plain list, searched as "
                       f"the range {par} under the same rule and budget as declared ranges "
                       f"(12 design points spread from {lo:g} to {hi:g}, then extension and "
                       f"refinement: docs/tuning.md); declare it with the model's real "
                       f"bounds, e.g. {key!r}: {kind}({list(decl)!r}, low=..., high=...)")
        elif len(decl) == 1 and isinstance(decl[0], (int, float)) \
                and not isinstance(decl[0], bool):
            v = decl[0]
            example = (f"Log([{v / 10:g}, {v * 10:g}], low=..., high=...)" if v > 0 else
                       f"Linear([{v - 1:g}, {v + 1:g}], low=..., high=...)")
            out.append(f"search_space[{key!r}] = {list(decl)!r} holds one value, so it is not "
                       f"searched; make it the __init__ default (or a param_constraints "
                       f"entry), or declare a range, e.g. {key!r}: {example}")
    return out


