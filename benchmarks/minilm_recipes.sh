#!/usr/bin/env bash
# MiniLM-L6 with a recipe per task (benchmarks/minilm-recipes.toml), resumable: rerun it after an
# interruption and it continues (a finished run directory is skipped).
#   bash benchmarks/minilm_recipes.sh [DATA_DIR] [WORKERS] [STOP_BY]
# WORKERS processes (default: the number of cores) share the grid, one thread each, seed by seed.
# STOP_BY (HH:MM, a date and time, or 2h30m from now): start no cell that would end after it.
set -euo pipefail
cd "$(dirname "$0")/.."
DATA_DIR=${1:-${EEBENCH_DATA_DIR:-../shared/data}}
WORKERS=${2:-$(nproc)}
STOP_BY=${3:-}

source benchmarks/_together.sh  # together ARGS...: WORKERS workers share a grid

CONFIG=benchmarks/minilm-recipes.toml
together
