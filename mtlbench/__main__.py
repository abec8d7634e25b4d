"""``python -m mtlbench``: the ``mtlbench`` command."""
from .cli.main import main

main()
