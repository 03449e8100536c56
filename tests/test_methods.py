"""The three methods: heads, losses, stages and exit rules, checked against hand computations."""

from __future__ import annotations

import json
import math
from itertools import pairwise

import pytest
import torch
from safetensors.torch import load_model, save_model
from typer.testing import CliRunner

from eebench.cli import app
from eebench.errors import UsageError
from eebench.methods import METHODS, Stage, derived, get_method
from eebench.rules.base import ExitRule, select_state
from eebench.rules.catalog import RULES
from eebench.rules.entropy import entropy
from eebench.tasks.catalog import get_task
from eebench.train.checkpoint import rebuild_model
from tests.tiny import TEXT_METHODS, tiny_model

ALL_METHODS = TEXT_METHODS  # the token methods' models and rules: tests/test_token_*.py


def replay(rule: ExitRule, logits: torch.Tensor, signals: dict | None = None) -> list[int]:
    """Exit index of each sample over stored logits [E, N, C] (and signals [E, N] by name); the
    last exit always exits."""
    num_exits, n = logits.shape[:2]
    state, out = rule.start(n), [num_exits - 1] * n
    decided = torch.zeros(n, dtype=torch.bool)
    for j in range(num_exits - 1):
        step = rule.step(state, j, logits[j], {k: v[j] for k, v in (signals or {}).items()})
        state = step.state
        for i in torch.nonzero(step.exit & ~decided).flatten().tolist():
            out[i] = j
        decided |= step.exit
    return out


def shrinking(rule: ExitRule, logits: torch.Tensor, signals: dict | None = None) -> list[int]:
    """The same decisions the way real inference makes them: exited rows leave the batch."""
    n = logits.shape[1]
    alive, state, out = torch.arange(n), rule.start(n), [logits.shape[0] - 1] * n
    for j in range(logits.shape[0] - 1):
        step = rule.step(state, j, logits[j, alive],
                         {k: v[j, alive] for k, v in (signals or {}).items()})
        for i in alive[step.exit].tolist():
            out[i] = j
        keep = ~step.exit
        alive, state = alive[keep], select_state(step.state, keep)
        if len(alive) == 0:
            break
    return out


def _sequences_to_logits(preds: list[list[int]], num_labels: int = 3) -> torch.Tensor:
    """Logits [E, N, C] whose argmax at exit j for sample i is preds[i][j]."""
    logits = torch.zeros(len(preds[0]), len(preds), num_labels)
    for i, seq in enumerate(preds):
        for j, p in enumerate(seq):
            logits[j, i, p] = 1.0 + 0.1 * j
    return logits


# ------------------------------------------------------------------------------------------ PABEE
def test_pabee_patience_counter_follows_the_paper():
    preds = [
        [0, 0, 0, 0, 0, 0],  # counter 0,1,2,...: patience 2 exits at exit 2 (layer 3)
        [0, 1, 1, 1, 1, 1],  # reset at layer 2, then 1, 2: exit at index 3
        [0, 1, 0, 1, 0, 1],  # never stable: the last exit
        [2, 2, 1, 1, 1, 0],  # 1, 0, 1, 2: exit at index 4
    ]
    logits = _sequences_to_logits(preds)
    rule = get_method("pabee").exit_rule(2, is_regression=False)
    assert replay(rule, logits) == [2, 3, 5, 4]
    assert replay(get_method("pabee").exit_rule(1, False), logits) == [1, 2, 5, 1]
    assert replay(get_method("pabee").exit_rule(6, False), logits) == [5, 5, 5, 5]


def test_pabee_margin_is_the_top2_logit_gap():
    rule = get_method("pabee").exit_rule(1, False)
    step = rule.step(rule.start(2), 0, torch.tensor([[2.0, 0.5, 1.5], [0.0, 3.0, -1.0]]))
    torch.testing.assert_close(step.margin, torch.tensor([0.5, 3.0]))


def test_pabee_regression_patience():
    scores = torch.tensor([
        [1.0, 1.05, 2.0, 2.02, 2.05, 3.0],  # |delta|: .05 .95 .02 .03 -> counts 1, 0, 1, 2
        [1.0, 1.5, 2.0, 2.5, 3.0, 3.5],  # every |delta| = .5 >= .1: the last exit
        [0.0, 0.0, 0.09, 0.1, 0.1, 0.1],  # 1, 2: exits at index 2
    ]).T[:, :, None]  # [E, N, 1]
    rule = get_method("pabee", regression_threshold=0.1).exit_rule(2, is_regression=True)
    assert replay(rule, scores) == [4, 5, 2]
    first = rule.step(rule.start(3), 0, scores[0])
    assert torch.isinf(first.margin).all()  # nothing to compare with yet
    second = rule.step(first.state, 1, scores[1])
    torch.testing.assert_close(second.margin, torch.tensor([0.05, 0.4, 0.1]))


def test_pabee_pooler_is_shared():
    model = tiny_model("pabee")
    pooler = model.heads[0].pooler
    assert all(h.pooler is pooler for h in model.heads)
    assert len({id(h.classifier) for h in model.heads}) == model.num_exits
    shared = {id(p) for p in pooler.parameters()}
    assert sum(id(p) in shared for p in model.parameters()) == len(shared)
    assert [k for k in model.state_dict() if "pooler" in k] == [
        "heads.0.pooler.dense.weight", "heads.0.pooler.dense.bias"]
    # the last exit's loss reaches the one shared pooler
    ids = torch.tensor([[101, 2023, 2003, 102]])
    model(ids, torch.ones_like(ids))[-1].sum().backward()
    assert pooler.dense.weight.grad is not None and pooler.dense.weight.grad.abs().sum() > 0
    model.double()  # conversions reach the shared pooler through its owner, head 0
    assert model.heads[-1].pooler.dense.weight.dtype == torch.float64
    assert model(ids, torch.ones_like(ids)).dtype == torch.float64


def _ce(logits: torch.Tensor, labels: torch.Tensor) -> float:
    """Cross-entropy by hand: mean of logsumexp - logit of the true class."""
    rows = [torch.logsumexp(row, 0) - row[y] for row, y in zip(logits, labels, strict=True)]
    return float(sum(rows) / len(rows))


def test_pabee_loss_weights_exit_j_by_j():
    torch.manual_seed(0)
    logits = [torch.randn(5, 3) for _ in range(4)]
    labels = torch.tensor([0, 2, 1, 1, 0])
    method = get_method("pabee")
    got = method.loss(logits, labels, method.stages()[0], is_regression=False)
    expected = sum((j + 1) * _ce(x, labels) for j, x in enumerate(logits)) / (1 + 2 + 3 + 4)
    assert math.isclose(float(got), expected, rel_tol=1e-6)
    scores, target = [torch.randn(5, 1) for _ in range(3)], torch.randn(5)
    got = method.loss(scores, target, method.stages()[0], is_regression=True)
    mse = [float(((s[:, 0] - target) ** 2).mean()) for s in scores]
    assert math.isclose(float(got), (mse[0] + 2 * mse[1] + 3 * mse[2]) / 6, rel_tol=1e-6)


def test_pabee_equal_loss_weights_are_the_plain_mean():
    torch.manual_seed(0)
    logits = [torch.randn(5, 3) for _ in range(4)]
    labels = torch.tensor([0, 2, 1, 1, 0])
    method = get_method("pabee", loss_weights="equal")
    got = method.loss(logits, labels, method.stages()[0], is_regression=False)
    assert math.isclose(float(got), sum(_ce(x, labels) for x in logits) / 4, rel_tol=1e-6)


def test_pabee_pooler_per_exit_when_not_shared(tmp_path):
    model = tiny_model(get_method("pabee", shared_pooler=False))
    poolers = [h.pooler for h in model.heads]
    assert len({id(p) for p in poolers}) == model.num_exits
    # each a copy of the pretrained pooler, all starting equal
    for p in poolers[1:]:
        torch.testing.assert_close(p.dense.weight, poolers[0].dense.weight, atol=0, rtol=0)
    assert sorted(k for k in model.state_dict() if k.endswith("pooler.dense.weight")) == [
        f"heads.{i}.pooler.dense.weight" for i in range(model.num_exits)]
    shared = tiny_model("pabee")
    per_exit = sum(p.numel() for p in poolers[0].parameters())
    assert (sum(p.numel() for p in model.parameters())
            == sum(p.numel() for p in shared.parameters()) + (model.num_exits - 1) * per_exit)
    # the last exit's loss reaches its own pooler only
    ids = torch.tensor([[101, 2023, 2003, 102]])
    model(ids, torch.ones_like(ids))[-1].sum().backward()
    assert poolers[-1].dense.weight.grad.abs().sum() > 0
    assert poolers[0].dense.weight.grad is None or not poolers[0].dense.weight.grad.any()
    # saved and rebuilt from its config (as checkpoints are), it is the same model
    with torch.no_grad():
        poolers[2].dense.weight.add_(0.5)  # make the copies differ before saving
    save_model(model, str(tmp_path / "model.safetensors"))
    rebuilt = rebuild_model(json.loads(json.dumps(model.model_config())))
    missing, unexpected = load_model(rebuilt, str(tmp_path / "model.safetensors"))
    assert not missing and not unexpected
    with torch.no_grad():
        torch.testing.assert_close(rebuilt(ids, torch.ones_like(ids)),
                                   model(ids, torch.ones_like(ids)), atol=0, rtol=0)


def test_pabee_new_settings_keep_the_paper_runs_names():
    """Settings at their defaults are not recorded, so runs made before they existed keep their
    configuration (and hence their names); a changed one is recorded."""
    paper = {"regression_threshold": 0.1}
    assert get_method("pabee").settings == paper
    assert get_method("pabee", loss_weights="layer", shared_pooler=True).settings == paper
    changed = get_method("pabee", loss_weights="equal", shared_pooler=False)
    assert changed.settings == {**paper, "loss_weights": "equal", "shared_pooler": False}
    assert get_method("pabee", **changed.settings).settings == changed.settings
    assert (get_method("pabee").config.loss_weights, changed.config.loss_weights) == (
        "layer", "equal")


# ---------------------------------------------------------------------------------------- DeeBERT
def test_entropy_rule():
    logits = torch.tensor([[0.0, 0.0], [10.0, -10.0], [1.0, 0.0]])
    h = entropy(logits)
    p = torch.tensor([math.e / (1 + math.e), 1 / (1 + math.e)])
    torch.testing.assert_close(h[[0, 2]], torch.tensor([math.log(2), float(-(p * p.log()).sum())]))
    assert h[1] < 1e-6
    step = get_method("deebert").exit_rule(0.6, False).step({}, 0, logits)
    assert step.exit.tolist() == [False, True, True]  # H = .693, ~0, .582
    torch.testing.assert_close(step.margin, (h - 0.6).abs())
    never = get_method("deebert").exit_rule(0.0, False)
    assert replay(never, logits[None].repeat(3, 1, 1)) == [2, 2, 2]


def test_deebert_stages():
    model, method = tiny_model("deebert"), get_method("deebert")
    first, second = method.stages()
    backbone = {id(p) for p in model.backbone_parameters()}
    last = {id(p) for p in model.heads[-1].parameters()}
    ramps = {id(p) for h in model.heads[:-1] for p in h.parameters()}
    assert {id(p) for p in first.trainable(model)} == backbone | last
    stage2 = {id(p) for p in second.trainable(model)}
    assert stage2 == ramps and not stage2 & (backbone | last)
    assert first.exit_indices(model.num_exits) == [3]
    assert second.exit_indices(model.num_exits) == [0, 1, 2]
    torch.manual_seed(1)
    logits, labels = [torch.randn(4, 2) for _ in range(4)], torch.tensor([0, 1, 1, 0])
    assert math.isclose(float(method.loss(logits, labels, first, False)), _ce(logits[3], labels),
                        rel_tol=1e-6)
    assert math.isclose(float(method.loss(logits, labels, second, False)),
                        sum(_ce(x, labels) for x in logits[:3]), rel_tol=1e-6)


def test_deebert_refuses_regression():
    method = get_method("deebert")
    with pytest.raises(UsageError, match="regression"):
        derived.check_task(method, get_task("stsb"))
    with pytest.raises(UsageError, match="regression"):
        method.exit_rule(0.1, is_regression=True)
    derived.check_task(method, get_task("sst2"))
    derived.check_task(get_method("pabee"), get_task("stsb"))
    derived.check_task(get_method("static"), get_task("elue-stsb"))


def test_default_sweeps():
    grid = derived.default_sweep(get_method("deebert"), 6, False, num_labels=3)
    assert grid[0] == 0 and math.isclose(grid[-1], math.log(3), rel_tol=1e-6)
    assert all(a < b for a, b in pairwise(grid))
    assert derived.default_sweep(get_method("pabee"), 6, True) == [1, 2, 3, 4, 5, 6]
    assert derived.default_sweep(get_method("static"), 4, False) == [1, 2, 3, 4]


# ----------------------------------------------------------------------------------- every method
def _rule_cases():
    for name in ALL_METHODS:
        method = get_method(name)
        regression = [False, True] if derived.supports_regression(method) else [False]
        for reg in regression:
            for value in derived.default_sweep(method, 4, reg, num_labels=3):
                yield pytest.param(name, reg, value, id=f"{name}-{'reg' if reg else 'cls'}-{value}")


@pytest.mark.parametrize("name,regression,value", list(_rule_cases()))
def test_rules_decide_the_same_on_full_and_shrinking_batches(name, regression, value):
    g = torch.Generator().manual_seed(7)
    if regression:  # coarse scores so successive exits often agree within the threshold
        logits = torch.randint(0, 4, (4, 64, 1), generator=g).float() * 0.08
    else:  # few classes and small logits: repeated predictions and a spread of entropies
        logits = torch.randint(-2, 3, (4, 64, 3), generator=g).float() * 0.7
    signals = {"exit_score": torch.rand(4, 64, generator=g)}  # what a learned-exit head gives
    rule = get_method(name).exit_rule(value, regression, _facts(regression, 3))
    full = replay(rule, logits, signals)
    assert full == shrinking(rule, logits, signals)


def _facts(regression: bool, num_labels: int):
    """A model that gives every rule what it needs (temperatures, an exit score)."""
    from eebench.rules.catalog import ModelFacts

    return ModelFacts(regression, num_labels, temperatures=[0.5, 1.0, 2.0, 1.0],
                      signals=("exit_score",))


@pytest.mark.parametrize("name", ["deebert", "pabee"])
def test_sweep_orders_the_trade_off(name):
    """Along the default sweep, samples exit monotonically later (entropy threshold falling
    towards 0 = stricter; patience rising = stricter), and the sweep spans early to late."""
    g = torch.Generator().manual_seed(3)
    logits = torch.randint(-2, 3, (6, 200, 3), generator=g).float() * 0.7
    method = get_method(name)
    sweep = derived.default_sweep(method, 6, False, num_labels=3)
    mean_exit = [sum(replay(method.exit_rule(v, False), logits)) / 200 for v in sweep]
    if name == "deebert":
        mean_exit = mean_exit[::-1]
    assert all(a <= b for a, b in pairwise(mean_exit))
    assert mean_exit[0] < 3 and mean_exit[-1] == 5


@pytest.mark.parametrize("name", ALL_METHODS)
def test_method_trains_through_its_stages(name):
    model, method = tiny_model(name), get_method(name)
    ids = torch.tensor([[101, 2023, 2003, 1037, 102], [101, 2204, 102, 0, 0]])
    mask = (ids != 0).long()
    labels = torch.tensor([1, 0])
    for stage in method.stages():
        assert isinstance(stage, Stage) and stage.exit_indices(model.num_exits)
        model.zero_grad()
        loss = method.loss(list(model(ids, mask)), labels, stage, is_regression=False)
        assert torch.isfinite(loss) and loss.ndim == 0
        loss.backward()
        grads = [p.grad for p in stage.trainable(model)]
        assert any(g is not None and g.abs().sum() > 0 for g in grads)
    head = method.build_heads(model.config, 2, 4, model.heads[0].pooler)
    assert list(head.exit_layers) == sorted(set(head.exit_layers))
    assert len(head.heads) == len(head.exit_layers)


def test_settings_are_checked():
    with pytest.raises(UsageError, match="setting patience: Extra inputs") as e:
        get_method("pabee", patience=3)
    assert "regression_threshold, loss_weights, shared_pooler" in e.value.hint
    for bad in ("abc", -0.1, float("nan"), float("inf"), True):
        with pytest.raises(UsageError, match="^method 'pabee': setting regression_threshold: "):
            get_method("pabee", regression_threshold=bad)
    assert get_method("pabee", regression_threshold=0).config.regression_threshold == 0.0
    with pytest.raises(UsageError) as e:
        get_method("pabee", loss_weights="linear")
    assert str(e.value) == ("method 'pabee': setting loss_weights: Input should be 'layer', "
                            "'equal' or 'descending'")
    with pytest.raises(UsageError, match="setting shared_pooler: Input should be a valid bool"):
        get_method("pabee", shared_pooler="no")
    for bad in ("two", "2", 0, 2.0, True):
        with pytest.raises(UsageError, match="^method 'static': setting layers: "):
            get_method("static", layers=bad)
    with pytest.raises(UsageError, match="setting k: Extra inputs"):
        get_method("deebert", k=1)
    with pytest.raises(UsageError, match="patience"):
        get_method("pabee").exit_rule(1.5, False)
    with pytest.raises(UsageError) as e:
        get_method("pabe")
    assert "pabee" in e.value.hint


def test_cli_lists_the_methods():
    result = CliRunner().invoke(app, ["methods", "--json"])
    assert result.exit_code == 0, result.output
    rows = {r["name"]: r for r in json.loads(result.stdout)}
    assert {"static", "deebert", "pabee"} <= set(rows)
    assert {n: rows[n]["sweep_param"] for n in ("static", "deebert", "pabee")} == {
        "static": "layers", "deebert": "threshold", "pabee": "patience"}
    assert rows["deebert"]["supports_regression"] is False
    assert rows["static"]["trains"].startswith("one model per")
    assert rows["pabee"]["trains"] == "one model"
    assert rows["pabee"]["settings"] == {
        "regression_threshold": 0.1, "loss_weights": "layer", "shared_pooler": True}
    table = CliRunner().invoke(app, ["methods"])
    assert table.exit_code == 0 and "pabee" in table.output
    field = {"maxprob", "fastbert", "berxit", "pcee", "elasticbert", "sweet"}
    assert len(rows) >= 9 and field <= set(rows)
    assert {n: rows[n]["rule"] for n in ("deebert", "pabee", "maxprob", "berxit")} == {
        "deebert": "entropy", "pabee": "patience", "maxprob": "calibrated-maxprob",
        "berxit": "learned"}
    assert rows["berxit"]["provides"] == ["exit-score"]
    assert rows["berxit"]["supports_regression"] is True


def test_cli_lists_the_rules_and_what_each_needs():
    result = CliRunner().invoke(app, ["rules", "--json"])
    assert result.exit_code == 0, result.output
    rows = {r["name"]: r for r in json.loads(result.stdout)}
    builtin = set(RULES.builtin())  # a plugin's rules are listed too
    assert builtin <= set(rows) and builtin == {
        "entropy", "normalized-entropy", "maxprob", "calibrated-maxprob", "patience",
        "confident-patience", "learned", "mean-entropy", "sentee", "tokee", "calm"}
    assert {n for n in rows if rows[n]["unit"] == "token"} == {"mean-entropy", "sentee", "tokee"}
    assert {n for n in rows if rows[n]["unit"] == "generated"} == {"calm"}
    # DeeBERT's token model exits on the mean entropy (the survey's); the token methods' own
    assert {n: rows[n]["default_for"] for n in ("mean-entropy", "sentee", "tokee")} == {
        "mean-entropy": ["deebert"], "sentee": ["sentee"], "tokee": ["tokee"]}
    assert rows["calibrated-maxprob"]["needs"] == ["classes", "temperatures"]
    assert rows["learned"]["needs"] == ["exit-score"] and rows["patience"]["needs"] == []
    assert rows["patience"]["supports_regression"] and not rows["entropy"]["supports_regression"]
    assert set(rows["entropy"]["default_for"]) & set(ALL_METHODS) == {"deebert", "elasticbert"}
    # every method's own rule is a registered one
    for name in METHODS.builtin():
        method = get_method(name)
        assert method.rule == "" or method.rule in rows, name
    table = CliRunner().invoke(app, ["rules"])
    assert table.exit_code == 0 and "confident-patience" in table.output


def test_a_pair_sweep_value_is_patience_plus_threshold():
    from eebench.rules.catalog import get_rule

    kind = get_rule("confident-patience")
    assert kind.from_number(2.333333) == {"patience": 2, "threshold": 0.333333}
    assert kind.number({"patience": 2, "threshold": 0.333333}) == 2.333333
    assert kind.label(1.5) == "patience=1,threshold=0.5"
    grid = kind.default_sweep(6, False, 2)
    assert len(grid) == 27 and grid[0] == pytest.approx(1 + 1 / 18, abs=1e-6)
    for bad in (0.5, -1.0):  # patience 0; a negative one
        with pytest.raises(UsageError):
            kind.check(bad)
