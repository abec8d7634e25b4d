"""The README as a guide: short, its set-up and test commands those of ``.ci/run``, and every
file it links present in the repository."""
from __future__ import annotations

import re
import shlex
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def _commands(text: str) -> list[list[str]]:
    """The command lines of the README's bash blocks, split as the shell would (comments
    dropped)."""
    out = []
    for block in re.findall(r"```bash\n(.*?)```", text, flags=re.S):
        out += [shlex.split(line, comments=True) for line in block.splitlines() if line.strip()]
    return out


def _ci_commands() -> list[list[str]]:
    lines = (REPO / ".ci" / "run").read_text(encoding="utf-8").splitlines()
    return [shlex.split(ln, comments=True) for ln in lines
            if re.match(r"\s*(python -m pip install|pytest)\b", ln)]


def test_the_readme_is_short_and_runs_what_ci_runs():
    text = (REPO / "README.md").read_text(encoding="utf-8")
    assert len(text.splitlines()) < 200
    readme = _commands(text)
    ci = _ci_commands()
    tests = [c for c in ci if c[0] == "pytest"]
    assert tests and all(c in readme for c in tests), (tests, readme)
    installs = [[a for a in c[2:] if a != "--quiet"] for c in ci if "-e" in c]
    assert installs and all(c in readme for c in installs), (installs, readme)


def test_every_file_the_readme_links_exists():
    text = (REPO / "README.md").read_text(encoding="utf-8")
    targets = re.findall(r"\]\(([^)\s#]+)(?:#[^)]*)?\)", text)
    assert targets
    missing = [t for t in targets if "://" not in t and not (REPO / t).exists()]
    assert missing == []
