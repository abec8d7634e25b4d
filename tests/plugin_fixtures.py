"""Write throw-away distributions with ``mtlbench`` entry points onto sys.path.

importlib.metadata discovers ``<name>-<version>.dist-info`` folders on sys.path, so a test can
install a real (if tiny) plugin distribution without pip.
"""
from __future__ import annotations

import sys
import textwrap
from pathlib import Path


def write_distribution(root: Path, dist: str, version: str, modules: dict[str, str],
                       entry_points: dict[str, str]) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    for mod, code in modules.items():
        (root / f"{mod}.py").write_text(textwrap.dedent(code))
    info = root / f"{dist}-{version}.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist}\nVersion: {version}\n")
    # as setuptools writes it: the distribution's top-level modules (its code fingerprint's scope)
    (info / "top_level.txt").write_text("".join(f"{m.split('.')[0]}\n" for m in sorted(modules)))
    eps = "\n".join(f"{k} = {v}" for k, v in entry_points.items())
    (info / "entry_points.txt").write_text(f"[mtlbench]\n{eps}\n")
    return root


def activate(monkeypatch, root: Path) -> None:
    """Put ``root`` on sys.path and make the next registry load see it."""
    from mtlbench.plugins import registry as plugins

    monkeypatch.syspath_prepend(str(root))
    for mod in [m for m in sys.modules if m.startswith("tp_")]:
        del sys.modules[mod]
    plugins._reset_registry_for_tests()
    monkeypatch.setattr(plugins, "_REGISTRY", None)
