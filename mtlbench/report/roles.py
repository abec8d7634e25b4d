"""What models and datasets declare about their role in a report, read through the registry.

The report names no model: the win/tie/loss baseline is the model whose class sets
``is_baseline = True``; an ablation is a model whose class sets ``ablation_of = "<full
model's registry name>"`` (and optionally ``ablation_label``, e.g. ``"w/o AUC loss"``);
model-specific figures use fitted arrays that any model may store (``embeddings``,
``feature_groups``, convergence histories).  A stored label whose model is not installed has
no declared role.  A dataset whose labels were made from real-valued targets says how
(``Dataset.binarized``); tables then call it binarized.
"""
from __future__ import annotations

import warnings
from typing import Any

import pandas as pd


def registry_name(label: str, units: pd.DataFrame | None = None) -> str:
    """The registry name behind a stored model label (``tfcl[k=5]`` -> ``tfcl``)."""
    if units is not None and len(units):
        cfg = units.loc[units["model"] == label, "model_config"]
        for c in cfg:
            if isinstance(c, dict) and c.get("name"):
                return str(c["name"])
    return label.split("[", 1)[0]


def model_class_of(label: str, units: pd.DataFrame | None = None) -> Any:
    """The installed model class of a stored label, or None (not installed, broken plugin)."""
    from ..errors import MTLBenchError
    from ..plugins import PluginWarning, get_registry

    name = registry_name(label, units)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", PluginWarning)
            return get_registry().model_class(name)
    except (MTLBenchError, KeyError, LookupError):
        return None
    except Exception:  # noqa: BLE001 - a report must not fail on a broken plugin
        return None


def ablation_groups(labels: list[str], units: pd.DataFrame | None = None) -> dict[str, list[str]]:
    """``{full model label: [full model, ablation, ...]}`` for every full model present with
    at least one ablation present (ablations: classes declaring ``ablation_of``)."""
    names = {lab: registry_name(lab, units) for lab in labels}
    by_name = {}
    for lab, n in names.items():
        by_name.setdefault(n, lab)
    groups: dict[str, list[str]] = {}
    for lab in labels:
        cls = model_class_of(lab, units)
        parent = getattr(cls, "ablation_of", None) if cls is not None else None
        if parent and parent in by_name:
            groups.setdefault(by_name[parent], [by_name[parent]]).append(lab)
    return groups


def binarized(dataset: str) -> str:
    """How dataset ``dataset`` (a label, ``NAME[param=value]`` too) made binary labels from
    real-valued targets (``Dataset.binarized``); "" when it did not or is not installed."""
    from ..plugins import PluginWarning, get_registry

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", PluginWarning)
            text = getattr(get_registry().dataset(dataset), "binarized", "")
    except Exception:  # noqa: BLE001 - a report must not fail on a broken plugin
        return ""
    return text if isinstance(text, str) else ""


def dataset_title(dataset: str) -> str:
    """``"school (binarized: the exam score above the school's median (label_rule))"`` or the
    label itself: how tables name a data set."""
    how = binarized(dataset)
    return f"{dataset} (binarized: {how})" if how else dataset


def ablation_label(label: str, units: pd.DataFrame | None = None) -> str:
    cls = model_class_of(label, units)
    text = getattr(cls, "ablation_label", None) if cls is not None else None
    return f"{label}\n({text})" if text else label


__all__ = ["registry_name", "model_class_of", "ablation_groups", "ablation_label",
           "binarized", "dataset_title"]
