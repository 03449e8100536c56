"""The decoder tasks' metrics in numpy: perplexity, top-1 agreement, next-token accuracy, token
agreement and exact match.

An early-exit decoder is scored against its own full model: what an exit rule gives up is the
full model's output, so agreement with it is the quality axis (the full model scores 100 by
definition, every operating point of every method on one fixed scale, higher is better as in
the GLUE/ELUE metrics that the Pareto fronts and ELUE scores read). Perplexity (of the actual
next token: lower is better) is reported beside it.

- imdb-lm (teacher-forced): at every position each exit predicts the next token. `top1_agreement`
  is the share of positions where the prediction is the full model's argmax (main metric);
  `next_token_accuracy` where it is the text's actual next token; `perplexity` is exp of the mean
  negative log-likelihood of the actual next tokens, pooled over every predicted position of
  every sample (a corpus perplexity: summed NLL over the token count, not a mean of per-sample
  perplexities).
- humaneval-gen (greedy, exactly N new tokens per prompt): `token_agreement` is the share of the
  generated positions where the output equals the full model's greedy output (main metric: it
  grades a point that `exact_match` would call simply wrong); `exact_match` the share of prompts
  whose N tokens all equal it. `agreed_prefix` (tokens before the first divergence) is there
  for analysis.

Like `compute_metrics` (eebench.tasks.metrics), `compute_lm_metrics` reports agreements,
accuracies and exact match in percent; perplexity is a plain number. Every function takes the
values for one exit or one operating point; `per_exit_lm_metrics` runs them over each exit.
"""

from __future__ import annotations

import math

import numpy as np

from eebench.errors import EebenchError
from eebench.tasks.metrics import accuracy
from eebench.tasks.spec import TaskSpec

PERCENT = ("top1_agreement", "next_token_accuracy", "token_agreement", "exact_match")


def _flat(values, reference, mask=None) -> tuple[np.ndarray, np.ndarray]:
    """Predictions and reference tokens at the positions `mask` keeps (all where None)."""
    p, r = np.asarray(values), np.asarray(reference)
    if p.shape != r.shape:
        raise EebenchError(f"got predictions of shape {p.shape} for references of shape "
                           f"{r.shape}")
    if mask is not None:
        m = np.asarray(mask, dtype=bool)
        if m.shape != p.shape:
            raise EebenchError(f"a mask of shape {m.shape} for predictions of shape {p.shape}")
        p, r = p[m], r[m]
    if p.size == 0:
        raise EebenchError("cannot compute a metric on zero tokens")
    return p.reshape(-1), r.reshape(-1)


def perplexity(nll_sum: float, count: int) -> float:
    """exp(summed negative log-likelihood / token count): a corpus perplexity (natural log)."""
    if count <= 0:
        raise EebenchError("cannot compute a perplexity over zero tokens")
    if not math.isfinite(nll_sum) or nll_sum < 0:
        raise EebenchError(f"a summed negative log-likelihood of {nll_sum}: not a finite value "
                           ">= 0")
    return float(math.exp(nll_sum / count))


def top1_agreement(preds, full_preds, mask=None) -> float:
    """Share of positions whose predicted token is the full model's argmax."""
    p, r = _flat(preds, full_preds, mask)
    return float(np.mean(p == r))


def next_token_accuracy(preds, targets, mask=None) -> float:
    """Share of positions whose predicted token is the actual next token."""
    p, r = _flat(preds, targets, mask)
    return float(np.mean(p == r))


def _rows(generated, reference) -> tuple[np.ndarray, np.ndarray]:
    g, r = np.asarray(generated), np.asarray(reference)
    if g.ndim != 2 or g.shape != r.shape:
        raise EebenchError(f"generated tokens {g.shape} and the full model's {r.shape}: both "
                           "[prompts, new tokens]")
    if g.size == 0:
        raise EebenchError("cannot compute a metric on zero generated tokens")
    return g, r


def token_agreement(generated, reference) -> float:
    """Share of generated positions ([prompts, N]) equal to the full model's greedy output."""
    return accuracy(*_rows(generated, reference))


def exact_match(generated, reference) -> float:
    """Share of prompts whose N generated tokens all equal the full model's."""
    g, r = _rows(generated, reference)
    return float(np.mean(np.all(g == r, axis=1)))


def agreed_prefix(generated, reference) -> np.ndarray:
    """Per prompt, how many tokens were generated before the first divergence (N where none)."""
    g, r = _rows(generated, reference)
    differs = g != r
    return np.where(differs.any(axis=1), differs.argmax(axis=1), g.shape[1])


def compute_lm_metrics(spec: TaskSpec, *, preds=None, full_preds=None, targets=None,
                       mask=None, nll_sum: float | None = None, count: int | None = None,
                       generated=None, reference=None) -> dict[str, float]:
    """Every metric of a decoder task for one exit or operating point (agreements, accuracy and
    exact match in percent). imdb-lm takes per-position `preds`, the full model's `full_preds`,
    the actual `targets` (a `mask` of the positions that count) and the summed NLL of the
    targets with its token `count`; humaneval-gen the `generated` tokens and the full model's
    greedy `reference`, both [prompts, N]."""
    if spec.unit != "generated":
        raise EebenchError(f"task {spec.name!r} is not a decoder task: eebench.tasks.metrics "
                           "scores it")
    out: dict[str, float] = {}
    for name in spec.metrics:
        if name == "top1_agreement":
            out[name] = top1_agreement(preds, full_preds, mask)
        elif name == "next_token_accuracy":
            out[name] = next_token_accuracy(preds, targets, mask)
        elif name == "perplexity":
            if nll_sum is None or count is None:
                raise EebenchError("perplexity needs the summed NLL and the token count")
            out[name] = perplexity(nll_sum, count)
        elif name == "token_agreement":
            out[name] = token_agreement(generated, reference)
        elif name == "exact_match":
            out[name] = exact_match(generated, reference)
        else:
            raise EebenchError(f"task {spec.name!r}: no decoder metric {name!r}")
    return {k: 100.0 * v if k in PERCENT else v for k, v in out.items()}


def per_exit_lm_metrics(spec: TaskSpec, exit_preds, exit_nll, full_preds, targets,
                        mask=None) -> list[dict[str, float]]:
    """imdb-lm's metrics for each exit: `exit_preds` and `exit_nll` are [exits, ...positions]
    (each exit's argmax and the NLL of the actual next token at every position); the last exit
    of a complete model is the full model (top-1 agreement 100)."""
    preds, nll = np.asarray(exit_preds), np.asarray(exit_nll, dtype=np.float64)
    if preds.shape != nll.shape or preds.shape[1:] != np.shape(full_preds):
        raise EebenchError(f"per-exit predictions {preds.shape}, NLL {nll.shape} and the full "
                           f"model's predictions {np.shape(full_preds)} do not fit")
    m = np.ones(preds.shape[1:], dtype=bool) if mask is None else np.asarray(mask, dtype=bool)
    count = int(m.sum())
    return [compute_lm_metrics(spec, preds=preds[e], full_preds=full_preds, targets=targets,
                               mask=m, nll_sum=float(nll[e][m].sum()), count=count)
            for e in range(preds.shape[0])]
