#!/usr/bin/env bash
# Peers in one run: the authors' own DeeBERT and PABEE evaluation loops side by side with
# eebench's one-pass simulation and its real dynamic inference, on the same MiniLM-L6 models
# (GLUE SST-2, [CLS] heads), on one CPU thread.
#   bash benchmarks/peers.sh [DATA_DIR]
# 1. Trains the two models (benchmarks/peers.toml: 2,000 examples, 2 epochs; about 6 minutes on
#    one core), or reuses them: a finished run directory is skipped, and its checkpoint under
#    checkpoints/ is what the script loads.
# 2. Clones the peers' code at the commits benchmarks/_peers.py records into a scratch folder
#    outside the repository (PEERS_SCRATCH, default ../scratch/peers; never committed), unless a
#    copy is there. PEERS_GIT_BASE (default https://github.com) is where the repositories are
#    cloned from.
# 3. Runs benchmarks/peers.py: parity of every exit's logits, then the authors' loops, eebench's
#    dynamic inference and its one pass, timed side by side (three repeats, about 25 minutes on
#    one core of the 2-core machine). Writes peers.json and table.md under
#    benchmarks/results/peers-minilm/.
set -euo pipefail
cd "$(dirname "$0")/.."
DATA_DIR=${1:-${EEBENCH_DATA_DIR:-../shared/data}}
SCRATCH=${PEERS_SCRATCH:-../scratch/peers}
GIT_BASE=${PEERS_GIT_BASE:-https://github.com}
export OMP_NUM_THREADS=1

eebench run --config benchmarks/peers.toml --data-dir "$DATA_DIR"

mkdir -p "$SCRATCH"
python benchmarks/peers.py --peers | while read -r repo commit; do
  dir="$SCRATCH/${repo#*/}@$commit"
  if [ ! -d "$dir" ]; then
    git clone --quiet "$GIT_BASE/$repo" "$dir"
    git -C "$dir" checkout --quiet "$commit"
  fi
done

python benchmarks/peers.py --data-dir "$DATA_DIR" --scratch "$SCRATCH"
