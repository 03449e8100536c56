"""Exit units as strategies (eebench.models.units): the one-pass simulation and real dynamic
inference (the one loop, eebench.rules.engine.exit_loop) decide alike for every unit: a label
per text on every dynamic method and pooling, a sentence-level decision over tokens on every
aggregate."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from eebench.data.batching import eval_batches
from eebench.methods.base import get_method
from eebench.models.pooling import POOLINGS
from eebench.models.units import SEQUENCE, TOKEN, UNITS, model_unit, unit_of
from eebench.rules.engine import compare, dynamic_inference, simulate_pass
from eebench.rules.tokens import SentenceEntropyRule
from eebench.tasks.loaders import load_split
from tests import test_evaluate as texts
from tests import test_token_model as tokens
from tests import tiny


@pytest.fixture(scope="module")
def rte_dev(data_dir):
    return load_split("rte", "dev", data_dir).take(24, seed=0)


@pytest.fixture(scope="module")
def conll(data_dir):
    dev = load_split("conll2003", "dev", data_dir).take(32, seed=0)
    return tokens.encode_words(dev, tiny.tokenizer(), 64)


def _texts(case, request):
    """A dynamic method's tiny model on RTE sentences: its rule at its sweep's values."""
    name, pooling = case
    method = get_method(name)
    model = texts._confident(tiny.tiny_model(method, seed=3, pooling=pooling).eval(),
                             backbone_std=0.3)
    enc = texts._encoded(request.getfixturevalue("rte_dev"))
    out = SEQUENCE.collect(model, enc, eval_batches(enc, 8, sort_by_length=True))
    rules = [lambda v=v: method.exit_rule(v, False, texts._facts(model))
             for v in texts._sweep(method, out)]
    return model, out, rules, [(1, enc), (5, enc)]


def _sentences(aggregate, request):
    """A token model on CoNLL-2003 sentences: SENTEE's rule (max or mean of the words'
    uncertainties) at thresholds between observed ones, never (0) and always (2) exiting;
    labelled and unlabelled batches (their counting tokens from word ids)."""
    conll = request.getfixturevalue("conll")
    model = tokens._confident(tokens._model(seed=2))
    out = TOKEN.collect(model, conll, eval_batches(conll, 8, sort_by_length=True))
    values = [0.0, *tokens._thresholds(out.logits, out.mask, aggregate), 2.0]
    rules = [lambda v=v: SentenceEntropyRule(v, aggregate) for v in values]
    return model, out, rules, [(1, conll), (5, replace(conll, labels=None)), (32, conll)]


SETUPS = {SEQUENCE.name: _texts, TOKEN.name: _sentences}
CASES = ([(SEQUENCE, (name, pooling)) for name in texts.DYNAMIC for pooling in POOLINGS]
         + [(TOKEN, aggregate) for aggregate in ("max", "mean")])


def test_every_unit_has_a_case():
    # a generated token runs in this loop too, over a decoder walk (CALM's): its real decoding is
    # held equal to CALM written out in tests/test_calm_loop.py, and to its oracle simulation,
    # prompt by prompt, in tests/test_decoder_sweep.py
    looped = {name for name, unit in UNITS.items() if not unit.generates}
    assert {u.name for u, _ in CASES} == looped == set(SETUPS)


@pytest.mark.parametrize(("unit", "case"), CASES,
                         ids=[f"{u.name}-{'-'.join(np.atleast_1d(c))}" for u, c in CASES])
def test_simulation_equals_real_dynamic_inference(unit, case, request):
    model, out, rules, feeds = SETUPS[unit.name](case, request)
    assert model_unit(model) is unit
    mixed = set()
    for make in rules:
        sim = simulate_pass(make(), out, False, unit)
        mixed |= set(np.asarray(sim.exit_index).tolist())
        for bs, split in feeds:
            real = dynamic_inference(model, make(), eval_batches(split, bs), len(split),
                                     enc=split)
            agree = compare(sim, real, unit=unit)
            assert agree.compared == len(split) and agree.unexplained == 0, (case, bs, agree)
    assert len(mixed) > 1, "the sweep never produced a mix of exit layers"


def test_unit_of_names_and_refuses():
    assert unit_of(None) is SEQUENCE and unit_of("token") is TOKEN and unit_of(TOKEN) is TOKEN
    assert TOKEN.per_token and not SEQUENCE.per_token
    with pytest.raises(ValueError, match="unknown exit unit"):
        unit_of("word")


def test_a_generated_token_is_not_scored_or_costed_as_a_text():
    """A decoder's points are scored over whole decodes (eebench.tasks.lm_metrics) and costed
    per decode (eebench.measure.decoder_flops): the unit refuses the per-answer ways a text's
    evaluator would use, rather than giving a classifier's numbers."""
    from eebench.models.units import GENERATED
    from eebench.tasks.catalog import get_task

    answers = np.array([1, 2, 3])
    with pytest.raises(NotImplementedError, match="lm_metrics"):
        GENERATED.score(get_task("humaneval-gen"), answers, answers)
    with pytest.raises(NotImplementedError, match="decoder_flops"):
        GENERATED.flops_along(None, np.zeros(3, dtype=int), np.ones(3, dtype=int))
