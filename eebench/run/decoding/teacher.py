"""imdb-lm's operating points: one teacher-forced pass over each review.

`record_teacher_forced` keeps per exit (and the last layer) and per position the argmax, the
confidence and the NLL of the review's actual next token: [exits + 1, positions] numbers, never
the vocabulary. Points: the full model; each exit k alone (the model truncated at k: its
perplexity, its top-1 agreement with the full model, k layers and a head per position); CALM
under an oracle cache at each threshold (every position exits at its first confident exit: the
exited distribution's argmax and NLL, the exit heads read and the copy into skipped layers
counted).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import torch
from torch import nn

from eebench.measure.decoder_flops import (
    copy_flops,
    layer_flops,
    lm_head_flops,
    teacher_forced_flops,
)
from eebench.models.decoder_exits import DecoderExits, num_layers
from eebench.rules.decoder_sweep import confidence
from eebench.rules.decoder_tf import TeacherForcedTrace, record_teacher_forced
from eebench.run.decoding.records import DecodeConfig, DecoderPoint, decoder_point
from eebench.tasks.catalog import get_task
from eebench.tasks.lm_metrics import compute_lm_metrics


def teacher_forced_points(model: nn.Module, exits: DecoderExits, windows: list[torch.Tensor],
                          cfg: DecodeConfig, head_cost: int, tick: Callable[[str], None]
                          ) -> list[DecoderPoint]:
    spec = get_task(cfg.task)
    config, total = model.config, num_layers(model)
    traces: list[TeacherForcedTrace] = []
    for ids in windows:
        traces.append(record_teacher_forced(model, exits, ids))
        tick("teacher-forced pass")
    argmax = np.concatenate([t.argmax for t in traces], axis=1)  # [E + 1, positions]
    nll = np.concatenate([t.nll for t in traces], axis=1)
    full_preds = argmax[-1]
    targets = np.concatenate([t.targets for t in traces])
    positions = np.concatenate([np.arange(t.n_new) for t in traces])
    count, n = len(targets), len(traces)
    lengths = [t.n_new + 1 for t in traces]
    layers = traces[0].layers

    def metrics(preds: np.ndarray, nll_values: np.ndarray) -> dict[str, float]:
        return compute_lm_metrics(spec, preds=preds, full_preds=full_preds, targets=targets,
                                  nll_sum=float(nll_values.sum()), count=count)

    def per_token(k: int) -> float:
        head = None if k == total else head_cost
        return sum(teacher_forced_flops(config, t, k, head) for t in lengths) / count

    full = per_token(total)

    def point(method: str, setting: dict, m: dict, flops: float, **extra) -> DecoderPoint:
        return decoder_point(cfg, spec.main_metric, method, setting, m, flops, full, n, count,
                             total, **extra)

    points = [point("full", {"k": total}, metrics(argmax[-1], nll[-1]), full,
                    mean_exit_layer=float(total))]
    for row, k in enumerate(layers[:-1]):
        points.append(point("static", {"k": k}, metrics(argmax[row], nll[row]), per_token(k),
                            mean_exit_layer=float(k)))
    # CALM under an oracle cache: vectorised calm_step_flops over every position
    conf = np.concatenate([confidence(t, cfg.measure)[:-1] for t in traces], axis=1)
    n_exits = conf.shape[0]
    per_layer = np.array([layer_flops(config, p) for p in range(max(lengths))], dtype=np.float64)
    columns = np.arange(count)
    exit_of_row = np.asarray(layers)
    for threshold in cfg.thresholds:
        confident = conf >= threshold
        first = np.where(confident.any(axis=0), confident.argmax(axis=0), n_exits)
        exit_layer = exit_of_row[first]
        evaluated = np.minimum(first + 1, n_exits)
        flops = (exit_layer * per_layer[positions] + evaluated * head_cost
                 + (exit_layer == total) * lm_head_flops(config)
                 + (total - exit_layer) * copy_flops(config))
        m = metrics(argmax[first, columns], nll[first, columns])
        points.append(point("calm", {"threshold": threshold, "measure": cfg.measure}, m,
                            float(flops.mean()), mean_exit_layer=float(exit_layer.mean())))
    return points
