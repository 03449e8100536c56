# Sourced by the benchmark scripts: `together ARGS...` starts WORKERS copies of
# `eebench run --config "$CONFIG" --data-dir "$DATA_DIR" ARGS...`, one torch thread each, and
# waits for them; they share the grid's cells (a finished cell is skipped, one being run by
# another process is left to it).
together() {
  for _ in $(seq "$WORKERS"); do
    OMP_NUM_THREADS=1 eebench run --config "$CONFIG" --data-dir "$DATA_DIR" "$@" &
    sleep 5  # the first worker claims its cell; the next one takes the next
  done
  wait
}
