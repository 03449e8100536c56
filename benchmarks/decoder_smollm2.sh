#!/usr/bin/env bash
# The decoder benchmark (docs/results.md, "Decoder LLMs"): SmolLM2-135M-Instruct on both decoder
# tasks, every registered decoder method, exits after layers 6, 12, 18 and 24 of its 30.
#   bash benchmarks/decoder_smollm2.sh [DATA_DIR]
# Resumable: a finished run is returned as it is, and exits EE-Tuning trained are kept in the
# tuning folder and read again (docs/decoders.md). One torch thread, on the CPU unless CUDA is
# there; about an hour and a half on one core of a 2-core AMD EPYC.
#   1. the logit lens (untrained exits: the static truncation curve, self-speculation, CALM):
#      humaneval-gen (8 prompts x 32 new tokens, every self-speculation point decoded for real
#      and checked, wall time beside transformers' assistant_early_exit) and imdb-lm (64 reviews
#      x 256 tokens, teacher-forced);
#   2. EE-Tuning: adapter exits (rank 16) trained on the frozen model for 200 steps on imdb-lm's
#      training reviews (32 windows of 256 tokens, KL to the full model), then both tasks again
#      (humaneval-gen untimed: every point still decoded for real and checked).
set -euo pipefail
cd "$(dirname "$0")/.."
DATA_DIR=${1:-${EEBENCH_DATA_DIR:-../shared/data}}
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-1}
OUT=benchmarks/results/decoder-smollm2
COMMON=(--model smollm2-135m --exits 6,12,18,24 --data-dir "$DATA_DIR" --out "$OUT")
GEN=(--task humaneval-gen --samples 8 --new-tokens 32 --spec-checks all)
LM=(--task imdb-lm --samples 64 --max-tokens 256)
TUNED=(--head adapter --rank 16 --tune-steps 200)

eebench decode "${COMMON[@]}" "${GEN[@]}" --timing
eebench decode "${COMMON[@]}" "${LM[@]}"
eebench decode "${COMMON[@]}" "${TUNED[@]}" "${LM[@]}"
eebench decode "${COMMON[@]}" "${TUNED[@]}" "${GEN[@]}"

# 3. the leaderboard's decoder submissions, one per set of exits (a submission holds one):
#    leaderboard/submissions/smollm2-135m-{lens,ee-tuning}.json
run_dir() { eebench decode "${COMMON[@]}" "$@" --dry-run --json | python -c \
  'import json, sys; print(json.load(sys.stdin)["path"])'; }
eebench submit "$(run_dir "${GEN[@]}" --timing)" "$(run_dir "${LM[@]}")" \
  --name "SmolLM2-135M, logit-lens exits" --out leaderboard/submissions/smollm2-135m-lens.json
eebench submit "$(run_dir "${TUNED[@]}" "${GEN[@]}")" "$(run_dir "${TUNED[@]}" "${LM[@]}")" \
  --name "SmolLM2-135M, EE-Tuning exits" --out leaderboard/submissions/smollm2-135m-ee-tuning.json
