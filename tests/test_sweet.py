"""SWEET's training gradient, parameter by parameter, against the authors' loop.

schwartz-lab-NLP/SWEET a2d8a30, code/models/bert/modeling_bert.py 1729-1755 (and
code/models/deberta/modeling_deberta.py 1264-1289, the same loop): for each exit i the encoder runs
layers start_idx..exit_layers[i] (0-based) on `last_hidden_state`, the previous exit's output
after `hidden_state.detach()` (the embeddings for the first), then the one shared pooler ->
dropout -> classifiers[i]; the loss is MultiExitCrossEntropyLoss, the sum of the exits' mean
cross-entropies (code/utils/losses.py). `_authors_loss` below re-implements that loop on the
Hugging Face modules directly (none of eebench's forward), with a relative position bias, where a
family has one, computed afresh in every call of the encoder as the authors' DeBERTa
`get_rel_embedding()` is (modeling_deberta.py 431): so every exit's loss reaches it.

The 12-layer benchmark runs MPNet, the 6-layer one MiniLM (BERT): both families are checked, with
an exit after every layer (eebench's default) and with exits placed as `exit_layers` places them.
"""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from eebench.methods import derived
from eebench.methods.base import get_method
from tests import tiny

IDS = torch.tensor([[101, 2023, 2003, 1037, 2204, 3185, 102], [101, 6659, 102, 0, 0, 0, 0],
                    [101, 2054, 1037, 2307, 2154, 102, 0]])
MASK = (IDS != 0).long()
LABELS = torch.tensor([1, 0, 1])


def _build(family: str, exit_layers: list[int] | None, depth: int):
    settings = {} if exit_layers is None else {"exit_layers": exit_layers}
    method = get_method("sweet", **settings)
    hf = tiny.tiny_hf_model(seed=5, family=family, num_layers=depth)
    torch.manual_seed(6)
    from eebench.models.build import assemble

    model = assemble(hf, method, 2, pooling="mean")  # eval mode: no dropout, so no RNG order
    return method, hf, model


def _authors_loss(hf, model) -> torch.Tensor:
    """The authors' training forward (modeling_bert.py 1729-1755, SWEET on) on `hf`'s modules."""
    keep = MASK[:, None, None, :].float()
    additive = (1.0 - keep) * torch.finfo(torch.float32).min
    mpnet = hf.config.model_type == "mpnet"
    pooler = model.heads[0].pooler  # the one pooler (BertModel.pooler), read by every exit
    hidden, start, losses = None, 0, []
    for i, exit_layer in enumerate(model.exit_layers):  # 1-based here, 0-based in theirs
        if hidden is None:  # BertModel.forward: the embeddings only when no last_hidden_state
            hidden = hf.embeddings(input_ids=IDS) if mpnet else hf.embeddings(
                input_ids=IDS, token_type_ids=torch.zeros_like(IDS))
        extra = {"position_bias": hf.encoder.compute_position_bias(hidden)} if mpnet else {}
        for layer in hf.encoder.layer[start:exit_layer]:
            out = layer(hidden, attention_mask=additive, **extra)
            hidden = out[0] if isinstance(out, tuple) else out
        head = model.heads[i]
        assert head.pooler is pooler
        logits = head.classifier(head.dropout(pooler(hidden, MASK)))
        losses.append(F.cross_entropy(logits, LABELS))
        hidden = hidden.detach()  # `if self.SWEET_training: hidden_state = hidden_state.detach()`
        start = exit_layer
    return torch.stack(losses).sum()


def _grads(model, loss: torch.Tensor) -> dict[str, torch.Tensor]:
    model.zero_grad(set_to_none=True)
    loss.backward()
    return {n: (torch.zeros_like(p) if p.grad is None else p.grad.clone())
            for n, p in model.named_parameters()}


@pytest.mark.parametrize("family", ["bert", "mpnet"])
@pytest.mark.parametrize("exit_layers", [None, [1, 3, 4], [2, 4]])
def test_sweet_gradient_is_the_authors_parameter_by_parameter(family, exit_layers):
    method, hf, model = _build(family, exit_layers, depth=4)
    route = derived.route(method, method.stages()[0], model.num_exits)
    logits = model(IDS, MASK, route=route)
    ours = _grads(model, method.loss(list(logits), LABELS, method.stages()[0], False))
    theirs = _grads(model, _authors_loss(hf, model))
    assert ours.keys() == theirs.keys()
    for name in ours:
        torch.testing.assert_close(ours[name], theirs[name], rtol=1e-4, atol=1e-6, msg=name)
    # and the gradient is not trivially zero anywhere that the authors' loop trains
    assert all(bool(g.abs().sum() > 0) for n, g in theirs.items() if "layers" in n
               and "bias" not in n)


def _reached(grads: dict[str, torch.Tensor], prefix: str) -> bool:
    return any(bool(g.abs().sum() > 0) for n, g in grads.items() if n.startswith(prefix))


@pytest.mark.parametrize("exit_index", [0, 1, 2])
def test_sweet_on_mpnet_each_exit_trains_its_block_and_the_shared_parts(exit_index):
    """Exits after layers 1, 3 and 4 of a 4-layer MPNet: exit j's loss reaches layers
    (exit_{j-1}, exit_j], its own classifier, the shared pooler and the relative position bias
    every layer reads (as the authors' DeBERTa's relative embeddings); the token embeddings
    only from exit 1."""
    method, _, model = _build("mpnet", [1, 3, 4], depth=4)
    logits = model(IDS, MASK, route=derived.route(method, method.stages()[0], model.num_exits))
    grads = _grads(model, F.cross_entropy(logits[exit_index], LABELS))
    block = {0: {0}, 1: {1, 2}, 2: {3}}[exit_index]
    for i in range(4):
        assert _reached(grads, f"layers.{i}.") == (i in block), (exit_index, i)
    assert _reached(grads, "embeddings.embeddings.") == (exit_index == 0)
    assert _reached(grads, "embeddings.relative_attention_bias.")
    assert _reached(grads, "heads.0.pooler.")
    for j in range(3):
        assert _reached(grads, f"heads.{j}.classifier.") == (j == exit_index)
