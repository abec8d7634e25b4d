"""Built-in dataset plugins of mtlbench, one module per data set, each named by its own
entry point in the ``mtlbench`` group (see pyproject.toml)."""
