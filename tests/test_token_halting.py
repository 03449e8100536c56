"""Token-level early exit (TOKEE) on a real model: the authors' per-sentence loop with its copies,
eebench's batched exact loop and its live loop (only live tokens computed) decide alike on every
token; the live layer is the layer; and the per-token FLOPs are what a hand count gives.

The loop below follows LeeSureman/Sequence-Labeling-Early-Exit @9717770 (V0/modeling_bert_ee.py,
`t_level_win_ee_copy`, test.py's defaults `true_copy=1`, `copy_wordpiece='all'`): one sentence
at a time, its words' first pieces (`ptm_pool_pos`) read by the rule; after a word halts, all its
pieces keep the state they had (the copy) while the special tokens and the other words go on; a
word's uncertainty is the max of entropy / ln C over a window of neighbouring words (halted ones
included, at their current logits); the threshold doubles in the upper half of the layers.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from eebench.data.batching import collate
from eebench.data.tokens import encode_words, first_pieces
from eebench.measure.cost_table import build_cost_table
from eebench.measure.token_flops import build_live_costs, check_full
from eebench.methods.base import get_method
from eebench.models.token_halting_layer import live_layer
from eebench.rules.token_halting import halting_batch, halting_inference
from eebench.rules.tokens import TokenHaltRule, simulate_tokens
from eebench.tasks.loaders import load_split
from tests import tiny

TAGS = 9


@pytest.fixture(scope="module")
def model():
    """A tiny BERT with token heads after each of its 4 layers, the heads sharpened so that
    words' uncertainties spread over (0, 1) and halt at every layer."""
    m = tiny.tiny_model(get_method("tokee"), num_labels=TAGS, seed=0)
    with torch.no_grad():
        for head in m.heads:
            head.classifier.weight.mul_(30.0)
    return m.eval()


@pytest.fixture(scope="module")
def enc(data_dir):
    dev = load_split("conll2003", "dev", data_dir).take(24, seed=0)
    return encode_words(dev, tiny.tokenizer(), 48)


def _authors_tokee(model, ids: list[int], word_ids: list, threshold: float, window: int
                   ) -> tuple[int, dict[int, tuple[int, int]]]:
    """One sentence, batch size 1, no padding: (the exit where it stopped, word -> (exit, tag))."""
    first = first_pieces(word_ids)
    words = sorted(first)
    with torch.inference_mode():
        hidden, inputs = model.embed(torch.tensor([ids]), torch.ones(1, len(ids), dtype=torch.long))
        halted: dict[int, tuple[int, int]] = {}
        exit_of = {k: j for j, k in enumerate(model.exit_layers)}
        half = model.num_exits // 2
        for i in range(model.exit_layers[-1]):
            new = model.layer(i, hidden, inputs)
            keep = [k for k, w in enumerate(word_ids) if w is not None and w in halted]
            new[0, keep] = hidden[0, keep]  # the copy: a halted word's pieces keep their states
            hidden = new
            j = exit_of.get(i + 1)
            if j is None:
                continue
            z = model.head(j, hidden)[0, [first[w] for w in words]].double()  # [W, C]
            if j == model.num_exits - 1:
                for w, tag in zip(words, z.argmax(-1).tolist(), strict=True):
                    halted.setdefault(w, (j, tag))
                return j, halted
            u = (torch.logsumexp(z, -1) - (F.softmax(z, -1) * z).sum(-1)) / math.log(TAGS)
            pooled = F.max_pool1d(u[None, None], window, stride=1, padding=window // 2)[0, 0]
            t = threshold * (2 if j >= half else 1)
            for k, w in enumerate(words):
                if w not in halted and float(pooled[k]) < t:
                    halted[w] = (j, int(z[k].argmax()))
            if len(halted) == len(words):
                return j, halted
    raise AssertionError("the last exit always ends the sentence")


@pytest.mark.parametrize("threshold,window", [(0.2, 1), (0.3, 3), (0.4, 5), (0.5, 3)])
def test_batched_and_live_loops_are_the_authors(model, enc, threshold, window):
    rule = TokenHaltRule(threshold, window, upper_from=model.num_exits // 2)
    n = len(enc)
    batch = collate(enc, list(range(n)))
    width = batch["input_ids"].shape[1]
    mask, owner = enc.counting_mask(range(n), width), enc.piece_owner(range(n), width)
    exact, computed = halting_batch(model, rule, batch, mask, owner, live=False)
    live, computed_live = halting_batch(model, rule, batch, mask, owner, live=True)
    assert torch.equal(exact.token_exit, live.token_exit)
    assert torch.equal(exact.prediction, live.prediction)
    assert torch.equal(exact.exit_index, live.exit_index)
    assert torch.equal(computed, computed_live)
    halts = np.bincount(exact.token_exit[mask].numpy(), minlength=model.num_exits)
    assert (halts > 0).sum() >= 2  # words halt at more than one exit: the copies matter
    wrong = []
    for i in range(n):
        ids = enc.input_ids[i]
        stop, words = _authors_tokee(model, ids, enc.word_ids[i], threshold, window)
        first = first_pieces(enc.word_ids[i])
        ours = {w: (int(exact.token_exit[i, k]), int(exact.prediction[i, k]))
                for w, k in first.items()}
        if stop != int(exact.exit_index[i]) or ours != words:
            wrong.append(i)
    assert wrong == [], wrong  # the same on every token of every sentence


def test_without_early_halts_the_one_pass_replay_is_exact(model, enc):
    """Copies change nothing until a word halts: at threshold 0 the model run and the replay of
    one full pass's logits (simulate_tokens) agree, and every layer computes every piece."""
    rule = TokenHaltRule(0.0, 3, upper_from=2)
    n = len(enc)
    batch = collate(enc, list(range(n)))
    width = batch["input_ids"].shape[1]
    mask, owner = enc.counting_mask(range(n), width), enc.piece_owner(range(n), width)
    dec, computed = halting_batch(model, rule, batch, mask, owner)
    with torch.inference_mode():
        logits = model(batch["input_ids"], batch["attention_mask"], batch.get("token_type_ids"))
    sim = simulate_tokens(rule, logits, mask)
    assert torch.equal(dec.token_exit, sim.token_exit)
    assert torch.equal(dec.prediction, sim.prediction)
    lengths = torch.tensor(enc.lengths)
    assert torch.equal(computed, lengths[:, None].expand_as(computed))


def test_live_layer_is_the_layer(model, enc):
    batch = collate(enc, list(range(6)))
    hidden, inputs = model.embed(batch["input_ids"], batch["attention_mask"],
                                 batch.get("token_type_ids"))
    with torch.inference_mode():
        full = model.layer(0, hidden, inputs)
        real = batch["attention_mask"].bool()
        live = real.clone()
        live[:, 2:5] = False
        out = live_layer(model.layers[0], hidden, inputs.attention_mask, live)
    assert torch.allclose(out[live], full[live], atol=1e-5)
    assert torch.equal(out[~live], hidden[~live])


def test_per_token_flops_by_hand(model, enc):
    """A BERT layer with q of n tokens live: 2 x (q d^2 [queries] + 2 n d^2 [keys, values] +
    2 q n d [scores, weighted sum] + q d^2 [attention output] + 2 q d d_ff [feed-forward])
    under 2 FLOPs per multiply-add, matrix multiplications only; with every token live it is
    the cost table's layer."""
    d, ff = model.config.hidden_size, model.config.intermediate_size
    costs = build_live_costs(model, "mac2-matmul")
    table = build_cost_table(model, 48)
    check_full(costs, table)
    for q, n in [(1, 1), (3, 10), (7, 7), (0, 12), (20, 33)]:
        hand = 0 if q == 0 else 2 * (q * d * d + 2 * n * d * d + 2 * q * n * d + q * d * d
                                     + 2 * q * d * ff)
        assert int(costs.layer(2, q, n)) == hand, (q, n)
    rule = TokenHaltRule(0.4, 3, upper_from=2)
    n = len(enc)
    run = halting_inference(model, rule, [collate(enc, list(range(n)))], n, max(enc.lengths),
                            lambda b: (enc.counting_mask(range(n), b["input_ids"].shape[1]),
                                       enc.piece_owner(range(n), b["input_ids"].shape[1])))
    flops = costs.sentence_flops(table, run.decisions.exit_index.numpy(), np.asarray(enc.lengths),
                                 run.live_pieces)
    for i in range(n):
        length, stop = enc.lengths[i], int(run.decisions.exit_index[i])
        hand = int(table.embedding[length]) + sum(int(table.head[j][length])
                                                  for j in range(stop + 1))
        for q in run.live_pieces[i]:
            if q:
                hand += 2 * (2 * q * d * d + 2 * length * d * d + 2 * q * length * d
                             + 2 * q * d * ff)
        assert int(flops[i]) == hand
    # fewer FLOPs than running every layer on every piece to the same exit
    whole = table.per_sample_flops(run.decisions.exit_index.numpy(), np.asarray(enc.lengths))
    assert (flops <= whole).all() and (flops < whole).any()


def test_eebench_flops_counts_a_live_layer_as_by_hand(tmp_path):
    """`eebench flops --unit token --live q`: each layer with q of n tokens live costs the hand
    count; with every token live, what the plain count gives."""
    import json

    from tests.cli import invoke

    backbone = tiny.save_tiny_backbone(tmp_path / "backbone")
    config = json.loads((backbone / "config.json").read_text())
    d, ff = config["hidden_size"], config["intermediate_size"]

    def layers(*extra):
        result = invoke("flops", "--model-config", backbone, "--method", "tokee", "--unit",
                        "token", "--num-labels", TAGS, "--seq-len", 12, "--json", *extra)
        assert result.exit_code == 0, result.output
        out = json.loads(result.stdout)
        assert out["counters_agree"]
        return [r["fvcore"] for r in out["modules"] if r["module"].startswith("layer")]

    q, n = 4, 12
    hand = 2 * (2 * q * d * d + 2 * n * d * d + 2 * q * n * d + 2 * q * d * ff)
    assert layers("--live", q) == [hand] * config["num_hidden_layers"]
    assert layers("--live", n) == layers()
    refused = invoke("flops", "--model-config", backbone, "--live", 3)
    assert refused.exit_code == 2 and "--unit token" in refused.stderr


@pytest.mark.slow
def test_on_minilm_the_authors_loops_agree_with_eebench_on_every_token(minilm_path, enc):
    """On MiniLM-L6 (the pretrained backbone, token heads sharpened as above): TOKEE's authors'
    loop against the exact and the live loop, and SENTEE's authors' loop (one sentence at a
    time, its own forward) against the replay of one full pass and real dynamic inference."""
    from eebench.models.build import build_model
    from eebench.rules.token_engine import dynamic_token_batch
    from eebench.rules.tokens import SentenceEntropyRule
    from tests.test_token_rules import _sentee_loop

    torch.manual_seed(0)
    m = build_model(str(minilm_path), get_method("tokee"), TAGS)
    with torch.no_grad():
        for head in m.heads:
            head.classifier.weight.mul_(10.0)
    m.eval()
    n = len(enc)
    batch = collate(enc, list(range(n)))
    width = batch["input_ids"].shape[1]
    mask, owner = enc.counting_mask(range(n), width), enc.piece_owner(range(n), width)
    for threshold in (0.4, 0.6):
        rule = TokenHaltRule(threshold, 5, upper_from=m.num_exits // 2)
        exact, _ = halting_batch(m, rule, batch, mask, owner)
        live, _ = halting_batch(m, rule, batch, mask, owner, live=True)
        assert torch.equal(exact.token_exit, live.token_exit)
        assert torch.equal(exact.prediction, live.prediction)
        assert len(set(exact.token_exit[mask].tolist())) >= 2  # words halt at several exits
        for i in range(n):
            stop, words = _authors_tokee(m, enc.input_ids[i], enc.word_ids[i], threshold, 5)
            first = first_pieces(enc.word_ids[i])
            assert stop == int(exact.exit_index[i])
            assert words == {w: (int(exact.token_exit[i, k]), int(exact.prediction[i, k]))
                             for w, k in first.items()}
    with torch.inference_mode():
        logits = m(batch["input_ids"], batch["attention_mask"], batch.get("token_type_ids"))
    for threshold in (0.55, 0.7):
        rule = SentenceEntropyRule(threshold)
        sim = simulate_tokens(rule, logits, mask)
        real_exit, real_pred = dynamic_token_batch(m, rule, batch, mask)
        assert torch.equal(sim.exit_index, real_exit) and torch.equal(sim.prediction, real_pred)
        assert len(set(sim.exit_index.tolist())) >= 2
        for i in range(n):  # the authors' loop on the sentence alone, at batch size 1
            ids = torch.tensor([enc.input_ids[i]])
            with torch.inference_mode():
                z = m(ids, torch.ones_like(ids))[:, 0]  # [E, T, C]
            words = list(first_pieces(enc.word_ids[i]).values())
            stop, _, preds = _sentee_loop(z[:, words], threshold, "max")
            assert stop == int(sim.exit_index[i])
            assert preds == sim.prediction[i, words].tolist()
