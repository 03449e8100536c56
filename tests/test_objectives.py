"""The new methods' training objectives, checked by hand on small tensors and toy models, against
what the authors' code computes (see each method's module docstring).

FastBERT's self-distillation, ElasticBERT's gradient equilibrium, SWEET's detached blocks,
BERxiT's alternating schedule and learning-to-exit targets, maxprob's temperature calibration on
a held-out slice, and the layer weights PCEE shares with PABEE.
"""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

from eebench.errors import UsageError
from eebench.methods import derived
from eebench.methods.base import get_method
from eebench.tasks.catalog import get_task
from eebench.tasks.loaders import load_split
from tests import tiny

TRAIN = dict(epochs=2, batch_size=16, max_train_samples=64, max_seq_length=32, lr=5e-3,
             heads_lr=5e-3, warmup_ratio=0.0, save_every=0, eval_batch_size=64, seed=3)
IDS = torch.tensor([[101, 2023, 2003, 1037, 2204, 3185, 102], [101, 6659, 102, 0, 0, 0, 0]])
MASK = (IDS != 0).long()


def _ce(logits: torch.Tensor, labels: torch.Tensor) -> float:
    """Cross-entropy by hand: the mean over rows of logsumexp - the true class's logit."""
    rows = [math.log(sum(math.exp(v) for v in row.tolist())) - float(row[y])
            for row, y in zip(logits.detach(), labels.tolist(), strict=True)]
    return sum(rows) / len(rows)


def _mse(pred: torch.Tensor, target: torch.Tensor) -> float:
    return sum((float(a) - float(b)) ** 2 for a, b in zip(pred, target, strict=True)) / len(pred)


def _zero_or_none(p: torch.nn.Parameter) -> bool:
    return p.grad is None or bool((p.grad == 0).all())


def _reached(p: torch.nn.Parameter) -> bool:
    return p.grad is not None and bool(p.grad.abs().sum() > 0)


@pytest.fixture(scope="module")
def tiny_backbone(tmp_path_factory) -> str:
    return str(tiny.save_tiny_backbone(tmp_path_factory.mktemp("tiny-bert"), seed=7))


@pytest.fixture(scope="module")
def rte(data_dir):
    spec = get_task("rte")
    return spec, load_split(spec, "train", data_dir), load_split(spec, "dev", data_dir).take(8, 0)


def _train(method, rte, backbone, out, **overrides):
    from eebench.train.config import TrainConfig
    from eebench.train.loop import train

    spec, tr, dev = rte
    return train(method, spec, backbone, tr, dev, TrainConfig.parse({**TRAIN, **overrides}), out,
                 pooling="mean")


# ---------------------------------------------------------------------------------- FastBERT
def test_fastbert_distillation_is_kl_teacher_to_student():
    """KLDivLoss(log_softmax(student), softmax(teacher), 'batchmean') = mean over the batch of
    sum_c p_t (log p_t - log p_s) = KL(p_teacher || p_student) (run_fastbert.py 116-129)."""
    from eebench.methods.fastbert import distillation_loss

    student = torch.tensor([[1.0, -0.5, 0.2], [0.0, 2.0, -1.0]])
    teacher = torch.tensor([[0.3, 0.3, -2.0], [1.5, -1.0, 0.5]])

    def kl(p_logits, q_logits):  # KL(softmax(p) || softmax(q)) per row, by hand, averaged
        total = 0.0
        for a, b in zip(p_logits.tolist(), q_logits.tolist(), strict=True):
            za, zb = sum(math.exp(v) for v in a), sum(math.exp(v) for v in b)
            p, q = [math.exp(v) / za for v in a], [math.exp(v) / zb for v in b]
            total += sum(pi * math.log(pi / qi) for pi, qi in zip(p, q, strict=True))
        return total / len(p_logits)

    got = float(distillation_loss(student, teacher))
    assert math.isclose(got, kl(teacher, student), rel_tol=1e-5)
    swapped = float(distillation_loss(teacher, student))
    assert math.isclose(swapped, kl(student, teacher), rel_tol=1e-5)
    assert abs(got - swapped) > 1e-2  # the direction matters on these logits
    assert float(distillation_loss(teacher, teacher)) == pytest.approx(0.0, abs=1e-7)


def test_fastbert_no_gradient_reaches_the_teacher():
    from eebench.methods.fastbert import distillation_loss

    student = torch.randn(4, 2, requires_grad=True)
    teacher = torch.randn(4, 2, requires_grad=True)
    distillation_loss(student, teacher).backward()
    assert teacher.grad is None and _reached(student)


def test_fastbert_stage_two_loss_sums_students_and_ignores_labels():
    method = get_method("fastbert")
    stage = method.stages()[1]
    assert stage.name == "distillation"
    g = torch.Generator().manual_seed(1)
    logits = [torch.randn(5, 3, generator=g) for _ in range(4)]
    from eebench.methods.fastbert import distillation_loss

    expect = sum(float(distillation_loss(z, logits[-1])) for z in logits[:-1])
    for labels in (torch.tensor([0, 1, 2, 0, 1]), torch.tensor([2, 2, 2, 2, 2])):
        got = float(method.loss(logits, labels, stage, is_regression=False))
        assert math.isclose(got, expect, rel_tol=1e-6)
    first = method.stages()[0]  # stage 1: the teacher's cross-entropy alone
    labels = torch.tensor([0, 1, 2, 0, 1])
    assert math.isclose(float(method.loss(logits, labels, first, False)),
                        _ce(logits[-1], labels), rel_tol=1e-5)


def test_fastbert_distillation_trains_only_the_students():
    model, method = tiny.tiny_model("fastbert"), get_method("fastbert")
    backbone_stage, distill = method.stages()
    trainable = {id(p) for p in distill.trainable(model)}
    frozen = {id(p) for p in [*model.backbone_parameters(), *model.heads[-1].parameters()]}
    students = {id(p) for h in model.heads[:-1] for p in h.parameters()}
    assert trainable == students and not trainable & frozen
    assert trainable | frozen == {id(p) for p in model.parameters()}  # nothing else exists
    assert {id(p) for p in backbone_stage.trainable(model)} == frozen
    assert distill.exit_indices(model.num_exits) == list(range(model.num_exits - 1))


def test_fastbert_backbone_and_teacher_bit_identical_through_distillation(
        rte, tiny_backbone, tmp_path, monkeypatch):
    """A real tiny run: the weights before and after stage 2 differ only in the students."""
    from eebench.train import loop

    snapshots: dict[str, dict[str, torch.Tensor]] = {}
    run_stage = loop._Trainer.run_stage

    def spy(self, stage):
        snapshots[f"{stage.name}/before"] = {k: v.clone() for k, v in
                                             self.model.state_dict().items()}
        run_stage(self, stage)
        snapshots[f"{stage.name}/after"] = {k: v.clone() for k, v in
                                            self.model.state_dict().items()}

    monkeypatch.setattr(loop._Trainer, "run_stage", spy)
    _train(get_method("fastbert"), rte, tiny_backbone, tmp_path)
    before, after = snapshots["distillation/before"], snapshots["distillation/after"]
    last = f"heads.{len({k.split('.')[1] for k in before if k.startswith('heads.')}) - 1}."
    changed = {k for k in before if not torch.equal(before[k], after[k])}
    assert changed, "stage 2 changed nothing"
    assert all(k.startswith("heads.") and not k.startswith(last) for k in changed), changed
    assert any(k.startswith("heads.0.classifier") for k in changed)
    # and stage 1 did move the backbone (the comparison above is not vacuous)
    b1, a1 = snapshots["backbone/before"], snapshots["backbone/after"]
    assert not torch.equal(b1["layers.0.attention.self.query.weight"],
                           a1["layers.0.attention.self.query.weight"])


# ------------------------------------------------------------------------------- ElasticBERT
def test_gradient_equilibrium_on_a_scalar_chain():
    """h1 = a1 x, h2 = a2 h1', h3 = a3 h2' (h' the deeper path's copy), exit j reads c_j h_j,
    loss = sum of the exits. With the rescales the gradient at h_i (1-based, L = 3) is
    (1 / (L - i + 1)) [c_i + (L - i) a_{i+1} G_{i+1}] (ElasticBERT's GradientRescaleFunction)."""
    from eebench.methods.elasticbert import gradient_equilibrium

    a = [1.5, -0.7, 2.0]
    c = [0.3, 1.1, -0.4]
    x = torch.tensor(1.0, requires_grad=True)
    hs, loss, h = [], 0.0, x
    for j in range(3):
        h = a[j] * h
        h.retain_grad()
        hs.append(h)
        to_head, h_next = gradient_equilibrium(j, h, 3)
        assert to_head.item() == h.item() and h_next.item() == h.item()  # identity forward
        loss = loss + c[j] * to_head
        h = h_next
    loss.backward()
    g3 = c[2]  # 1/1 [c3 + 0 * nothing]
    g2 = (c[1] + 1 * a[2] * g3) / 2
    g1 = (c[0] + 2 * a[1] * g2) / 3
    for got, expect in zip(hs, (g1, g2, g3), strict=True):
        assert math.isclose(float(got.grad), expect, rel_tol=1e-6)


def test_gradient_equilibrium_through_the_model():
    """A 3-layer model through MultiExitModel.forward with the method's route: at layer i's
    output (1-based) the gradient is (1 / (L - i + 1)) [g_exit_i + (L - i) g_deeper], with
    g_exit_i what exit i's loss sends through its head and g_deeper what layer i + 1 sends back
    of the gradient at its own output; the forward outputs are unchanged."""
    method = get_method("elasticbert")
    model = tiny.tiny_model(method, depth=3, seed=2).eval()  # route acts in eval mode too
    route = derived.route(method, method.stages()[0], model.num_exits)
    assert route is not None
    outputs: list[torch.Tensor] = []

    def keep(module, args, output):
        out = output[0] if isinstance(output, tuple) else output
        out.retain_grad()
        outputs.append(out)

    hooks = [layer.register_forward_hook(keep) for layer in model.layers]
    weights = torch.randn(3, 2, 2, generator=torch.Generator().manual_seed(0))
    logits = model(IDS, MASK, route=route)
    for hook in hooks:
        hook.remove()
    with torch.no_grad():
        torch.testing.assert_close(logits, model(IDS, MASK), rtol=0, atol=0)
    (weights * logits).sum().backward()

    _, inputs = model.embed(IDS, MASK)
    big_l = model.num_layers
    grads = [h.grad for h in outputs]
    for j in range(big_l):  # 0-based; i = j + 1
        x = outputs[j].detach().requires_grad_(True)
        (g_exit,) = torch.autograd.grad((weights[j] * model.heads[j](x, MASK)).sum(), x)
        if j + 1 < big_l:
            y = model.layer(j + 1, x, inputs)
            (g_deeper,) = torch.autograd.grad(y, x, grads[j + 1])
        else:
            g_deeper = torch.zeros_like(g_exit)
        expect = (g_exit + (big_l - j - 1) * g_deeper) / (big_l - j)
        torch.testing.assert_close(grads[j], expect, rtol=1e-4, atol=1e-7)
    assert not torch.allclose(grads[0], grads[0] * 0)


def test_gradient_equilibrium_can_be_turned_off():
    method = get_method("elasticbert", gradient_equilibrium=False)
    assert derived.route(method, method.stages()[0], 4) is None


# ------------------------------------------------------------------------------------- SWEET
def _sweet_model():
    method = get_method("sweet")
    model = tiny.tiny_model(method, depth=3, seed=5).eval()
    return method, model, derived.route(method, method.stages()[0], model.num_exits)


def test_sweet_route_leaves_the_forward_unchanged():
    _, model, route = _sweet_model()
    with torch.no_grad():
        torch.testing.assert_close(model(IDS, MASK, route=route), model(IDS, MASK),
                                   rtol=0, atol=0)


@pytest.mark.parametrize("exit_index", [0, 1, 2])
def test_sweet_an_exit_trains_only_its_own_block(exit_index):
    """SWEET (modeling_bert.py 1749-1755): the hidden state passed on after an exit is detached,
    so the loss of exit k reaches layer k alone (each exit follows one layer here); the
    embeddings learn only from exit 1; the one shared pooler learns from every exit."""
    _, model, route = _sweet_model()
    logits = model(IDS, MASK, route=route)
    F.cross_entropy(logits[exit_index], torch.tensor([1, 0])).backward()
    for i, layer in enumerate(model.layers):
        params = list(layer.parameters())
        if i == exit_index:
            assert any(_reached(p) for p in params)
        else:
            assert all(_zero_or_none(p) for p in params), (exit_index, i)
    embeddings = list(model.embeddings.parameters())
    if exit_index == 0:
        assert any(_reached(p) for p in embeddings)
    else:
        assert all(_zero_or_none(p) for p in embeddings)
    assert _reached(model.heads[0].pooler.dense.weight)  # shared: every exit's loss reaches it
    for j, head in enumerate(model.heads):
        assert _reached(head.classifier.weight) == (j == exit_index)


def test_sweet_without_the_route_every_lower_layer_learns():
    """The contrast: plain multi-exit training sends exit 3's loss down to layer 1."""
    _, model, _ = _sweet_model()
    F.cross_entropy(model(IDS, MASK)[2], torch.tensor([1, 0])).backward()
    assert all(any(_reached(p) for p in layer.parameters()) for layer in model.layers)


@pytest.mark.parametrize("exit_index", [0, 1])
def test_sweet_with_placed_exits_an_exit_trains_its_block_of_layers(exit_index):
    """The paper's placement (four exits on BERT-base, after layers 1, 4, 6, 12): on 4 layers
    with exits after 1 and 3, exit 2's loss trains layers 2 and 3, not 1 or 4 (no exit reads
    layer 4, so it is not even run); one pooler, two heads."""
    method = get_method("sweet", exit_layers=[1, 3])
    model = tiny.tiny_model(method, depth=4, seed=5).eval()
    assert model.exit_layers == (1, 3) and model.num_exits == 2
    assert sum(1 for h in model.heads if "pooler" in h._modules) == 1
    logits = model(IDS, MASK, route=derived.route(method, method.stages()[0], model.num_exits))
    assert len(logits) == 2
    F.cross_entropy(logits[exit_index], torch.tensor([1, 0])).backward()
    block = {0: {0}, 1: {1, 2}}[exit_index]
    for i, layer in enumerate(model.layers):
        reached = any(_reached(p) for p in layer.parameters())
        assert reached == (i in block), (exit_index, i)


def test_sweet_exit_layers_are_checked():
    for bad in ([], [0, 2], [3, 2], [2, 2]):
        with pytest.raises(UsageError, match="exit_layers"):
            get_method("sweet", exit_layers=bad)
    with pytest.raises(UsageError, match="after layer 5 but the backbone has 4"):
        tiny.tiny_model(get_method("sweet", exit_layers=[1, 5]), depth=4)
    # a run of every layer records no exit_layers, so its directory keeps its name
    assert "exit_layers" not in get_method("sweet").settings
    assert get_method("sweet", exit_layers=[1, 2]).settings["exit_layers"] == [1, 2]


def test_sweet_loss_is_the_plain_sum_over_exits():
    """MultiExitCrossEntropyLoss: sum over exits of the batch-mean cross-entropy."""
    method = get_method("sweet")
    g = torch.Generator().manual_seed(2)
    logits, labels = [torch.randn(4, 3, generator=g) for _ in range(3)], torch.tensor([0, 2, 1, 1])
    got = float(method.loss(logits, labels, method.stages()[0], False))
    assert math.isclose(got, sum(_ce(z, labels) for z in logits), rel_tol=1e-5)


# ------------------------------------------------------------------------------------ BERxiT
def _berxit_outputs(regression: bool) -> tuple[list[torch.Tensor], torch.Tensor]:
    """Three exits of 4 samples: logits (or one score), then the LTE score column in (0, 1)."""
    if regression:
        preds = [[0.1, 0.9, 2.0, -0.5], [0.4, 1.2, 1.5, 0.0], [0.5, 0.8, 3.1, 0.2]]
        labels = torch.tensor([0.3, 1.0, 2.5, 0.1])
        cols = [torch.tensor(p)[:, None] for p in preds]
    else:
        cols = [torch.tensor([[2.0, 0.0], [0.0, 1.0], [0.5, 0.3], [-1.0, 1.0]]),
                torch.tensor([[1.0, 0.0], [1.0, 0.0], [0.0, 2.0], [-1.0, 1.0]]),
                torch.tensor([[0.0, 1.0], [0.0, 3.0], [0.0, 1.0], [2.0, 1.0]])]
        labels = torch.tensor([0, 1, 1, 1])
    scores = [torch.tensor([0.2, 0.7, 0.4, 0.9]), torch.tensor([0.5, 0.1, 0.3, 0.6]),
              torch.tensor([0.05, 0.5, 0.95, 0.35])]
    outs = [torch.cat([c, s[:, None]], dim=-1).requires_grad_(True)
            for c, s in zip(cols, scores, strict=True)]
    return outs, labels


@pytest.mark.parametrize("regression", [False, True])
def test_berxit_alternating_schedule_by_hand(regression):
    """castorini/berxit modeling_highway_bert.py 382-412 ('alternate-lte'): an even step is the
    final exit's loss + MSE(u, t); an odd step the sum of the intermediate exits' losses +
    MSE(u, t); t = 1 - [argmax = y] (classification), tanh|y_hat - y| (regression)."""
    from eebench.methods.berxit import exit_error

    method = get_method("berxit")
    stage = method.stages()[0]
    outs, labels = _berxit_outputs(regression)
    plain = [o.detach() for o in outs]  # for the hand computation
    if regression:
        targets = [[math.tanh(abs(float(o[b, 0]) - float(labels[b]))) for b in range(4)]
                   for o in plain]
        losses = [_mse(o[:, 0], labels) for o in plain]
    else:
        targets = [[0.0 if int(o[b, :2].argmax()) == int(labels[b]) else 1.0 for b in range(4)]
                   for o in plain]
        losses = [_ce(o[:, :2], labels) for o in plain]
    for o, t in zip(plain, targets, strict=True):
        n = 1 if regression else 2
        assert exit_error(o[:, :n], labels, regression).tolist() == pytest.approx(t, abs=1e-6)
    lte = sum((float(o[b, -1]) - t[b]) ** 2 for o, t in zip(plain, targets, strict=True)
              for b in range(4)) / (3 * 4)
    for step in (0, 2, 10):
        got = method.loss(outs, labels, stage, regression, step=step).item()
        assert math.isclose(got, losses[-1] + lte, rel_tol=1e-5), step
    for step in (1, 3, 11):
        got = method.loss(outs, labels, stage, regression, step=step).item()
        assert math.isclose(got, losses[0] + losses[1] + lte, rel_tol=1e-5), step
    # not the plain 'alternate' routine, whose odd steps also add the final loss
    assert not math.isclose(method.loss(outs, labels, stage, regression, step=1).item(),
                            losses[0] + losses[1] + losses[2] + lte, rel_tol=1e-3)


@pytest.mark.parametrize("regression", [False, True])
def test_berxit_lte_target_is_detached(regression):
    """The target t_i is a constant: on an odd step the final exit's prediction gets no gradient
    (its loss is not in the sum, and t_L does not pass one back, though tanh|y_hat - y| could);
    on an even step the intermediate predictions get none. The scores always get one."""
    method = get_method("berxit")
    stage = method.stages()[0]
    n = 1 if regression else 2
    for step, silent in ((1, [2]), (0, [0, 1])):
        outs, labels = _berxit_outputs(regression)
        method.loss(outs, labels, stage, regression, step=step).backward()
        for j, o in enumerate(outs):
            assert bool((o.grad[:, :n] == 0).all()) == (j in silent), (step, j)
            assert bool((o.grad[:, n] != 0).all())


def test_berxit_lte_scorer_is_one_module_shared_by_every_head():
    from eebench.measure.params import params_total
    from eebench.train.checkpoint import rebuild_model

    model = tiny.tiny_model("berxit", depth=4)
    scorer = model.heads[0].scorer
    assert all(h.scorer is scorer for h in model.heads)
    keys = [k for k in model.state_dict() if "scorer" in k]
    assert keys == ["heads.0.scorer.weight", "heads.0.scorer.bias"]
    hidden = model.config.hidden_size
    assert scorer.weight.shape == (1, hidden)
    named = dict(model.named_parameters(remove_duplicate=False))
    assert [k for k in named if "scorer" in k] == keys  # not reachable through heads 1..E-1
    assert params_total(model) == sum(p.numel() for p in model.parameters())
    assert params_total(model) == sum(model.state_dict()[k].numel() for k in named)
    # rebuilt from its config, it is still one shared module
    again = rebuild_model(model.model_config())
    again.load_state_dict(model.state_dict())
    assert all(h.scorer is again.heads[0].scorer for h in again.heads)
    # the LTE loss is not detached at its input: it trains the heads' poolers and the backbone
    model.zero_grad()
    model(IDS, MASK)[:, :, -1].sum().backward()
    assert _reached(scorer.weight) and _reached(model.heads[1].pooler.dense.weight)
    assert any(_reached(p) for p in model.layers[0].parameters())


def test_berxit_schedule_follows_the_step_within_the_epoch(rte, tiny_backbone, tmp_path,
                                                           monkeypatch):
    """The authors alternate on `step` from enumerate(epoch_iterator): it restarts every epoch.
    64 rows at batch 16, 2 epochs: the trainer passes 0, 1, 2, 3 twice."""
    from eebench.methods.berxit import BERxiT

    steps: list[int] = []
    loss = BERxiT.loss

    def spy(self, exit_logits, labels, stage, is_regression, step=0):
        steps.append(step)
        return loss(self, exit_logits, labels, stage, is_regression, step)

    monkeypatch.setattr(BERxiT, "loss", spy)
    _train(get_method("berxit"), rte, tiny_backbone, tmp_path)
    assert steps == [0, 1, 2, 3, 0, 1, 2, 3]


# ----------------------------------------------------------------------------------- maxprob
def _nll(logits: torch.Tensor, labels: torch.Tensor, t: float) -> float:
    return float(F.cross_entropy(logits.double() / t, labels))


def test_fit_temperature_softens_overconfident_logits():
    from eebench.methods.maxprob import fit_temperature

    g = torch.Generator().manual_seed(0)
    labels = torch.randint(0, 3, (400,), generator=g)
    logits = torch.randn(400, 3, generator=g)
    logits[torch.arange(400), labels] += 1.0  # right more often than not ...
    logits = logits * 8  # ... but far too sure
    t = fit_temperature(logits, labels)
    assert t > 1.5
    assert _nll(logits, labels, t) < _nll(logits, labels, 1.0)
    under = logits / 40  # and too unsure: sharpened
    t_under = fit_temperature(under, labels)
    assert t_under < 1 and _nll(under, labels, t_under) < _nll(under, labels, 1.0)


@pytest.mark.parametrize("seed", range(4))
def test_fit_temperature_never_raises_the_nll(seed):
    from eebench.methods.maxprob import fit_temperature

    g = torch.Generator().manual_seed(seed)
    logits = torch.randn(50, 2, generator=g) * float(torch.rand(1, generator=g) * 5)
    labels = torch.randint(0, 2, (50,), generator=g)  # unrelated to the logits
    t = fit_temperature(logits, labels)
    assert _nll(logits, labels, t) <= _nll(logits, labels, 1.0)
    assert math.exp(-3) - 1e-9 <= t <= math.exp(3) + 1e-9


def test_maxprob_calibrates_on_the_held_out_slice_and_the_checkpoint_keeps_it(
        rte, tiny_backbone, tmp_path, monkeypatch):
    from safetensors.torch import load_file

    from eebench.data.batching import encode
    from eebench.methods.maxprob import MaxProb
    from eebench.train import checkpoint as ckpt
    from eebench.train.naming import hold_out

    seen = []
    calibrate = MaxProb.calibrate

    def spy(self, model, outputs):
        seen.append(outputs)
        calibrate(self, model, outputs)

    monkeypatch.setattr(MaxProb, "calibrate", spy)
    method = get_method("maxprob")
    path = _train(method, rte, tiny_backbone, tmp_path)
    spec, tr, dev = rte
    trains, held = hold_out(tr.take(TRAIN["max_train_samples"], TRAIN["seed"]),
                            derived.calibration_fraction(method), TRAIN["seed"])
    assert len(seen) == 1 and len(held) == math.ceil(64 * 0.1) != len(dev)
    enc = encode(held, tiny.tokenizer(), TRAIN["max_seq_length"])
    assert seen[0].labels.tolist() == held.labels and seen[0].lengths.tolist() == enc.lengths
    assert ckpt.read_state(path).config["data"]["n"] == len(trains)  # what trained: the rest

    model, _, _ = ckpt.load_trained(path)
    temps = model.temperatures()
    assert temps is not None and any(abs(t - 1) > 1e-3 for t in temps)
    stored = load_file(str(path / ckpt.MODEL_FILE))
    assert [float(stored[f"heads.{j}.temperature"]) for j in range(len(temps))] == temps
    fresh = tiny.tiny_model("maxprob")
    assert fresh.temperatures() == [1.0] * fresh.num_exits  # what load_trained replaced


def test_hold_out_is_disjoint_seeded_and_keeps_order(rte):
    from eebench.train.naming import hold_out

    _, tr, _ = rte
    rows = tr.take(200, 0)
    a_train, a_held = hold_out(rows, 0.1, seed=1)
    b_train, b_held = hold_out(rows, 0.1, seed=1)
    _, c_held = hold_out(rows, 0.1, seed=2)
    assert len(a_held) == 20 and len(a_train) == 180
    assert a_held.ids == b_held.ids and a_train.ids == b_train.ids  # deterministic in the seed
    assert c_held.ids != a_held.ids
    assert not set(a_held.ids) & set(a_train.ids)
    assert sorted(a_held.ids + a_train.ids) == sorted(rows.ids)
    position = {i: k for k, i in enumerate(rows.ids)}
    assert [position[i] for i in a_train.ids] == sorted(position[i] for i in a_train.ids)
    assert hold_out(rows, 0.0, seed=1) == (rows, None)


# ------------------------------------------------------------------------------ PCEE and PABEE
def _per_exit(n: int, seed: int) -> tuple[list[torch.Tensor], torch.Tensor, list[float]]:
    g = torch.Generator().manual_seed(seed)
    logits = [torch.randn(6, 3, generator=g) * (1 + j) for j in range(n)]
    labels = torch.randint(0, 3, (6,), generator=g)
    return logits, labels, [_ce(z, labels) for z in logits]


def test_pcee_loss_is_pabee_layer_weighted():
    """PCEE-BERT's default `--weights_schema asc`: sum_j j L_j / sum_j j (j = 1..n)."""
    logits, labels, losses = _per_exit(5, 0)
    pcee, pabee = get_method("pcee"), get_method("pabee")
    got = float(pcee.loss(logits, labels, pcee.stages()[0], False))
    assert got == float(pabee.loss(logits, labels, pabee.stages()[0], False))
    expect = sum((j + 1) * x for j, x in enumerate(losses)) / sum(range(1, 6))
    assert math.isclose(got, expect, rel_tol=1e-5)


def test_pabee_descending_weights_by_hand():
    """`loss_weights = "descending"`: sum_j (n + 1 - j) L_j / sum_j j. (PCEE-BERT's own `desc`
    differs: layer 1 weighs 1 over a denominator share of n - 1 and the last layer 0.)"""
    logits, labels, losses = _per_exit(4, 1)
    method = get_method("pabee", loss_weights="descending")
    got = float(method.loss(logits, labels, method.stages()[0], False))
    n = len(losses)
    expect = sum((n + 1 - j) * losses[j - 1] for j in range(1, n + 1)) / sum(range(1, n + 1))
    assert math.isclose(got, expect, rel_tol=1e-5)
    equal = get_method("pabee", loss_weights="equal")
    assert math.isclose(float(equal.loss(logits, labels, equal.stages()[0], False)),
                        sum(losses) / n, rel_tol=1e-5)


@pytest.mark.parametrize("name", ["maxprob", "elasticbert"])
def test_unweighted_sum_over_exits(name):
    """sledgehammer (line 199) and ElasticBERT (818-831): the plain sum of the exits' CE."""
    logits, labels, losses = _per_exit(4, 2)
    method = get_method(name)
    got = float(method.loss(logits, labels, method.stages()[0], False))
    assert math.isclose(got, sum(losses), rel_tol=1e-5)
