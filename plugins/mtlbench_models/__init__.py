"""Built-in model plugins of mtlbench, one module per model.

Each module implements the ``register_models`` hook and is named by its own entry point in
the ``mtlbench`` group (see pyproject.toml), exactly as a third-party plugin would be.
The models compose the shared layer ``_core`` (datafits, penalties, solvers).
"""
