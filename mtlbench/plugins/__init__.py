"""Plugins: discovery and the registry (:mod:`.registry`), the checks a plugin passes when it
registers (:mod:`.checks`) and the migration notices of forms that work but should change
(:mod:`.notices`).
"""
from __future__ import annotations

from .checks import (hook_problems, metric_declaration_problems, model_declaration_problems,
                     registered_object_problem)
from .notices import (NO_CONVERGED, PluginMigrationWarning, PluginNotice,
                      model_declaration_notices, space_notices)
from .registry import (BUILTIN_DISTRIBUTION, ENTRY_POINT_GROUP, STRICT_ENV, PluginFailure,
                       PluginInfo, PluginWarning, Registered, Registry, get_registry)

__all__ = ["Registry", "get_registry", "PluginInfo", "PluginFailure", "PluginNotice",
           "Registered", "PluginWarning", "PluginMigrationWarning", "BUILTIN_DISTRIBUTION",
           "ENTRY_POINT_GROUP", "STRICT_ENV", "NO_CONVERGED", "hook_problems",
           "registered_object_problem", "model_declaration_problems",
           "metric_declaration_problems", "model_declaration_notices", "space_notices"]
