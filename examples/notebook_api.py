# %% [markdown]
# # mtlbench from Python (notebook-style script)
#
# Each `# %%` block is a notebook cell (Jupyter, VS Code and `jupytext` read this format);
# `python examples/notebook_api.py` runs it top to bottom.  It compares two fast models on the
# paper's simulated data, reads the results back and builds the leaderboard table.

# %%
import os
import tempfile

import mtlbench

# A throwaway store for this demo; omit `store=` to use results/mtlbench.sqlite, which the
# command line shares (finished units are never recomputed).
store = os.environ.get("MTLBENCH_EXAMPLE_STORE") or os.path.join(tempfile.mkdtemp(), "demo.sqlite")

# %% [markdown]
# ## Run a comparison
# The same selectors as on the command line: `"lasso"`, `"stl[lam=1.0]"`,
# `"lasso[rho_ratio=[0.01,0.1]]"`; datasets `"simulated"`, `"shoes/brown"`, ...

# %%
done = []
res = mtlbench.compare(datasets=["simulated"], models=["lasso", "stl"], reps=2, seed=0,
                       store=store, on_result=lambda r: done.append(r.ok))
print(res)
print(f"{len(done)} unit(s) computed, {sum(done)} ok")

# %% [markdown]
# ## One row per unit (model, problem, repetition) and per task
# AUCs are on the tables' scale, x 100, in columns named `..._x100`.

# %%
units = res.to_frame()
print(units[["model", "problem", "rep", "status", "test_auc_x100", "best_params"]])
tasks = res.to_frame(level="task")
print(tasks.groupby("model")["test_auc_x100"].describe()[["mean", "min", "max"]])

# %% [markdown]
# ## Mean ± std over repetitions, and the leaderboard (ranks, Wilcoxon-Holm, W/T/L vs stl)

# %%
print(res.summary())
board = res.leaderboard("simulated")
print(board[["problem", "model", "mean_auc_x100", "std_auc_x100", "avg_rank"]])

# %% [markdown]
# ## Later (another session): read what a store holds

# %%
again = mtlbench.load_results(store)
print(again, len(again.to_frame()), "unit(s) stored")
lasso_only = mtlbench.load_results(store, models=["lasso"])
assert set(lasso_only.to_frame()["model"]) == {"lasso"}
