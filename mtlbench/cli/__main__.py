"""``python -m mtlbench.cli``: the ``mtlbench`` command."""
from .main import main

main()
