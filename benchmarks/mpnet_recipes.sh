#!/usr/bin/env bash
# The 12-layer ELUE benchmark (benchmarks/mpnet-recipes.toml), resumable: rerun it after an
# interruption and it continues (a finished run directory is skipped, a checkpoint resumed).
#   bash benchmarks/mpnet_recipes.sh [DATA_DIR] [WORKERS] [STOP_BY]
# WORKERS processes (default: the number of cores) share each phase, one thread each:
#   0. benchmarks/mpnet-claims.toml: the full model, DeeBERT and PABEE on RTE and CoLA, three
#      seeds, for the papers' claims made there (small: about 5 core-hours);
#   1. every method on seed 1 (static first, then the cascade, which reuses its models), each
#      cell's models then run on the ELUE test split at once (labels withheld, for ELUE's
#      files; --test-out), while their checkpoints are at hand: SST-2, STS-B and SciTail first,
#      then ELUE MRPC, whose dev runs came before --test-out and whose models train again for
#      the test split (checkpoints are not kept between sessions);
#   2. static, DeeBERT and PABEE on seeds 2 and 3.
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
together --seed 1 --test-out "$TEST" --task elue-sst2 --task elue-stsb --task elue-scitail
together --seed 1 --test-out "$TEST"
together --seed 2 --seed 3 --method static --method deebert --method pabee
