"""The layering the README promises: no import cycles among the project's modules, the core
(``mtlbench``) never imports a plugin package (``mtlbench_models``, ``mtlbench_datasets``), the
core's layers point one way with the command line (``mtlbench.cli``) on top, and only the command
line imports click or rich.

Read from the source with ``ast`` (nothing is imported or run); an import inside a function
counts like one at the top, since it is a dependency all the same.
"""
from __future__ import annotations

import ast
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
ROOTS = {"mtlbench": REPO / "mtlbench", "mtlbench_models": REPO / "plugins" / "mtlbench_models",
         "mtlbench_datasets": REPO / "datasets" / "mtlbench_datasets"}


def _modules() -> dict[str, Path]:
    out = {}
    for pkg, root in ROOTS.items():
        for f in root.rglob("*.py"):
            parts = [pkg, *f.relative_to(root).with_suffix("").parts]
            if parts[-1] == "__init__":
                parts.pop()
            out[".".join(parts)] = f
    return out


def _imports(name: str, path: Path, known: set[str]) -> set[str]:
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                up = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(up + ([base] if base else []))
            targets = [base] + [f"{base}.{a.name}" for a in node.names]
        else:
            continue
        for t in targets:
            while t and t not in known:  # a name imported from a module -> that module
                t = t.rpartition(".")[0]
            if t and t != name:
                found.add(t)
    if path.name == "__init__.py":  # a package importing its own submodules is no cycle
        found = {t for t in found if not t.startswith(name + ".")}
    return found


def _graph() -> dict[str, set[str]]:
    mods = _modules()
    return {m: _imports(m, p, set(mods)) for m, p in mods.items()}


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (iterative Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out = []
    counter = 0
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            v, children = work[-1]
            for w in children:
                if w not in index:
                    index[w] = low[w] = counter
                    counter += 1
                    stack.append(w)
                    on_stack.add(w)
                    work.append((w, iter(sorted(graph.get(w, ())))))
                    break
                if w in on_stack:
                    low[v] = min(low[v], index[w])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[v])
                if low[v] == index[v]:
                    comp = []
                    while True:
                        w = stack.pop()
                        on_stack.discard(w)
                        comp.append(w)
                        if w == v:
                            break
                    if len(comp) > 1:
                        out.append(sorted(comp))
    return out


def test_cycle_finder_finds_a_known_cycle():
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert _cycles({"a": {"b"}, "b": set()}) == []


def test_no_import_cycles():
    assert _cycles(_graph()) == []


def test_core_imports_no_plugin():
    up = sorted(f"{m} -> {t}" for m, ts in _graph().items() if m.split(".")[0] == "mtlbench"
                for t in ts if t.split(".")[0] != "mtlbench")
    assert up == []


#: the command line, the top layer
CLI = {"mtlbench.cli", "mtlbench.cli.__main__", "mtlbench.cli.main", "mtlbench.cli._ui",
       "mtlbench.cli._options", "mtlbench.cli._progress", "mtlbench.cli.info", "mtlbench.cli.run",
       "mtlbench.cli.report", "mtlbench.cli.new_plugin", "mtlbench.cli.race",
       "mtlbench.cli.share"}

#: The core's layers, lowest first: a module may import modules of its own or a lower layer,
#: never of a higher one (the package facade ``mtlbench/__init__.py`` is not a layer).
CORE_LAYERS = [
    {"mtlbench.errors", "mtlbench._json", "mtlbench.syntax", "mtlbench.progress",
     "mtlbench._forkserver", "mtlbench.provenance", "mtlbench._published_fingerprints",
     "mtlbench.reproducible"},
    {"mtlbench.search.space", "mtlbench.search.bounds", "mtlbench.data", "mtlbench.metrics"},
    {"mtlbench.model", "mtlbench.dataset", "mtlbench.search.design", "mtlbench.search.base",
     "mtlbench.synthetic", "mtlbench.fetch"},
    {"mtlbench.hookspecs"},
    {"mtlbench.plugins", "mtlbench.plugins.registry", "mtlbench.plugins.checks",
     "mtlbench.plugins.notices"},
    {"mtlbench.search", "mtlbench.search.searchers", "mtlbench.scoring"},
    {"mtlbench.evaluate", "mtlbench.search.loop"},
    {"mtlbench.protocol"},
    {"mtlbench.config", "mtlbench.selectors", "mtlbench.datasets_api"},
    {"mtlbench.store", "mtlbench.store.diagnosis", "mtlbench.store.schema",
     "mtlbench.store.claims", "mtlbench.store.results"},
    {"mtlbench.testing", "mtlbench.testing._common", "mtlbench.testing.problems",
     "mtlbench.testing.model_checks", "mtlbench.testing._model_fit",
     "mtlbench.testing.dataset_checks",
     "mtlbench.testing.conformance", "mtlbench.testing.pytest_plugin"},
    {"mtlbench.runner", "mtlbench.runner.unit", "mtlbench.runner.plan", "mtlbench.runner.cost",
     "mtlbench.runner.local", "mtlbench.runner.dask", "mtlbench.runner.run",
     "mtlbench.report", "mtlbench.report.select",
     "mtlbench.report.stats", "mtlbench.report.roles", "mtlbench.report.render",
     "mtlbench.report.schema", "mtlbench.report.across", "mtlbench.report.across_render",
     "mtlbench.report.leaderboard", "mtlbench.report.records", "mtlbench.report.arithmetic",
     "mtlbench.report.plots",
     "mtlbench.report.canvas", "mtlbench.report.figures",
     "mtlbench.report.publish", "mtlbench.report.staging", "mtlbench.report.importing",
     "mtlbench.report.imported", "mtlbench.report.race_figures",
     "mtlbench.report.merge", "mtlbench.report.best_params", "mtlbench.report.site",
     "mtlbench.report.text",
     "mtlbench.race", "mtlbench.race.runs", "mtlbench.race.selection",
     "mtlbench.race.reference", "mtlbench.race.output", "mtlbench.race.running",
     "mtlbench.scaffold",
     "mtlbench.rekey"},
    {"mtlbench.results_api"},
    {"mtlbench.api"},
    CLI,
]

#: modules outside the layers: the package facade, the version and ``python -m mtlbench``
UNLAYERED = {"mtlbench", "mtlbench._version", "mtlbench.__main__"}

#: third-party packages that only the command line may import
UI_PACKAGES = {"click", "rich"}


def test_core_layers_point_one_way():
    graph = _graph()
    layer = {m: i for i, mods in enumerate(CORE_LAYERS) for m in mods}
    assert set(layer) <= set(graph), sorted(set(layer) - set(graph))
    upward = sorted(f"{m} (layer {layer[m]}) -> {t} (layer {layer[t]})"
                    for m in layer for t in graph[m] if t in layer and layer[t] > layer[m])
    assert upward == []


def test_layer_cycles_of_the_core_are_gone():
    """No cycle among the layered modules (the rest of the tree is checked above)."""
    graph = _graph()
    core = {m for mods in CORE_LAYERS for m in mods}
    assert _cycles({m: graph[m] & core for m in core}) == []


def test_every_core_module_has_a_layer():
    """A new module of the core is placed in CORE_LAYERS (or named in UNLAYERED)."""
    core = {m for m in _graph() if m.split(".")[0] == "mtlbench"}
    layered = {m for mods in CORE_LAYERS for m in mods}
    assert sorted(core - layered - UNLAYERED) == []
    assert sorted((layered | UNLAYERED) - core) == []


def test_only_the_command_line_imports_it():
    """Nothing but ``python -m mtlbench`` imports ``mtlbench.cli`` (the library never calls up
    into its command line)."""
    graph = _graph()
    up = sorted(f"{m} -> {t}" for m, ts in graph.items() for t in ts
                if (t == "mtlbench.cli" or t.startswith("mtlbench.cli."))
                and m not in CLI and m != "mtlbench.__main__")
    assert up == []


def _third_party_imports(path: Path) -> set[str]:
    """Top-level names of the absolute imports of a file (``from rich.table import X`` ->
    ``rich``), wherever they stand (module level or inside a function)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
            found.add(node.module.split(".")[0])
    return found


def test_third_party_import_finder():
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        f = Path(tmp) / "m.py"
        f.write_text("import os.path\nfrom . import x\ndef g():\n    from rich.table import T\n",
                     encoding="utf-8")
        assert _third_party_imports(f) == {"os", "rich"}


def test_only_the_cli_imports_click_or_rich():
    """Library modules report through callbacks or a reporter object; terminal output (click,
    rich) is the command line's business.  Plugins may still add click commands through the
    ``register_commands`` hook (that is the plugin API), so only ``mtlbench/`` is checked."""
    root = ROOTS["mtlbench"]
    cli_dir = root / "cli"
    bad = sorted(f"{f.relative_to(REPO)} imports {', '.join(sorted(names))}"
                 for f in root.rglob("*.py") if cli_dir not in f.parents
                 for names in [_third_party_imports(f) & UI_PACKAGES] if names)
    assert bad == []
    assert _third_party_imports(cli_dir / "main.py") & UI_PACKAGES == {"click"}  # the check bites


def _mtlbench_names(path: Path) -> list[tuple[str, str]]:
    """``(module, name)`` for every name a file imports from the mtlbench core: ``from
    mtlbench.fetch import DataFile`` -> ``("mtlbench.fetch", "DataFile")``, ``import
    mtlbench.protocol`` -> ``("mtlbench.protocol", "")``."""
    out = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            out += [(a.name, "") for a in node.names if a.name.split(".")[0] == "mtlbench"]
        elif isinstance(node, ast.ImportFrom) and not node.level and node.module \
                and node.module.split(".")[0] == "mtlbench":
            out += [(node.module, a.name) for a in node.names]
    return out


def _off_surface(path: Path) -> list[str]:
    """Names a dataset plugin file imports from mtlbench outside the dataset authors' public
    surface: the top-level ``mtlbench`` names (``mtlbench.__all__``) and
    ``mtlbench.datasets_api`` (its ``__all__``)."""
    import mtlbench
    import mtlbench.datasets_api

    public = {"mtlbench": set(mtlbench.__all__),
              "mtlbench.datasets_api": set(mtlbench.datasets_api.__all__)}
    return [f"{module}.{name}" if name else module for module, name in _mtlbench_names(path)
            if name not in public.get(module, ())]


def test_builtin_dataset_plugins_use_only_the_public_surface(tmp_path):
    """What a dataset plugin needs (checksummed files, the user's data
    folder, the minimum-per-class rule, building a task set) is public in
    ``mtlbench.datasets_api`` (docs/plugins.md); the built-in dataset plugins use nothing else
    of the core, so an outside author can rely on everything they use."""
    bad = sorted(f"{f.relative_to(REPO)}: {name}"
                 for f in ROOTS["mtlbench_datasets"].rglob("*.py") for name in _off_surface(f))
    assert bad == []
    probe = tmp_path / "probe.py"
    probe.write_text("from mtlbench import TaskSet\nfrom mtlbench.protocol import MIN_PER_CLASS\n"
                     "def f():\n    import mtlbench.fetch\n", encoding="utf-8")
    assert _off_surface(probe) == ["mtlbench.protocol.MIN_PER_CLASS", "mtlbench.fetch"]


def test_benchmark_and_maintenance_scripts_compile():
    """The scripts in benchmarks/ and scripts/ are run by hand, not by the suite: at least they
    must parse (a misplaced ``global`` once made one unusable without any test noticing)."""
    for folder in ("benchmarks", "scripts"):
        root = REPO / folder
        scripts = sorted(root.glob("*.py"))
        assert scripts, f"no scripts found in {root}"
        for path in scripts:
            compile(path.read_text(encoding="utf-8"), str(path), "exec")  # SyntaxError names it


#: what each package of the core may import from the rest of the core (its own modules aside)
PACKAGE_IMPORTS = {
    "mtlbench.store": {"mtlbench.errors"},
    "mtlbench.search": {"mtlbench.errors", "mtlbench.hookspecs", "mtlbench.metrics",
                        "mtlbench.plugins", "mtlbench.scoring", "mtlbench.evaluate",
                        "mtlbench.data", "mtlbench.model"},
}


def test_packages_import_only_their_lower_layers():
    """The store knows nothing of searches, runs or reports (only the core's errors); the
    search package reads models, data, metrics and the plugin registry, never the protocol,
    the store or the runner."""
    bad = {}
    for package, allowed in PACKAGE_IMPORTS.items():
        graph = _graph()
        inside = [m for m in graph if m == package or m.startswith(package + ".")]
        found = {t for m in inside for t in graph[m] if t.split(".")[0] == "mtlbench"
                 and not (t == package or t.startswith(package + "."))}
        extra = {t for t in found
                 if not any(t == a or t.startswith(a + ".") for a in allowed)}
        if extra:
            bad[package] = sorted(extra)
    assert bad == {}


#: the most lines a module of the core has; each module over it is listed with the reason
MAX_MODULE_LINES = 600
OVER_LIMIT: dict[str, str] = {}


def test_core_modules_stay_small():
    """A module of the core holds one concern in at most MAX_MODULE_LINES lines; the ones
    over it are named in OVER_LIMIT with why (and leave it once they are split)."""
    sizes = {str(f.relative_to(REPO)): len(f.read_text(encoding="utf-8").splitlines())
             for f in ROOTS["mtlbench"].rglob("*.py")}
    over = {f for f, n in sizes.items() if n > MAX_MODULE_LINES}
    assert sorted(over - set(OVER_LIMIT)) == []
    assert sorted(set(OVER_LIMIT) - over) == []  # a module back under the limit leaves the list
