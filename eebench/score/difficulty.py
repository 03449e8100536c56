"""Which inputs exit early: a run's per-sample arrays read back, and how a sample's exit layer
goes with its first exit's confidence, its length and how much its exits agree.

At one operating point of a run (by default the one whose FLOPs are nearest half the full
model's), Spearman's rank correlation (scipy.stats.spearmanr, with its two-sided p-value) between
a sample's exit layer and

- `first_exit_confidence`: the first exit's max softmax probability,
- `length`: the sample's real token length,
- `agreement`: the share of the model's exits whose prediction is the last exit's (1: all agree),
- `correct`: whether the exited prediction is right (0/1; labelled splits only),

and the easiest and hardest samples: earliest exit with the highest first-exit confidence, and
latest exit with the lowest. Numpy and scipy, no torch: everything is read from the run's
predictions.safetensors.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from eebench.errors import DataError, UsageError
from eebench.io import read_text
from eebench.run.artifacts import (
    IDS_FILE,
    PREDICTIONS_FILE,
    OperatingPoint,
    RunFiles,
    VariantRecord,
    verify_run,
)
from eebench.tasks.catalog import get_task


@dataclass
class Samples:
    """A finished run and its per-sample arrays; row p of the [P, N] arrays is point p."""

    run: RunFiles
    ids: list[str]
    exit_layer: np.ndarray  # [P, N] 1-based
    prediction: np.ndarray  # [P, N]
    labels: np.ndarray | None  # [N]
    lengths: np.ndarray  # [N]
    logits: dict[str, np.ndarray]  # logits key -> [E, N, C]

    @property
    def points(self) -> list[OperatingPoint]:
        return self.run.points

    def variant_logits(self, p: int) -> tuple[VariantRecord, np.ndarray]:
        v = self.run.summary.variant(self.points[p].variant)
        return v, self.logits[v.logits_key]

    def full_prediction(self) -> np.ndarray:
        """The full-depth prediction of every sample: the last exit of the deepest model (a
        joint method's one model; static's k = all layers)."""
        deepest = max(self.run.summary.variants, key=lambda v: v.exit_layers[-1])
        return self.logits[deepest.logits_key][-1].argmax(-1)


def load_samples(run_dir: Path) -> Samples:
    """A finished run's arrays, checked against its points (one line per problem)."""
    from safetensors.numpy import load_file

    run_dir = Path(run_dir)
    run = verify_run(run_dir)  # finished, its files as its summary recorded them
    arrays = load_file(str(run_dir / PREDICTIONS_FILE))
    ids = read_text(run_dir / IDS_FILE).splitlines()
    for key in ("exit_layer", "prediction", "lengths"):
        if key not in arrays:
            raise DataError(f"{run_dir / PREDICTIONS_FILE}: no {key!r} array")
    shape = (len(run.points), run.summary.n_samples)
    if arrays["exit_layer"].shape != shape or len(ids) != shape[1]:
        raise DataError(f"{run_dir}: arrays {arrays['exit_layer'].shape} and {len(ids)} ids do "
                        f"not match {shape[0]} points of {shape[1]} samples")
    logits = {v.logits_key: arrays[v.logits_key] for v in run.summary.variants}
    return Samples(run, ids, arrays["exit_layer"], arrays["prediction"], arrays.get("labels"),
                   arrays["lengths"], logits)


def default_point(points: list[OperatingPoint]) -> int:
    """The point whose mean FLOPs are nearest half the full model's (the most expensive point
    of the run: every default sweep has one that runs every layer); the cheaper one on a tie."""
    full = max(p.mean_flops for p in points)
    return min(range(len(points)),
               key=lambda i: (abs(points[i].mean_flops - full / 2), points[i].mean_flops))


def point_index(points: list[OperatingPoint], value: float | None) -> int:
    if value is None:
        return default_point(points)
    for i, p in enumerate(points):
        if math.isclose(p.sweep_value, value, rel_tol=1e-9, abs_tol=1e-12):
            return i
    values = ", ".join(f"{p.sweep_value:g}" for p in points)
    raise UsageError(f"--point {value:g}: no such sweep value in the run",
                     hint=f"choose from: {values}")


def softmax(logits: np.ndarray) -> np.ndarray:
    z = logits.astype(np.float64)
    z = np.exp(z - z.max(-1, keepdims=True))
    return z / z.sum(-1, keepdims=True)


@dataclass
class Correlation:
    quantity: str
    rho: float | None  # None where either side is constant
    p_value: float | None
    n: int


def spearman(x: np.ndarray, y: np.ndarray, quantity: str) -> Correlation:
    from scipy.stats import spearmanr

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # a constant input: rho is undefined, reported as None
        res = spearmanr(x, y)
    rho, p = float(res.statistic), float(res.pvalue)
    ok = math.isfinite(rho)
    return Correlation(quantity, rho if ok else None, p if ok else None, int(len(x)))


@dataclass
class Difficulty:
    run: str
    method: str
    task: str
    split: str
    seed: int
    sweep_param: str
    sweep_value: float
    default_point: bool  # chosen as the point nearest half the full model's FLOPs
    mean_mflops: float
    full_mflops: float
    avg_exit_layer: float
    correlations: list[Correlation]
    easiest: list[dict]
    hardest: list[dict]
    texts: str = "not loaded"  # "loaded", or why not
    extra: dict = field(default_factory=dict)


def analyze(samples: Samples, value: float | None = None, top: int = 5) -> Difficulty:
    points = samples.points
    spec = get_task(samples.run.config.task)
    if spec.is_regression:
        raise UsageError(f"{spec.name} is a regression task: confidence and agreement need "
                         "class probabilities")
    p = point_index(points, value)
    point = points[p]
    variant, logits = samples.variant_logits(p)
    if logits.shape[0] < 2:
        raise UsageError(f"{samples.run.config.label}: its {variant.name} model has one exit; "
                         "analyze needs a model with several (a joint method: deebert, pabee)")
    layers = samples.exit_layer[p].astype(np.int64)
    probs = softmax(logits[0])
    confidence = probs.max(-1)
    votes = logits.argmax(-1)  # [E, N]
    agreement = (votes == votes[-1]).mean(0)
    corr = [spearman(layers, confidence, "first_exit_confidence"),
            spearman(layers, samples.lengths, "length"),
            spearman(layers, agreement, "agreement")]
    if samples.labels is not None:
        correct = (samples.prediction[p] == samples.labels).astype(np.int64)
        corr.append(spearman(layers, correct, "correct"))

    def item(i: int) -> dict:
        out = {"id": samples.ids[i], "exit_layer": int(layers[i]),
               "first_exit_confidence": round(float(confidence[i]), 4),
               "agreement": round(float(agreement[i]), 4), "length": int(samples.lengths[i]),
               "prediction": spec.labels[int(samples.prediction[p, i])]}
        if samples.labels is not None:
            out["label"] = spec.labels[int(samples.labels[i])]
        return out

    top = max(0, min(top, len(layers)))
    easiest = np.lexsort((-confidence, layers))[:top]
    hardest = np.lexsort((confidence, -layers))[:top]
    return Difficulty(
        run=str(samples.run.path), method=samples.run.config.label, task=spec.name,
        split=point.split, seed=point.seed, sweep_param=point.sweep_param,
        sweep_value=point.sweep_value, default_point=value is None,
        mean_mflops=point.mean_mflops, full_mflops=max(q.mean_mflops for q in points),
        avg_exit_layer=point.avg_exit_layer, correlations=corr,
        easiest=[item(int(i)) for i in easiest], hardest=[item(int(i)) for i in hardest])


def attach_texts(result: Difficulty, texts: dict[str, tuple[str, ...]]) -> None:
    """Each listed sample's text (joined with " ||| " for a pair), by id."""
    missing = 0
    for item in (*result.easiest, *result.hardest):
        t = texts.get(item["id"])
        missing += t is None
        item["text"] = None if t is None else " ||| ".join(t)
    result.texts = "loaded" if not missing else f"loaded; {missing} ids not found in the data"
