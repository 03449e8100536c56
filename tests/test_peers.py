"""benchmarks/peers.py without the authors' code: an eebench model's weights written in the
authors' DeeBERT and PABEE layouts (benchmarks/_peers.py) are read back by eebench's importer as
the same model, compute every exit's logits as the authors' forward written by hand
(tests/authors.py) does, and give the same exit decisions as the authors' per-sample loops,
counted by the script's own agreement function.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import torch

from eebench.methods.base import get_method
from eebench.rules.engine import simulate
from tests import authors as A
from tests import tiny

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
from _peers import agreement, authors_state_dict  # noqa: E402

SENTENCES = ["a gripping , funny film", "dull and far too long", "it is what it is",
             "the best thing in it is the score , and the score is bad", "charming",
             "an ambitious mess that never finds its feet", "i loved every minute",
             "neither good nor bad"]
SETTINGS = {"deebert": [0.0, 0.1, 0.3, 0.5, 0.65, 0.7], "pabee": [1, 2, 3]}


def _model(method: str, **settings):
    """A tiny 3-layer BERT (tests/authors.py's depth) with [CLS] heads, its weights large enough
    (std 0.5) that the samples' entropies spread over (0, ln 2) and their predictions change
    from layer to layer."""
    return tiny.tiny_model(get_method(method, **settings), depth=A.LAYERS, pooling="cls",
                           initializer_range=0.5)


def _singles():
    tok = tiny.tokenizer()
    return [(torch.tensor(e["input_ids"]), torch.tensor(e["token_type_ids"]))
            for e in (tok(s) for s in SENTENCES)]


def _their_decision(method, state, config, ids, types, value) -> tuple[int, int]:
    if method == "deebert":
        layer, logits = A.deebert_loop(state, "bert", ids, types, config, value)
    else:
        layer, logits = A.pabee_loop(A.pabee_exits(state, "bert", ids, types, config), int(value))
    return layer, int(logits.argmax())


@pytest.mark.parametrize("method", ["deebert", "pabee"])
def test_weights_in_the_authors_layout_are_the_same_model(method, tmp_path):
    from eebench.models.convert import open_checkpoint
    from eebench.models.convert.build import load_model

    model = _model(method)
    config, state = authors_state_dict(model, method)
    # eebench's importer reads them back as this model, tensor for tensor
    folder = A.write(tmp_path / method, config, state)
    back = load_model(open_checkpoint(str(folder)), get_method(method))
    ours = model.state_dict()
    assert back.state_dict().keys() == ours.keys()
    for k, v in back.state_dict().items():
        assert torch.equal(v, ours[k]), k

    singles = _singles()
    exits = []
    for ids, types in singles:
        with torch.no_grad():
            logits = model(ids[None], torch.ones_like(ids)[None], types[None])[:, 0]
            if method == "deebert":  # off-ramps 1..L-1, the top classifier, the L-th off-ramp
                *reference, last_ramp = A.deebert_exits(state, "bert", ids, types, config)
                torch.testing.assert_close(last_ramp, reference[-1], atol=0, rtol=0)
            else:
                reference = A.pabee_exits(state, "bert", ids, types, config)
        torch.testing.assert_close(logits, torch.stack(reference), atol=1e-4, rtol=1e-4)
        exits.append(logits)
    logits = torch.stack(exits, 1)  # [E, N, C]

    mixed = 0
    for value in SETTINGS[method]:
        dec = simulate(get_method(method).exit_rule(float(value), False), logits, False)
        theirs = [_their_decision(method, state, config, ids, types, value)
                  for ids, types in singles]
        got = agreement([t[0] for t in theirs], [t[1] for t in theirs],
                        dec.exit_index + 1, dec.prediction, near=dec.margin < 1e-4)
        assert got["either"] == 0 and got["compared"] == len(SENTENCES), (value, got)
        mixed += len(set(dec.exit_index.tolist())) > 1
    assert mixed >= 1  # some setting sends the samples out at different layers


def test_agreement_counts_each_kind_of_difference():
    got = agreement([1, 2, 3, 3], [0, 1, 1, 0], [1, 3, 3, 3], [0, 1, 0, 0],
                    near=[False, True, False, False])
    assert (got["exit_layer"], got["prediction"], got["either"]) == (1, 1, 2)
    assert got["samples"] == [1, 2] and got["near_threshold"] == 1


def test_models_the_authors_classes_cannot_hold_are_refused():
    with pytest.raises(ValueError, match="pool"):
        authors_state_dict(tiny.tiny_model("deebert", depth=2, pooling="mean"), "deebert")
    with pytest.raises(ValueError, match="one pooler"):
        authors_state_dict(_model("pabee", shared_pooler=False), "pabee")
    with pytest.raises(ValueError, match="no authors' layout"):
        authors_state_dict(_model("deebert"), "elasticbert")
