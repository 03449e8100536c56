#!/usr/bin/env bash
# MiniLM-L6 with a recipe per task (benchmarks/minilm-recipes.toml), resumable: rerun it after an
# interruption and it continues (a finished run directory is skipped).
#   bash benchmarks/minilm_recipes.sh [DATA_DIR] [WORKERS]
# WORKERS processes (default: the number of cores) share the grid, one thread each, seed by seed.
set -euo pipefail
cd "$(dirname "$0")/.."
DATA_DIR=${1:-${EEBENCH_DATA_DIR:-../shared/data}}
WORKERS=${2:-$(nproc)}
for _ in $(seq "$WORKERS"); do
  OMP_NUM_THREADS=1 eebench run --config benchmarks/minilm-recipes.toml --data-dir "$DATA_DIR" &
  sleep 5  # the first worker claims its cell; the next one takes the next
done
wait
