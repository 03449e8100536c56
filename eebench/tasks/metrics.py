"""GLUE/ELUE metrics in numpy: accuracy, F1, MCC, Pearson, Spearman and their means.

The single metrics return fractions in [0, 1] (correlations in [-1, 1]), like scikit-learn and
scipy, so they can be checked against them. `compute_metrics` reports every metric of a task in
percent (x100), the unit of the GLUE and ELUE leaderboards.

Degenerate inputs give 0, never NaN: an early exit that predicts one class for every sample has
MCC 0 (as in scikit-learn) and a constant regression output has correlation 0. A NaN would poison
the means and the ELUE score that average over many operating points.

Token tasks (NER: a tag per word) are scored on entities by seqeval: `eebench.tasks.seqlabel`.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from eebench.errors import EebenchError
from eebench.tasks.spec import TaskSpec


def _pair(preds, labels) -> tuple[np.ndarray, np.ndarray]:
    p, y = np.asarray(preds).reshape(-1), np.asarray(labels).reshape(-1)
    if p.shape != y.shape:
        raise EebenchError(f"got {p.size} predictions for {y.size} labels")
    if p.size == 0:
        raise EebenchError("cannot compute a metric on zero examples")
    return p, y


def accuracy(preds, labels) -> float:
    """Fraction of predictions equal to the label."""
    p, y = _pair(preds, labels)
    return float(np.mean(p == y))


def f1(preds, labels) -> float:
    """Binary F1 of the positive class 1 (MRPC, QQP); 0 when there is no positive anywhere."""
    p, y = _pair(preds, labels)
    tp = np.sum((p == 1) & (y == 1))
    fp = np.sum((p == 1) & (y != 1))
    fn = np.sum((p != 1) & (y == 1))
    denom = 2 * tp + fp + fn
    return float(2 * tp / denom) if denom else 0.0


def mcc(preds, labels) -> float:
    """Matthews correlation (multi-class form, Gorodkin 2004); 0 when it is undefined."""
    p, y = _pair(preds, labels)
    classes, codes = np.unique(np.concatenate([y, p]), return_inverse=True)
    k, n = len(classes), y.size
    cm = np.zeros((k, k), dtype=np.float64)
    np.add.at(cm, (codes[:n], codes[n:]), 1)  # rows: true class, columns: predicted class
    t, q = cm.sum(axis=1), cm.sum(axis=0)  # true and predicted counts per class
    c, s = np.trace(cm), float(n)
    cov_yp = c * s - t @ q
    cov_pp = s * s - q @ q
    cov_yy = s * s - t @ t
    if cov_pp * cov_yy == 0:
        return 0.0
    return float(cov_yp / np.sqrt(cov_pp * cov_yy))


def pearson(preds, labels) -> float:
    """Pearson correlation; 0 when either side is constant (undefined)."""
    p, y = _pair(preds, labels)
    p, y = p.astype(np.float64) - p.mean(), y.astype(np.float64) - y.mean()
    denom = np.sqrt((p @ p) * (y @ y))
    if denom == 0:
        return 0.0
    return float(np.clip((p @ y) / denom, -1.0, 1.0))


def average_ranks(values) -> np.ndarray:
    """Ranks 1..n, ties sharing their mean rank: the numbers of scipy.stats.rankdata (method
    "average", NaN propagating to every rank) without importing scipy (seconds on a slow
    machine, for a sort)."""
    x = np.asarray(values).reshape(-1)
    if np.issubdtype(x.dtype, np.floating) and np.isnan(x).any():
        return np.full(x.shape, np.nan)
    order = np.argsort(x, kind="stable")
    s = x[order]
    first = np.flatnonzero(np.r_[True, s[1:] != s[:-1]])  # where each run of ties starts
    counts = np.diff(np.r_[first, x.size])
    ranks = np.empty(x.size, dtype=np.float64)
    ranks[order] = np.repeat(first + 1 + (counts - 1) / 2, counts)
    return ranks


def spearman(preds, labels) -> float:
    """Spearman rank correlation: Pearson on average ranks (ties share a rank, as in scipy)."""
    p, y = _pair(preds, labels)
    return pearson(average_ranks(p), average_ranks(y))


SINGLE = {"accuracy": accuracy, "f1": f1, "mcc": mcc, "pearson": pearson, "spearman": spearman}
COMBINED = {"acc_and_f1": ("accuracy", "f1"), "pearson_and_spearman": ("pearson", "spearman")}
# Token tasks' metrics, over a tag id per word of each sentence (eebench.tasks.seqlabel)
TOKEN = ("entity_f1", "entity_precision", "entity_recall", "token_accuracy")


def _as_predictions(spec: TaskSpec, predictions) -> np.ndarray:
    """Label ids (classification) or scores (regression); logits of shape (n, C) are accepted."""
    p = np.asarray(predictions)
    if spec.is_regression:
        return p.reshape(-1).astype(np.float64)
    if p.ndim == 2 and p.shape[1] == spec.num_labels and spec.num_labels > 1:
        return p.argmax(axis=1)
    return p.reshape(-1)


def compute_metrics(
    spec: TaskSpec, predictions, labels: Sequence[int] | Sequence[float] | None
) -> dict[str, float]:
    """Every metric in `spec.metrics`, in percent; "acc_and_f1" and "pearson_and_spearman" are
    the means of their two parts (the GLUE convention for MRPC/QQP and STS-B)."""
    if labels is None:
        raise EebenchError(f"{spec.name}: this split has no labels to score against")
    if spec.unit == "token":  # a tag per word: entities by seqeval
        from eebench.tasks.seqlabel import token_metrics

        return token_metrics(spec, predictions, labels)
    p = _as_predictions(spec, predictions)
    y = np.asarray(labels, dtype=np.float64 if spec.is_regression else np.int64).reshape(-1)
    values: dict[str, float] = {}

    def get(name: str) -> float:
        if name not in values:
            if name in SINGLE:
                values[name] = 100.0 * SINGLE[name](p, y)
            elif name in COMBINED:
                a, b = COMBINED[name]
                values[name] = (get(a) + get(b)) / 2.0
            else:
                raise ValueError(f"{spec.name}: unknown metric {name!r}")
        return values[name]

    return {name: get(name) for name in spec.metrics}


def majority_baseline(spec: TaskSpec, labels) -> dict[str, float]:
    """Metrics of always predicting the most frequent label (ties: the lowest id), or, for
    regression, the mean score: the floor every exit of a trained model should clear."""
    if labels is None:
        raise EebenchError(f"{spec.name}: this split has no labels for a baseline")
    if spec.unit == "token":  # the most frequent tag for every word (O: no entity at all)
        tags = np.concatenate([np.asarray(s, dtype=np.int64) for s in labels] or [[0]])
        common = int(np.bincount(tags).argmax())
        return compute_metrics(spec, [[common] * len(s) for s in labels], labels)
    y = np.asarray(labels).reshape(-1)
    if y.size == 0:
        raise EebenchError("cannot compute a baseline on zero examples")
    if spec.is_regression:
        constant = float(np.mean(y.astype(np.float64)))
    else:
        values, counts = np.unique(y.astype(np.int64), return_counts=True)
        constant = int(values[np.argmax(counts)])
    return compute_metrics(spec, np.full(y.shape, constant), y)
