#!/usr/bin/env bash
# Produce the published leaderboards (issue 7, item 5): every built-in model on the simulated
# data (the paper's 15 repetitions) and on School, Landmine, Lenk and MovieLens (REAL_REPS
# repetitions), then `mtlbench publish`.  Run from the repository root:
#
#     bash benchmarks/publish_all.sh                 # everything, 2 parallel units
#     JOBS=1 REAL_REPS=6 bash benchmarks/publish_all.sh
#
# The run is resumable: finished units are in $STORE and are not recomputed; rerun the
# script after an interruption.  Failed units (exception, timeout, non-finite scores) are
# recorded and counted in the tables; retry them with RETRY=--retry-failed.
#
# Repetitions on the real data: REAL_REPS (default 10).  With n paired repetitions the
# smallest two-sided Wilcoxon p is 2/2^n, and Holm multiplies the smallest p of a column by
# the number of comparisons (about 9 for all built-in models): n = 10 gives 2/1024 x 9 = 0.018
# < 0.05, so significance is reachable; n < 6 could never be significant (the tables say so).
set -euo pipefail

STORE=${STORE:-results/published.sqlite}
OUT=${OUT:-leaderboards}
DATA_DIR=${DATA_DIR:-${MTLBENCH_DATA_DIR:-../shared/data}}
JOBS=${JOBS:-2}
SIM_REPS=${SIM_REPS:-15}
REAL_REPS=${REAL_REPS:-10}
TIMEOUT=${TIMEOUT:-3600}          # seconds per unit (model x problem x repetition)
SEED=${SEED:-0}
RETRY=${RETRY:-}
FORCE=${FORCE:-}                  # FORCE=--force: replace tables published from another store

# A model whose plugin fails to import must stop the run, not silently drop out of the tables.
export MTLBENCH_STRICT_PLUGINS=1

echo "== plugins and models that will run (every discovered model)"
mtlbench plugins
mtlbench models

echo "== simulated data: ${SIM_REPS} repetitions (the paper's protocol)"
mtlbench compare --datasets simulated --reps "$SIM_REPS" --seed "$SEED" --jobs "$JOBS" \
    --timeout "$TIMEOUT" --store "$STORE" $RETRY

for ds in school landmine lenk movielens; do
    echo "== ${ds}: ${REAL_REPS} repetitions"
    mtlbench compare --datasets "$ds" --data-dir "$DATA_DIR" --reps "$REAL_REPS" \
        --seed "$SEED" --jobs "$JOBS" --timeout "$TIMEOUT" --store "$STORE" $RETRY
done

echo "== failures (also counted in every table)"
mtlbench results --store "$STORE" --failures

echo "== publishing to ${OUT}/"
mtlbench publish --store "$STORE" --out "$OUT" $FORCE
