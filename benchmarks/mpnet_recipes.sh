#!/usr/bin/env bash
# The 12-layer ELUE benchmark (benchmarks/mpnet-recipes.toml), resumable: rerun it after an
# interruption and it continues (a finished run directory is skipped, a checkpoint resumed).
#   bash benchmarks/mpnet_recipes.sh [DATA_DIR] [WORKERS]
# WORKERS processes (default: the number of cores) share each phase, one thread each:
#   0. benchmarks/mpnet-claims.toml: the full model, DeeBERT and PABEE on RTE and CoLA, three
#      seeds, for the papers' claims made there (small: about 5 core-hours);
#   1. every method on seed 1 (static first: the cascade reuses its models);
#   2. the seed-1 models on the ELUE test splits (labels withheld), for ELUE's files;
#   3. static, DeeBERT and PABEE on seeds 2 and 3.
set -euo pipefail
cd "$(dirname "$0")/.."
DATA_DIR=${1:-${EEBENCH_DATA_DIR:-../shared/data}}
WORKERS=${2:-$(nproc)}

source benchmarks/_together.sh  # together ARGS...: WORKERS workers share a grid

CONFIG=benchmarks/mpnet-claims.toml
together
CONFIG=benchmarks/mpnet-recipes.toml
together --seed 1
together --seed 1 --split test --no-timing --out benchmarks/results/mpnet-recipes-test
together --seed 2 --seed 3 --method static --method deebert --method pabee
