"""Sequence-labelling tags and metrics: IOB1 -> IOB2, and entity-level micro precision, recall
and F1 computed by seqeval, with token accuracy, in percent.

What an entity is: seqeval's default mode, the chunking of conlleval (the CoNLL shared tasks'
scorer). An entity starts at `B-X`, or at an `I-X` that follows `O` or a tag of another type,
and goes on over the `I-X` after it. That reads both tag schemes right:

- IOB1 (CoNLL-2003's files): an entity is tagged `I-X`; `B-X` only starts one that directly
  follows another X. `I-PER I-PER` is one person, `I-PER B-PER` two.
- IOB2 (WNUT-17, and every token task once loaded): every entity starts with `B-X`.

A prediction that starts an entity with `I-X` (ill-formed IOB2) still counts as that entity, as in
conlleval and in WNUT-17's own scorer (`wnuteval.py`, which reads `O I-X` as `O B-X`). seqeval's
strict modes are not used: its IOB1 scheme misreads `O B-X I-X` and a sentence that starts with
`B-X` (it drops the `B-X` word), and strict IOB2 drops an entity that starts with `I-X`, which
neither shared task's scorer does.

Predictions and labels are a list of tag ids per sentence (spec.labels order), one per word.
"""

from __future__ import annotations

from collections.abc import Sequence

from eebench.errors import EebenchError
from eebench.tasks.spec import TaskSpec


def to_iob2(tags: Sequence[str]) -> list[str]:
    """One sentence's IOB1 tags as IOB2: an `I-X` that starts an entity (after `O`, or after a
    tag of another type, or first in the sentence) becomes `B-X`. The entities stay the same."""
    out: list[str] = []
    previous = "O"
    for tag in tags:
        if tag.startswith("I-") and (previous == "O" or previous[2:] != tag[2:]):
            tag = "B-" + tag[2:]
        out.append(tag)
        previous = tag
    return out


def _tags(spec: TaskSpec, sentences: Sequence[Sequence[int]], what: str) -> list[list[str]]:
    n = spec.num_labels
    try:
        ids = [[int(t) for t in s] for s in sentences]
    except (TypeError, ValueError):
        ids = None
    if ids is None or any(not 0 <= t < n for s in ids for t in s):
        raise EebenchError(f"{spec.name}: {what} must be a list of tag ids 0..{n - 1} per "
                           "sentence (-100 marks a sub-token, not a word)")
    return [[spec.labels[t] for t in s] for s in ids]


def entity_scores(y_true: list[list[str]], y_pred: list[list[str]]) -> dict[str, float]:
    """Entity micro precision, recall and F1 (fractions) of tag strings, by seqeval."""
    import warnings

    with warnings.catch_warnings():  # importing seqeval (scikit-learn) may warn
        warnings.simplefilter("ignore")
        from seqeval.metrics import f1_score, precision_score, recall_score

    return {
        "entity_precision": precision_score(y_true, y_pred, zero_division=0),
        "entity_recall": recall_score(y_true, y_pred, zero_division=0),
        "entity_f1": f1_score(y_true, y_pred, zero_division=0),
    }


def token_metrics(spec: TaskSpec, predictions: Sequence[Sequence[int]],
                  labels: Sequence[Sequence[int]] | None) -> dict[str, float]:
    """Every metric in `spec.metrics` for a token task, in percent."""
    if labels is None:
        raise EebenchError(f"{spec.name}: this split has no labels to score against")
    if len(labels) == 0:
        raise EebenchError("cannot compute a metric on zero examples")
    if len(predictions) != len(labels):
        raise EebenchError(f"{spec.name}: {len(predictions)} predicted sentences for "
                           f"{len(labels)} labelled ones")
    y_true, y_pred = _tags(spec, labels, "labels"), _tags(spec, predictions, "predictions")
    for i, (y, p) in enumerate(zip(y_true, y_pred)):
        if len(y) != len(p):
            raise EebenchError(f"{spec.name}: sentence {i} has {len(y)} words but {len(p)} "
                               "predicted tags (a tag per word, not per sub-token)")
    words = sum(len(y) for y in y_true)
    right = sum(a == b for y, p in zip(y_true, y_pred) for a, b in zip(y, p))
    values = {**entity_scores(y_true, y_pred), "token_accuracy": right / words if words else 0.0}
    unknown = [m for m in spec.metrics if m not in values]
    if unknown:
        raise ValueError(f"{spec.name}: unknown metric {unknown[0]!r}")
    return {m: 100.0 * float(values[m]) for m in spec.metrics}
