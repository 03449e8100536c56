"""Token tasks (sequence labelling): tokenise words once, align a tag per word to word pieces,
and read a tag per word back from per-piece predictions. The counterpart of `batching.encode`
for a task whose rows are sentences given as words (`TaskSpec.unit == "token"`).

Alignment is the one of the transformers token-classification example (`run_ner.py`,
`label_all_tokens=False`): the words go to the fast tokenizer pre-split
(`is_split_into_words=True`); the first piece of each word carries the word's tag; the word's
other pieces and the special tokens get -100, which the loss ignores.

Scoring is per word, never per piece: `word_predictions` takes each word's first piece. A word
with no piece inside `max_seq_length` (cut by truncation, or a word the tokenizer turns into
nothing) is predicted `O` and still scored, so a short limit costs recall instead of silently
dropping gold entities. `EncodedWords.words_cut` counts such words.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from eebench.data.batching import IGNORE, Encoded, encode, tokenised
from eebench.errors import DataError, UsageError, one_line

# A piece that is not a word's first is labelled IGNORE; batching.collate makes the batches.


def align_labels(word_ids: Sequence[int | None], tags: Sequence[int]) -> list[int]:
    """A label per piece: a word's tag on its first piece, IGNORE on its other pieces and on
    special tokens (`word_ids[k]` is the word piece k belongs to, None for a special token)."""
    labels, previous = [], None
    for w in word_ids:
        if w is None:
            labels.append(IGNORE)
        elif w != previous:
            if not 0 <= w < len(tags):
                raise DataError(f"piece of word {w} in a sentence of {len(tags)} tagged words")
            labels.append(int(tags[w]))
        else:
            labels.append(IGNORE)
        if w is not None:
            previous = w
    return labels


def first_pieces(word_ids: Sequence[int | None]) -> dict[int, int]:
    """word index -> the position of its first piece."""
    first: dict[int, int] = {}
    for k, w in enumerate(word_ids):
        if w is not None and w not in first:
            first[w] = k
    return first


def word_predictions(piece_predictions: Sequence[int], word_ids: Sequence[int | None],
                     n_words: int, fill: int = 0) -> list[int]:
    """A tag id per word from per-piece predictions: the word's first piece; `fill` (0: `O`)
    for a word with no piece."""
    first = first_pieces(word_ids)
    return [int(piece_predictions[first[w]]) if w in first else fill for w in range(n_words)]


@dataclass(frozen=True, kw_only=True)
class EncodedWords(Encoded):
    """A tokenised token-task split: pieces per sentence (`labels`: per piece, align_labels; None
    for an unlabelled split), each piece's word, and the words per sentence."""

    word_ids: list[list[int | None]]  # per piece: its word's index, None for special tokens
    words: list[int]  # words per sentence (what a prediction per word is scored against)
    words_cut: int  # words with no piece inside max_seq_length (predicted O when scored)
    tags: list[list[int]] | None = None  # the gold tag id per word (None: unlabelled)
    is_regression: bool = False

    def piece_owner(self, indices: Sequence[int], width: int) -> Any:
        """long [len(indices), width]: the position of each piece's word's first piece (a
        halted word's pieces all stop, TOKEE's `copy_wordpiece='all'`); -1 for special tokens
        and padding."""
        import torch

        owner = torch.full((len(indices), width), -1, dtype=torch.long)
        for row, i in enumerate(indices):
            first = first_pieces(self.word_ids[i])
            for k, w in enumerate(self.word_ids[i][:width]):
                if w is not None:
                    owner[row, k] = first[w]
        return owner

    def counting_mask(self, indices: Sequence[int], width: int) -> Any:
        """bool [len(indices), width]: each word's first piece in those sentences, the tokens a
        token rule reads and a tag is scored from."""
        import torch

        mask = torch.zeros((len(indices), width), dtype=torch.bool)
        for row, i in enumerate(indices):
            mask[row, [k for k in first_pieces(self.word_ids[i]).values() if k < width]] = True
        return mask


    def predictions_per_word(self, piece_predictions: Sequence[Sequence[int]]) -> list[list[int]]:
        """Per sentence, a tag id per word from per-piece predictions (see word_predictions)."""
        if len(piece_predictions) != len(self):
            raise DataError(f"{len(piece_predictions)} predicted sentences for {len(self)}")
        return [word_predictions(p, w, n)
                for p, w, n in zip(piece_predictions, self.word_ids, self.words, strict=True)]


def encode_words(examples: Any, tokenizer: Any, max_seq_length: int) -> EncodedWords:
    """Tokenise `examples` (loaders.Examples of a token task: words per row, a tag id per word)
    once, truncating to `max_seq_length` pieces, with labels aligned to the pieces."""
    if max_seq_length < 8:
        raise UsageError(f"--max-seq-length must be at least 8, got {max_seq_length}")
    where = f"{examples.task}/{examples.split}"
    sentences = [list(words) for words in examples.texts]
    if not sentences:
        raise DataError(f"{where}: no examples to tokenise")
    if any(not words or not all(isinstance(w, str) for w in words) for words in sentences):
        raise DataError(f"{where}: every row must be a non-empty list of words")
    if not getattr(tokenizer, "is_fast", False):
        raise UsageError(f"{where}: aligning tags to word pieces needs a fast tokenizer "
                         "(word_ids); this one is not")
    try:
        enc = tokenizer(sentences, is_split_into_words=True, truncation=True,
                        max_length=max_seq_length, padding=False,
                        return_attention_mask=False, return_token_type_ids=True)
    except (ValueError, TypeError) as e:  # e.g. a BPE tokenizer without add_prefix_space
        first = one_line(e)
        raise UsageError(f"{where}: the tokenizer refuses pre-split words: {first}") from None
    word_ids = [list(enc.word_ids(i)) for i in range(len(sentences))]
    tags = None if examples.labels is None else list(examples.labels)
    if tags is not None:
        if len(tags) != len(sentences) or any(
                len(t) != len(s) for t, s in zip(tags, sentences, strict=True)):
            raise DataError(f"{where}: the tags do not match the words (a tag per word)")
        labels = [align_labels(w, t) for w, t in zip(word_ids, tags, strict=True)]
    else:
        labels = None
    cut = sum(len(s) - len(first_pieces(w)) for s, w in zip(sentences, word_ids, strict=True))
    return EncodedWords(**tokenised(enc, examples, tokenizer, max_seq_length), labels=labels,
                        word_ids=word_ids, words=[len(s) for s in sentences], words_cut=cut,
                        tags=None if tags is None else [[int(t) for t in ts] for ts in tags])


def encode_for(spec: Any, examples: Any, tokenizer: Any, max_seq_length: int) -> Encoded:
    """Tokenise `examples` of task `spec` once: a label per text (`encode`), or for a token task
    a tag per word aligned to the word pieces (`encode_words`). Here, beside the token encoding,
    because batching's `encode` is what the token encoding builds on."""
    if getattr(spec, "unit", "sequence") == "token":
        return encode_words(examples, tokenizer, max_seq_length)
    return encode(examples, tokenizer, max_seq_length, spec.is_regression)
