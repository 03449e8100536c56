#!/usr/bin/env bash
# The GPU suite: every check and figure that needs CUDA, one step after another, each with a
# header, its wall time, its output under --out and a line in --out/summary.txt.
#
#   bash benchmarks/gpu.sh [--device cuda|cpu] [--data-dir DIR] [--out DIR]
#
# Steps (docs/benchmarks.md, "The GPU suite"):
#   setup           the environment (env.json); on cpu also a tiny random backbone
#   cuda_tests      the tests that need CUDA (pytest -m cuda)
#   timing          eebench's timer (CUDA events) against the synchronised wall clock
#   sweep_vs_rerun  the one-pass exit sweep against re-running bs 1 per threshold
#   dynamic_speedup real dynamic inference, wall-time vs FLOPs speed-up, at bs 1 and 32
#   serve_replay    a short serving replay (DeeBERT and PABEE, two loads, three schedulers)
#   train_step      a training step in fp32 and in the precision `auto` picks (bf16 on CUDA)
#   cuda_graphs     CUDA graphs against eager for the bs-1 per-layer path (CUDA only)
#   decoder         the decoder track: SmolLM2-135M on humaneval-gen, every method, real decoding
#                   checked against the simulation, timed beside transformers' assistant_early_exit
#
# --device cuda (default) runs the figures' sizes: MiniLM-L6 fine-tuned on 2,000 SST-2 examples,
# the whole dev set; under ten minutes on one GPU; outputs under benchmarks/results/gpu/.
# --device cpu is the smoke test CI runs: a tiny random backbone (4 layers, hidden 32, the real
# MiniLM tokenizer), a few dozen samples, one repeat; its figures mean nothing. Outputs go to a
# temporary directory unless --out says otherwise. A step that prints a line "skipped: ..." and
# exits 0 is recorded as skipped (on cpu: the CUDA tests and the CUDA graphs). Every step runs;
# the script fails (exit 1) if any step failed.
set -euo pipefail

usage() { sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; }

DEVICE=cuda
DATA_DIR=${EEBENCH_DATA_DIR:-}
OUT=
while [ $# -gt 0 ]; do
  case $1 in
    --device) DEVICE=${2:?--device needs a value}; shift 2 ;;
    --data-dir) DATA_DIR=${2:?--data-dir needs a value}; shift 2 ;;
    --out) OUT=${2:?--out needs a value}; shift 2 ;;
    -h|--help) usage; exit 0 ;;
    *) echo "gpu.sh: unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
done
case $DEVICE in
  cuda|cpu) ;;
  *) echo "gpu.sh: --device must be cuda or cpu, not '$DEVICE'" >&2; exit 2 ;;
esac

REPO=$(cd "$(dirname "$0")/.." && pwd)
DATA_DIR=$(realpath -m "${DATA_DIR:-$REPO/../shared/data}")
if [ ! -d "$DATA_DIR" ]; then
  echo "gpu.sh: no data directory at $DATA_DIR (--data-dir or EEBENCH_DATA_DIR)" >&2
  exit 2
fi
if [ -z "$OUT" ]; then
  if [ "$DEVICE" = cpu ]; then OUT=$(mktemp -d -t eebench-gpu-suite.XXXXXX)
  else OUT=$REPO/benchmarks/results/gpu; fi
fi
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
PY=${PYTHON:-python}
export EEBENCH_DATA_DIR=$DATA_DIR
export PYTHONPATH=$REPO/benchmarks${PYTHONPATH:+:$PYTHONPATH}
cd "$REPO"

if [ "$DEVICE" = cpu ]; then
  # Tiny sizes: the smoke test takes well under two minutes on two loaded cores.
  export OMP_NUM_THREADS=${OMP_NUM_THREADS:-1}
  MODEL=$OUT/tiny-backbone
  CKPT=$OUT/checkpoints
  COMMON=(--model "$MODEL" --data-dir "$DATA_DIR" --checkpoints "$CKPT" --device cpu --threads 1
          --max-train-samples 64 --max-seq-length 32 --repeats 1)
  TIMING=(--model "$MODEL" --threads 1 --seq-length 32 --iters 10 --warmup 2)
  SWEEP=(--eval-samples 48 --thresholds 5)
  DYNAMIC=(--eval-samples 64 --time-samples 32 --points 1,2)
  SERVE_TRAIN=(--model "$MODEL" --method deebert --method pabee --task sst2 --max-train-samples 64
               --epochs 1 --max-seq-length 32 --max-eval-samples 48 --precision fp32 --no-timing
               --checkpoints "$CKPT")
  SERVE=(--requests 32 --max-batch 8 --threads 1)
  TRAIN=(--model "$MODEL" --threads 1 --settings fp32,auto --batches random --steps 2 --warmup 1
         --batch-size 8)
  GRAPHS=(--model "$MODEL")
  DECODER_MODEL=$OUT/tiny-decoder
  DECODER=(--model "$DECODER_MODEL" --exits 1,2,3 --samples 2 --new-tokens 8 --timing
           --timing-prompts 1 --timing-repeats 1)
else
  # The figures' sizes: what docs/benchmarks.md reports for the CPU, now on the GPU.
  MODEL=minilm-l6
  COMMON=(--data-dir "$DATA_DIR" --device cuda)
  TIMING=()
  SWEEP=()
  DYNAMIC=()
  SERVE_TRAIN=(--config benchmarks/serve_replay.toml)  # 2,000 examples, 2 epochs, fp32
  SERVE=(--requests 400 --max-batch 32)
  TRAIN=(--settings loop,fp32,auto)
  GRAPHS=()
  DECODER=(--model smollm2-135m --exits 6,12,18,24 --samples 8 --new-tokens 32 --timing)
fi

SUMMARY=$OUT/summary.txt
STEPS=(setup cuda_tests timing sweep_vs_rerun dynamic_speedup serve_replay train_step cuda_graphs
       decoder)
N=0
FAILED=()
now_ms() { echo $(($(date +%s%N) / 1000000)); }
SUITE_T0=$(now_ms)
{
  echo "# benchmarks/gpu.sh --device $DEVICE --data-dir $DATA_DIR --out $OUT"
  echo "# started $(date -u +%Y-%m-%dT%H:%M:%SZ) on $(hostname); git $(git rev-parse --short HEAD 2>/dev/null || echo '?')"
  echo "# step status seconds"
} >"$SUMMARY"

# step NAME COMMAND...: run it (its own errexit on), its output to the terminal and NAME.log,
# then record ok / skipped / failed and its wall time.
step() {
  local name=$1 t0 ms rc status
  shift
  N=$((N + 1))
  echo
  echo "==> [$N/${#STEPS[@]}] $name"
  t0=$(now_ms)
  set +e
  (set -e; "$@") 2>&1 | tee "$OUT/$name.log"
  rc=${PIPESTATUS[0]}
  set -e
  ms=$(($(now_ms) - t0))
  if [ "$rc" -ne 0 ]; then
    status=failed
    FAILED+=("$name")
  elif grep -q '^skipped: ' "$OUT/$name.log"; then
    status=skipped
  else
    status=ok
  fi
  printf '%-16s %-8s %d.%d\n' "$name" "$status" $((ms / 1000)) $((ms % 1000 / 100)) >>"$SUMMARY"
  printf '<== %s: %s in %d.%d s%s\n' "$name" "$status" $((ms / 1000)) $((ms % 1000 / 100)) \
    "$([ "$rc" -ne 0 ] && echo " (exit $rc)")"
}

setup() {
  if [ "$DEVICE" = cpu ]; then
    "$PY" benchmarks/gpu_tiny.py "$MODEL"
  fi
  "$PY" - "$OUT/env.json" "$DEVICE" <<'EOF'
import json, sys
import torch
from _common import hardware
from eebench.measure.env import environment
json.dump(environment(), open(sys.argv[1], "w"), indent=1, default=str)
print(f"hardware: {hardware()}")
if sys.argv[2] == "cuda" and not torch.cuda.is_available():
    sys.exit("--device cuda, but torch sees no CUDA device (--device cpu runs the smoke test)")
EOF
}

cuda_tests() {
  local out rc=0
  # the tests marked `cuda` (pyproject.toml's markers): skipped without a GPU
  out=$("$PY" -m pytest -m cuda tests -rs -q -p no:cacheprovider \
    --junitxml "$OUT/cuda_tests.xml" 2>&1) || rc=$?
  echo "$out"
  [ "$rc" -eq 0 ] || return "$rc"
  if ! echo "$out" | tail -n 1 | grep -q ' passed'; then
    echo "skipped: no CUDA test ran (no GPU here)"
  fi
}

serve_replay() {
  local runs=$OUT/serve_replay/runs method summary
  "$PY" -m eebench run "${SERVE_TRAIN[@]}" --data-dir "$DATA_DIR" --out "$runs"
  for method in deebert pabee; do
    summary=$(find "$runs" -path "*/$method/sst2/*" -name summary.json -print -quit)
    if [ -z "$summary" ]; then
      echo "no finished $method run under $runs" >&2
      return 1
    fi
    # two loads: half the full model's measured capacity, and all of it
    "$PY" -m eebench serve-replay "$(dirname "$summary")" --data-dir "$DATA_DIR" \
      --device "$DEVICE" --arrivals poisson --load 0.5,1.0 "${SERVE[@]}" --seed 0 \
      --out "$OUT/serve_replay/replay-$method"
  done
  "$PY" benchmarks/serve_replay.py "$OUT/serve_replay"
}

decoder() {
  if [ "$DEVICE" = cpu ]; then  # a tiny random Llama with a byte tokenizer, written offline
    "$PY" -c 'import sys; from eebench.models.decoders import tiny_decoder_dir; tiny_decoder_dir(sys.argv[1])' "$DECODER_MODEL"
  fi
  "$PY" -m eebench decode "${DECODER[@]}" --task humaneval-gen --device "$DEVICE" \
    --data-dir "$DATA_DIR" --out "$OUT/decoder"
  "$PY" -m eebench decode "${DECODER[@]}" --task humaneval-gen --device "$DEVICE" \
    --data-dir "$DATA_DIR" --out "$OUT/decoder" --json >"$OUT/decoder.json"
}

step setup setup
if [ ${#FAILED[@]} -ne 0 ]; then  # nothing else can run
  cat "$SUMMARY"
  exit 1
fi
step cuda_tests cuda_tests
step timing "$PY" benchmarks/gpu_timing.py --device "$DEVICE" "${TIMING[@]}" \
  --json "$OUT/timing.json"
step sweep_vs_rerun "$PY" benchmarks/sweep_vs_rerun.py "${COMMON[@]}" "${SWEEP[@]}"
step dynamic_speedup "$PY" benchmarks/dynamic_speedup.py "${COMMON[@]}" "${DYNAMIC[@]}" \
  --batch-size 32
step serve_replay serve_replay
step train_step "$PY" benchmarks/train_step.py --data-dir "$DATA_DIR" --device "$DEVICE" \
  "${TRAIN[@]}"
step cuda_graphs "$PY" benchmarks/gpu_cuda_graphs.py --device "$DEVICE" "${GRAPHS[@]}" \
  --json "$OUT/cuda_graphs.json"
step decoder decoder

total=$(($(now_ms) - SUITE_T0))
printf '%-16s %-8s %d.%d\n' total "$([ ${#FAILED[@]} -eq 0 ] && echo ok || echo failed)" \
  $((total / 1000)) $((total % 1000 / 100)) >>"$SUMMARY"
echo
cat "$SUMMARY"
echo "outputs: $OUT"
if [ ${#FAILED[@]} -ne 0 ]; then
  echo "gpu.sh: failed: ${FAILED[*]}" >&2
  exit 1
fi
