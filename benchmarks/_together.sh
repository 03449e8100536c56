# Sourced by the benchmark scripts: `together ARGS...` starts WORKERS copies of
# `eebench run --config "$CONFIG" --data-dir "$DATA_DIR" ARGS...`, one torch thread each, and
# waits for them; they share the grid's cells (a finished cell is skipped, one being run by
# another process is left to it). With STOP_BY set (a script's third argument: HH:MM, a date
# and time, or 2h30m from now), no worker starts a cell whose estimate would end after it; it is
# fixed here once, so every phase of a script stops by the same time.
if [[ -n "${STOP_BY:-}" ]]; then
  STOP_BY=$(python -c 'import sys; from datetime import datetime
from eebench.cli.backends import parse_stop_by
print(datetime.fromtimestamp(parse_stop_by(sys.argv[1])).isoformat(timespec="seconds"))' "$STOP_BY")
fi
# SIGTERM or Ctrl-C to the script reaches every worker as SIGTERM: each saves its training step
# and lets go of its cells (a background job of a script ignores Ctrl-C by itself), and the
# script ends with 143 once they have.
together() {
  local pids=()
  trap 'kill -TERM "${pids[@]}" 2>/dev/null; wait; exit 143' TERM INT
  for _ in $(seq "$WORKERS"); do
    OMP_NUM_THREADS=1 eebench run --config "$CONFIG" --data-dir "$DATA_DIR" \
      ${STOP_BY:+--stop-by "$STOP_BY"} "$@" &
    pids+=("$!")
    sleep 5  # the first worker claims its cell; the next one takes the next
  done
  wait
  trap - TERM INT
}
