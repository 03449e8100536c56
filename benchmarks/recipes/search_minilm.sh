#!/usr/bin/env bash
# Recipe search, MiniLM-L6 full model: lr in {2e-5, 5e-5, 1e-4} x epochs in {3, 5} on the full
# training sets of RTE, MRPC, STS-B and CoLA, seed 1 (24 runs; benchmarks/recipes/minilm-l6.toml).
#   bash benchmarks/recipes/search_minilm.sh [DATA_DIR] [WORKERS]
# Resumable: each run directory is keyed by its config and a finished one is skipped, so rerun
# the same command after an interruption. WORKERS processes (default 2) share the runs, one
# torch thread each; 3-epoch runs come first, so a stopped search has whole comparisons.
#
# Cost, from a measured fp32 step (benchmarks/train_step.py: MiniLM-L6, batch 32, one thread,
# 3.54 s for 1,344 padded tokens on this AMD EPYC, AVX2, under load; docs/benchmarks.md), taken
# as proportional to the padded tokens of a length-grouped batch:
#
#   task   train rows  steps/epoch  padded tokens/batch  s/step  s/epoch
#   RTE         2,490           78                2,169     5.7      441
#   MRPC        3,668          115                1,736     4.6      522
#   STS-B       5,749          180                  929     2.5      446
#   CoLA        8,551          268                  375     1.1      284
#                                                              = 1,693 s per epoch of all four
#
# 3 learning rates x (3 + 5) epochs = 24 epochs of each task: 24 x 1,693 s = 40,600 s, about
# 11.3 hours of one core; with two workers about 5.6 hours wall, plus a few minutes of dev
# evaluation and model loading. MPNet-base's fp32 step is 4.5x MiniLM's (16.1 s): the same
# search on it would take about a day on two cores.
set -euo pipefail
cd "$(dirname "$0")/../.."
DATA_DIR=${1:-${EEBENCH_DATA_DIR:-../shared/data}}
WORKERS=${2:-2}
CONFIG=benchmarks/recipes/minilm-l6.toml

search() {
  for epochs in 3 5; do
    for lr in 2e-5 5e-5 1e-4; do
      OMP_NUM_THREADS=1 eebench run --config "$CONFIG" --data-dir "$DATA_DIR" \
        --lr "$lr" --epochs "$epochs"
    done
  done
}

for _ in $(seq "$WORKERS"); do
  search &
  sleep 5  # the first worker claims its run; the next one takes the next
done
wait

python benchmarks/recipes/summary.py benchmarks/results/recipes-minilm
