"""One-pass exit simulation against real dynamic inference, and against the papers' loops."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from eebench.data.batching import collate, encode, eval_batches
from eebench.methods import derived
from eebench.methods.base import get_method
from eebench.models.outputs import collect_exit_logits
from eebench.models.pooling import POOLINGS
from eebench.rules.engine import compare, dynamic_batch, dynamic_inference, simulate
from eebench.tasks.loaders import load_split
from tests import tiny

# methods whose one model sweeps an exit rule (static trains a model per sweep value; a cascade
# chains several models: tests/test_cascade.py)
DYNAMIC = [name for name in tiny.TEXT_METHODS if len(get_method(name).variants([1.0, 2.0])) == 1
           and len(get_method(name).models(6)) == 1]


@pytest.fixture(scope="module")
def rte_dev(data_dir):
    return load_split("rte", "dev", data_dir).take(24, seed=0)


def _encoded(examples, max_len=64):
    return encode(examples, tiny.tokenizer(), max_len)


def _confident(model, backbone_std: float | None = None):
    """Untrained exit heads give near-uniform, sample-independent outputs. Larger weights (and, for
    a random backbone, weights that mix tokens strongly) make every rule exit at a mix of layers,
    which is what the comparison needs."""
    with torch.no_grad():
        if backbone_std is not None:
            for p in model.parameters():
                if p.dim() == 2:
                    p.normal_(0, backbone_std)
        for p in model.heads.parameters():
            p.mul_(30)
    return model


def _sweep(method, out) -> list[float]:
    """The method's own grid plus values placed among the observed exit quantities, so that
    every test sees a mix of early and late exits (random heads are not confident)."""
    logits = out.logits
    values = list(derived.default_sweep(method, logits.shape[0], False, logits.shape[-1]))
    p = logits.softmax(-1)
    quantity = {"entropy": -(p * p.clamp_min(1e-12).log()).sum(-1),
                "maxprob": p.max(-1).values, "calibrated-maxprob": p.max(-1).values,
                "learned": out.signals.get("exit_score")}.get(method.rule)
    if quantity is not None:
        q = torch.quantile(quantity.flatten().float(), torch.tensor([.2, .5, .8]))
        values += [min(float(v), 1.0) for v in q]
    return values


def _facts(model):
    from eebench.rules.catalog import ModelFacts

    return ModelFacts(False, model.num_labels, model.temperatures(), model.signal_names)


# simulation against real dynamic inference, for every unit: tests/test_units.py


def test_collect_exit_logits_restores_order_and_matches_single_samples(rte_dev):
    model = tiny.tiny_model("pabee", seed=1).eval()
    enc = _encoded(rte_dev)
    out = collect_exit_logits(model, eval_batches(enc, 7, sort_by_length=True))
    assert out.logits.shape == (model.num_exits, len(enc), 2)
    assert out.lengths.tolist() == enc.lengths
    assert out.labels.tolist() == rte_dev.labels
    for i in (0, 5, 23):
        b = collate(enc, [i])
        with torch.inference_mode():
            alone = model(b["input_ids"], b["attention_mask"], b.get("token_type_ids"))
        torch.testing.assert_close(out.logits[:, i], alone[:, 0], atol=1e-5, rtol=1e-4)


def _deebert_loop(logits: torch.Tensor, threshold: float) -> list[int]:
    """DeeBERT's evaluation, one sample at a time: the first off-ramp whose entropy < threshold."""
    exits = []
    for i in range(logits.shape[1]):
        chosen = logits.shape[0] - 1
        for j in range(logits.shape[0]):
            p = logits[j, i].softmax(-1).tolist()
            entropy = -sum(x * math.log(x) for x in p if x > 0)
            if entropy < threshold:
                chosen = j
                break
        exits.append(chosen)
    return exits


def _pabee_loop(logits: torch.Tensor, patience: int) -> list[int]:
    """PABEE's evaluation, one sample at a time, as in the authors' code."""
    exits = []
    for i in range(logits.shape[1]):
        counter, prev, chosen = 0, None, logits.shape[0] - 1
        for j in range(logits.shape[0]):
            pred = int(logits[j, i].argmax())
            counter = counter + 1 if prev is not None and pred == prev else 0
            prev = pred
            if counter == patience:
                chosen = j
                break
        exits.append(chosen)
    return exits


def test_simulation_matches_the_papers_loops():
    g = torch.Generator().manual_seed(0)
    logits = torch.randn(6, 300, 3, generator=g) * 2
    deebert, pabee = get_method("deebert"), get_method("pabee")
    for t in (0.0, 0.3, 0.6, 0.9, 1.2):
        sim = simulate(deebert.exit_rule(t, False), logits, False)
        assert sim.exit_index.tolist() == _deebert_loop(logits, t)
        expect = logits[torch.as_tensor(sim.exit_index), torch.arange(300)].argmax(-1)
        assert sim.prediction.tolist() == expect.tolist()
    for p in range(1, 7):
        sim = simulate(pabee.exit_rule(p, False), logits, False)
        assert sim.exit_index.tolist() == _pabee_loop(logits, p)


@pytest.mark.parametrize("pooling", POOLINGS)
def test_batch_shrinking_cuts_padding_without_changing_results(pooling, rte_dev):
    method = get_method("pabee")
    model = _confident(tiny.tiny_model(method, seed=2, pooling=pooling).eval(),
                       backbone_std=0.3)
    enc = _encoded(rte_dev)
    order = sorted(range(len(enc)), key=lambda i: enc.lengths[i])  # short ones exit, long stay
    batch = collate(enc, order)
    rule = method.exit_rule(1, False)
    e_batched, p_batched = dynamic_batch(model, rule, batch, False)
    assert len(set(e_batched.tolist())) > 1  # samples left at several exits: padding was cut
    for row, i in enumerate(order):
        e1, p1 = dynamic_batch(model, method.exit_rule(1, False), collate(enc, [i]), False)
        assert (int(e1[0]), int(p1[0])) == (int(e_batched[row]), int(p_batched[row]))


def test_full_mode_runs_only_the_last_exit(rte_dev):
    model = tiny.tiny_model("deebert", seed=4).eval()
    enc = _encoded(rte_dev)
    batch = collate(enc, list(range(len(enc))))
    exits, preds = dynamic_batch(model, get_method("deebert").exit_rule(10.0, False), batch,
                                 False, full=True)
    assert exits.tolist() == [model.num_exits - 1] * len(enc)
    with torch.inference_mode():
        last = model(batch["input_ids"], batch["attention_mask"],
                     batch.get("token_type_ids"))[-1].argmax(-1)
    assert preds.long().tolist() == last.tolist()


def _few(method, out) -> list[float]:
    """Three values of a sweep: where the rule reads a quantity, its 20th, 50th and 80th
    percentiles over the observed exits (early, middle and late exits mixed); else the lowest,
    middle and highest of the method's own grid. The whole sweep, at batch size 1 too, is proven
    on tiny models above."""
    values = _sweep(method, out)
    grid = len(derived.default_sweep(method, out.logits.shape[0], False, out.logits.shape[-1]))
    observed = values[grid:]
    return observed or [values[0], values[len(values) // 2], values[-1]]


@pytest.mark.slow  # the real MiniLM-L6 on 32 sentences, three values at one batched size
@pytest.mark.parametrize("pooling", POOLINGS)
@pytest.mark.parametrize("name", DYNAMIC)
def test_simulation_equals_real_inference_on_minilm(name, pooling, data_dir, minilm_backbone):
    """The real pretrained MiniLM-L6 backbone (exit heads untrained) on real SST-2 sentences."""
    method = get_method(name)
    torch.manual_seed(0)
    model = _confident(minilm_backbone(method, pooling).eval())
    assert model.pooling == pooling
    examples = load_split("sst2", "dev", data_dir).take(32, seed=1)
    enc = encode(examples, tiny.tokenizer(), 64)
    out = collect_exit_logits(model, eval_batches(enc, 16, sort_by_length=True))
    for value in _few(method, out):
        rule = method.exit_rule(value, False, _facts(model))
        sim = simulate(rule, out.logits, False, out.signals)
        batches = (collate(enc, list(range(i, min(i + 8, len(enc)))))
                   for i in range(0, len(enc), 8))
        real = dynamic_inference(model, rule, batches, len(enc), False)
        assert compare(sim, real).unexplained == 0
    np.testing.assert_array_equal(out.lengths, enc.lengths)
