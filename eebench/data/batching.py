"""Tokenise a split once, then cut it into dynamically padded batches.

Why this shape:

- Tokenising once (fast tokenizer, truncation to `max_seq_length`, pairs as sentence pairs) keeps
  every epoch and every evaluation cheap, and it records each sample's real token length, which
  FLOPs per sample are computed from later.
- A batch is padded to its own longest sample, not to `max_seq_length`: short sentences stay cheap.
- The training order is a pure function of (seed, epoch), so a run interrupted at step k of an
  epoch resumes by regenerating that epoch's order and skipping k batches: no sampler state to save.
  Several processes of one job draw the same batches and each takes its part of every batch.
- Evaluation keeps a fixed order; sorting by length (less padding) is optional, and every batch
  carries the original row indices so results can be put back in the original order.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from eebench.errors import DataError, UsageError

if TYPE_CHECKING:
    import torch


IGNORE = -100  # the label of a token no loss reads (torch's CrossEntropy default)


@dataclass(frozen=True)
class Encoded:
    """A tokenised split: unpadded token ids per sample, real lengths, labels."""

    input_ids: list[list[int]]
    token_type_ids: list[list[int]] | None  # None for tokenizers without segment ids
    lengths: list[int]  # real token count per sample, special tokens included
    labels: list[int] | list[float] | None  # None for unlabelled (test) splits
    ids: list[str]
    pad_token_id: int
    is_regression: bool
    max_seq_length: int

    def __len__(self) -> int:
        return len(self.input_ids)


def encode(examples: Any, tokenizer: Any, max_seq_length: int, is_regression: bool = False
           ) -> Encoded:
    """Tokenise `examples` (a loaders.Examples) once, truncating to `max_seq_length` tokens."""
    if max_seq_length < 8:
        raise UsageError(f"--max-seq-length must be at least 8, got {max_seq_length}")
    texts = list(examples.texts)
    if not texts:
        raise DataError(f"{examples.task}/{examples.split}: no examples to tokenise")
    width = len(texts[0])
    if width not in (1, 2) or any(len(t) != width for t in texts):
        raise DataError(
            f"{examples.task}/{examples.split}: expected one or two text fields per example"
        )
    first = [t[0] for t in texts]
    second = [t[1] for t in texts] if width == 2 else None
    enc = tokenizer(
        first,
        second,
        truncation=True,
        max_length=max_seq_length,
        padding=False,
        return_attention_mask=False,
        return_token_type_ids=True,
    )
    pieces = tokenised(enc, examples, tokenizer, max_seq_length)
    labels = None if examples.labels is None else list(examples.labels)
    if labels is not None and len(labels) != len(pieces["input_ids"]):
        raise DataError(f"{examples.task}/{examples.split}: {len(labels)} labels for "
                        f"{len(pieces['input_ids'])} examples")
    return Encoded(**pieces, labels=labels, is_regression=is_regression)


def tokenised(enc: Any, examples: Any, tokenizer: Any, max_seq_length: int) -> dict[str, Any]:
    """An Encoded's fields that come from the tokenizer's output `enc` (all but the labels)."""
    input_ids = [list(ids) for ids in enc["input_ids"]]
    token_type_ids = enc.get("token_type_ids")
    pad = tokenizer.pad_token_id
    return {"input_ids": input_ids, "lengths": [len(ids) for ids in input_ids],
            "token_type_ids": None if token_type_ids is None else [list(t) for t in token_type_ids],
            "ids": list(examples.ids), "pad_token_id": 0 if pad is None else int(pad),
            "max_seq_length": max_seq_length}


def collate(data: Encoded, indices: list[int], device: Any = None) -> dict[str, torch.Tensor]:
    """One batch of rows `indices`, padded to the longest of them.

    Keys: input_ids, attention_mask, token_type_ids (if any) [B, T]; lengths, index [B];
    labels [B] (long, or float for regression) when the split has labels; a label per token
    (eebench.data.tokens: per word piece) is [B, T], IGNORE on the padding.
    """
    import torch

    longest = max(data.lengths[i] for i in indices)
    n = len(indices)
    input_ids = torch.full((n, longest), data.pad_token_id, dtype=torch.long)
    attention_mask = torch.zeros((n, longest), dtype=torch.long)
    token_types = torch.zeros((n, longest), dtype=torch.long) if data.token_type_ids else None
    for row, i in enumerate(indices):
        length = data.lengths[i]
        input_ids[row, :length] = torch.tensor(data.input_ids[i], dtype=torch.long)
        attention_mask[row, :length] = 1
        if token_types is not None:
            token_types[row, :length] = torch.tensor(data.token_type_ids[i], dtype=torch.long)
    batch = {
        "input_ids": input_ids,
        "attention_mask": attention_mask,
        "lengths": torch.tensor([data.lengths[i] for i in indices], dtype=torch.long),
        "index": torch.tensor(indices, dtype=torch.long),
    }
    if token_types is not None:
        batch["token_type_ids"] = token_types
    if data.labels is not None and isinstance(data.labels[indices[0]], list):  # per token
        labels = torch.full((n, longest), IGNORE, dtype=torch.long)
        for row, i in enumerate(indices):
            labels[row, :data.lengths[i]] = torch.tensor(data.labels[i], dtype=torch.long)
        batch["labels"] = labels
    elif data.labels is not None:
        dtype = torch.float32 if data.is_regression else torch.long
        batch["labels"] = torch.tensor([data.labels[i] for i in indices], dtype=dtype)
    if device is not None:
        batch = {k: v.to(device) for k, v in batch.items()}
    return batch


def steps_per_epoch(n: int, batch_size: int) -> int:
    """Batches in one epoch; the last one may be smaller (no sample is dropped)."""
    return math.ceil(n / batch_size)


def epoch_order(n: int, seed: int, epoch: int) -> list[int]:
    """The shuffled order of epoch `epoch`: depends on (seed, epoch) only, never on global RNG."""
    import torch

    g = torch.Generator()
    g.manual_seed(seed * 1_000_003 + epoch)
    return torch.randperm(n, generator=g).tolist()


def epoch_batches(lengths: list[int], batch_size: int, seed: int, epoch: int,
                  group_by_length: bool = False, group_size: int = 50) -> list[list[int]]:
    """The row indices of every batch of one training epoch, a function of (seed, epoch) only.

    With `group_by_length`, the shuffled order is cut into groups of `group_size` batches, each
    group sorted by length (longest first) and cut into batches, and the batches shuffled again:
    rows in a batch have similar lengths, so less compute goes to padding (Hugging Face's
    `group_by_length` does the same). Every row still appears once per epoch.
    """
    import torch

    order = epoch_order(len(lengths), seed, epoch)
    if group_by_length:
        span = batch_size * group_size
        groups = [sorted(order[i:i + span], key=lambda r: -lengths[r])
                  for i in range(0, len(order), span)]
        order = [r for group in groups for r in group]
    batches = [order[i:i + batch_size] for i in range(0, len(order), batch_size)]
    if group_by_length:
        g = torch.Generator()
        g.manual_seed(seed * 1_000_003 + epoch + 7_919)
        batches = [batches[i] for i in torch.randperm(len(batches), generator=g).tolist()]
    return batches


def batch_part(indices: list[int], rank: int, processes: int) -> list[int]:
    """Process `rank`'s contiguous part of one global batch: parts differ by at most one row,
    the first ones are the larger (a last batch of 5 rows over 2 processes: 3 and 2)."""
    size, extra = divmod(len(indices), processes)
    start = rank * size + min(rank, extra)
    return indices[start:start + size + (rank < extra)]


def train_batches(data: Encoded, batch_size: int, seed: int, epoch: int, start_step: int = 0,
                  device: Any = None, group_by_length: bool = False, part: tuple[int, int] = (0, 1)
                  ) -> Iterator[dict[str, torch.Tensor]]:
    """The batches of one training epoch from step `start_step` on (resuming mid-epoch).

    `part` (rank, processes) with several processes: every process draws the same global batches
    and yields its own part of each (`batch_part`), with `share`, its rows' fraction of the
    global batch (float64, on the CPU). A process whose part is empty (a last batch smaller than
    the number of processes) gets the batch's first row with share 0, so that it still takes part
    in every step."""
    import torch

    if data.labels is None:
        raise DataError("cannot train on a split without labels")
    rank, processes = part
    batches = epoch_batches(data.lengths, batch_size, seed, epoch, group_by_length)
    for indices in batches[start_step:]:
        if processes == 1:
            yield collate(data, indices, device)
            continue
        rows = batch_part(indices, rank, processes)
        batch = collate(data, rows or indices[:1], device)
        batch["share"] = torch.tensor(len(rows) / len(indices), dtype=torch.float64)
        yield batch


def eval_batches(data: Encoded, batch_size: int, sort_by_length: bool = False,
                 device: Any = None) -> Iterator[dict[str, torch.Tensor]]:
    """Evaluation batches in a fixed order; batch["index"] gives each row's original position.

    With `sort_by_length`, samples are grouped by length (longest first, stable) to waste less
    padding; the batches' `index` puts per-sample outputs back in the original order.
    """
    order = list(range(len(data)))
    if sort_by_length:
        order.sort(key=lambda i: -data.lengths[i])
    for start in range(0, len(order), batch_size):
        yield collate(data, order[start:start + batch_size], device)
