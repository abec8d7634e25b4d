"""Publishing leaderboards into a folder, and importing published units into a store.

``publish`` writes ``<out>/<dataset>.md`` and ``.json`` for every dataset of the store (or
those given), figures under ``<out>/figures/``, an index ``<out>/README.md``, and a manifest
``<out>/.manifest.json`` naming the store's fingerprint and every file generated.

Rules
-----
* **Another store needs ``force``.**  The folder's tables came from the same store when every
  unit key its published JSON files list is still in the store being published (a store that
  gained units since is the same store).  A folder with generated tables but no manifest, or
  whose units are not all in the store, was written from another store: publishing there
  raises :class:`ConfigError` unless ``force=True``.
* **Stale files are removed**: every file the previous manifest lists (or, without a manifest,
  every generated markdown / leaderboard JSON and the figures it links) that this publication
  does not write again.  Hand-written files (no generated marker) are never touched.
* **The README is regenerated** from the store: the index, how the tables were produced
  (seed, repetitions, search, models, dates per dataset, read from the units themselves).  A
  hand-written block between the hand-written markers is kept when the publication comes
  from the same store; when it comes from another store the block described other runs, so
  it is dropped and the log says so (it stays in version control).

``import_results`` reads a published ``<dataset>.json`` back into a store, after checking
every unit's form and consistency (:mod:`mtlbench.report.imported`), that this installation
computes the same split fingerprints, data fingerprints and protocol for the same dataset,
seed and repetitions (:func:`mtlbench.protocol.make_split`), and optionally recomputing some
units (``--verify N``).
"""
from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path
from typing import Any, Callable, Sequence

from ..errors import ConfigError
from ..syntax import file_stem
from .leaderboard import FORMAT_VERSION, build_leaderboard
from .render import GENERATED_MARKER, _fmt_seconds, _machines_text, to_json, to_markdown
from .select import select_units

MANIFEST = ".manifest.json"
MANIFEST_FORMAT = "mtlbench-publish/1"
README_HAND_START = "<!-- hand-written:start (kept by mtlbench publish) -->"
README_HAND_END = "<!-- hand-written:end -->"


def is_generated(path: Path) -> bool:
    try:
        with open(path, encoding="utf-8") as fh:
            return fh.readline().startswith(GENERATED_MARKER)
    except (OSError, UnicodeDecodeError):
        return False


def _is_leaderboard_json(path: Path) -> dict[str, Any] | None:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if isinstance(data, dict) and str(data.get("format", "")).startswith("mtlbench-leaderboard/"):
        return data
    return None


def store_fingerprint(keys: Sequence[str]) -> str:
    """sha256 over the sorted unit keys of a publication (names which units it shows)."""
    h = hashlib.sha256()
    for k in sorted(keys):
        h.update(k.encode() + b"\n")
    return h.hexdigest()


def _previous(out: Path) -> tuple[dict[str, Any] | None, list[Path], set[str]]:
    """(manifest or None, generated files found, unit keys the folder's JSON files show)."""
    manifest = None
    mpath = out / MANIFEST
    if mpath.exists():
        try:
            manifest = json.loads(mpath.read_text(encoding="utf-8"))
        except ValueError:
            manifest = None
    files: list[Path] = []
    keys: set[str] = set()
    if manifest and isinstance(manifest.get("files"), list):
        files = [out / f for f in manifest["files"] if (out / f).exists()]
    else:
        for p in sorted(out.glob("*.md")):
            if p.name != "README.md" and is_generated(p):
                files.append(p)
                for link in re.findall(r"\]\((figures/[^)]+)\)", p.read_text(encoding="utf-8")):
                    if (out / link).exists():
                        files.append(out / link)
        files += [p for p in sorted(out.glob("*.json")) if _is_leaderboard_json(p)]
    for p in out.glob("*.json"):
        data = _is_leaderboard_json(p)
        if data is not None:
            units = data.get("units")
            if isinstance(units, list):
                keys.update(str(u.get("key")) for u in units if isinstance(u, dict))
            else:
                keys.add(f"<{p.name}: published without unit keys>")
    return manifest, sorted(set(files)), keys


def publish(store, out: str | Path = "leaderboards", datasets: Sequence[str] | None = None,
            figures: bool = True, log: Callable[[str], None] = print, force: bool = False,
            seed: int | None = None, models: Sequence[str] | None = None) -> dict[str, Any]:
    """Publish the leaderboards of ``store`` into ``out`` (rules: module docstring)."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    all_units = store.units()
    sel = select_units(store, list(datasets) if datasets else None, seed=seed, models=models,
                       all_units=all_units)
    present = list(sel.problems)
    store_keys = set(all_units["key"])
    manifest, old_files, old_keys = _previous(out)
    foreign = sorted(old_keys - store_keys)
    same_store = not foreign and (manifest is not None or not old_files)
    if old_files and not same_store and not force:
        why = (f"{len(foreign)} published unit(s) are not in this store" if foreign else
               "it holds generated tables without a manifest naming their store")
        raise ConfigError(
            f"{str(out)!r} holds tables generated from another results store ({why}); "
            f"publishing {str(store.path)!r} there would replace them. Pass --force to "
            "replace them (stale generated files are removed), or choose another --out.")
    written: dict[str, Any] = {}
    new_files: list[Path] = []
    for ds in present:
        lb = build_leaderboard(store, ds, selection=sel)
        figs: list[dict[str, Any]] = []
        if figures:
            from .figures import make_figures

            figs = make_figures(store, ds, out / "figures", rel_to=out, selection=sel)
        md, js = out / f"{file_stem(ds)}.md", out / f"{file_stem(ds)}.json"
        md.write_text(to_markdown(lb, figs, generated_by="mtlbench publish"), encoding="utf-8")
        js.write_text(to_json(lb, compact=True), encoding="utf-8")
        new_files += [md, js] + [out / f["path"] for f in figs if f.get("path")]
        written[ds] = {"leaderboard": lb, "figures": figs}
        log(f"wrote {md}, {js} and {sum(1 for f in figs if f.get('path'))} figure(s)")
    keep = {p.resolve() for p in new_files}
    removed = []
    for p in old_files:
        if p.resolve() not in keep and p.name not in ("README.md", MANIFEST) and p.exists():
            if p.suffix == ".md" and not is_generated(p):
                continue  # never delete a hand-written document
            p.unlink()
            removed.append(p)
    for p in removed:
        log(f"removed stale {p}")
    published_keys = [str(u["key"]) for v in written.values()
                      for u in v["leaderboard"]["units"]]
    _write_index(out, written, keep_hand=same_store, log=log)
    rel = sorted(str(p.relative_to(out)) for p in new_files) + ["README.md"]
    (out / MANIFEST).write_text(json.dumps({
        "format": MANIFEST_FORMAT, "store_fingerprint": store_fingerprint(published_keys),
        "store_name": Path(store.path).name, "datasets": present,
        "units": len(published_keys), "files": rel,
        "generated_at": next(iter(written.values()))["leaderboard"]["provenance"]["generated_at"],
    }, indent=1) + "\n", encoding="utf-8")
    log(f"wrote {out / 'README.md'} and {out / MANIFEST}")
    return written


def _produced_text(rows: dict[str, dict[str, Any]]) -> list[str]:
    """How the tables were produced, read from the units themselves (never hand-kept)."""
    lines = ["## How these results were produced", "",
             "Read from the published units (each table's provenance section has the rest):", ""]
    for ds, lb in sorted(rows.items()):
        units = lb.get("units") or []
        searches = sorted({f"{u['search'].get('search', 'grid (declared list)')}"
                           + (f", budget {u['search']['budget']}" if u["search"].get("budget")
                              else "")
                           for u in units if isinstance(u.get("search"), dict)})
        prov = lb["provenance"]
        lines.append(
            f"- {ds}: seed {lb.get('seed', prov.get('seed'))}, "
            f"{lb.get('planned_reps') or ', '.join(map(str, prov.get('planned_reps', [])))} "
            f"planned repetitions, {len(lb['models'])} models, search: "
            f"{'; '.join(searches) or 'not recorded'}; units finished "
            f"{prov['first_started_at']} → {prov['last_finished_at']}"
            + ("" if lb.get("complete", True) else " — **incomplete run** (see the table)"))
    lines += ["", "Reproduce: `mtlbench compare --datasets DATASET --reps N --seed S --store "
              "STORE` for each line above (`benchmarks/publish_all.sh` runs them all), then "
              "`mtlbench publish --store STORE`.", ""]
    return lines


def _write_index(out: Path, written: dict[str, Any], keep_hand: bool = True,
                 log: Callable[[str], None] = print) -> None:
    readme = out / "README.md"
    hand = ""
    if readme.exists():
        text = readme.read_text(encoding="utf-8")
        if README_HAND_START in text and README_HAND_END in text:
            hand = text.split(README_HAND_START, 1)[1].split(README_HAND_END, 1)[0].strip()
        elif not is_generated(readme):
            hand = text.strip()
    if hand and not keep_hand:
        log("dropped the hand-written block of README.md: it described tables of another "
            "store (it remains in version control); the README is regenerated from this store")
        hand = ""
    lines = [f"{GENERATED_MARKER} (mtlbench publish); regenerated from the store on every "
             "publication: edit only the hand-written block -->", "# Published leaderboards", "",
             "Every table is built by `mtlbench publish` from a results store: test AUC x 100, "
             "mean ± std over repetitions, Wilcoxon signed-rank tests with Holm correction "
             "against the best model, Friedman test, win/tie/loss per user against the "
             "baseline model, the search (budget, selections at a bound, convergence) and the "
             "provenance (versions, protocol, seed, split fingerprints, machine, run time).", "",
             "| dataset | problems | models | repetitions | units done/planned | failed units "
             "| run time | machine | files |",
             "|---|---|---|---|---|---|---|---|---|"]
    rows = {}
    by_stem = {file_stem(ds): ds for ds in written}   # file names are stems of the labels
    for js in sorted(out.glob("*.json")):
        if js.stem in by_stem:
            ds = by_stem[js.stem]
            lb = written[ds]["leaderboard"]
        else:
            lb = _is_leaderboard_json(js)
            ds = str((lb or {}).get("dataset") or js.stem)
        if lb is not None and lb.get("format") == FORMAT_VERSION:
            rows[ds] = lb
    for ds, lb in sorted(rows.items()):
        prov = lb["provenance"]
        mach = _machines_text([{**m, "platform": None} for m in prov["machines"]], units=False)
        reps = ", ".join(map(str, lb["reps_per_cell"]))
        done = sum(r.get("finished_units", 0) for r in lb["rows"])
        planned = sum(r.get("planned_units", 0) for r in lb["rows"])
        stem = file_stem(ds)
        lines.append(f"| [{ds}]({stem}.md) | {len(lb['problems'])} | {len(lb['models'])} | {reps} | "
                     f"{done}/{planned} | {prov['units_failed']} | "
                     f"{_fmt_seconds(prov['time_total_s'])} | {mach} | "
                     f"[md]({stem}.md), [json]({stem}.json) |")
    lines.append("")
    figs = [(ds, f) for ds, v in written.items() for f in v["figures"] if f.get("path")]
    if figs:
        lines += ["## Figures", ""]
        for ds, f in figs:
            lines.append(f"- {ds}: [{f['title']}]({f['path']})")
        lines.append("")
    others = sorted(p.name for p in out.glob("*.md")
                    if p.name != "README.md" and p.stem not in rows and not is_generated(p))
    if others:
        lines += ["## Other documents (hand-written)", ""]
        lines += [f"- [{name}]({name})" for name in others]
        lines.append("")
    lines += _produced_text(rows)
    lines += [README_HAND_START, hand, README_HAND_END, ""]
    readme.write_text("\n".join(lines), encoding="utf-8")


# ================================================================================ import
def _local_check(unit: dict[str, Any], cache: dict, data_dir: str | None = None) -> str | None:
    """Why this installation disagrees with a published unit's split / data / protocol, or
    None.  Recomputes the split of (dataset, problem, seed, rep) through the dataset plugin and
    :func:`mtlbench.protocol.make_split`."""
    import dataclasses

    from ..plugins import get_registry
    from ..protocol import (PROTOCOL_VERSION, ProtocolConfig, config_json, evaluable_tasks,
                            make_split, restrict_tasks)

    proto = unit.get("protocol") or {}
    if proto.get("protocol_version") != PROTOCOL_VERSION:
        return (f"protocol version {proto.get('protocol_version')!r} differs from this "
                f"installation's {PROTOCOL_VERSION}")
    fields = {f.name for f in dataclasses.fields(ProtocolConfig)}
    try:
        cfg = ProtocolConfig(**{k: v for k, v in proto.items() if k in fields})
    except (ConfigError, TypeError, ValueError) as exc:
        return f"its protocol {proto} is not valid here: {exc}"
    from ..search import searcher_version

    if "search_version" in proto and str(proto["search_version"]) != searcher_version(cfg.search):
        return (f"it was searched by version {proto['search_version']} of the {cfg.search!r} "
                f"rule; this installation's is version {searcher_version(cfg.search)}")
    extra = {k: v for k, v in proto.items()
             if k not in fields and k not in ("protocol_version", "search_version")}
    if extra:
        return f"its protocol has settings this installation does not know: {sorted(extra)}"
    local_proto = {**cfg.split_settings(), "reps": cfg.reps}
    for k, v in local_proto.items():
        if k in proto and proto[k] != v:
            return f"protocol setting {k} = {proto[k]!r} is {v!r} here"
    dataset, problem = unit["dataset"], unit["problem"]
    name = problem.split("/", 1)[1] if "/" in problem else problem
    ck = (dataset, name, config_json(unit.get("dataset_params")))
    if ck not in cache:
        try:
            ds = get_registry().dataset(dataset)
            if config_json(ds.params()) != config_json(unit.get("dataset_params") or {}):
                cache[ck] = (None, f"dataset parameters {unit.get('dataset_params')} differ from "
                                   f"this installation's {ds.params()}")
            else:
                tasks = ds.load(name, data_dir=Path(data_dir) if data_dir else None)
                keep, _ = evaluable_tasks(tasks)
                cache[ck] = (restrict_tasks(tasks, keep), None)
        except Exception as exc:  # noqa: BLE001 - reported as a refusal
            cache[ck] = (None, f"cannot load {problem} here: {exc}")
    tasks, why = cache[ck]
    if tasks is None:
        return why
    if tasks.fingerprint() != unit.get("data_fingerprint"):
        return (f"the data fingerprint of {problem} differs (published "
                f"{str(unit.get('data_fingerprint'))[:12]}…, here {tasks.fingerprint()[:12]}…)")
    fp = make_split(tasks, cfg, int(unit["rep"])).fingerprint()
    if fp != unit.get("split_fingerprint"):
        return (f"the split of {problem} repetition {unit['rep']} differs (published "
                f"{str(unit.get('split_fingerprint'))[:12]}…, here {fp[:12]}…)")
    return None


def read_published(path: str | Path, data_dir: str | None = None, verify: int = 0,
                   verify_seed: int = 0, log: Callable[[str], None] = print) -> dict[str, Any]:
    """Read a published leaderboard JSON and check it for import; nothing is written.

    Refused (:class:`ConfigError`, one line) when the file is not a leaderboard, a unit is
    not well-formed or not consistent (:func:`mtlbench.report.imported.check_published`),
    any unit's protocol, data fingerprint or split fingerprint differs from what this
    installation computes, or a key is not the hash of its unit; with ``verify`` N, unless
    N units drawn at random (``verify_seed``) and recomputed here agree
    (:func:`mtlbench.report.imported.verify_units`).  Returns the data with ``verified``:
    the keys of the units recomputed."""
    from .imported import check_keys, check_published, verify_units

    path = Path(path)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ConfigError(f"cannot read {str(path)!r}: {exc.strerror or exc}") from None
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{str(path)!r} is not UTF-8 text (byte {exc.object[exc.start]:#04x} "
                          f"at offset {exc.start})") from None
    except ValueError as exc:
        raise ConfigError(f"{str(path)!r} is not JSON: {exc}") from None
    if not isinstance(data, dict) or not str(data.get("format", "")).startswith(
            "mtlbench-leaderboard/"):
        raise ConfigError(f"{str(path)!r} is not a published mtlbench leaderboard "
                          "(no 'format': 'mtlbench-leaderboard/...')")
    units = data.get("units")
    if not isinstance(units, list) or not units:
        raise ConfigError(f"{str(path)!r} carries no per-unit results (published before "
                          "units were included); republish it with this mtlbench version")
    check_published(data, repr(str(path)))
    cache: dict = {}
    problems: dict[str, list[str]] = {}
    for u in units:
        u = {**u, "dataset": data["dataset"]}
        why = _local_check(u, cache, data_dir)
        if why:
            problems.setdefault(why, []).append(
                f"{u.get('model')} {u.get('problem')} rep {u.get('rep')}")
    if problems:
        parts = [f"{who[0]}" + (f" (and {len(who) - 1} more unit(s))" if len(who) > 1 else "")
                 + f": {why}" for why, who in list(problems.items())[:3]]
        more = f" (and {len(problems) - 3} more reasons)" if len(problems) > 3 else ""
        raise ConfigError(f"refusing to import {str(path)!r}: it does not match what this "
                          f"installation computes — {'; '.join(parts)}{more}. "
                          "Nothing was imported.")
    check_keys(data, repr(str(path)))
    data["verified"] = (verify_units(data, verify, verify_seed, data_dir, repr(str(path)), log)
                        if verify else set())
    data["path"] = str(path)
    return data


def write_published(data: dict[str, Any], store, log: Callable[[str], None] = print) -> int:
    """Write the units of a file checked by :func:`read_published` into ``store``, each with
    its origin ("verified" if --verify recomputed it, else "imported"); returns how many."""
    from ..store import UNIT_COLUMNS
    from .imported import IMPORTED, VERIFIED

    path = Path(data["path"])
    names = data.get("task_names") or {}
    n = 0
    for u in data["units"]:
        row = {c: u.get(c) for c in UNIT_COLUMNS}
        row["dataset"] = data["dataset"]
        trace = u.get("trace") or []
        info = u.get("search") or {}
        row["grid"] = ({"fits": trace, **{k: v for k, v in info.items() if k != "n_fits"}}
                       if info and set(info) - {"n_fits"} else trace)
        row["host"] = u.get("host") or f"imported from {path.name}"
        row["origin"] = VERIFIED if u["key"] in data["verified"] else IMPORTED
        tnames = u.get("task_names") or names.get(u["problem"], [])
        scores = [(i, tnames[i] if i < len(tnames) else str(i), a, m)
                  for i, (a, m) in enumerate(zip(u.get("task_auc") or [], u.get("n_test") or []))]
        store.write_unit(row, scores)
        n += 1
    verified = len(data["verified"])
    log(f"imported {n} unit(s) of {data['dataset']} from {path} into {store.path}"
        + (f" ({verified} of them verified by recomputing them here)" if verified else ""))
    return n


def import_results(path: str | Path, store, log: Callable[[str], None] = print,
                   data_dir: str | None = None, verify: int = 0, verify_seed: int = 0) -> int:
    """Import the units of a published leaderboard JSON into ``store``; returns how many.

    All or nothing: every check (:func:`read_published`) passes before any unit is
    written."""
    return write_published(read_published(path, data_dir, verify, verify_seed, log), store, log)


__all__ = ["publish", "import_results", "read_published", "write_published", "is_generated",
           "store_fingerprint", "MANIFEST"]
