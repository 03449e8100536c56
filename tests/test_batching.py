"""Tokenise once, pad per batch, a resumable seeded order, an order-restoring eval pass."""

from __future__ import annotations

import pytest
import torch

from eebench.data.batching import (
    collate,
    encode,
    epoch_batches,
    epoch_order,
    eval_batches,
    steps_per_epoch,
    train_batches,
)
from eebench.errors import DataError, UsageError
from eebench.tasks.loaders import Examples, load_split


@pytest.fixture(scope="module")
def tokenizer(minilm_path):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(str(minilm_path))


@pytest.fixture(scope="module")
def rte(data_dir):
    return load_split("rte", "dev", data_dir).take(40, seed=0)


def _examples(texts, labels):
    return Examples(task="toy", split="train", texts=texts, labels=labels,
                    ids=[str(i) for i in range(len(texts))], source="memory")


def test_pairs_are_sentence_pairs_truncated_with_real_lengths(tokenizer, rte):
    data = encode(rte, tokenizer, max_seq_length=32)
    assert len(data) == len(rte) == 40
    assert max(data.lengths) == 32  # RTE premises are long: some rows are truncated
    for ids, types, n in zip(data.input_ids, data.token_type_ids, data.lengths, strict=True):
        assert n == len(ids) <= 32
        assert ids[0] == tokenizer.cls_token_id and ids[-1] == tokenizer.sep_token_id
        assert ids.count(tokenizer.sep_token_id) == 2  # [CLS] a [SEP] b [SEP]
        assert set(types) == {0, 1} and types[0] == 0 and types[-1] == 1
    short = min(range(40), key=lambda i: data.lengths[i])
    full = tokenizer(*rte.texts[short])["input_ids"]
    if len(full) <= 32:  # an untruncated pair is tokenised exactly as the tokenizer does it
        assert data.input_ids[short] == full


def test_single_sentences_and_regression_labels(tokenizer):
    ex = _examples([("a fine movie",), ("bad",), ("the plot , though thin , works",)],
                   [4.5, 0.0, 2.25])
    data = encode(ex, tokenizer, max_seq_length=16, is_regression=True)
    assert data.lengths == [len(tokenizer("a fine movie")["input_ids"]), 3,
                            len(tokenizer("the plot , though thin , works")["input_ids"])]
    assert all(set(t) == {0} for t in data.token_type_ids)
    batch = collate(data, [0, 1, 2])
    assert batch["labels"].dtype == torch.float32
    assert batch["labels"].tolist() == [4.5, 0.0, 2.25]


def test_collate_pads_to_the_longest_in_the_batch(tokenizer, rte):
    data = encode(rte, tokenizer, max_seq_length=128)
    rows = [3, 7, 11]
    batch = collate(data, rows)
    longest = max(data.lengths[i] for i in rows)
    assert batch["input_ids"].shape == (3, longest)
    assert batch["attention_mask"].sum(1).tolist() == [data.lengths[i] for i in rows]
    assert batch["lengths"].tolist() == [data.lengths[i] for i in rows]
    assert batch["index"].tolist() == rows
    assert batch["labels"].dtype == torch.long
    assert batch["labels"].tolist() == [rte.labels[i] for i in rows]
    for r, i in enumerate(rows):
        n = data.lengths[i]
        assert batch["input_ids"][r, :n].tolist() == data.input_ids[i]
        assert (batch["input_ids"][r, n:] == tokenizer.pad_token_id).all()
        assert (batch["token_type_ids"][r, n:] == 0).all()


def test_order_depends_only_on_seed_and_epoch():
    a = epoch_order(100, seed=3, epoch=0)
    torch.manual_seed(123)  # the global RNG does not matter
    assert epoch_order(100, seed=3, epoch=0) == a
    assert sorted(a) == list(range(100))
    assert epoch_order(100, seed=3, epoch=1) != a
    assert epoch_order(100, seed=4, epoch=0) != a


def test_train_batches_resume_mid_epoch(tokenizer, rte):
    data = encode(rte, tokenizer, max_seq_length=64)
    assert steps_per_epoch(len(data), 6) == 7  # 40 rows: the last batch has 4, none dropped
    full = list(train_batches(data, 6, seed=1, epoch=2))
    assert len(full) == 7 and len(full[-1]["index"]) == 4
    seen = torch.cat([b["index"] for b in full]).tolist()
    assert sorted(seen) == list(range(40))
    resumed = list(train_batches(data, 6, seed=1, epoch=2, start_step=4))
    assert len(resumed) == 3
    for a, b in zip(full[4:], resumed, strict=True):
        assert a.keys() == b.keys()
        assert all(torch.equal(a[k], b[k]) for k in a)


def test_length_grouped_batches_cover_every_row_with_less_padding(tokenizer, rte):
    data = encode(rte, tokenizer, max_seq_length=128)
    plain = epoch_batches(data.lengths, 4, seed=1, epoch=0)
    grouped = epoch_batches(data.lengths, 4, seed=1, epoch=0, group_by_length=True, group_size=3)
    assert grouped == epoch_batches(data.lengths, 4, seed=1, epoch=0, group_by_length=True,
                                    group_size=3)  # a function of (seed, epoch)
    assert len(grouped) == len(plain) == steps_per_epoch(len(data), 4)
    assert sorted(i for b in grouped for i in b) == list(range(40))

    def padded(batches):
        return sum(len(b) * max(data.lengths[i] for i in b) for b in batches)

    assert padded(grouped) < padded(plain)
    # Within a group of 3 batches rows are sorted by length, and the groups come from the plain
    # shuffled order: the longest rows of each group share a batch.
    order = [i for b in plain for i in b]
    for g in range(0, 40, 12):
        rows = sorted(order[g:g + 12], key=lambda i: -data.lengths[i])
        assert rows[:4] in grouped
    resumed = list(train_batches(data, 4, seed=1, epoch=0, start_step=6, group_by_length=True))
    assert [b["index"].tolist() for b in resumed] == epoch_batches(
        data.lengths, 4, seed=1, epoch=0, group_by_length=True)[6:]


def test_eval_batches_sorted_by_length_restore_the_original_order(tokenizer, rte):
    data = encode(rte, tokenizer, max_seq_length=128)
    plain = list(eval_batches(data, 16))
    assert torch.cat([b["index"] for b in plain]).tolist() == list(range(40))
    batches = list(eval_batches(data, 16, sort_by_length=True))
    index = torch.cat([b["index"] for b in batches])
    lengths = torch.cat([b["lengths"] for b in batches])
    assert sorted(index.tolist()) == list(range(40))
    assert lengths.tolist() == sorted(lengths.tolist(), reverse=True)
    padded = sum(b["input_ids"].numel() for b in batches)
    assert padded < sum(b["input_ids"].numel() for b in plain)  # sorting saves padding
    restored = lengths[index.argsort()]
    assert restored.tolist() == data.lengths


def test_unlabelled_split_has_no_labels_and_cannot_train(tokenizer, data_dir):
    test = load_split("rte", "test", data_dir).take(5, seed=0)
    data = encode(test, tokenizer, max_seq_length=64)
    assert "labels" not in collate(data, [0, 1])
    with pytest.raises(DataError):
        next(train_batches(data, 2, seed=0, epoch=0))


def test_bad_input_is_a_one_line_error(tokenizer):
    with pytest.raises(UsageError, match="max-seq-length"):
        encode(_examples([("x",)], [0]), tokenizer, max_seq_length=4)
    with pytest.raises(DataError, match="no examples"):
        encode(_examples([], []), tokenizer, max_seq_length=32)
    with pytest.raises(DataError, match="text fields"):
        encode(_examples([("a",), ("b", "c")], [0, 1]), tokenizer, max_seq_length=32)
