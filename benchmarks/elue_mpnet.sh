#!/usr/bin/env bash
# The 12-layer slice (benchmarks/elue-mpnet.toml), resumable: rerun it after an interruption.
#   bash benchmarks/elue_mpnet.sh [DATA_DIR] [WORKERS]
# WORKERS processes (default: the number of cores) share the grid, one thread each.
set -euo pipefail
cd "$(dirname "$0")/.."
DATA_DIR=${1:-${EEBENCH_DATA_DIR:-../shared/data}}
WORKERS=${2:-$(nproc)}
CONFIG=benchmarks/elue-mpnet.toml

for _ in $(seq "$WORKERS"); do
  OMP_NUM_THREADS=1 eebench run --config "$CONFIG" --data-dir "$DATA_DIR" &
  sleep 5  # the first worker claims its run; the next one takes the next
done
wait

# ELUE test-split predictions (labels withheld) of DeeBERT and PABEE, for export-elue.
OMP_NUM_THREADS=$WORKERS eebench run --config "$CONFIG" --data-dir "$DATA_DIR" --split test \
  --method deebert --method pabee --no-timing --out benchmarks/results/elue-mpnet-test

python benchmarks/report_elue_mpnet.py --export
