"""Exceptions that carry a message meant for the user (the CLI prints them without a traceback)."""
from __future__ import annotations

import difflib


class MTLBenchError(Exception):
    """Base class of every error whose message is written for the user."""


class DataValidationError(MTLBenchError, ValueError):
    """Input data is malformed: the message names the task and the problem."""


class DatasetUnavailableError(MTLBenchError):
    """A dataset's files are missing, truncated or fail their checksum."""


class PluginError(MTLBenchError):
    """A plugin failed to load or register (raised only in strict mode)."""


class PluginConflictError(MTLBenchError):
    """Two plugins registered the same model or dataset name."""


class UnknownNameError(MTLBenchError, KeyError):
    """A model, dataset or problem name that no plugin provides."""

    def __str__(self) -> str:  # KeyError would quote the message
        return str(self.args[0]) if self.args else ""


class ConfigError(MTLBenchError, ValueError):
    """An invalid hyperparameter override, config file or command-line option."""


class ModelContractError(MTLBenchError):
    """A model broke the model contract (``fit`` did not return self, ``decision_function``
    returned scores of the wrong shape, a search space names an unknown parameter, ...)."""


def unknown_name_message(kind: str, name: str, known, known_as: str | None = None) -> str:
    """``unknown KIND 'NAME'. Did you mean ...? Known KINDs: ...`` (close matches by difflib).

    ``known`` is any iterable of the valid names; used for models, datasets, problems and
    searchers alike.  ``known_as`` replaces the words "Known KINDs" (e.g. "Models of this
    run")."""
    known = sorted(known)
    close = difflib.get_close_matches(name, known, n=3, cutoff=0.5)
    hint = f" Did you mean {', '.join(repr(c) for c in close)}?" if close else ""
    return (f"unknown {kind} {name!r}.{hint} {known_as or f'Known {kind}s'}: "
            f"{', '.join(known) or '(none)'}.")
