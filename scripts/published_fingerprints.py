"""The table of the built-in plugins' published code fingerprints, and which built-in classes
still have that code.

Units published before the code fingerprint became a hash of the parsed code
(``leaderboards/*.json``, and stores of that time) carry fingerprints of the previous rule,
which hashed the source files as text.  ``mtlbench/_published_fingerprints.py`` maps, for each
model and dataset class the built-in plugins registered at the published commit, its
fingerprint under the previous rule to the fingerprint this rule gives the same code; a stored
unit of that class counts as current exactly when the installed code's fingerprint equals the
second (the code is the published code, docstrings and comments aside).
:func:`mtlbench.provenance.previous_fingerprints` reads it.

    python scripts/published_fingerprints.py write [--ref 7f84c80]

extracts the built-in plugins of ``--ref`` (``git archive``) into a temporary folder, imports
every class their entry points register from there, computes both fingerprints of each with
this mtlbench, refuses unless the previous-rule fingerprints equal those the units published
at ``--ref`` carry (its ``leaderboards/*.json``), and rewrites the table.

    python scripts/published_fingerprints.py check

lists each installed built-in class with whether its code is still the published code
(its units published at the table's commit are current) or has changed since.  Exit status 0,
or 1 when ``write`` finds a published fingerprint it does not reproduce.
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TABLE = ROOT / "mtlbench" / "_published_fingerprints.py"
DISTRIBUTION = "mtlbench"
FOLDERS = ("plugins", "datasets")   # the built-in plugins' source folders


def registered_classes(modules: list[str]) -> list[type]:
    """The model and dataset classes the hook implementations of ``modules`` register."""
    import importlib

    found: list[type] = []

    def register(obj) -> None:
        found.append(obj if isinstance(obj, type) else type(obj))

    for name in modules:
        mod = importlib.import_module(name)
        for hook in ("register_models", "register_datasets"):
            if hasattr(mod, hook):
                getattr(mod, hook)(register)
    return list(dict.fromkeys(found))


def _qualified(cls: type) -> str:
    return f"{cls.__module__}.{cls.__qualname__}"


def _published(folder: Path) -> dict[str, set[str]]:
    """Class -> the code fingerprints its published units carry."""
    out: dict[str, set[str]] = {}
    for path in sorted(folder.glob("*.json")):
        data = json.loads(path.read_text(encoding="utf-8"))
        units = data.get("units") if isinstance(data, dict) else None
        for unit in units if isinstance(units, list) else []:
            for part in ("model", "dataset"):
                prov = (unit.get("provenance") or {}).get(part) or {}
                if prov.get("distribution") == DISTRIBUTION and prov.get("code"):
                    out.setdefault(prov["class"], set()).add(prov["code"])
    return out


def write(ref: str) -> int:
    with tempfile.TemporaryDirectory() as tmp:
        archive = subprocess.run(["git", "archive", ref, *FOLDERS, "leaderboards",
                                  "pyproject.toml"], cwd=ROOT, check=True,
                                 capture_output=True).stdout
        subprocess.run(["tar", "-x", "-C", tmp], input=archive, check=True)
        commit = subprocess.run(["git", "rev-parse", "--short", ref], cwd=ROOT, check=True,
                                capture_output=True, text=True).stdout.strip()
        points = tomllib.loads((Path(tmp) / "pyproject.toml").read_text())["project"][
            "entry-points"]["mtlbench"]
        modules = [m for m in points.values() if m.split(".")[0] != "mtlbench"]
        sys.path[:0] = [str(Path(tmp) / f) for f in FOLDERS]   # before the installed plugins
        from mtlbench.provenance import code_fingerprint, text_fingerprint

        classes = registered_classes(modules)
        here = sorted({_qualified(c): (text_fingerprint(c, DISTRIBUTION),
                                       code_fingerprint(c, DISTRIBUTION))
                       for c in classes if Path(sys.modules[c.__module__].__file__).is_relative_to(
                           tmp)}.items())
        published = _published(Path(tmp) / "leaderboards")
    wrong = [f"{name}: published {sorted(codes)}, recomputed {dict(here).get(name, ('-',))[0]}"
             for name, codes in sorted(published.items())
             if codes != {dict(here).get(name, (None,))[0]}]
    if wrong:
        print("the previous rule recomputed at", commit, "does not give the published "
              "fingerprints:\n  " + "\n  ".join(wrong), file=sys.stderr)
        return 1
    lines = [f'    "{name}": ("{old}", "{new}"),' for name, (old, new) in here]
    lines = [line if len(line) <= 100 else line.replace(": (", ":\n        (", 1)
             for line in lines]
    TABLE.write_text(
        f'"""The built-in plugins\' code fingerprints at git {commit}, whose units were '
        'published then:\nclass -> (fingerprint under the previous rule, the source files '
        'hashed as text;\nfingerprint of the same code under this rule).  Written by\n'
        '``python scripts/published_fingerprints.py write``; read by\n'
        ':func:`mtlbench.provenance.previous_fingerprints`."""\n\n'
        "PUBLISHED: dict[str, tuple[str, str]] = {\n" + "\n".join(lines) + "\n}\n",
        encoding="utf-8")
    print(f"{TABLE.relative_to(ROOT)}: {len(here)} classes of {commit} "
          f"({len(published)} of them with published units, all reproduced)")
    return 0


def check() -> int:
    from mtlbench._published_fingerprints import PUBLISHED
    from mtlbench.provenance import code_fingerprint

    from importlib.metadata import entry_points

    modules = [ep.value for ep in entry_points(group="mtlbench")
               if ep.value.split(".")[0] != "mtlbench"]
    for cls in registered_classes(sorted(set(modules))):
        name = _qualified(cls)
        entry = PUBLISHED.get(name)
        now = code_fingerprint(cls, DISTRIBUTION)
        state = ("not in the table" if entry is None else
                 "the published code (its published units are current)" if entry[1] == now
                 else f"changed since (published {entry[1]}, now {now})")
        print(f"{name}: {state}")
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("action", choices=("write", "check"))
    ap.add_argument("--ref", default="7f84c80", help="the commit the units were published at")
    args = ap.parse_args(argv)
    return write(args.ref) if args.action == "write" else check()


if __name__ == "__main__":
    sys.exit(main())
