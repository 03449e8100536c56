#!/usr/bin/env bash
# Recipe search, MPNet-base full model: lr in {2e-5, 5e-5} at 3 epochs on ELUE MRPC, STS-B, SST-2,
# 8,000 SciTail pairs, RTE and CoLA, seed 1 (12 runs; benchmarks/recipes/mpnet-base.toml).
#   bash benchmarks/recipes/search_mpnet.sh [DATA_DIR] [WORKERS]
# Resumable: each run directory is keyed by its config and a finished one is skipped, so rerun
# the same command after an interruption. WORKERS processes (default 2) share the runs, one
# torch thread each; the papers' rate for base models (2e-5) comes first.
#
# Cost, measured (train_seconds of benchmarks/results/recipes-mpnet; bf16 autocast on this
# project's AMD EPYC with AVX-512 BF16, one thread, two runs at a time): at 2e-5, MRPC 24 min
# (345 steps), STS-B 24 min (540), SST-2 29 min (801), SciTail about 40 min (750), RTE 19 min
# (234), CoLA 12 min (804): about 2.5 hours of one core per rate, 5 for the search, 2.5 hours of
# wall time on two cores. In fp32 on an AVX2
# machine (16.1 s a step, docs/benchmarks.md) the same search takes about a day on two cores.
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
