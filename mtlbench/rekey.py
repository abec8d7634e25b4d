"""Units stored under the previous code fingerprint rule: recognised, and moved to their keys.

A unit's key hashes its provenance, code fingerprints included (:mod:`mtlbench.provenance`).
The fingerprint was a hash of the source files as text; it is now a hash of their parsed code
without docstrings and comments.  So a unit stored or published under the previous rule has
another key than the same unit computed now.  It is the unit this installation computes when
its provenance is one of :func:`~mtlbench.provenance.previous_rule_provenances`: its code
fingerprints are those the previous rule gives the code installed now (for a third-party
plugin whose code has not changed, the previous rule applied to its files; for a built-in
class, the fingerprint its units were published with, if its code is still that code).  Such a
unit gets this rule's provenance and the key its identity has under it, with the same version
of its searcher's rule; nothing else of it changes:

* :func:`rekey_store` moves the units of a results store (``compare`` runs it when it plans,
  ``--dry-run`` too, so that they are found in the store);
* :func:`rekey_published` the units of a published leaderboard JSON as read by
  ``import-results`` and ``scripts/restore_store.py`` (after the file's keys are checked
  against its units), so that they are imported under this rule's keys.

A unit of other code, or of a model or dataset not installed here, keeps its key.
"""
from __future__ import annotations

from dataclasses import replace
from typing import Any, Mapping, Sequence

from ._json import config_json
from .provenance import previous_rule_provenances, unit_provenance
from .report.imported import published_spec, search_versions

__all__ = ["rekey_published", "rekey_store"]


class _Installed:
    """Per (model, dataset): this installation's provenance and, read when first needed, the
    previous rule's provenances of the same code (None: the model or dataset is not
    installed)."""

    def __init__(self, registry: Any) -> None:
        self.registry = registry
        self.current: dict[tuple[str, str], dict[str, Any] | None] = {}
        self.previous: dict[tuple[str, str], list[dict[str, Any]]] = {}

    def here(self, pk: tuple[str, str]) -> dict[str, Any] | None:
        if pk not in self.current:
            try:
                self.current[pk] = unit_provenance(self.registry, *pk)
            except Exception:  # noqa: BLE001 - a model or dataset not installed here
                self.current[pk] = None
        return self.current[pk]

    def before(self, pk: tuple[str, str]) -> list[dict[str, Any]]:
        """The previous rule's provenances of the installed code (empty if not installed)."""
        if pk not in self.previous:
            self.previous[pk] = [] if self.here(pk) is None else \
                previous_rule_provenances(self.registry, *pk)
        return self.previous[pk]

    def same_code(self, pk: tuple[str, str], provenance: Mapping[str, Any]) -> bool:
        """Whether ``provenance`` is one the previous rule gives the installed code."""
        return provenance != self.here(pk) and provenance in self.before(pk)


def current_identity(unit: Mapping[str, Any], dataset: str,
                     installed: _Installed) -> tuple[str, dict[str, Any]] | None:
    """(key, provenance) under this rule of a stored or published ``unit`` (a unit's fields
    as the store and the published JSON hold them) of the previous rule that the code
    installed now made; None for any other unit."""
    name = (unit.get("model_config") or {}).get("name")
    prov = unit.get("provenance")
    if not name or not isinstance(prov, Mapping):
        return None
    pk = (str(name), str(dataset))
    if not installed.same_code(pk, prov):
        return None
    before = published_spec(unit, dataset)
    after = published_spec(unit, dataset, installed.here(pk))
    for version in search_versions(unit):
        if before.key_under(version) == unit["key"]:
            return after.key_under(version), installed.here(pk)
    return None  # a key that is not the hash of its identity: left alone


def rekey_published(data: dict[str, Any], registry: Any = None) -> int:
    """Give the units of a published leaderboard JSON (``data``, read; changed in place)
    that are of the previous rule and made by the code installed now their key and
    provenance under this rule; returns how many.  A unit whose new key another unit of the
    file has keeps its own."""
    if registry is None:
        from .plugins import get_registry

        registry = get_registry()
    installed = _Installed(registry)
    taken = {u["key"] for u in data["units"]}
    n = 0
    for unit in data["units"]:
        found = current_identity(unit, data["dataset"], installed)
        if found is not None and found[0] not in taken:
            taken.add(found[0])
            unit["key"], unit["provenance"] = found[0], dict(found[1])
            n += 1
    return n


def rekey_store(store: Any, registry: Any, specs: Sequence[Any] | None = None) -> int:
    """Move the units of ``store`` (a writable :class:`~mtlbench.store.ResultStore`) that
    are of the previous rule and made by the code installed now to their keys under this
    rule; returns how many moved.  With ``specs`` (the units a run plans) the store is read
    only when one of the planned units that it lacks is stored under the previous rule (a
    lookup by key); then every unit of the store is considered, so that no table mixes the
    two rules.  Decided once per (dataset, model configuration, provenance)."""
    installed = _Installed(registry)
    if specs is not None:
        stored = store.statuses(s.key for s in specs)
        before = [replace(s, provenance_json=config_json(prov)).key
                  for s in specs if s.key not in stored
                  for prov in installed.before((s.model, s.dataset))]
        if not before or not store.statuses(before):
            return 0
    groups: dict[tuple[str, str, str], list[dict[str, Any]]] = {}
    for unit in store.unit_identities():
        groups.setdefault((str(unit["dataset"]), config_json(unit["model_config"]),
                           config_json(unit["provenance"])), []).append(unit)
    moves: dict[str, tuple[str, dict[str, Any]]] = {}
    for (dataset, _, _), units in groups.items():
        first = units[0]
        name = (first["model_config"] or {}).get("name") \
            if isinstance(first["model_config"], dict) else None
        if not name or not isinstance(first["provenance"], dict) or \
                not installed.same_code((str(name), dataset), first["provenance"]):
            continue
        for unit in units:
            found = current_identity(unit, dataset, installed)
            if found is not None:
                moves[unit["key"]] = found
    return store.rekey_units(moves) if moves else 0
