"""When requests arrive: a Poisson process, a bursty one, or a trace file of timestamps.

Every process returns the arrival times in seconds from the start of the replay, sorted, as a
float64 array. The same seed gives the same arrivals, so the schedulers of one replay see one
arrival list each rate.

- `poisson(rate, n)`: exponential gaps of mean 1/rate.
- `bursty(rate, n, burst)`: bursts whose sizes are geometric with mean `burst`, the bursts a
  Poisson process at rate/burst; a burst's requests arrive at the same instant. The mean rate is
  `rate`, but a queue sees `burst` requests at once.
- `read_trace(path)`: one timestamp a line (seconds; blank lines and `#` comments skipped),
  shifted to start at 0; a regular file of bounded size and at most MAX_REQUESTS timestamps
  (eebench.serve.limits; a FIFO or a device is refused unread). `rescale(times, rate)`
  stretches a trace to a mean rate, keeping its shape.
- `span(n, rate)`: how long `n` arrivals at `rate` take, what a replay waits for in real time.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np

from eebench.errors import DataError, UsageError
from eebench.io import read_text
from eebench.serve.limits import MAX_BURST, MAX_REQUESTS, MAX_TRACE_BYTES

ARRIVALS = ("poisson", "bursty", "trace")
DEFAULT_BURST = 8.0  # requests per burst, on average
TRACE_HINT = "a trace holds one arrival time in seconds a line"


def _check(rate: float, n: int) -> None:
    if not (math.isfinite(rate) and rate > 0):
        raise UsageError(f"an arrival rate must be a positive number of requests per second, "
                         f"got {rate}")
    if not 1 <= n <= MAX_REQUESTS:
        raise UsageError(f"a replay sends 1 to {MAX_REQUESTS:,} requests, got {n}")


def poisson(rate: float, n: int, seed: int = 0) -> np.ndarray:
    """`n` arrivals of a Poisson process at `rate` requests per second, the first at time 0."""
    _check(rate, n)
    gaps = np.random.default_rng(seed).exponential(1.0 / rate, size=n)
    gaps[0] = 0.0
    return np.cumsum(gaps)


def bursty(rate: float, n: int, burst: float = DEFAULT_BURST, seed: int = 0) -> np.ndarray:
    """`n` arrivals in bursts of geometric size (mean `burst`) at rate/burst bursts a second."""
    _check(rate, n)
    if not (math.isfinite(burst) and 1 <= burst <= MAX_BURST):
        raise UsageError(f"a mean burst size must be 1 to {MAX_BURST:g}, got {burst}")
    rng = np.random.default_rng(seed)
    # at least n requests in n bursts; none larger than n, so the repeat below stays n long
    sizes = np.minimum(rng.geometric(1.0 / burst, size=n), n)
    sizes = sizes[: int(np.searchsorted(np.cumsum(sizes), n)) + 1]
    starts = np.cumsum(rng.exponential(burst / rate, size=len(sizes)))
    starts -= starts[0]
    return np.repeat(starts, sizes)[:n]


def read_trace(path: Path) -> np.ndarray:
    """Arrival timestamps from a text file, one a line, shifted to start at 0; unsorted,
    negative-gapped or non-numeric lines are refused in one line naming the file and row."""
    path = Path(path)
    text = read_text(path, TRACE_HINT, MAX_TRACE_BYTES)  # a FIFO or /dev/zero: refused unread
    times: list[float] = []
    for row, line in enumerate(text.splitlines(), 1):
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        try:
            t = float(line.split(",")[0])
        except ValueError:
            raise DataError(f"{path}:{row}: not a timestamp: {line[:40]!r}",
                            hint=TRACE_HINT) from None
        if not math.isfinite(t) or (times and t < times[-1]):
            raise DataError(f"{path}:{row}: timestamps must be finite and in order ({t})")
        if len(times) == MAX_REQUESTS:
            raise DataError(f"{path}:{row}: more than {MAX_REQUESTS:,} timestamps, the most "
                            "requests a replay sends", hint="replay a part of the trace")
        times.append(t)
    if not times:
        raise DataError(f"{path}: no timestamps in the trace")
    out = np.asarray(times, dtype=np.float64)
    return out - out[0]


def rescale(times: np.ndarray, rate: float) -> np.ndarray:
    """A trace stretched (or squeezed) to a mean rate of `rate` requests per second."""
    _check(rate, len(times))
    span = float(times[-1] - times[0])
    if len(times) < 2 or span <= 0:
        return times.copy()  # all at once: every rate is the same trace
    return (times - times[0]) * ((len(times) - 1) / span / rate)


def mean_rate(times: np.ndarray) -> float:
    """Requests per second over the span of the arrivals (inf for one instant)."""
    span = float(times[-1] - times[0]) if len(times) > 1 else 0.0
    return (len(times) - 1) / span if span > 0 else math.inf


def span(n: int, rate: float) -> float:
    """Seconds from the first of `n` arrivals at `rate` to the last: exactly, for a trace rescaled
    to `rate` (or at its own mean rate); on average, for a Poisson or bursty process."""
    return (n - 1) / rate if n > 1 else 0.0
