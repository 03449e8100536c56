#!/usr/bin/env bash
# Early exit for sequence labelling, the whole CPU benchmark, resumable (rerun it after an
# interruption and it continues; a finished run directory is skipped):
#   bash benchmarks/ner_minilm.sh [DATA_DIR] [WORKERS]
# WORKERS processes (default: the number of cores) share each step, one thread each. Seed 1 of
# everything comes first (its dev runs, TOKEE on its models, its test-split runs for export),
# then seeds 2 and 3. Writes benchmarks/results/ner-minilm (dev) and ner-minilm-test.
set -euo pipefail
cd "$(dirname "$0")/.."
DATA_DIR=${1:-${EEBENCH_DATA_DIR:-../shared/data}}
WORKERS=${2:-$(nproc)}
CONFIG=benchmarks/ner-minilm.toml

source benchmarks/_together.sh  # together ARGS...: WORKERS workers share a grid

for seed in 1 2 3; do
  together --seed "$seed"
  # TOKEE on the SENTEE and DeeBERT models (their checkpoints, one evaluation each)
  together --seed "$seed" --method sentee --method deebert --rule tokee \
    --out benchmarks/results/ner-minilm-tokee
  if [ "$seed" = 1 ]; then  # the test split, labels withheld: predictions for export
    together --seed 1 --split test --out benchmarks/results/ner-minilm-test
  fi
done
