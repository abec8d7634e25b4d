"""The TFCL paper's simulated data set (Experiments, "Simulated Dataset").

Recipe, exactly as the paper states it:

* 100 users; each user i has its own 200 samples X_i (200 x 80), rows ~ N(0, I_80);
* W (80 x 100) is block diagonal with 5 blocks of (20, 20, 10, 20, 10) features x 20 users;
  entries of block b are i.i.d. N(C_b, 2.5^2) with centroid C_b ~ U(0, K_b),
  K = (5, 5, 10, 15, 20); entries off the blocks are 0;
* scores s_i = X_i w_i + eps_i, eps_i ~ N(0, 0.1^2 I_200);
* the 50 highest scores of each user are labelled +1, the other 150 -1.

The generator seed is a dataset parameter (``seed``, default 0), independent of the
protocol's split seed.  The true W and the feature/task groups are kept in ``meta`` for
structure-recovery metrics.  The generators are mtlbench's (:mod:`mtlbench.datasets_api`;
re-exported here for scripts that import them from the plugin).
"""
from __future__ import annotations

from mtlbench import Dataset, TaskSet, hookimpl
from mtlbench.datasets_api import (BLOCK_FEATURES, CENTROID_UPPER,  # noqa: F401
                                   USERS_PER_BLOCK, make_low_rank_tasks, make_simulated)


class Simulated(Dataset):
    name = "simulated"
    description = "TFCL paper's simulated data: 100 users x 200 samples, 80 features, 5 blocks"
    source = "generated (Yang et al., TFCL, IEEE TPAMI, Sec. Simulated Dataset)"

    def __init__(self, seed: int = 0):
        self.seed = seed

    def problems(self) -> list[str]:
        return ["simulated"]

    def load(self, problem: str = "simulated", *, data_dir=None, cache_dir=None) -> TaskSet:
        return make_simulated(seed=self.seed)

    def params(self) -> dict:
        return {"seed": self.seed}


@hookimpl
def register_datasets(register):
    register(Simulated)
