"""A tiny model and a handful of rows for conformance checks: no download, no data directory.

`tiny_backbone` writes a random 3-layer BERT (hidden 32) with a word-level tokenizer of ROWS'
words, a model directory that `--model` and `build_model` load like a pretrained one; `examples`
gives ROWS as a task's training or dev split (RTE's labels, or STS-B's scores), `token_examples`
their first sentences as a token task's (CoNLL-2003's tags: people and places). `trained` is the
model a run measures for a method, trained a few steps on them and reloaded; `stirred` a copy of
a model with its weights drawn anew.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

# A handful of sentence pairs (RTE's shape: 0 entailment, 1 not) with a regression score (STS-B's
# 0..5): enough rows for a few training steps and a dev split with mixed lengths.
ROWS = [
    ("the cat sat on the mat", "a cat is on the mat", 0, 4.6),
    ("the dog ran in the park all day", "a dog was in the park", 0, 3.8),
    ("it rained in the city", "the city was dry", 1, 0.4),
    ("she bought a red car last week", "she owns a car", 0, 3.2),
    ("the sun is hot", "the sun is cold", 1, 0.8),
    ("he reads a book every night before sleep", "he never reads", 1, 0.2),
    ("two men play chess in the garden", "men are playing a game", 0, 3.9),
    ("the shop closed at noon", "the shop was open all night", 1, 0.6),
    ("a child draws a tree with green leaves", "a child is drawing", 0, 4.1),
    ("the river is long and cold", "the river is short", 1, 1.0),
    ("birds sing in the morning", "birds make sounds", 0, 3.5),
    ("the train left early today", "the train did not leave", 1, 0.3),
    ("a woman cooks rice and fish for dinner tonight", "a woman makes food", 0, 4.0),
    ("the old house has a blue door", "the house has no door", 1, 0.5),
    ("we walked to school", "we went to school", 0, 4.8),
    ("the game ended in a draw after extra time", "one team won", 1, 1.2),
]
SPECIAL = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
NUM_LAYERS = 3  # the tiny backbone's depth


def tiny_backbone(path: Path, num_layers: int = NUM_LAYERS, seed: int = 0) -> Path:
    """Write a tiny random BERT (hidden 32, 4 heads) and a word-level tokenizer of ROWS' words
    into `path`: a model directory `--model` and `build_model` load like a pretrained one."""
    import torch
    from transformers import BertConfig, BertModel, BertTokenizerFast

    path = Path(path)
    path.mkdir(parents=True, exist_ok=True)
    words = sorted({w for a, b, _, _ in ROWS for w in f"{a} {b}".split()})
    (path / "vocab.txt").write_text("\n".join(SPECIAL + words) + "\n", encoding="utf-8")
    BertTokenizerFast(vocab_file=str(path / "vocab.txt")).save_pretrained(str(path))
    config = BertConfig(vocab_size=len(SPECIAL) + len(words), hidden_size=32,
                        num_hidden_layers=num_layers, num_attention_heads=4,
                        intermediate_size=64, max_position_embeddings=64, type_vocab_size=2)
    torch.manual_seed(seed)
    model = BertModel(config).eval()
    with _no_progress_bars():
        model.save_pretrained(str(path))
    return path


@contextmanager
def _no_progress_bars() -> Iterator[None]:
    from transformers.utils import logging

    was = logging.is_progress_bar_enabled()
    logging.disable_progress_bar()
    try:
        yield
    finally:
        if was:
            logging.enable_progress_bar()


def examples(split: str, regression: bool) -> Any:
    """ROWS as a task's Examples: 12 training rows, 16 dev rows (every row, lengths mixed)."""
    from eebench.tasks.loaders import Examples

    rows = ROWS[:12] if split == "train" else ROWS
    return Examples(task="stsb" if regression else "rte", split=split,
                    texts=[(a, b) for a, b, _, _ in rows],
                    labels=[float(s) if regression else int(y) for _, _, y, s in rows],
                    ids=[str(i) for i in range(len(rows))], source="eebench.testing")


# A tag per word of a token task (CoNLL-2003's names): the people and the places of ROWS.
PEOPLE = {"she", "he", "woman", "child", "men", "we"}
PLACES = {"park", "city", "garden", "school", "river", "house", "shop", "mat"}


def token_examples(split: str) -> Any:
    """ROWS' first sentences as CoNLL-2003's Examples, a tag per word: B-PER, B-LOC or O."""
    from eebench.tasks.catalog import get_task
    from eebench.tasks.loaders import Examples

    labels = list(get_task("conll2003").labels)
    rows = ROWS[:12] if split == "train" else ROWS
    sentences = [a.split() for a, _, _, _ in rows]
    tags = [[labels.index("B-PER" if w in PEOPLE else "B-LOC" if w in PLACES else "O")
             for w in words] for words in sentences]
    return Examples(task="conll2003", split=split, texts=[tuple(w) for w in sentences],
                    labels=tags, ids=[str(i) for i in range(len(rows))],
                    source="eebench.testing")


def trained(method: Any, backbone: Path, root: Path, is_regression: bool,
           task: str | None = None, rows: Any = None) -> Any:
    """The model a run measures for this (variant's) method: trained, saved and reloaded (on
    RTE or STS-B's `examples`, or on `task`'s `rows`)."""
    from eebench.tasks.catalog import get_task
    from eebench.train.checkpoint import load_trained
    from eebench.train.config import TrainConfig
    from eebench.train.loop import train

    spec = get_task(task or ("stsb" if is_regression else "rte"))
    rows = rows if rows is not None else examples("train", is_regression)
    cfg = TrainConfig(epochs=2, batch_size=4, lr=1e-3, max_seq_length=32, eval_batch_size=8,
                      save_every=0, device="cpu", seed=0)
    models = []
    for part in method.models(NUM_LAYERS):
        path = train(part, spec, str(backbone), rows, None, cfg, root / "checkpoints")
        models.append(load_trained(path)[0])
    return method.combine(models)


def stirred(model: Any) -> Any:
    """A copy with its weight matrices drawn anew, N(0, 0.3): a briefly trained tiny model gives
    nearly the same outputs for every sample (all exit alike); this one's differ per sample."""
    import copy

    import torch

    out = copy.deepcopy(model)
    gen = torch.Generator().manual_seed(0)
    with torch.no_grad():
        for p in out.parameters():
            if p.dim() == 2:
                p.copy_(torch.randn(p.shape, generator=gen) * 0.3)
    return out
