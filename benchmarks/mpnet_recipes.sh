#!/usr/bin/env bash
# The 12-layer ELUE benchmark (benchmarks/mpnet-recipes.toml, its plan: docs/benchmarks.md),
# resumable: rerun it after an interruption and it continues (a finished run directory is
# skipped, a checkpoint resumed).
#   bash benchmarks/mpnet_recipes.sh [DATA_DIR] [WORKERS] [STOP_BY]
# WORKERS processes (default: the number of cores) share each phase, one thread each:
#   0. benchmarks/mpnet-claims.toml: the full model, DeeBERT and PABEE on RTE and CoLA, three
#      seeds, for the papers' claims made there (done);
#   a. SWEET on ELUE MRPC, seed 1, again once its run directory is deleted (and its test-split
#      twin under $TEST, where the model changes): the one cell of ELUE MRPC's seed 1 to redo.
#      Run without STOP_BY: deleting the run deleted the record its estimate came from (its
#      last run took 1,720 s);
#   b. every method on seed 1 of ELUE SST-2, then STS-B, then SciTail (static first, then the
#      cascade, which reuses its models), real inference timed at 4 points of each sweep, each
#      cell's models then run on the ELUE test split at once (labels withheld, for ELUE's files;
#      --test-out), while their checkpoints are at hand;
#   c. seeds 2 and 3 of the full model (static k = 12), DeeBERT and PABEE on the four tasks,
#      nothing timed.
# A worker that finds a static cell taken helps train its twelve models (docs/running.md).
# STOP_BY (HH:MM, a date and time, or 2h30m from now): start no cell that would end after it.
set -euo pipefail
cd "$(dirname "$0")/.."
DATA_DIR=${1:-${EEBENCH_DATA_DIR:-../shared/data}}
WORKERS=${2:-$(nproc)}
STOP_BY=${3:-}

source benchmarks/_together.sh  # together ARGS...: WORKERS workers share a grid

CONFIG=benchmarks/mpnet-claims.toml
together
CONFIG=benchmarks/mpnet-recipes.toml
TEST=benchmarks/results/mpnet-recipes-test
STOP_BY='' together --seed 1 --task elue-mrpc --method sweet --test-out "$TEST"
together --seed 1 --test-out "$TEST" --task elue-sst2 --task elue-stsb --task elue-scitail
together --seed 2 --seed 3
