#!/usr/bin/env bash
# Why PABEE's shallow exits stay weak: PABEE retrained on GLUE SST-2 and SciTail, three seeds,
# the benchmark's budget (benchmarks/elue-minilm.toml), once with equal loss weights and once
# with a pooler per exit; compared with the benchmark's own PABEE runs of the same seeds.
#   bash benchmarks/pabee_ablation.sh [DATA_DIR]
# Resumable like the benchmark; two workers, one thread each, about 20 minutes on two cores.
set -euo pipefail
cd "$(dirname "$0")/.."
DATA_DIR=${1:-${EEBENCH_DATA_DIR:-../shared/data}}
VARIANTS=(loss_weights=equal shared_pooler=false)

grid() {  # one worker: every variant, starting with the one named first
  for v in "$@"; do
    OMP_NUM_THREADS=1 eebench run --config benchmarks/elue-minilm.toml --data-dir "$DATA_DIR" \
      --method pabee --task sst2 --task elue-scitail --seed 1 --seed 2 --seed 3 --setting "$v" \
      --out benchmarks/results/pabee-ablation
  done
}
grid "${VARIANTS[0]}" "${VARIANTS[1]}" &
sleep 5
grid "${VARIANTS[1]}" "${VARIANTS[0]}" &
wait

python benchmarks/report_pabee_ablation.py
