#!/usr/bin/env bash
# Recipe search, MPNet-base full model: lr in {2e-5, 5e-5} at 3 epochs on ELUE MRPC, STS-B, SST-2
# and 8,000 SciTail pairs, seed 1 (8 runs; benchmarks/recipes/mpnet-base.toml).
#   bash benchmarks/recipes/search_mpnet.sh [DATA_DIR] [WORKERS]
# Resumable: each run directory is keyed by its config and a finished one is skipped, so rerun
# the same command after an interruption. WORKERS processes (default 2) share the runs, one
# torch thread each; the papers' rate for base models (2e-5) comes first.
#
# Cost, from MPNet's measured fp32 step (4.5x MiniLM's: 16.1 s for 1,344 padded tokens at batch
# 32 on this AMD EPYC, AVX2, under load; docs/benchmarks.md), proportional to padded tokens:
#   MRPC 115 steps/epoch ~2,350 s, STS-B 180 ~2,000 s, SST-2 267 ~2,500 s, SciTail 250 ~3,800 s
#   = ~10,700 s per epoch of all four; x 3 epochs x 2 rates = ~17.8 hours of one core, about
#   9 hours wall with two workers.
set -euo pipefail
cd "$(dirname "$0")/../.."
DATA_DIR=${1:-${EEBENCH_DATA_DIR:-../shared/data}}
WORKERS=${2:-2}
CONFIG=benchmarks/recipes/mpnet-base.toml

search() {
  for lr in 2e-5 5e-5; do
    OMP_NUM_THREADS=1 eebench run --config "$CONFIG" --data-dir "$DATA_DIR" --lr "$lr"
  done
}

for _ in $(seq "$WORKERS"); do
  search &
  sleep 5  # the first worker claims its run; the next one takes the next
done
wait
python benchmarks/recipes/summary.py benchmarks/results/recipes-mpnet
