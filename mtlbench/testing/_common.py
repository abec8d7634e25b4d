"""What every check of the conformance kit shares: its errors, constants and message format."""
from __future__ import annotations

import re
from typing import Any

#: What ``Dataset.availability`` may return.
AVAILABILITY_VALUES = ("generated", "cached", "in data-dir", "downloadable", "needs local files")
#: Availabilities for which ``load`` needs neither network nor user action.
LOADABLE = ("generated", "cached", "in data-dir")
_NAME_RE = re.compile(r"^[a-z0-9][a-z0-9_.\-]*$")
#: Relative tolerance of the non-increasing objective check.
MONOTONE_RTOL = 1e-8


class ConformanceError(AssertionError):
    """A plugin breaks the mtlbench contract; the message says which check and what to fix."""


class DataNotAvailable(Exception):
    """A dataset's files are not available locally; dataset checks that need data skip."""


def _fail(who: str, check: str, msg: str) -> ConformanceError:
    return ConformanceError(f"{who}: {check}: {msg}")


def _label(model_class: Any) -> str:
    name = getattr(model_class, "name", "") or ""
    return f"{name} ({model_class.__module__}.{model_class.__qualname__})" if name \
        else f"{model_class.__module__}.{model_class.__qualname__}"
