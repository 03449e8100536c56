#!/usr/bin/env bash
# Early exit under load: the serving replay (`eebench serve-replay`) of MiniLM-L6 DeeBERT and PABEE
# on GLUE SST-2, three schedulers (the full model with dynamic batching, batch shrinking,
# continuous rebatching) at five Poisson rates, in real time on one CPU thread.
#   bash benchmarks/serve_replay.sh [DATA_DIR]
# Trains the two models first (benchmarks/serve_replay.toml: 2,000 examples, 2 epochs; about 6
# minutes on one core), or reuses them: a finished run directory is skipped, and its checkpoint
# under checkpoints/ is what the replay loads. Then 2 methods x 5 rates x 3 schedulers, 872
# requests each: about 8 minutes on one core. Writes, under benchmarks/results/serve-minilm/, the
# two run directories, replay-<method>/{serving.json,latency-vs-load.png} and table.md.
# RATES (requests per second, comma-separated) and TARGET_MS change the rates and the target.
set -euo pipefail
cd "$(dirname "$0")/.."
DATA_DIR=${1:-${EEBENCH_DATA_DIR:-../shared/data}}
OUT=benchmarks/results/serve-minilm
# Fixed rates, the same for both methods. On one thread of the 2-core benchmark machine the full
# model answers 40-95 requests per second (batched; it varies with the other core's load) and the
# early-exit points about 1.6x (PABEE) and 2.2x (DeeBERT) as many: 40 is below every capacity,
# 80 near the full model's, 120 and 160 above it, 240 above early exit's too. Each replay sends
# every dev sentence once (872 requests), in a seeded order.
RATES=${RATES:-40,80,120,160,240}
TARGET_MS=${TARGET_MS:-250}
export OMP_NUM_THREADS=1

eebench run --config benchmarks/serve_replay.toml --data-dir "$DATA_DIR"

for method in deebert pabee; do
  summary=$(find "$OUT/minilm-l6/$method/sst2" -name summary.json | head -n 1)
  if [ -z "$summary" ]; then
    echo "no finished $method run under $OUT" >&2
    exit 1
  fi
  # the default point: the sweep value whose FLOPs are nearest half the full model's
  eebench serve-replay "$(dirname "$summary")" --data-dir "$DATA_DIR" --arrivals poisson \
    --rates "$RATES" --requests 872 --max-batch 32 --target-ms "$TARGET_MS" --threads 1 \
    --seed 0 --out "$OUT/replay-$method"
done

python benchmarks/serve_replay.py "$OUT"
