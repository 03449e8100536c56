"""Early exit under load: replay an arrival process over a task's samples on a trained model,
with three schedulers (the full model, batch shrinking, continuous rebatching), in real time.

arrivals.py   Poisson, bursty and trace arrivals
cohort.py     one batch walking the exits, answering each request when it exits
scheduler.py  the serving loop and its three admission policies; real and simulated clocks
report.py     latency percentiles, throughput, share within target, the decision check
replay.py     a run's point loaded (model, samples, offline decisions), every scheduler and rate
limits.py     what one replay may ask for (no torch: the command's options name these bounds)

The loop (scheduler.py, torch) is loaded on first use, so that `eebench.serve.limits` stays light.
"""

__all__ = ["SCHEDULERS", "StepClock", "WallClock", "serve"]


def __getattr__(name: str):
    if name in __all__:
        from eebench.serve import scheduler

        return getattr(scheduler, name)
    raise AttributeError(f"module 'eebench.serve' has no attribute {name!r}")
