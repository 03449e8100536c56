"""What an early-exit point does to the predictions, beyond its metric: calibration, agreement with
the full-depth model, and what exiting gains or loses against it. Numpy only, on arrays; the one
implementation behind `eebench run` (eebench.run.evaluate fills OperatingPoint's fields) and
`eebench score` (which computes them from the stored arrays of runs that lack them).

Classification only: every quantity is in percent except NLL (nats per sample). Definitions
(docs/scoring.md has them in full):

- ECE: `N_BINS` = 15 equal-width bins of confidence over [0, 1] (a confidence of exactly 1 goes
  in the last bin); confidence = the softmax probability of the exited prediction (its max
  softmax probability, for every built-in rule); ECE = sum over bins of (bin size / N) *
  |accuracy in bin - mean confidence in bin|, i.e. weighted by bin size.
- NLL: mean over samples of -log softmax(exit logits)[label], at each sample's own exit.
- consistency: share of samples whose exited prediction equals the full-depth prediction.
- exit_gain / exit_loss (per point): share of samples the exited prediction gets right where the
  full-depth prediction is wrong / wrong where the full-depth one is right. The point's accuracy
  minus the full-depth accuracy is exactly exit_gain - exit_loss.
- overthinking / underthinking (per run, whatever the rule): share of samples that some exit
  before the last gets right and the last gets wrong / that some earlier exit gets wrong and the
  last gets right. Overthinking bounds what an oracle exit rule could gain over full depth.
- exit accuracy (per run): accuracy of each exit on its own, every sample leaving there.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

N_BINS = 15


def log_softmax(logits: np.ndarray) -> np.ndarray:
    """log softmax over the last axis, in float64."""
    z = np.asarray(logits, dtype=np.float64)
    z = z - z.max(axis=-1, keepdims=True)
    return z - np.log(np.exp(z).sum(axis=-1, keepdims=True))


def ece(confidence: np.ndarray, correct: np.ndarray, n_bins: int = N_BINS) -> float:
    """Expected calibration error in percent: equal-width bins, weighted by bin size."""
    conf = np.asarray(confidence, dtype=np.float64)
    ok = np.asarray(correct, dtype=np.float64)
    if len(conf) == 0:
        raise ValueError("ECE of no samples")
    bins = np.minimum((conf * n_bins).astype(np.int64), n_bins - 1)
    gap = np.bincount(bins, weights=ok - conf, minlength=n_bins)  # sum(acc - conf) per bin
    return float(np.abs(gap).sum() / len(conf) * 100)  # sum_b |n_b (acc_b - conf_b)| / N


def nll(log_probs: np.ndarray, labels: np.ndarray) -> float:
    """Mean negative log-likelihood (nats) of the labels under log probabilities [N, C]."""
    lp = np.asarray(log_probs, dtype=np.float64)
    y = np.asarray(labels, dtype=np.int64)
    return float(-lp[np.arange(len(y)), y].mean())


def exited_logits(logits: np.ndarray, exit_index: np.ndarray) -> np.ndarray:
    """Each sample's logits at its own exit: logits [E, N, C], exit_index [N] (0-based) ->
    [N, C]."""
    idx = np.asarray(exit_index, dtype=np.int64)
    return np.asarray(logits)[idx, np.arange(len(idx))]


@dataclass(frozen=True)
class PointQuality:
    ece: float | None  # percent
    nll: float | None  # nats per sample
    consistency: float  # percent
    exit_gain: float | None  # percent; None without labels
    exit_loss: float | None


def point_quality(exit_logits: np.ndarray, prediction: np.ndarray, full_prediction: np.ndarray,
                  labels: np.ndarray | None, n_bins: int = N_BINS) -> PointQuality:
    """One classification point: its exited logits [N, C] and predictions [N], the full-depth
    predictions [N] and the labels [N] (None: unlabelled, only consistency)."""
    pred = np.asarray(prediction, dtype=np.int64)
    full = np.asarray(full_prediction, dtype=np.int64)
    consistency = float((pred == full).mean() * 100)
    if labels is None:
        return PointQuality(None, None, consistency, None, None)
    y = np.asarray(labels, dtype=np.int64)
    lp = log_softmax(exit_logits)
    confidence = np.exp(lp[np.arange(len(pred)), pred])
    right, full_right = pred == y, full == y
    return PointQuality(
        ece=ece(confidence, right, n_bins), nll=nll(lp, y), consistency=consistency,
        exit_gain=float((right & ~full_right).mean() * 100),
        exit_loss=float((~right & full_right).mean() * 100))


@dataclass(frozen=True)
class RunQuality:
    exit_layers: list[int]
    exit_accuracy: list[float]  # percent, one per exit
    overthinking: float  # percent
    underthinking: float  # percent


def run_quality(exit_predictions: np.ndarray, labels: np.ndarray,
                exit_layers: list[int]) -> RunQuality:
    """Per run: every exit's predictions [E, N] (ascending depth, the last = full depth)."""
    preds = np.asarray(exit_predictions, dtype=np.int64)
    y = np.asarray(labels, dtype=np.int64)
    right = preds == y[None, :]
    earlier, last = right[:-1], right[-1]
    some_right = earlier.any(axis=0) if len(earlier) else np.zeros_like(last)
    some_wrong = (~earlier).any(axis=0) if len(earlier) else np.zeros_like(last)
    return RunQuality(
        exit_layers=[int(k) for k in exit_layers],
        exit_accuracy=[float(r.mean() * 100) for r in right],
        overthinking=float((some_right & ~last).mean() * 100),
        underthinking=float((some_wrong & last).mean() * 100))


def budget_value(flops: np.ndarray, metric: np.ndarray, budget: float) -> float | None:
    """The best metric among points with FLOPs <= budget (the step Pareto front: one operating
    point, no mixing); None when even the cheapest point costs more."""
    x = np.asarray(flops, dtype=np.float64)
    y = np.asarray(metric, dtype=np.float64)
    ok = x <= budget * (1 + 1e-9)
    return float(y[ok].max()) if ok.any() else None


# ELUE's parameter buckets (parameters of the model, millions): a model belongs to the smallest
# bucket that holds it.
PARAM_BUCKETS_M = (40, 55, 70, 110)


def param_bucket(params: float) -> str:
    """'<= 40M', ..., '<= 110M', or '> 110M'."""
    for b in PARAM_BUCKETS_M:
        if params <= b * 1e6:
            return f"<= {b}M"
    return f"> {PARAM_BUCKETS_M[-1]}M"
