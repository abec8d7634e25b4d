#!/usr/bin/env bash
# Produce the published leaderboards: every built-in model, the paper's 15 repetitions, the
# default fair search (adaptive, 20 fits per unit), on
#   * the simulated data (generator seed 0, the paper's recipe),
#   * the simulated data of two other generator seeds (robustness: data no design decision
#     touched; starting grids were designed on seed 101, see docs/tuning.md),
#   * School, Landmine, Lenk and MovieLens (read from DATA_DIR), binary (AUC, error rate beside),
#   * School and Lenk in their regression forms (school-regression, lenk-regression: RMSE, nMSE,
#     explained variance; models that handle binary targets only are skipped and say so),
#   * the paper-scale synthetic attribute data (synthetic-attributes, all 7 attributes),
# then the solver races (simulated and School, at the selected hyperparameters of rep 0),
# `mtlbench publish`, and the verdict pages regenerated from the published JSON.  Run from the repository root:
#
#     bash scripts/publish_all.sh                  # everything, 2 parallel units
#     FORCE=--force bash scripts/publish_all.sh    # first publication over tables of another store
#     DATASETS="simulated school" bash scripts/publish_all.sh   # a part (then publish)
#     STAGE=staging PUBLISH=0 DATASETS=school bash scripts/publish_all.sh
#
# The run is resumable: finished units are in $STORE and are not recomputed (a unit's key
# includes the code fingerprint of its model, so changed code is recomputed); rerun the script
# after an interruption.  The store is not in version control: when $STORE does not exist, it
# is first rebuilt from the published $OUT/*.json (scripts/restore_store.py: every published
# unit this code would compute, except repetition 0, whose runs store what the figures draw), so
# after a change to one model only that model's units and repetition 0 are computed, and the
# recomputed units are checked against the published ones (RESTORE=0: start from nothing).
# Failed units (exception, timeout, killed worker, non-finite scores) are recorded and counted
# in the tables; retry them with RETRY=--retry-failed.
#
# A republication longer than one machine session: with STAGE=FOLDER, every data set is written
# to FOLDER as soon as its units are finished (JSON and tables, no figures or site; commit it),
# and a store rebuilt on a later machine is restored from FOLDER as well as from $OUT, so that
# the run goes on where it stopped. PUBLISH=0 stops after the data sets (no races, nothing
# written to $OUT); the last session runs STAGE=FOLDER alone: it computes what is left (and
# repetition 0 again, which is never restored), checks the staged units it recomputed, runs
# the races and publishes to $OUT, after which FOLDER can be deleted.
#
# With n paired repetitions the smallest two-sided Wilcoxon p is 2/2^n; Holm multiplies the
# smallest p of a column by the number of comparisons (13 for 14 models): n = 15 gives
# 2/32768 x 13 = 8e-4, so significance is reachable.
set -euo pipefail

STORE=${STORE:-results/published.sqlite}
OUT=${OUT:-leaderboards}
DATA_DIR=${DATA_DIR:-${MTLBENCH_DATA_DIR:-../shared/data}}
JOBS=${JOBS:-2}
SIM_REPS=${SIM_REPS:-15}
REAL_REPS=${REAL_REPS:-15}
SIM_SEEDS=${SIM_SEEDS:-"1 2"}     # extra generator seeds of the simulated data (robustness rows)
DATASETS=${DATASETS:-"synthetic-attributes simulated simulated-seeds school landmine lenk movielens school-regression lenk-regression"}
RACES=${RACES-"simulated school"}    # data sets whose rep-0 solver race is published (RACES="": none)
TIMEOUT=${TIMEOUT:-3600}          # seconds per unit (model x problem x repetition)
SEED=${SEED:-0}
RETRY=${RETRY:-}
MODELS=${MODELS:-all}             # e.g. MODELS=stl,lasso: only these (default: every model)
FORCE=${FORCE:-}                  # FORCE=--force (or 1): replace tables of another store
STAGE=${STAGE:-}                  # folder of a republication spanning sessions (see above)
PUBLISH=${PUBLISH:-1}             # PUBLISH=0: compute (and stage) the data sets only
[ "$FORCE" = "1" ] && FORCE=--force

# A model whose plugin fails to import must stop the run, not silently drop out of the tables.
export MTLBENCH_STRICT_PLUGINS=1

RESTORE=${RESTORE:-1}
if [ "$RESTORE" = "1" ] && [ ! -e "$STORE" ]; then
    for folder in "$OUT" ${STAGE:+"$STAGE"}; do
        [ -d "$folder" ] || continue
        echo "== rebuilding ${STORE} from the published ${folder}/*.json"
        python scripts/restore_store.py restore --leaderboards "$folder" --store "$STORE" \
            --data-dir "$DATA_DIR" || \
            echo "(a file refused above: compare computes its units)"
    done
fi

echo "== plugins and models that will run (every discovered model)"
mtlbench plugins
mtlbench models

run() {  # run DATASET_SELECTOR REPS [extra options]
    local ds=$1 reps=$2; shift 2
    echo "== ${ds}: ${reps} repetitions ($(date -u +%H:%M:%S) UTC)"
    local t0=$SECONDS
    mtlbench compare --datasets "$ds" --reps "$reps" --seed "$SEED" --jobs "$JOBS" \
        --timeout "$TIMEOUT" --store "$STORE" ${MODELS:+--models "$MODELS"} "$@" $RETRY
    echo "== ${ds}: $((SECONDS - t0)) s of wall time on this machine"
}

for part in $DATASETS; do
    case "$part" in
        simulated) run simulated "$SIM_REPS" ;;
        simulated-seeds) for s in $SIM_SEEDS; do run "simulated[seed=${s}]" "$SIM_REPS"; done ;;
        synthetic-attributes) run synthetic-attributes "$SIM_REPS" ;;
        *) run "$part" "$REAL_REPS" --data-dir "$DATA_DIR" ;;
    esac
    if [ -n "$STAGE" ]; then
        echo "== ${part}: finished units written to ${STAGE}/"
        mtlbench publish --store "$STORE" --out "$STAGE" --no-figures --no-html --force
    fi
done

echo "== units recomputed here vs the published units of the same key (bit for bit)"
for folder in "$OUT" ${STAGE:+"$STAGE"}; do
    [ -d "$folder" ] || continue
    python scripts/restore_store.py check --leaderboards "$folder" --store "$STORE" || \
        echo "(differences above: this machine's arithmetic differs from the one that wrote ${folder})"
done

if [ "$PUBLISH" != "1" ]; then
    echo "== PUBLISH=${PUBLISH}: no races, nothing written to ${OUT}/${STAGE:+ (finished data sets are in ${STAGE}/)}"
    exit 0
fi

echo "== failures (also counted in every table)"
mtlbench results --store "$STORE" --failures

for ds in $RACES; do
    echo "== race: ${ds} rep 0 at the selected hyperparameters"
    mtlbench race --dataset "$ds" --from-store "$STORE" --store "$STORE" --data-dir "$DATA_DIR" \
        ${MODELS:+--models "$MODELS"} --figures results
done

echo "== publishing to ${OUT}/"
mtlbench publish --store "$STORE" --out "$OUT" $FORCE
python scripts/write_verdict.py "$OUT"
