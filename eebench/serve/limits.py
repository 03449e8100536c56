"""What one replay may ask for. A replay runs in real time and holds every request in memory, so
each number a user gives is bounded where a mistake would otherwise wait for days or allocate
terabytes (a trace in milliseconds read as seconds, `--rates 1e-9`, `--requests 10**12`). Kept
apart from the replay itself (torch), so that the command's options can name them.
"""

from __future__ import annotations

MAX_REQUESTS = 1_000_000  # per replay (a trace: its timestamps); its arrays stay a few MB
MAX_TRACE_BYTES = 64 << 20  # a million timestamps of up to 60 characters and a comment
MAX_RATES = 64  # rates (or loads) per replay, each replayed by every scheduler
MAX_RATE = 1e6  # requests per second: far above any model's capacity
MAX_LOAD = 100.0  # times the full model's capacity
MAX_BURST = 10_000.0  # requests per burst, on average
MAX_BATCH = 4096  # samples in flight
MAX_THREADS = 1024  # torch CPU threads
MAX_TARGET_MS = 3_600_000.0  # an hour
# A replay longer than this is a mistaken rate or unit, not a measurement anyone waits for.
MAX_REPLAY_S = 6 * 3600.0
