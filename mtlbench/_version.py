"""The version of mtlbench (the single source: pyproject.toml reads it from here) and the
version of its plugin API (CHANGELOG.md lists what changed with each)."""
__version__ = "0.2.0"

#: Raised whenever a plugin author must act (a new requirement of the model, dataset or
#: searcher contract, a hook, a public helper); plugins written for earlier versions keep
#: loading, with a PluginMigrationWarning naming the change (docs/plugins.md, CHANGELOG.md).
PLUGIN_API_VERSION = 2
