"""Multi-exit token classification: token heads on every family, the loss over exits on token
labels, a few training steps, and real sentence-level early exit against the simulation, on a
tiny random backbone with real CoNLL-2003 dev sentences and the real MiniLM tokenizer."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from eebench.data.batching import IGNORE, collate
from eebench.data.tokens import encode_words
from eebench.methods import EarlyExitMethod, get_method
from eebench.methods.deebert import DeeBERT
from eebench.methods.stages import exit_loss, joint
from eebench.models.token_heads import TokenExitHead
from eebench.models.units import counting_tokens
from eebench.rules.engine import dynamic_batch
from eebench.rules.tokens import SentenceEntropyRule, token_uncertainty
from eebench.tasks.catalog import get_task
from eebench.tasks.loaders import load_split
from tests import tiny

CONLL = get_task("conll2003")
TAGS = len(CONLL.labels)


def TokenDeeBERT() -> DeeBERT:  # noqa: N802
    """DeeBERT's scheme with a token head after every layer: its token model."""
    return DeeBERT(unit="token")


def TokenJoint() -> EarlyExitMethod:  # noqa: N802
    """A token head after every layer, one joint stage summing every exit's loss (SENTEE's)."""
    return get_method("sentee")


@pytest.fixture(scope="module")
def conll(data_dir):
    dev = load_split("conll2003", "dev", data_dir).take(32, seed=0)
    return encode_words(dev, tiny.tokenizer(), 64)


def _model(family: str = "bert", method: EarlyExitMethod | None = None, seed: int = 0):
    return tiny.tiny_model(method or TokenDeeBERT(), num_labels=TAGS, seed=seed, family=family)


def _logits(model, batch) -> torch.Tensor:
    with torch.inference_mode():
        return model(batch["input_ids"], batch["attention_mask"], batch.get("token_type_ids"))


# ------------------------------------------------------------------------- heads and the model
@pytest.mark.parametrize("family", tiny.FAMILIES)
def test_token_heads_on_every_family_walk_as_forward(family, conll):
    model = _model(family)
    assert model.unit == "token" and all(isinstance(h, TokenExitHead) for h in model.heads)
    assert not any(n.endswith("pooler.dense.weight") for n, _ in model.heads.named_parameters())
    batch = collate(conll, list(range(8)))
    full = _logits(model, batch)
    b, t = batch["input_ids"].shape
    assert full.shape == (model.num_exits, b, t, TAGS)
    walk = model.exit_walk(batch["input_ids"], batch["attention_mask"],
                           batch.get("token_type_ids"))
    rows = torch.arange(b)
    with torch.inference_mode():
        for j in range(model.num_exits):
            logits, signals = walk.step(j, emit=True)
            w = logits.shape[1]
            assert signals == {} and logits.shape == (len(rows), w, TAGS)
            real = batch["attention_mask"][rows, :w].bool()  # padding's logits are not read
            torch.testing.assert_close(logits[real], full[j][rows, :w][real],
                                       atol=1e-5, rtol=1e-4)
            keep = torch.arange(len(rows)) % 2 == 0  # half the sentences leave at every exit
            rows = rows[keep]
            walk.keep(keep)


def test_unit_is_recorded_only_for_token_models():
    token, sequence = _model(), tiny.tiny_model("deebert")
    assert token.model_config()["unit"] == "token"
    assert sequence.unit == "sequence" and "unit" not in sequence.model_config()
    mixed = torch.nn.ModuleList([*sequence.heads[:2], TokenExitHead(sequence.config, 2)])
    from eebench.models.multi_exit import ExitHeads, MultiExitModel

    with pytest.raises(ValueError, match="mix units"):
        MultiExitModel(sequence.config, sequence.embeddings, list(sequence.layers)[:3],
                       ExitHeads(mixed, (1, 2, 3)), 2, TokenDeeBERT())


# --------------------------------------------------------------------------------- the loss
def test_token_loss_ignores_uncounted_tokens_and_is_the_hand_sum():
    g = torch.Generator().manual_seed(0)
    logits = torch.randn(4, 3, 7, TAGS, generator=g)  # [E, B, T, C]
    labels = torch.randint(0, TAGS, (3, 7), generator=g)
    labels[:, 0] = labels[:, -1] = IGNORE
    labels[1, 2:5] = IGNORE
    method = TokenJoint()
    loss = method.loss(logits, labels, joint("joint"), False)
    hand = 0.0
    for j in range(4):
        terms = [-torch.log_softmax(logits[j, b, t].double(), -1)[labels[b, t]]
                 for b in range(3) for t in range(7) if labels[b, t] != IGNORE]
        hand += sum(terms) / len(terms)
    torch.testing.assert_close(loss.double(), hand, atol=1e-6, rtol=1e-6)
    noisy = logits.clone()
    noisy[:, labels == IGNORE] = 1e4  # what an ignored token predicts changes nothing
    assert method.loss(noisy, labels, joint("joint"), False) == loss
    nothing = exit_loss(logits[0].requires_grad_(), torch.full((3, 7), IGNORE), False)
    assert nothing.item() == 0.0 and nothing.requires_grad
    with pytest.raises(ValueError, match="regression"):
        exit_loss(logits[0], labels, True)
    seq_logits, seq_labels = torch.randn(5, 3, generator=g), torch.tensor([0, 2, 1, 1, 0])
    assert exit_loss(seq_logits, seq_labels, False) == F.cross_entropy(seq_logits, seq_labels)


def test_a_few_training_steps_lower_the_token_loss(conll):
    method = TokenJoint()
    model = _model(method=method, seed=1)
    stage = method.stages()[0]
    batches = [collate(conll, list(range(i, i + 16))) for i in (0, 16)]

    def total() -> float:
        model.eval()
        with torch.no_grad():
            return sum(float(method.loss(model(b["input_ids"], b["attention_mask"],
                                               b["token_type_ids"]), b["labels"], stage, False))
                       for b in batches)

    before = total()
    torch.manual_seed(0)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3)
    model.train()
    for _ in range(4):
        for b in batches:
            out = model(b["input_ids"], b["attention_mask"], b["token_type_ids"])
            loss = method.loss(out, b["labels"], stage, False)
            opt.zero_grad()
            loss.backward()
            opt.step()
    after = total()
    assert after < 0.8 * before, (before, after)


# ------------------------------------------------------------ real sentence-level early exit
def _confident(model):
    """Random heads are near-uniform; larger weights spread the sentences' uncertainties."""
    with torch.no_grad():
        for p in model.parameters():
            if p.dim() == 2:
                p.normal_(0, 0.3)
        for p in model.heads.parameters():
            p.mul_(30)
    return model.eval()


def _thresholds(logits, mask, aggregate: str) -> list[float]:
    """Midpoints between observed sentence uncertainties (every exit but the last): a mix of
    exit layers, and no decision within float noise of its threshold."""
    u = token_uncertainty(logits[:-1]).masked_fill(~mask, 0.0)
    agg = (u.amax(-1) if aggregate == "max" else u.sum(-1) / mask.sum(-1)).flatten()
    values = agg.sort().values
    picks = [int(q * (len(values) - 1)) for q in (0.15, 0.4, 0.6, 0.85)]
    return [float(values[k] + values[k + 1]) / 2 for k in picks]


# the simulation against real sentence-level exit: tests/test_units.py


def test_dynamic_batch_predicts_counting_tokens_only_and_full_runs_everything(conll):
    model = _confident(_model(seed=3))
    batch = collate(conll, list(range(6)))
    mask = counting_tokens(batch)
    assert torch.equal(counting_tokens(batch, conll.word_ids), mask)  # unlabelled: word ids
    exits, preds = dynamic_batch(model, SentenceEntropyRule(2.0), batch)
    assert exits.tolist() == [0] * 6
    assert ((preds >= 0) == mask).all()
    full_exits, full_preds = dynamic_batch(model, SentenceEntropyRule(2.0), batch, full=True)
    last = _logits(model, batch)[-1].argmax(-1)
    assert full_exits.tolist() == [model.num_exits - 1] * 6
    assert torch.equal(full_preds, last.where(mask, -1))
    with pytest.raises(TypeError, match="decides over tokens"):  # a sequence model's unit
        dynamic_batch(tiny.tiny_model("deebert"), SentenceEntropyRule(0.5), batch)
    with pytest.raises(ValueError, match="word_ids"):
        counting_tokens({k: v for k, v in batch.items() if k != "labels"})
