"""Every exit's logits for every sample of a split, from one batched pass over the model.

The trainer's dev evaluation and a run's one-pass sweep both start here: exit rules only need the
logits of exits 1..k, so the whole model runs once per sample and every exit's logits are kept.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

import numpy as np
import torch


@dataclass
class ExitOutputs:
    """Every exit's logits for every sample of a split, from one full pass."""

    logits: torch.Tensor  # [E, N, C] float32, CPU
    lengths: np.ndarray  # [N] real token lengths (no padding)
    labels: np.ndarray | None  # [N] label ids / scores, None for unlabelled splits
    # the heads' other outputs by name, [E, N] each (BERxiT's exit score); most models have none
    signals: dict[str, torch.Tensor] = field(default_factory=dict)


@torch.inference_mode()
def collect_exit_logits(model, batches: Iterable[dict],
                        progress: Callable[[int], None] | None = None) -> ExitOutputs:
    """Run every layer and every exit head once per sample. `batches` yield dicts with input_ids,
    attention_mask, (token_type_ids), `index` (positions in the split) and optionally `labels`."""
    model.eval()
    device = next(model.parameters()).device
    chunks, idx, lengths, labels = [], [], [], []
    for batch in batches:
        inputs = {k: batch[k].to(device) for k in ("input_ids", "attention_mask", "token_type_ids")
                  if k in batch}
        chunks.append(model(**inputs).float().cpu())  # [E, B, C + S]
        idx.append(torch.as_tensor(batch["index"]))
        lengths.append(batch["attention_mask"].sum(-1).cpu())
        if batch.get("labels") is not None:
            labels.append(torch.as_tensor(batch["labels"]))
        if progress is not None:
            progress(len(batch["index"]))
    order = torch.cat(idx).argsort()
    outputs = torch.cat(chunks, dim=1)[:, order]
    lab = torch.cat(labels)[order].numpy() if labels else None
    names = tuple(getattr(model, "signal_names", ()))
    logits, signals = outputs[..., : model.num_labels], {}
    if names:
        from eebench.models.multi_exit import split_outputs

        logits, signals = split_outputs(outputs, model.num_labels, names)
        logits, signals = logits.contiguous(), {k: v.contiguous() for k, v in signals.items()}
    return ExitOutputs(logits, torch.cat(lengths)[order].numpy(), lab, signals)


@dataclass
class TokenOutputs:
    """Every exit's token logits for every sentence of a token task's split, from one pass."""

    logits: torch.Tensor  # [E, N, T, C] float32, CPU; T the split's longest sentence, 0-padded
    mask: torch.Tensor  # bool [N, T]: the tokens that count (each word's first piece)
    lengths: np.ndarray  # [N] real token lengths (no padding)
    labels: list[list[int]] | None = None  # the gold tag id per word (None: unlabelled)


@torch.inference_mode()
def collect_token_logits(model, data, batches: Iterable[dict],
                         progress: Callable[[int], None] | None = None) -> TokenOutputs:
    """Run every layer and every token head once per sentence of `data` (an EncodedWords);
    `batches` of its rows as `collect_exit_logits` takes them."""
    model.eval()
    device = next(model.parameters()).device
    n, width = len(data), max(data.lengths)
    logits = torch.zeros((model.num_exits, n, width, model.num_labels))
    for batch in batches:
        inputs = {k: batch[k].to(device) for k in ("input_ids", "attention_mask", "token_type_ids")
                  if k in batch}
        out = model(**inputs)[..., : model.num_labels].float().cpu()  # [E, B, T_b, C]
        logits[:, batch["index"], : out.shape[2]] = out
        if progress is not None:
            progress(len(batch["index"]))
    mask = data.counting_mask(range(n), width)
    return TokenOutputs(logits, mask, np.asarray(data.lengths, dtype=np.int64),
                        getattr(data, "tags", None))
