"""Write docs/literature.md: published regression results beside ours, under each one's protocol.

    python scripts/write_literature.py --data-dir ../shared/data   # runs what the store lacks
    python scripts/write_literature.py --no-run                    # only what the store holds

The published numbers, their sources and protocols are data (``leaderboards/literature.toml``,
quoted, never tuned to).  For every (source, data set) protocol the script plans the units of
every registered model that a result of it names, plus the single-task baseline
(:data:`CONTEXT_MODELS`), with ``mtlbench.api.plan`` (``--train-fraction`` as published, the
default search and validation split, selection by the problem's primary metric), runs the
missing ones into a store of its own (``results/literature.sqlite``) and reads each model's
test value of the published metric: mean and standard deviation (ddof 1) over the
repetitions, the published number of repetitions capped at :data:`REPS_CAP` (and the cap when
the source does not state it).  A result whose model is not registered is listed as "waiting
for model X": adding that model's plugin is all it takes for the next run to fill the row.
"""
from __future__ import annotations

import argparse
import math
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

REPO = Path(__file__).resolve().parents[1]
DEFAULT_DATA = REPO / "leaderboards" / "literature.toml"
DEFAULT_OUT = REPO / "docs" / "literature.md"
DEFAULT_STORE = "results/literature.sqlite"
#: At most this many repetitions per protocol (compute: the machine is shared).
REPS_CAP = 10
#: Models run under every protocol as context (no published number of their own needed).
CONTEXT_MODELS = ("stl",)
SPREAD_KINDS = ("std", "variance", "undefined")
COMMAND = "python scripts/write_literature.py --data-dir ../shared/data"


class LiteratureError(ValueError):
    """The literature file is malformed: one line naming the entry and the field."""


@dataclass(frozen=True)
class Protocol:
    train_fraction: float
    reps: int                       # as published; 0: not stated
    paper: str
    differences: tuple[str, ...]

    @property
    def our_reps(self) -> int:
        return min(self.reps, REPS_CAP) if self.reps > 0 else REPS_CAP


@dataclass(frozen=True)
class Source:
    id: str
    citation: str
    quoted_from: str
    metric_code: str
    protocols: Mapping[str, Protocol]


@dataclass(frozen=True)
class Result:
    source: str
    dataset: str
    method: str
    metric: str
    value: str                      # as printed
    spread: str                     # as printed ("" when none)
    spread_kind: str
    model: str                      # "" when no mtlbench model is planned
    same_method: str
    grid_probe: bool = False        # also run the model at each point of its declared grid

    def spread_as_std(self) -> float | None:
        """The published spread as a standard deviation (None when it is not one)."""
        if not self.spread or self.spread_kind == "undefined":
            return None
        s = float(self.spread)
        return math.sqrt(s) if self.spread_kind == "variance" else s


@dataclass(frozen=True)
class Pending:
    id: str
    citation: str
    wanted: str
    models: tuple[str, ...]


@dataclass(frozen=True)
class Literature:
    sources: Mapping[str, Source]
    results: tuple[Result, ...]
    pending: tuple[Pending, ...] = ()


@dataclass(frozen=True)
class Measured:
    """Our test value of one metric for one model under one protocol."""

    mean: float | None
    std: float | None
    reps: int
    failed: int = 0


# ---------------------------------------------------------------------------------- reading
def _text(entry: Mapping[str, Any], key: str, where: str, required: bool = True) -> str:
    value = entry.get(key, "")
    if not isinstance(value, str) or (required and not value.strip()):
        raise LiteratureError(f"{where}: '{key}' must be a non-empty string, got {value!r}")
    return value


def _number_text(entry: Mapping[str, Any], key: str, where: str, required: bool) -> str:
    value = entry.get(key, "")
    if value == "" and not required:
        return ""
    try:
        if not isinstance(value, str) or not math.isfinite(float(value)):
            raise ValueError
    except ValueError:
        raise LiteratureError(f"{where}: '{key}' must be a number written as printed, in "
                              f"quotes (\"10.0170\"), got {value!r}") from None
    return value


def read_literature(path: str | Path = DEFAULT_DATA) -> Literature:
    """The sources, results and pending publications of ``path``, checked for the fields each
    needs (a :class:`LiteratureError` naming the entry otherwise)."""
    import tomllib  # standard library from Python 3.11 only; the package supports 3.10

    path = Path(path)
    try:
        raw = tomllib.loads(path.read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as exc:
        raise LiteratureError(f"{path}: not valid TOML: {exc}") from None
    sources: dict[str, Source] = {}
    for i, s in enumerate(raw.get("source", [])):
        where = f"{path.name}: [[source]] #{i + 1}"
        sid = _text(s, "id", where)
        where = f"{path.name}: source {sid!r}"
        if sid in sources:
            raise LiteratureError(f"{where}: the id is given twice")
        protos = {}
        for ds, p in (s.get("protocol") or {}).items():
            pw = f"{where}, protocol {ds!r}"
            tf = p.get("train_fraction")
            if not isinstance(tf, float) or not 0 < tf < 1:
                raise LiteratureError(f"{pw}: 'train_fraction' must be a number in (0, 1), "
                                      f"got {tf!r}")
            reps = p.get("reps")
            if isinstance(reps, bool) or not isinstance(reps, int) or reps < 0:
                raise LiteratureError(f"{pw}: 'reps' must be an integer >= 0 (0: not "
                                      f"stated), got {reps!r}")
            diffs = p.get("differences", [])
            if not isinstance(diffs, list) or not all(isinstance(d, str) for d in diffs):
                raise LiteratureError(f"{pw}: 'differences' must be a list of sentences")
            protos[ds] = Protocol(tf, reps, _text(p, "paper", pw), tuple(diffs))
        sources[sid] = Source(sid, _text(s, "citation", where), _text(s, "quoted_from", where),
                              _text(s, "metric_code", where), protos)
    results = []
    for i, r in enumerate(raw.get("result", [])):
        where = f"{path.name}: [[result]] #{i + 1}"
        src = _text(r, "source", where)
        if src not in sources:
            raise LiteratureError(f"{where}: source {src!r} is not a [[source]] id "
                                  f"({', '.join(sources) or 'none'})")
        ds = _text(r, "dataset", where)
        if ds not in sources[src].protocols:
            raise LiteratureError(f"{where}: source {src!r} has no protocol for {ds!r} "
                                  f"([source.protocol.{ds}])")
        kind = r.get("spread_kind", "undefined")
        if kind not in SPREAD_KINDS:
            raise LiteratureError(f"{where}: 'spread_kind' must be one of {SPREAD_KINDS}, "
                                  f"got {kind!r}")
        results.append(Result(src, ds, _text(r, "method", where), _text(r, "metric", where),
                              _number_text(r, "value", where, True),
                              _number_text(r, "spread", where, False), kind,
                              _text(r, "model", where, required=False),
                              _text(r, "same_method", where), bool(r.get("grid_probe", False))))
    pending = []
    for i, p in enumerate(raw.get("pending", [])):
        where = f"{path.name}: [[pending]] #{i + 1}"
        models = p.get("models", [])
        if not isinstance(models, list) or not all(isinstance(m, str) for m in models):
            raise LiteratureError(f"{where}: 'models' must be a list of model names")
        pending.append(Pending(_text(p, "id", where), _text(p, "citation", where),
                               _text(p, "wanted", where), tuple(models)))
    return Literature(sources, tuple(results), tuple(pending))


def check_names(lit: Literature, datasets: Sequence[str], metrics: Mapping[str, Any]) -> None:
    """Every result names a registered data set and a registered metric that applies to real
    targets (a :class:`LiteratureError` otherwise: a published number whose definition we do
    not have must get its metric first)."""
    for r in lit.results:
        where = f"result {r.source} / {r.dataset} / {r.method!r}"
        if r.dataset not in datasets:
            raise LiteratureError(f"{where}: no registered data set {r.dataset!r}")
        if r.metric not in metrics:
            raise LiteratureError(f"{where}: no registered metric {r.metric!r}: register the "
                                  f"publication's definition as a metric first")


# ------------------------------------------------------------------------------- measuring
@dataclass(frozen=True)
class Run:
    """The units one protocol needs: its data set, settings and models."""

    dataset: str
    train_fraction: float
    reps: int
    models: tuple[str, ...]
    metrics: tuple[str, ...]

    @property
    def key(self) -> tuple[str, float, int]:
        return (self.dataset, self.train_fraction, self.reps)


def grid_selections(model_class: Any) -> tuple[str, list[str]]:
    """(parameter, one fixed selection per point of its declared start grid) of a model with
    one searched parameter: ``["lasso[rho_ratio=0.003]", ...]``; ("", []) otherwise."""
    space = model_class.search_space
    if len(space) != 1:
        return "", []
    (param, dim), = space.items()
    return param, [f"{model_class.name}[{param}={v!r}]" for v in dim.grid]


def planned_runs(lit: Literature, registered: Sequence[str],
                 model_class: Callable[[str], Any] | None = None) -> list[Run]:
    """One :class:`Run` per (data set, training fraction, repetitions): the registered models
    its results name, then :data:`CONTEXT_MODELS`, then (``model_class`` given) the fixed
    grid points of every result with ``grid_probe``."""
    groups: dict[tuple[str, float, int], dict[str, Any]] = {}
    for r in lit.results:
        proto = lit.sources[r.source].protocols[r.dataset]
        g = groups.setdefault((r.dataset, proto.train_fraction, proto.our_reps),
                              {"models": [], "metrics": []})
        if r.model and r.model in registered and r.model not in g["models"]:
            g["models"].append(r.model)
        if r.grid_probe and model_class is not None and r.model in registered:
            g.setdefault("probes", []).extend(
                sel for sel in grid_selections(model_class(r.model))[1]
                if sel not in g.get("probes", []))
        if r.metric not in g["metrics"]:
            g["metrics"].append(r.metric)
    runs = []
    for (ds, tf, reps), g in groups.items():
        models = g["models"] + [m for m in CONTEXT_MODELS if m in registered
                                and m not in g["models"]] + g.get("probes", [])
        if models:
            runs.append(Run(ds, tf, reps, tuple(models), tuple(g["metrics"])))
    return runs


def waiting(lit: Literature, registered: Sequence[str]) -> list[str]:
    """"waiting for model X: ..." for every model a result names that is not registered."""
    rows: dict[str, list[str]] = {}
    for r in lit.results:
        if r.model and r.model not in registered:
            rows.setdefault(r.model, []).append(f"{r.source} {r.dataset} {r.method!r}")
    return [f"waiting for model {m}: {len(v)} published result(s) ({'; '.join(v)})"
            for m, v in sorted(rows.items())]


def measure(runs: Sequence[Run], *, store: str, data_dir: str | None, jobs: int | None,
            execute: bool, log: Callable[[str], None] = print
            ) -> dict[tuple[str, float, int, str, str], Measured]:
    """Our values, keyed (data set, training fraction, repetitions, model, metric): the units
    of each run planned with ``mtlbench.api.plan``, the missing ones run first when
    ``execute``, then read from ``store``."""
    from mtlbench.api import Results, plan, run

    out: dict[tuple[str, float, int, str, str], Measured] = {}
    for r in runs:
        p = plan([r.dataset], list(r.models), reps=r.reps, train_fraction=r.train_fraction,
                 store=store, data_dir=data_dir, jobs=jobs)
        log(f"{r.dataset}, train fraction {r.train_fraction:g}, {r.reps} reps, "
            f"{', '.join(r.models)}: {len(p.specs) - len(p.todo)} unit(s) stored, "
            f"{len(p.todo)} to run" + ("" if execute or not p.todo else " (--no-run: left out)"))
        if execute and p.todo:
            run(p, on_result=lambda u: log(f"  {'ok    ' if u.ok else 'FAILED'} "
                                           f"{u.spec.label} rep {u.spec.rep}"))
        res = Results(store, keys=[s.key for s in p.specs])
        for metric in r.metrics:
            for _, row in res.summary(metric=metric).iterrows():
                out[(*r.key, row["model"], metric)] = Measured(
                    _float(row["mean"]), _float(row["std"]), int(row["reps"]),
                    int(row["failed"]))
    return out


def _float(x: Any) -> float | None:
    return None if x is None or (isinstance(x, float) and math.isnan(x)) else float(x)


# ------------------------------------------------------------------------------- rendering
def _decimals(text: str) -> int:
    return len(text.split(".", 1)[1]) if "." in text else 0


def _ours(m: Measured | None, scale: float, digits: int) -> str:
    if m is None or m.mean is None:
        return "not run"
    sd = f" ± {scale * m.std:.{digits}f}" if m.std is not None else ""
    failed = f", {m.failed} failed" if m.failed else ""
    return f"{scale * m.mean:.{digits}f}{sd} ({m.reps} reps{failed})"


def _published(r: Result) -> str:
    if not r.spread:
        return r.value
    if r.spread_kind == "variance":
        return f"{r.value} ± {r.spread} (variance; std {r.spread_as_std():.3f})"
    if r.spread_kind == "std":
        return f"{r.value} ± {r.spread} (std)"
    return f"{r.value} ({r.spread})"


def _difference(r: Result, m: Measured | None, scale: float, digits: int,
                higher_is_better: bool) -> str:
    if m is None or m.mean is None:
        return ""
    ours, theirs = scale * m.mean, float(r.value)
    d = ours - theirs
    rel = f" ({100 * d / abs(theirs):+.1f} %)" if theirs else ""
    better = (d > 0) == higher_is_better
    word = "better" if better else "worse"
    if d == 0:
        word = "equal"
    spread = r.spread_as_std()
    ours_sd = scale * m.std if m.std is not None else None
    if spread is not None and ours_sd is not None:
        inside = abs(d) <= spread + ours_sd
        word += ", within" if inside else ", beyond"
        word += " the two spreads"
    return f"{d:+.{digits}f}{rel}: ours {word}"


def render(lit: Literature, measured: Mapping[tuple[str, float, int, str, str], Measured],
           registered: Sequence[str], metric_info: Mapping[str, Any],
           probes: Mapping[str, tuple[str, list[str]]] | None = None) -> str:
    """The page: per data set and source, every published result beside ours (and, for a
    result with ``grid_probe``, the range of ours over the model's declared grid:
    ``probes`` maps the model to :func:`grid_selections`), the protocol as published, every
    difference of ours, then the sources without a number, the publications still to
    transcribe and the models still to come."""
    probes = probes or {}
    lines = [
        "# Our regression numbers beside the literature's",
        "",
        f"Generated by `{COMMAND}` from the published numbers "
        "in `leaderboards/literature.toml` (quoted as printed, never used to set a grid, a "
        f"default or a constant) and our units in `{DEFAULT_STORE}`; do not edit by hand.",
        "",
        "**How ours are computed.** For each publication and data set: `mtlbench compare "
        "--datasets D --models M --train-fraction F --reps R`, i.e. per task a seeded split "
        "into F train+validation and 1 - F test; the default search (adaptive, 20 fits) on "
        "train, each fit scored on the validation part (20 % of train+validation) by the "
        "problem's primary metric (RMSE), the best refitted on train+validation and scored on "
        "test. R is the publication's number of repetitions, at most "
        f"{REPS_CAP} (a cap of this page, for compute), and {REPS_CAP} when it does not say. "
        "Ours: mean ± standard deviation (ddof 1) over the R repetitions. The published spread "
        "is shown as printed, with what it is where the source says. \"Within the two spreads\": "
        "the difference is at most the sum of the two standard deviations; a spread the source "
        "does not define is not used.",
        "",
    ]
    by_ds: dict[str, list[Result]] = {}
    for r in lit.results:
        by_ds.setdefault(r.dataset, []).append(r)
    for ds, results in by_ds.items():
        lines += [f"## {ds}", ""]
        by_src: dict[str, list[Result]] = {}
        for r in results:
            by_src.setdefault(r.source, []).append(r)
        for sid, rows in by_src.items():
            src, proto = lit.sources[sid], lit.sources[sid].protocols[ds]
            metric_names = list(dict.fromkeys(r.metric for r in rows))
            lines += [f"### {src.citation}", "",
                      f"Quoted from {src.quoted_from}.", ""]
            for name in metric_names:
                info = metric_info[name]
                scale = 100.0 if info["percent"] else 1.0
                lines += [f"{info['heading']}; ours under `--train-fraction "
                          f"{proto.train_fraction:g} --reps {proto.our_reps}`.", "",
                          "| method (as printed) | published | our model | ours | ours - "
                          "published |", "| --- | --- | --- | --- | --- |"]
                for r in (x for x in rows if x.metric == name):
                    digits = max(_decimals(r.value), 2)
                    if not r.model:
                        ours, model, diff = "no mtlbench model", "—", ""
                    elif r.model not in registered:
                        ours, model, diff = f"waiting for model {r.model}", r.model, ""
                    else:
                        m = measured.get((ds, proto.train_fraction, proto.our_reps,
                                          r.model, name))
                        ours, model = _ours(m, scale, digits), r.model
                        diff = _difference(r, m, scale, digits, info["higher_is_better"])
                    lines.append(f"| {r.method} | {_published(r)} | {model} | {ours} | "
                                 f"{diff} |")
                context = [c for c in CONTEXT_MODELS if c in registered
                           and c not in {r.model for r in rows}]
                for c in context:
                    m = measured.get((ds, proto.train_fraction, proto.our_reps, c, name))
                    lines.append(f"| (no published number: our single-task baseline) | — | "
                                 f"{c} | {_ours(m, scale, 3)} | |")
                lines.append("")
            lines += _probe_lines(rows, ds, proto, measured, probes, metric_info)
            lines += ["**Their protocol.** " + proto.paper + ".", "",
                      "**Their metric.** " + src.metric_code + ".", "",
                      "**Same method?**", ""]
            lines += [f"- {r.method} ↔ {r.model or '—'}: {r.same_method}." for r in rows]
            lines += ["", "**Where ours differ (protocol).**", ""]
            lines += [f"- {d}" for d in proto.differences]
            if proto.reps > REPS_CAP:
                lines.append(f"- Repetitions: {proto.reps} published, ours capped at "
                             f"{REPS_CAP}.")
            lines.append("")
    lines += _no_number_sources(lit)
    if lit.pending:
        lines += ["## Publications still to transcribe", "",
                  "Sought for this page, their tables not transcribed yet (the number, table "
                  "and page must be read from the publication itself):", ""]
        lines += [f"- {p.citation}: {p.wanted} (models: {', '.join(p.models)})."
                  for p in lit.pending]
        lines.append("")
    wait = waiting(lit, registered)
    lines += ["## Waiting for models", ""]
    lines += [f"- {w}" for w in wait] if wait else ["- none"]
    lines.append("")
    return "\n".join(lines)


def _probe_lines(rows: Sequence[Result], ds: str, proto: Protocol,
                 measured: Mapping[tuple[str, float, int, str, str], Measured],
                 probes: Mapping[str, tuple[str, list[str]]],
                 metric_info: Mapping[str, Any]) -> list[str]:
    """One measured sentence per result with ``grid_probe``: ours at every grid point."""
    lines = []
    for r in rows:
        param, sels = probes.get(r.model, ("", []))
        if not (r.grid_probe and sels):
            continue
        scale = 100.0 if metric_info[r.metric]["percent"] else 1.0
        digits = max(_decimals(r.value), 2)
        got = [(sel, measured.get((ds, proto.train_fraction, proto.our_reps, sel, r.metric)))
               for sel in sels]
        got = [(sel.split("=", 1)[1].rstrip("]"), scale * m.mean) for sel, m in got
               if m is not None and m.mean is not None]
        if len(got) < len(sels):
            lines += [f"Measured: our {r.model} at each point of its declared grid: not run "
                      f"({len(got)} of {len(sels)} points in the store).", ""]
            continue
        lo, hi = min(got, key=lambda g: g[1]), max(got, key=lambda g: g[1])
        theirs = float(r.value)
        where = ("inside" if lo[1] <= theirs <= hi[1]
                 else "above" if theirs > hi[1] else "below")
        lines += [f"Measured, for {r.method!r}: our {r.model} fitted at each point of its "
                  f"declared start grid ({param} = {', '.join(g[0] for g in got)}) on train"
                  f"+validation, without selection, over the same {proto.our_reps} splits: "
                  f"mean test {metric_info[r.metric]['label']} from {lo[1]:.{digits}f} "
                  f"({param} = {lo[0]}) to {hi[1]:.{digits}f} ({param} = {hi[0]}); the "
                  f"published {r.value} lies {where} that range.", ""]
    return lines


def _no_number_sources(lit: Literature) -> list[str]:
    cited = {r.source for r in lit.results}
    quiet = [s for s in lit.sources.values() if s.id not in cited]
    if not quiet:
        return []
    lines = ["## Sources without a number to compare", ""]
    for s in quiet:
        lines += [f"### {s.citation}", "", f"Read: {s.quoted_from}.", "",
                  f"**Their metric.** {s.metric_code}.", ""]
        for ds, p in s.protocols.items():
            lines += [f"**Their protocol on {ds}.** {p.paper}.", ""]
            lines += [f"- {d}" for d in p.differences] + [""]
    return lines


def metric_table() -> dict[str, dict[str, Any]]:
    """Name -> heading, direction and percent display of every registered metric."""
    from mtlbench.scoring import get_metric, metric_names

    out = {}
    for name in metric_names():
        m = get_metric(name)
        if "real" in m.target_kinds:
            out[name] = {"heading": m.heading(), "higher_is_better": m.higher_is_better,
                         "percent": m.percent, "label": m.label or m.name}
    return out


# ------------------------------------------------------------------------------------ main
def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--literature", default=str(DEFAULT_DATA),
                    help="the published results (default leaderboards/literature.toml)")
    ap.add_argument("--store", default=DEFAULT_STORE,
                    help=f"results store of our units (default {DEFAULT_STORE})")
    ap.add_argument("--data-dir", default=None, help="folder of the data files")
    ap.add_argument("--jobs", type=int, default=None, help="units run side by side")
    ap.add_argument("--no-run", action="store_true",
                    help="run nothing: the page shows what the store holds")
    ap.add_argument("--out", default=str(DEFAULT_OUT),
                    help="the page to write (default docs/literature.md)")
    args = ap.parse_args(argv)
    from mtlbench.errors import MTLBenchError
    from mtlbench.plugins import get_registry

    reg = get_registry()
    try:
        lit = read_literature(args.literature)
        metrics = metric_table()
        check_names(lit, reg.dataset_names, metrics)
        runs = planned_runs(lit, reg.model_names, reg.model_class)
        probes = {r.model: grid_selections(reg.model_class(r.model)) for r in lit.results
                  if r.grid_probe and r.model in reg.model_names}
        Path(args.store).parent.mkdir(parents=True, exist_ok=True)
        measured = measure(runs, store=args.store, data_dir=args.data_dir, jobs=args.jobs,
                           execute=not args.no_run)
    except (LiteratureError, MTLBenchError) as exc:
        print(f"write_literature: {exc}", file=sys.stderr)
        return 2
    for line in waiting(lit, reg.model_names):
        print(line)
    Path(args.out).write_text(render(lit, measured, reg.model_names, metrics, probes),
                              encoding="utf-8")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
