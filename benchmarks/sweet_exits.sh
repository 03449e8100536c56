#!/usr/bin/env bash
# SWEET with the paper's exit placement: exits after layers 1, 2, 4 and 6 of MiniLM-L6 only (the
# paper puts four on BERT-base, after 1, 4, 6 and 12), retrained on GLUE SST-2, ELUE MRPC and
# SciTail, three seeds, the benchmark's budget (benchmarks/elue-minilm.toml); compared with the
# benchmark's own SWEET runs (an exit after every layer) of the same seeds.
#   bash benchmarks/sweet_exits.sh [DATA_DIR] [WORKERS]
# Resumable like the benchmark; one thread per worker, about 20 minutes on two cores.
set -euo pipefail
cd "$(dirname "$0")/.."
DATA_DIR=${1:-${EEBENCH_DATA_DIR:-../shared/data}}
WORKERS=${2:-$(nproc)}

for _ in $(seq "$WORKERS"); do
  OMP_NUM_THREADS=1 eebench run --config benchmarks/elue-minilm.toml --data-dir "$DATA_DIR" \
    --method sweet --setting "exit_layers=[1,2,4,6]" \
    --task sst2 --task elue-mrpc --task elue-scitail --out benchmarks/results/sweet-exits &
  sleep 5  # the first worker claims its run; the next one takes the next
done
wait

python benchmarks/report_sweet_exits.py
