"""What a point's scores can be, given how many samples its run scored.

A submission carries no per-sample predictions, only their sha256 (RunEntry.predictions_sha256),
so `eebench validate` cannot recompute a metric from them as `eebench submit` does
(eebench.score.recompute). What the file does carry still ties the numbers to the predictions
behind them: a run of n samples gets k of them right for a whole k, so its accuracy is 100·k/n;
consistency, exit gain and exit loss are shares of the samples too; MRPC's and QQP's F1 comes
from the same confusion matrix as their accuracy (with e = n − k errors, F1 = 2·TP / (2·TP + e)
for a whole TP ≤ k); a combined metric (`acc_and_f1`, `pearson_and_spearman`) is the mean of
its parts. A point claiming 99 % accuracy over 8 samples (7.92 of them right) was not computed
from any predictions, and is refused. A fabricated point that keeps to whole counts passes: only
the runs themselves can refute it.
"""

from __future__ import annotations

import math
from typing import Any

from eebench.errors import DataError

SHARES = ("accuracy",)  # metrics that are a share of the run's samples (sequence tasks)
QUALITY_SHARES = ("consistency", "exit_gain", "exit_loss")


def is_whole(x: float) -> bool:
    """Whether `x` is a whole number, to the rounding of the percentages it came from."""
    return abs(x - round(x)) <= 1e-6 * max(1.0, abs(x))


def check_counts(p, where: str, n_samples: int) -> None:
    """Refuse a point (eebench.submit.schema.OperatingPoint) whose scores no predictions over
    `n_samples` samples give: a share that is not a whole number of samples, an F1 that the
    accuracy's errors cannot give, a combined metric that is not the mean of its parts."""
    shares = {name: p.metrics[name] for name in SHARES if name in p.metrics}
    shares.update({name: getattr(p, name) for name in QUALITY_SHARES
                   if getattr(p, name) is not None})
    for name, value in shares.items():
        if not is_whole(value * n_samples / 100):
            raise DataError(f"{where}: {name} {value:.6g} is no whole number of its "
                            f"{n_samples} samples ({value * n_samples / 100:.6g})")
    if "accuracy" in p.metrics and "f1" in p.metrics:
        _check_f1(p.metrics["accuracy"], p.metrics["f1"], where, n_samples)
    from eebench.tasks.metrics import COMBINED  # acc_and_f1: the mean of accuracy and f1

    for name, (a, b) in COMBINED.items():
        if {name, a, b} <= set(p.metrics):
            mean = (p.metrics[a] + p.metrics[b]) / 2
            if not math.isclose(p.metrics[name], mean, rel_tol=1e-9, abs_tol=1e-9):
                raise DataError(f"{where}: {name} {p.metrics[name]:.6g} is not the mean of "
                                f"its {a} and {b} ({mean:.6g})")


def _check_f1(accuracy: float, f1: float, where: str, n: int) -> None:
    """Binary F1 = 2·TP / (2·TP + FP + FN), where FP + FN are the accuracy's errors: a whole TP,
    at least 1 (else F1 is 0) and at most the samples right."""
    right = round(accuracy * n / 100)
    errors = n - right
    f = f1 / 100
    if f == 0:  # no true positive: any number of errors
        return
    if f >= 1:
        ok = errors == 0
    else:
        tp = f * errors / (2 * (1 - f))
        ok = is_whole(tp) and 1 <= round(tp) <= right
    if not ok:
        raise DataError(f"{where}: f1 {f1:.6g} is not what {errors} errors in {n} samples "
                        f"give (accuracy {accuracy:.6g})")


def check_task_metrics(task: str, main_metric: str, metrics: dict, spec: Any) -> None:
    """A task entry's main metric is its task's own, and every metric it reports is one of the
    task's (`spec`: the task's TaskSpec); DataError naming the first that is not."""
    if main_metric != spec.main_metric:
        raise DataError(f"tasks.{task}: main_metric {main_metric!r} is not the task's "
                        f"({spec.main_metric!r})")
    unknown = [m for m in metrics if m not in spec.metrics]
    if unknown:
        raise DataError(f"tasks.{task}: metric {unknown[0]!r} is not one of the task's "
                        f"{list(spec.metrics)}")
