"""Reading stored results from a notebook or a script: :class:`Results` (one run's units, from
:func:`mtlbench.api.compare`, or every unit of a store) and :func:`load_results`.

One scale
---------
Every AUC in a frame of :class:`Results` is on the scale the tables print, x 100, in a column
whose name ends in ``_x100`` (``test_auc_x100``, ``val_auc_x100``, ``test_auc_mean_x100``,
``mean_auc_x100``); it is the same float the tables round (:func:`mtlbench.report.select.auc_x100`).
The JSON records inside a unit row (the search trace in ``grid``, ``diagnostics``) are as
stored, on the 0-1 scale.
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any, Sequence

from .errors import ConfigError

if TYPE_CHECKING:  # heavy modules are imported where they are used
    import pandas as pd

    from .report.across import Summary
    from .runner import RunReport

#: the store ``store=None`` means, the same file the command line uses
DEFAULT_STORE = "results/mtlbench.sqlite"


class Results:
    """Results in a store: one run's units (from :func:`mtlbench.api.compare`) or all
    (:func:`load_results`).

    The store is opened for each call and closed after, so a ``Results`` object holds no open
    file.  ``keys`` (unit identity keys) restricts to a run's own units; ``None`` means every
    unit in the store; ``report`` and ``plan`` are the run's ``RunReport`` and
    :class:`mtlbench.api.Plan`, when it comes from one."""

    def __init__(self, store: str | os.PathLike, *, keys: Sequence[str] | None = None,
                 report: "RunReport | None" = None, plan: Any = None) -> None:
        self.store = str(store)
        self.keys = list(keys) if keys is not None else None
        self.report = report
        self.plan = plan

    def _open(self):
        from .store import ResultStore

        return ResultStore(self.store)

    def to_frame(self, level: str = "unit") -> "pd.DataFrame":
        """A DataFrame with one row per unit (``level="unit"``: model, dataset, problem, rep,
        status, test_auc_x100, val_auc_x100, target_kind, metrics, best_params, times,
        fingerprints, ...), per task of each finished binary unit (``level="task"``: model,
        dataset, problem, rep, task_index, task_name, test_auc_x100, n_test, key) or per task
        and metric of each finished unit (``level="metric"``: ... task_name, n_test, metric,
        value, key; values in the metric's own units).  AUCs x 100 (module docstring)."""
        if level not in ("unit", "task", "metric"):
            raise ConfigError(f"level must be 'unit', 'task' or 'metric', got {level!r}")
        with self._open() as rs:
            if level == "metric":
                return rs.task_metrics(keys=self.keys).reset_index(drop=True)
            if level == "unit":
                df = rs.units(keys=self.keys)
                cols = ("test_auc", "val_auc")
            else:
                df = rs.task_scores(keys=self.keys).reset_index(drop=True)
                cols = ("test_auc",)
        from .report.select import auc_x100

        for col in cols:
            df[col] = auc_x100(df[col].astype(float))[0]
        return df.rename(columns={c: f"{c}_x100" for c in cols})

    def summary(self, metric: str | None = None) -> "pd.DataFrame":
        """Mean ± std (over repetitions) of test AUC x 100 per (dataset, problem, model), with
        finished and failed units and run time: the table ``mtlbench results`` and the end of
        ``compare`` print (columns ``test_auc_mean_x100``, ``test_auc_std_x100``, ``reps``,
        ``failed``, ``time_total_s``), over these results' units.  With ``metric``, that
        metric's test value in its own units (columns problem, model, metric, mean, std, reps,
        not_recorded, failed, time_total_s)."""
        from .report.select import Selection, metric_frame, results_frame

        with self._open() as rs:
            units = rs.units(keys=self.keys)
        if metric is not None:
            from .scoring import get_metric

            return metric_frame(units, get_metric(metric).name)
        frame = results_frame(Selection(units=units))
        # planned repetitions and the seed belong to a selection (``results``), not to a set
        # of units
        return frame.drop(columns=["planned_reps", "seed"], errors="ignore")

    def failures(self) -> "pd.DataFrame":
        """Failed units with their message and traceback."""
        df = self.to_frame()
        return df[df["status"] != "ok"].reset_index(drop=True)

    @property
    def datasets(self) -> list[str]:
        return sorted(self.to_frame()["dataset"].unique())

    def leaderboard(self, dataset: str | None = None,
                    metric: str | None = None) -> "pd.DataFrame":
        """The leaderboard of ``dataset`` (default: every dataset of these results) for
        ``metric`` (default: each data set's primary metric) as a DataFrame, one row per
        (dataset, problem, model), built by the leaderboard module from the whole store
        exactly as ``mtlbench leaderboard --format csv`` prints it."""
        import io

        import pandas as pd

        from .report import leaderboard as lbm

        names = [dataset] if dataset else self.datasets
        frames = []
        with self._open() as rs:
            for name in names:
                lb = lbm.build_leaderboard(rs, name, metric=metric)
                frames.append(pd.read_csv(io.StringIO(lbm.to_csv(lb))))
        if not frames:
            return pd.DataFrame()
        return pd.concat(frames, ignore_index=True)

    def summary_across(self, *, blocks: str | Sequence[str] | None = None,
                       focus: Sequence[str] | None = None, rope: float | None = None,
                       figures_dir: str | os.PathLike | None = None,
                       metric: str | None = None) -> "Summary":
        """The judgement across every data set of the store, exactly as ``mtlbench
        leaderboard --all`` prints it: the headline table, the Friedman test with average
        ranks, the Nemenyi post-hoc test and its critical difference, and per data set the
        Bayesian signed-rank probabilities of every model against the best (``rope``: region
        of practical equivalence in the tables' units; default 0.5 points of an AUC x 100,
        1 % of the best mean for a metric not shown x 100).  ``metric``: the metric of the
        tables (default: the primary metric of most data sets).  ``blocks``: which data sets
        count as independent blocks (None: the default rule, named in ``.blocks_rule``;
        ``"all"``; or labels).  ``figures_dir``: also draw the critical-difference diagram
        and the equivalence figure there.  Returns a
        :class:`mtlbench.report.across.Summary` (``.to_json()``; ``.average_ranks``,
        ``.friedman``, ``.posthoc``, ``.equivalence``, ``.headline``)."""
        from .report.across import summarize_store
        from .report.across_render import summary_figures

        with self._open() as rs:
            summary, _ = summarize_store(rs, blocks=blocks, focus=focus, rope=rope, metric=metric)
        if figures_dir is not None:
            summary_figures(summary, figures_dir)
        return summary

    def __len__(self) -> int:
        return len(self.keys) if self.keys is not None else len(self.to_frame())

    def __repr__(self) -> str:
        what = f"{len(self.keys)} planned unit(s)" if self.keys is not None else "all units"
        ran = ""
        if self.report is not None:
            ran = (f", ran {self.report.ran} ({self.report.failed} failed), "
                   f"{self.report.skipped} already stored")
        return f"<mtlbench.Results store={self.store!r}: {what}{ran}>"

    def _repr_html_(self) -> str:  # notebooks show the summary table
        return f"<p>{self!r}</p>" + self.summary().to_html(index=False)


def load_results(store: str | os.PathLike = DEFAULT_STORE, *,
                 models: Sequence[str] | None = None,
                 datasets: Sequence[str] | None = None) -> Results:
    """Results stored by earlier runs in ``store`` (every unit, or those of the given model
    labels and datasets / ``dataset/problem`` names)."""
    from .store import ResultStore

    if not Path(store).expanduser().is_file():
        raise ConfigError(f"no results store at {str(store)!r}; run mtlbench.compare(...) or "
                          "'mtlbench compare' first, or give the path of an existing store")
    if models is None and datasets is None:
        return Results(store)
    with ResultStore(store) as rs:
        df = rs.units(models=list(models) if models is not None else None)
    if datasets is not None:
        want = list(datasets)
        df = df[[any(p == d or p.startswith(d + "/") for d in want) for p in df["problem"]]]
    return Results(store, keys=list(df["key"]))


__all__ = ["Results", "load_results", "DEFAULT_STORE"]
