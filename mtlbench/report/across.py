"""The judgement across data sets: headline table, Friedman test, post-hoc, equivalence.

:func:`summary_across` reads the leaderboards of several data sets (built from a store, or
read from published JSON) and returns a :class:`Summary`:

* **one metric**: every leaderboard summarised is a table of the same metric (the summary's
  ``metric``; by default the primary metric of most data sets, the others left out and
  named); every comparison respects its direction: "best", ranks and the Bayesian test are on
  values oriented so that higher is better.
* **blocks**: by default one per independent data set.  A data set with several problems
  (the seven attributes of ``synthetic-attributes``) is one block, its *aggregate*: per
  repetition each model's mean of the metric over the problems (over the repetitions every
  problem finished), so that the problems of one generated data set, which share its items,
  features and generator, weigh as much as one real data set and not seven.  Data sets that
  are variants of one generator (labels ``name[...]`` beside ``name``, e.g.
  ``simulated[seed=1]`` beside ``simulated``) are not independent either: only the base label
  of such a family counts, and the summary names those it left out.  ``blocks="problems"``
  is the per-problem view (one block per data set and problem, variants still counted once),
  ``"all"`` every data set and problem, or a list of labels (a data set's label: its
  aggregate; a problem's label: that problem).  An aggregate block's cells are tested like a
  leaderboard's column (best mean, Wilcoxon on the paired repetitions' aggregates, Holm over
  the block).
* **headline table**: per block the best model, each *focus* model (the full models that
  other models declare themselves ablations of, e.g. the proposed method; or given), the best
  *competitor* (a model that is neither the baseline, a focus model nor an ablation) and the
  *baseline* (``is_baseline``), each with mean ± std, n and the leaderboard's Holm-adjusted
  Wilcoxon p against the block's best (:func:`mtlbench.report.stats.wilcoxon_p`).
* **Friedman test and average ranks** over the blocks (scores: each model's mean of the metric
  on the block; only models with every planned repetition on every block), the **Nemenyi post-hoc
  test** (``scikit_posthocs.posthoc_nemenyi_friedman``) with Demšar's critical difference
  CD = q_alpha sqrt(k (k + 1) / (6 N)) (q_alpha: the studentized range quantile / sqrt 2), and
  the cliques of models it cannot separate (drawn as the critical-difference diagram,
  :func:`mtlbench.report.plots.cd_diagram`).
* **practical equivalence**: per block, every model against the block's best, the Bayesian
  signed-rank test of Benavoli et al. (JMLR 2017; ``baycomp.SignedRankTest``) on the paired
  repetitions: P(best better by more than the ROPE), P(within the ROPE), P(model better by
  more) -- the three sum to 1; seeded, so reproducible.  The ROPE is in the tables' units: by
  default 0.5 points for a metric shown x 100 (an AUC), else 1 % of the best model's mean on
  the block (an RMSE has the units of its targets).

Pure functions of leaderboards: no store, no printing.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Sequence

import numpy as np

from .schema import Cell, FriedmanResult, JsonRecord, Leaderboard
from .stats import block_ranks, friedman

SUMMARY_FORMAT = "mtlbench-summary/1"
ALPHA = 0.05
ROPE = 0.5          # region of practical equivalence of a metric shown x 100: 0.5 points
ROPE_SHARE = 0.01   # ... of any other metric: 1 % of the block's best mean
BAYES_SAMPLES = 5_000   # Monte Carlo standard error of each probability <= 0.5 / sqrt(5000) = 0.007
BAYES_SEED = 0
POSTHOC = "Nemenyi (scikit_posthocs.posthoc_nemenyi_friedman)"
BAYES_TEST = ("Bayesian signed-rank test (Benavoli et al., JMLR 2017; baycomp.SignedRankTest, "
              "prior 0.5) on the paired repetitions")


# ================================================================================ records
@dataclass
class HeadlineEntry(JsonRecord):
    """One model on one block: test AUC x 100 and its test against the block's best."""

    model: str
    mean: float | None
    std: float | None
    n: int
    p_holm: float | None
    significantly_worse: bool | None
    best: bool


@dataclass
class HeadlineRow(JsonRecord):
    block: str
    dataset: str
    problem: str
    best: HeadlineEntry
    focus: dict[str, HeadlineEntry | None]
    best_competitor: HeadlineEntry | None
    baseline: HeadlineEntry | None


@dataclass
class Posthoc(JsonRecord):
    """Pairwise post-hoc test after the Friedman test, and what it cannot separate."""

    test: str
    alpha: float
    critical_difference: float
    p_values: dict[str, dict[str, float]]
    not_separated: list[list[str]]   # maximal cliques of models no pair of which differs


@dataclass
class Equivalence(JsonRecord):
    """A model against its block's best: the Bayesian signed-rank probabilities (sum 1)."""

    block: str
    model: str
    best: str
    n_pairs: int
    mean_difference: float | None    # best - model in the table's units, positive = best better
    p_best_better: float | None      # "left": best - model > rope
    p_equivalent: float | None       # within the rope
    p_model_better: float | None     # "right": model - best > rope
    significantly_worse: bool | None  # the leaderboard's frequentist mark, beside
    rope: float | None = None        # the ROPE of this block, in the table's units


@dataclass
class Summary(JsonRecord):
    """Everything ``mtlbench leaderboard --all`` shows (and ``publish``'s summary page)."""

    format: str
    blocks: list[str]
    blocks_rule: str
    left_out_blocks: dict[str, str]
    focus_models: list[str]
    baseline: str | None
    roles: dict[str, str]               # model -> baseline / focus / ablation / competitor
    block_means: dict[str, dict[str, float]]   # block -> model -> mean test AUC x 100
    headline: list[HeadlineRow]
    ranked_models: list[str]            # in the rank test: every planned repetition everywhere
    not_ranked: dict[str, str]
    average_ranks: dict[str, float]     # 1 = best, sorted
    friedman: FriedmanResult
    posthoc: Posthoc | None
    rope: float
    bayes_test: str
    bayes_samples: int
    bayes_seed: int
    equivalence: list[Equivalence]
    notes: list[str] = field(default_factory=list)
    #: the metric of every table summarised (files before it: the AUC), and its direction
    metric: str = "auc"
    higher_is_better: bool = True


# ================================================================================ blocks
@dataclass(eq=False)
class _Block:
    """A block: one problem of a leaderboard, or (``aggregate``) every problem of one, with
    each model's cell on it."""

    label: str
    lb: Leaderboard
    problem: str                   # the problem, or the data set's label for an aggregate
    cells: dict[str, Cell]
    aggregate: bool = False

    def cell(self, model: str) -> Cell | None:
        return self.cells.get(model)


#: the key of an aggregate block's one column (a data set's problems averaged)
_AGG = "(every problem)"


def block_label(dataset: str, problem: str) -> str:
    """``"school"``, or ``"synthetic-attributes / attr0"`` for a problem of a data set with
    several (the problem's name within it, :func:`mtlbench.syntax.problem_name`)."""
    from ..syntax import problem_name

    return dataset if problem == dataset else f"{dataset} / {problem_name(problem, dataset)}"


def _problem_blocks(lb: Leaderboard) -> list[_Block]:
    return [_Block(block_label(lb.dataset, p), lb, p,
                   {r.model: r.cells[p] for r in lb.rows if r.cells[p].n})
            for p in lb.problems if any(r.cells[p].n for r in lb.rows)]


def _aggregate_block(lb: Leaderboard, alpha: float) -> _Block | None:
    """The data set's problems as one block (module docstring); None without a finished cell.
    A data set of one problem is that problem's block."""
    problems = [p for p in lb.problems if any(r.cells[p].n for r in lb.rows)]
    if not problems:
        return None
    if len(lb.problems) == 1:
        return _problem_blocks(lb)[0]
    from ..scoring import get_metric
    from .leaderboard import _test_column

    cells: dict[str, dict[str, Cell]] = {}
    for r in lb.rows:
        per = [dict(zip(r.cells[p].reps, r.cells[p].scores)) for p in lb.problems]
        reps = sorted(set.intersection(*(set(v) for v in per)))
        if not reps:
            continue
        vals = np.array([np.mean([v[k] for v in per]) for k in reps], dtype=np.float64)
        cells[r.model] = {_AGG: Cell(
            n=len(reps), failed=sum(r.cells[p].failed for p in lb.problems),
            mean=float(vals.mean()), std=float(vals.std(ddof=1)) if len(reps) > 1 else None,
            reps=reps, values=vals.tolist())}
    if cells:
        _test_column(cells, _AGG, alpha, get_metric(lb.get("metric") or "auc"))
    return _Block(lb.dataset, lb, lb.dataset, {m: c[_AGG] for m, c in cells.items()},
                  aggregate=True)


def _all_blocks(boards: Sequence[Leaderboard]) -> list[_Block]:
    return [b for lb in boards for b in _problem_blocks(lb)]


def _variants(boards: Sequence[Leaderboard]) -> dict[str, str]:
    """{variant data set: the family member that counts}: labels ``name[...]`` of one
    generator beside ``name`` (or beside each other) count once."""
    families: dict[str, list[str]] = {}
    for lb in boards:
        families.setdefault(lb.dataset.split("[", 1)[0], []).append(lb.dataset)
    variants = {}
    for base, members in families.items():
        if len(members) > 1:
            keep = base if base in members else sorted(members)[0]
            variants.update({m: keep for m in members if m != keep})
    return variants


def choose_blocks(boards: Sequence[Leaderboard], blocks: str | Sequence[str] | None,
                  alpha: float = ALPHA) -> tuple[list[_Block], dict[str, str], str]:
    """(blocks used, {left-out block: why}, the rule in words): ``blocks`` None (one per
    independent data set), ``"problems"``, ``"all"`` or labels (module docstring)."""
    everything = _all_blocks(boards)
    if blocks == "all":
        return everything, {}, "every data set and problem of the store (--blocks all)"
    if blocks and blocks != "problems":
        wanted = list(blocks)
        ids = {b.problem: b.label for b in everything}   # a problem's id names its block too
        wanted = [ids.get(w, w) for w in wanted]
        known = {b.label for b in everything} | {b.lb.dataset for b in everything}
        unknown = [w for w in wanted if w not in known]
        if unknown:
            from ..errors import ConfigError

            sets = ", ".join(dict.fromkeys(b.lb.dataset for b in everything))
            parts = ", ".join(b.label for b in everything if b.label != b.lb.dataset)
            raise ConfigError(f"unknown block(s) {', '.join(unknown)}; blocks of these results: "
                              f"{sets}" + (f" or one of their problems: {parts}" if parts else ""))
        used = []
        for lb in boards:
            if lb.dataset in wanted:
                agg = _aggregate_block(lb, alpha)
                used += [agg] if agg is not None else []
            else:
                used += [b for b in _problem_blocks(lb) if b.label in wanted]
        left = {b.label: "not asked for (--blocks)" for b in everything
                if b.label not in wanted and b.lb.dataset not in wanted}
        return used, left, f"the blocks asked for: {', '.join(wanted)}"
    variants = _variants(boards)
    left = {b.label: f"a variant of {variants[b.lb.dataset]} (same generator, other "
                     "parameters): not an independent block" for b in everything
            if b.lb.dataset in variants}
    kept = [lb for lb in boards if lb.dataset not in variants]
    tail = ("; variants of one generator (name[...] beside name) count once, by their base "
            "data set" if variants else "")
    if blocks == "problems":
        return ([b for lb in kept for b in _problem_blocks(lb)], left,
                "one block per data set and problem (--blocks problems)" + tail)
    used = [b for lb in kept if (b := _aggregate_block(lb, alpha)) is not None]
    several = [b.label for b in used if b.aggregate]
    rule = "one block per independent data set"
    if several:
        rule += (f"; a data set of several problems ({', '.join(several)}) is one block, each "
                 "model's mean over its problems per repetition (--blocks problems: one per "
                 "problem)")
    return used, left, rule + tail


# ================================================================================ headline
def focus_models(boards: Sequence[Leaderboard]) -> list[str]:
    """The full models that other models of these results declare themselves ablations of."""
    from .roles import model_class_of

    labels = sorted({r.model for lb in boards for r in lb.rows})
    parents = {getattr(model_class_of(m), "ablation_of", None) for m in labels} - {None}
    return [m for m in labels if m in parents]


def _role(label: str, focus: Sequence[str], baseline: str | None) -> str:
    from .roles import model_class_of

    if label == baseline:
        return "baseline"
    if label in focus:
        return "focus"
    cls = model_class_of(label)
    if cls is not None and getattr(cls, "ablation_of", None):
        return "ablation"
    return "competitor"


def _entry(b: _Block, model: str | None) -> HeadlineEntry | None:
    c = b.cell(model) if model else None
    if c is None or not c.n:
        return None
    return HeadlineEntry(model=model, mean=c.mean, std=c.std, n=c.n, p_holm=c.p_holm,
                         significantly_worse=c.significantly_worse, best=c.best)


def _sign(lb: Leaderboard) -> float:
    """+1 when the table's metric is higher-is-better, -1 when lower (values x sign: higher
    is better)."""
    return 1.0 if lb.get("higher_is_better", True) else -1.0


def _headline(b: _Block, focus: Sequence[str], roles: dict[str, str]) -> HeadlineRow:
    sign = _sign(b.lb)
    best = next((m for m, c in b.cells.items() if c.best),
                max(b.cells, key=lambda m: sign * b.cells[m].mean))
    comp = [m for m in b.cells if roles.get(m) == "competitor"]
    top = max(comp, key=lambda m: sign * b.cells[m].mean) if comp else None
    return HeadlineRow(
        block=b.label, dataset=b.lb.dataset, problem=b.problem, best=_entry(b, best),
        focus={m: _entry(b, m) for m in focus}, best_competitor=_entry(b, top),
        baseline=_entry(b, b.lb.baseline))


# ================================================================================ ranks
def _rank_matrix(blocks: Sequence[_Block]) -> tuple[list[str], np.ndarray, dict[str, str]]:
    """(models, blocks x models mean scores oriented so that higher is better, {left-out
    model: why}): a model enters with every planned repetition on every block."""
    labels = sorted({m for b in blocks for m in b.cells})
    keep, why = [], {}
    for m in labels:
        cells = [(b, b.cell(m)) for b in blocks]
        short = [b.label for b, c in cells if c is None or c.n < (b.lb.planned_reps or c.n)
                 or not c.n]
        if short:
            why[m] = f"fewer than the planned repetitions on {', '.join(short)}"
        else:
            keep.append(m)
    scores = np.array([[_sign(b.lb) * b.cells[m].mean for m in keep]
                       for b in blocks], dtype=np.float64).reshape(len(blocks), len(keep))
    return keep, scores, why


def nemenyi(scores: np.ndarray, models: Sequence[str], alpha: float = ALPHA) -> Posthoc:
    """Nemenyi's test after Friedman's on a (blocks x models) array, its critical difference
    of average ranks (Demšar 2006, eq. 5) and the cliques it cannot separate."""
    import scikit_posthocs as sp
    from scipy.stats import studentized_range

    n, k = scores.shape
    p = sp.posthoc_nemenyi_friedman(scores)
    pv = {a: {b: float(p.iloc[i, j]) for j, b in enumerate(models)}
          for i, a in enumerate(models)}
    q = float(studentized_range.ppf(1 - alpha, k, np.inf)) / math.sqrt(2)
    return Posthoc(test=POSTHOC, alpha=alpha,
                   critical_difference=q * math.sqrt(k * (k + 1) / (6 * n)),
                   p_values=pv, not_separated=_cliques(models, pv, alpha))


def _cliques(models: Sequence[str], pv: dict[str, dict[str, float]], alpha: float
             ) -> list[list[str]]:
    """Maximal sets of models no two of which the post-hoc test separates (p >= alpha), in
    the order given (Bron-Kerbosch without pivoting; k is small)."""
    same = {a: {b for b in models if b != a and pv[a][b] >= alpha} for a in models}
    out: list[list[str]] = []

    def grow(r: set, p: set, x: set) -> None:
        if not p and not x:
            if len(r) > 1:
                out.append([m for m in models if m in r])
            return
        for v in [m for m in models if m in p]:
            grow(r | {v}, p & same[v], x & same[v])
            p = p - {v}
            x = x | {v}

    grow(set(), set(models), set())
    return sorted(out, key=lambda c: [models.index(m) for m in c])


# ================================================================================ equivalence
def bayes_signed_rank(best: Sequence[float], model: Sequence[float], rope: float = ROPE,
                      samples: int = BAYES_SAMPLES, seed: int = BAYES_SEED
                      ) -> tuple[float, float, float]:
    """(P(best - model > rope), P(|best - model| <= rope), P(model - best > rope)) by the
    Bayesian signed-rank test on paired scores; seeded, so the same inputs give the same
    probabilities."""
    from baycomp import SignedRankTest

    left, equiv, right = SignedRankTest.probs(np.asarray(best, dtype=np.float64),
                                              np.asarray(model, dtype=np.float64), rope=rope,
                                              nsamples=samples, random_state=seed)
    return float(left), float(equiv), float(right)


def block_rope(lb: Leaderboard, problem: str, rope: float | None,
               cells: dict[str, Cell] | None = None) -> float:
    """The ROPE of a block in its table's units: ``rope`` when given, else :data:`ROPE` for a
    metric shown x 100 and :data:`ROPE_SHARE` of the best mean otherwise (the best of
    ``cells``, the block's, or of the leaderboard's column ``problem``)."""
    if rope is not None:
        return float(rope)
    from ..scoring import get_metric

    if get_metric(lb.get("metric") or "auc").percent:
        return ROPE
    if cells is None:
        cells = {r.model: r.cells[problem] for r in lb.rows}
    best = next((c.mean for c in cells.values() if c.best), None)
    return ROPE_SHARE * abs(best) if best else ROPE_SHARE


def _equivalence(b: _Block, rope: float | None, samples: int, seed: int) -> list[Equivalence]:
    best = next((m for m, c in b.cells.items() if c.best), None)
    if best is None:
        return []
    sign, width = _sign(b.lb), block_rope(b.lb, b.problem, rope, b.cells)
    bscore = dict(zip(b.cells[best].reps, b.cells[best].scores))
    out = []
    for model, c in b.cells.items():
        if model == best:
            continue
        common = sorted(set(bscore) & set(c.reps))
        mine = dict(zip(c.reps, c.scores))
        x, y = [sign * bscore[k] for k in common], [sign * mine[k] for k in common]
        probs = bayes_signed_rank(x, y, width, samples, seed) if len(common) >= 2 else \
            (None, None, None)
        out.append(Equivalence(block=b.label, model=model, best=best,
                               n_pairs=len(common),
                               mean_difference=float(np.mean(np.subtract(x, y))) if common
                               else None, p_best_better=probs[0], p_equivalent=probs[1],
                               p_model_better=probs[2],
                               significantly_worse=c.significantly_worse, rope=width))
    return out


# ================================================================================ summary
def summary_across(boards: Sequence[Leaderboard], *, blocks: str | Sequence[str] | None = None,
                   focus: Sequence[str] | None = None, alpha: float = ALPHA,
                   rope: float | None = None,
                   bayes_samples: int = BAYES_SAMPLES, bayes_seed: int = BAYES_SEED,
                   equivalence: bool = True) -> Summary:
    """The summary of several data sets' leaderboards of one metric (module docstring).
    ``blocks``: None (one per independent data set, the default rule), ``"problems"``,
    ``"all"``, or block / data set labels; ``focus``: models shown in their own column
    (default: :func:`focus_models`);
    ``rope``: the ROPE in the tables' units (None: :func:`block_rope`'s default);
    ``equivalence=False`` leaves the Bayesian signed-rank view out (``equivalence`` empty; it
    is most of the run time) for callers that only read the headline and the ranks."""
    metrics = sorted({lb.get("metric") or "auc" for lb in boards})
    if len(metrics) > 1:
        from ..errors import ConfigError

        raise ConfigError(f"the leaderboards are tables of different metrics "
                          f"({', '.join(metrics)}); a summary ranks data sets on one metric")
    used, left_out, rule = choose_blocks(boards, blocks, alpha)
    focus = list(focus) if focus is not None else focus_models(boards)
    baselines = sorted({lb.baseline for lb in boards if lb.baseline})
    baseline = baselines[0] if len(baselines) == 1 else None
    labels = sorted({r.model for lb in boards for r in lb.rows})
    roles = {m: _role(m, focus, baseline) for m in labels}
    models, scores, not_ranked = _rank_matrix(used)
    fried = friedman(scores)
    from ..scoring import get_metric

    metric = get_metric(metrics[0] if metrics else "auc")
    per_problem = any(not b.aggregate and len(b.lb.problems) > 1 for b in used)
    fried.blocks_are = (f"{'data sets / problems' if per_problem else 'data sets'} (each "
                        f"model's mean {metric.heading()} on the block)")
    avg: dict[str, float] = {}
    posthoc = None
    if models and len(used):
        ranks = block_ranks(scores).mean(axis=0)
        order = np.argsort(ranks, kind="stable")
        avg = {models[j]: float(ranks[j]) for j in order}
        if fried.p_value is not None:
            posthoc = nemenyi(scores[:, order], [models[j] for j in order], alpha)
    notes = []
    if len(baselines) > 1:
        notes.append(f"The data sets declare different baselines ({', '.join(baselines)}).")
    return Summary(
        format=SUMMARY_FORMAT, blocks=[b.label for b in used], blocks_rule=rule,
        left_out_blocks=left_out, focus_models=focus, baseline=baseline, roles=roles,
        block_means={b.label: {m: c.mean for m, c in b.cells.items()} for b in used},
        headline=[_headline(b, focus, roles) for b in used], ranked_models=list(avg),
        not_ranked=not_ranked, average_ranks=avg, friedman=fried, posthoc=posthoc,
        rope=ROPE if rope is None else float(rope),
        bayes_test=BAYES_TEST, bayes_samples=bayes_samples, bayes_seed=bayes_seed,
        equivalence=[e for b in used for e in _equivalence(b, rope, bayes_samples, bayes_seed)]
        if equivalence else [], notes=notes, metric=metric.name,
        higher_is_better=metric.higher_is_better)


def boards_by_metric(store, sel, metric: str | None = None
                     ) -> tuple[str, list[Leaderboard], dict[str, str]]:
    """(the metric, the leaderboards of the data sets of selection ``sel`` for it, {data set
    left out: why}).  ``metric`` None: the primary metric of most data sets (ties: the first
    in the metric table order); a data set whose targets it does not apply to is left out."""
    from ..errors import ConfigError
    from ..scoring import metric_names
    from .leaderboard import build_leaderboard, table_metric

    primary = {}
    for ds in sel.problems:
        primary[ds] = table_metric(sel.units[sel.units["dataset"] == ds], ds)[0].name
    if metric is None:
        order = metric_names()
        counts = {m: list(primary.values()).count(m) for m in set(primary.values())}
        metric = max(sorted(counts, key=order.index), key=lambda m: counts[m])
    boards, left = [], {}
    for ds in sel.problems:
        try:
            boards.append(build_leaderboard(store, ds, selection=sel, metric=metric))
        except ConfigError:
            left[ds] = (f"{metric} does not apply to its targets (its primary metric is "
                        f"{primary[ds]}: --metric {primary[ds]})")
    if not boards:
        raise ConfigError(f"no data set of the store has targets {metric} applies to; "
                          + "; ".join(f"{ds}: {why}" for ds, why in left.items()))
    return metric, boards, left


def summarize_store(store, *, blocks: str | Sequence[str] | None = None,
                    focus: Sequence[str] | None = None, rope: float | None = None,
                    seed: int | None = None, models: Sequence[str] | None = None,
                    bayes_samples: int = BAYES_SAMPLES, metric: str | None = None
                    ) -> tuple[Summary, list[Leaderboard]]:
    """Build every data set's leaderboard of ``store`` for ``metric`` (the one selection rule;
    default: :func:`boards_by_metric`) and summarize them; returns (summary, leaderboards).
    Data sets the metric does not apply to are named in the summary's left-out blocks."""
    from .select import select_units

    sel = select_units(store, None, seed=seed, models=models)
    _, boards, left = boards_by_metric(store, sel, metric)
    summary = summary_across(boards, blocks=blocks, focus=focus, rope=rope,
                             bayes_samples=bayes_samples)
    summary.left_out_blocks.update(left)
    return summary, boards


__all__ = ["Summary", "HeadlineRow", "HeadlineEntry", "Posthoc", "Equivalence",
           "summary_across", "summarize_store", "boards_by_metric", "choose_blocks",
           "focus_models", "nemenyi", "bayes_signed_rank", "block_label", "block_rope",
           "SUMMARY_FORMAT", "ROPE", "ROPE_SHARE", "ALPHA"]
