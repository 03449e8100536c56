#!/usr/bin/env bash
# The whole CPU benchmark, resumable: rerun it after an interruption and it continues.
#   bash benchmarks/elue_minilm.sh [DATA_DIR] [WORKERS]
# WORKERS processes (default: the number of cores) share the grid, one thread each; each run
# directory under benchmarks/results/elue-minilm is written when its run finishes.
set -euo pipefail
cd "$(dirname "$0")/.."
DATA_DIR=${1:-${EEBENCH_DATA_DIR:-../shared/data}}
WORKERS=${2:-$(nproc)}
CONFIG=benchmarks/elue-minilm.toml
ELUE_TASKS=(elue-sst2 elue-mrpc elue-stsb elue-scitail elue-imdb)

# static, DeeBERT and PABEE on every task of the config
for _ in $(seq "$WORKERS"); do
  OMP_NUM_THREADS=1 eebench run --config "$CONFIG" --data-dir "$DATA_DIR" \
    --method static --method deebert --method pabee &
  sleep 5  # the first worker claims its run; the next one takes the next
done
wait

# the field's other methods on GLUE SST-2, ELUE MRPC and SciTail
for _ in $(seq "$WORKERS"); do
  OMP_NUM_THREADS=1 eebench run --config "$CONFIG" --data-dir "$DATA_DIR" \
    --method maxprob --method fastbert --method pcee --method elasticbert --method sweet \
    --method berxit --method cascade --task sst2 --task elue-mrpc --task elue-scitail &
  sleep 5
done
wait

# every exit rule on the DeeBERT, PABEE and ElasticBERT models of those tasks, each model's own
# rule and the others from one pass over it, into their own directory (a checkpoint is reused
# where it is still there, else the model is trained again)
for _ in $(seq "$WORKERS"); do
  OMP_NUM_THREADS=1 eebench run --config "$CONFIG" --data-dir "$DATA_DIR" \
    --method deebert --method pabee --method elasticbert \
    --rule entropy --rule maxprob --rule patience \
    --task sst2 --task elue-mrpc --task elue-scitail --out benchmarks/results/elue-minilm-rules &
  sleep 5
done
wait

# ELUE test-split predictions (labels withheld) from the seed-1 models, for export-elue.
tasks=(); for t in "${ELUE_TASKS[@]}"; do tasks+=(--task "$t"); done
OMP_NUM_THREADS=$WORKERS eebench run --config "$CONFIG" --data-dir "$DATA_DIR" --split test \
  --seed 1 --method deebert --method pabee "${tasks[@]}" --no-timing \
  --out benchmarks/results/elue-minilm-test

python benchmarks/report_elue_minilm.py --data-dir "$DATA_DIR" --export
