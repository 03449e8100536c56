"""CascadeBERT: the cascade against the authors' loop, its FLOPs, its DAR loss, and `eebench run`
end to end (reusing static's checkpoints)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch
from safetensors.numpy import load_file
from typer.testing import CliRunner

from eebench.cli import app
from eebench.data.batching import collate, encode, eval_batches
from eebench.errors import DataError, UsageError
from eebench.measure.cost_table import build_cost_table
from eebench.measure.flops import torch_flops
from eebench.measure.params import count_unique, params_per_exit
from eebench.methods import derived
from eebench.methods.base import get_method
from eebench.methods.cascade import Cascade, dar_loss
from eebench.methods.cascade_model import CascadeModel
from eebench.methods.static import Static
from eebench.models.outputs import collect_exit_logits
from eebench.rules.engine import dynamic_batch, dynamic_inference, simulate
from eebench.run import artifacts as R
from eebench.tasks.loaders import load_split
from tests import tiny
from tests.cli import tiny_run

DEPTHS = (1, 2, 4)


def _cascade(seed: int = 0) -> CascadeModel:
    """Static models of depths 1, 2, 4 on tiny random backbones, their weights drawn so that
    their confidences spread over (0.5, 1) and overlap."""
    models = []
    for k in DEPTHS:
        m = tiny.tiny_model(Static(layers=k), seed=seed + k, num_layers=k, depth=4).eval()
        with torch.no_grad():
            for p in m.parameters():
                if p.dim() == 2:
                    p.normal_(0, 0.3)
        models.append(m)
    return CascadeModel(models, get_method("cascade").settings).eval()


@pytest.fixture(scope="module")
def rte_dev(data_dir):
    return encode(load_split("rte", "dev", data_dir).take(32, seed=0), tiny.tokenizer(), 64)


def _authors_loop(cascade_logits: list[torch.Tensor], threshold: float) -> tuple[int, int]:
    """cascade_bert.py 121-148 for one sample, from each model's logits (their code, too, runs
    every model and then walks the cascade): exit at the first model whose max probability is
    strictly above the threshold; the last model takes the rest."""
    for i, logits in enumerate(cascade_logits):
        confidence = torch.softmax(logits, -1).max()
        if confidence > threshold or i == len(cascade_logits) - 1:
            return i, int(logits.argmax())
    raise AssertionError("unreachable")


def _one_by_one(cascade: CascadeModel, enc) -> list[list[torch.Tensor]]:
    """Each sample alone (batch size 1) through each model: its logits per model."""
    with torch.inference_mode():
        return [[m(b["input_ids"], b["attention_mask"], b.get("token_type_ids"))[-1][0]
                 for m in cascade.models] for b in (collate(enc, [i]) for i in range(len(enc)))]


def test_cascade_follows_the_authors_loop(rte_dev):
    cascade = _cascade()
    out = collect_exit_logits(cascade, eval_batches(rte_dev, 8, sort_by_length=True))
    conf = out.logits.softmax(-1).max(-1).values  # [S, N]
    thresholds = [float(q) for q in torch.quantile(conf[:-1].flatten(), torch.tensor([.2, .5, .8]))]
    batch = collate(rte_dev, list(range(len(rte_dev))))
    alone = _one_by_one(cascade, rte_dev)
    for t in [0.5, *thresholds, 0.99]:
        rule = get_method("cascade").exit_rule(t, False)
        sim = simulate(rule, out.logits, False)
        real = dynamic_inference(cascade, rule, [batch], len(rte_dev), False)
        shrunk, _ = dynamic_batch(cascade, rule, batch, False)
        assert shrunk.tolist() == real.exit_index.tolist()
        ties = (conf[:-1] - t).abs().min(0).values < 1e-6  # the rules differ only at exact ties
        for i in range(len(rte_dev)):
            if ties[i]:
                continue
            expect = _authors_loop(alone[i], t)
            assert (int(sim.exit_index[i]), int(sim.prediction[i])) == expect, (t, i)
            assert (int(real.exit_index[i]), int(real.prediction[i])) == expect, (t, i)
    spread = simulate(get_method("cascade").exit_rule(thresholds[1], False), out.logits, False)
    assert len(set(spread.exit_index.tolist())) == len(DEPTHS)  # every model answers some


def test_full_mode_runs_the_deepest_model_alone(rte_dev):
    cascade = _cascade(seed=1)
    batch = collate(rte_dev, list(range(len(rte_dev))))
    exits, preds = dynamic_batch(cascade, get_method("cascade").exit_rule(0.0, False), batch,
                                 False, full=True)
    assert exits.tolist() == [len(DEPTHS) - 1] * len(rte_dev)
    with torch.inference_mode():
        deepest = cascade.models[-1](batch["input_ids"], batch["attention_mask"],
                                      batch.get("token_type_ids"))[-1].argmax(-1)
    assert preds.long().tolist() == deepest.tolist()


def test_flops_and_params_count_every_model_run():
    cascade = _cascade()
    table = build_cost_table(cascade, max_len=20)
    whole = [build_cost_table(m, max_len=20).path[-1] for m in cascade.models]
    assert cascade.exit_layers == DEPTHS
    for n in (1, 7, 20):
        for j in range(len(DEPTHS)):
            assert table.path_flops(j, n) == sum(int(w[n]) for w in whole[: j + 1])
    # a model's whole cost is what a counter sees when the model runs once (eager attention)
    for m, w in zip(cascade.models, whole, strict=True):
        ids = torch.arange(1000, 1007)[None]
        m.config._attn_implementation = "eager"
        assert torch_flops(m, (ids, torch.ones_like(ids))) == int(w[7])
    exits, lengths = np.array([0, 2, 1, 2]), np.array([3, 9, 20, 1])
    assert table.per_sample_flops(exits, lengths).tolist() == [
        sum(int(w[n]) for w in whole[: j + 1]) for j, n in zip(exits, lengths, strict=True)]
    params = params_per_exit(cascade)
    sizes = [count_unique([m]) for m in cascade.models]
    assert params.per_exit == [sum(sizes[: j + 1]) for j in range(len(DEPTHS))]
    assert params.total == sum(sizes)


def test_dar_is_a_margin_ranking_of_easy_over_hard():
    # max probabilities 0.9 (right), 0.6 (right), 0.7 (wrong): easy 0, 1; hard 2 (drawn always)
    probs = torch.tensor([[0.9, 0.1], [0.4, 0.6], [0.7, 0.3]])
    logits, labels = probs.log(), torch.tensor([0, 1, 1])
    margin = 0.5
    expect = (max(0, margin - (0.9 - 0.7)) + max(0, margin - (0.6 - 0.7))) / 2
    assert dar_loss(logits, labels, margin).item() == pytest.approx(expect)
    assert dar_loss(logits, labels, 0.0).item() == pytest.approx(0.1 / 2)
    assert dar_loss(logits, torch.tensor([0, 1, 0]), margin).item() == 0  # no hard sample
    logits.requires_grad_(True)
    method = get_method("cascade", ranking_weight=0.5, ranking_margin=margin)
    stage = method.stages()[0]
    loss = method.loss([logits], labels, stage, is_regression=False)
    ce = torch.nn.functional.cross_entropy(logits, labels)
    assert loss.item() == pytest.approx(ce.item() + 0.5 * expect)
    loss.backward()
    assert logits.grad is not None
    plain = get_method("cascade").loss([logits], labels, stage, is_regression=False)
    assert plain.item() == pytest.approx(ce.item())


def test_parts_are_statics_models_unless_dar():
    plain = get_method("cascade").models(6)
    assert [type(m) for m in plain] == [Static] * 4
    assert [m.settings for m in plain] == [{"layers": k} for k in (1, 2, 4, 6)]
    assert get_method("cascade").depths(12) == [1, 2, 4, 8, 12]
    assert get_method("cascade").depths(3) == [1, 2, 3]
    dar = get_method("cascade", depths=[2, 6], ranking_weight=0.5).models(6)
    assert [type(m) for m in dar] == [Cascade, Static]  # the last model never has DAR
    assert dar[0].settings["layers"] == 2 and dar[0].settings["ranking_weight"] == 0.5
    assert dar[1].settings == {"layers": 6}
    with pytest.raises(UsageError, match="depth 8"):
        get_method("cascade", depths=[2, 8]).models(6)
    with pytest.raises(UsageError, match="depths"):
        get_method("cascade", depths=[2, 2])
    with pytest.raises(UsageError, match="regression"):
        derived.check_task(get_method("cascade"),
                           type("T", (), {"is_regression": True, "name": "x"})())


# ------------------------------------------------------------------------------- end to end
runner = CliRunner()
SWEEP = "0.5,0.55,0.6,0.7,0.9"


def _run(root: Path, backbone: Path, data_dir: Path, *extra: str) -> Path:
    return Path(tiny_run(root, backbone, data_dir, *extra)["run_dir"])


def test_cascade_run_reuses_static_checkpoints(tmp_path, data_dir, monkeypatch):
    monkeypatch.chdir(tmp_path)
    backbone = tiny.save_tiny_backbone(tmp_path / "tiny-bert", num_layers=4)
    static_dir = _run(tmp_path, backbone, data_dir, "--method", "static", "--sweep", "1,2,4")
    static = R.read_run(static_dir).summary
    trained = {v.checkpoint: (Path(v.checkpoint) / "model.safetensors").stat().st_mtime_ns
               for v in static.variants}
    run_dir = _run(tmp_path, backbone, data_dir, "--method", "cascade", "--sweep", SWEEP)
    run = R.read_run(run_dir)
    [variant] = run.summary.variants  # the cascade, measured as one model
    assert (variant.name, variant.exit_layers, variant.logits_key) == ("all", [1, 2, 4],
                                                                       "exit_logits")
    # a sample answered by model j ran models 1..j whole; a static model, its own layers
    assert [[(r.layers, r.heads) for r in path] for path in variant.exit_paths] == [
        [(1, [1])], [(1, [1]), (2, [2])], [(1, [1]), (2, [2]), (4, [4])]]
    assert all(len(path) == 1 for v in static.variants for path in v.exit_paths)
    # the static run's models, not retrained
    assert variant.checkpoint.split(";") == [v.checkpoint for v in static.variants]
    assert {c: (Path(c) / "model.safetensors").stat().st_mtime_ns for c in trained} == trained
    arrays = load_file(str(run_dir / R.PREDICTIONS_FILE))
    assert arrays["exit_logits"].shape[:2] == (3, 20)
    # each model's answer is the static run's model's answer
    for j, v in enumerate(static.variants):
        np.testing.assert_allclose(arrays["exit_logits"][j], arrays_of(static_dir)[v.logits_key][0],
                                   atol=1e-5)
    whole = _whole_costs(variant.checkpoint.split(";"), int(arrays["lengths"].max()))
    for row, p in enumerate(run.points):
        assert p.disagreements == p.disagreements_near_threshold == 0
        exit_index = np.searchsorted(DEPTHS, arrays["exit_layer"][row])
        flops = [sum(int(w[n]) for w in whole[: j + 1])
                 for j, n in zip(exit_index, arrays["lengths"], strict=True)]
        assert p.mean_flops == pytest.approx(np.mean(flops))
        assert p.avg_exit_layer == pytest.approx(arrays["exit_layer"][row].mean())
        assert p.consistency is not None  # the deepest model's answer is the full prediction
    assert [p.sweep_value for p in run.points] == [float(v) for v in SWEEP.split(",")]
    score = runner.invoke(app, ["score", str(run_dir), "--json"])
    assert score.exit_code == 0, score.output
    # its submission records what each exit ran, and is valid only with it
    from eebench.submit.build import build_submission
    from eebench.submit.schema import ModelRun
    from eebench.submit.validate import check_submission

    sub = build_submission([run_dir])
    [entry] = sub.tasks["rte"].runs
    assert [[r.layers for r in path] for path in entry.exit_paths] == [[1], [1, 2], [1, 2, 4]]
    check_submission(sub)
    entry.exit_paths = [[ModelRun(layers=k, heads=list(range(1, k + 1)))] for k in DEPTHS]
    with pytest.raises(DataError, match="outside"):  # as one model, it costs too much
        check_submission(sub)
    [static_entry] = build_submission([static_dir]).tasks["rte"].runs
    assert [[(r.layers, r.heads) for r in path] for path in static_entry.exit_paths] == [
        [(k, [k])] for k in DEPTHS]


def arrays_of(run_dir: Path) -> dict[str, np.ndarray]:
    return load_file(str(run_dir / R.PREDICTIONS_FILE))


def _whole_costs(checkpoints: list[str], max_len: int) -> list[np.ndarray]:
    from eebench.train.checkpoint import load_trained

    return [build_cost_table(load_trained(Path(c))[0], max_len).path[-1] for c in checkpoints]


@pytest.mark.slow
def test_cascade_run_with_dar(tmp_path, data_dir, monkeypatch):
    monkeypatch.chdir(tmp_path)
    backbone = tiny.save_tiny_backbone(tmp_path / "tiny-bert", num_layers=3)
    run_dir = _run(tmp_path, backbone, data_dir, "--method", "cascade", "--sweep", SWEEP,
                   "--setting", "ranking_weight=0.5")
    [variant] = R.read_run(run_dir).summary.variants
    kinds = [Path(c).parts[-3] for c in variant.checkpoint.split(";")]
    assert kinds == ["cascade", "cascade", "static"]  # DAR on the models before the last
    assert all(p.disagreements == p.disagreements_near_threshold
               for p in R.read_run(run_dir).points)


def test_elue_export_lists_every_model_run():
    from eebench.submit.export_elue import Structure, modules

    paths = tuple(tuple((k, (k,)) for k in (1, 2, 4)[: j + 1]) for j in range(3))
    cascade = Structure(8, (1, 2, 4), "cls", paths)
    assert modules(3, 1, cascade) == "(3),emb; (3,8),layer_1; (8),exit_1"
    assert modules(3, 2, cascade) == ("(3),emb; (3,8),layer_1; (8),exit_1; "
                                      "(3),emb; (3,8),layer_1; (3,8),layer_2; (8),exit_2")
    assert modules(3, 4, cascade).count("emb") == 3
    assert modules(3, 4, cascade).count("layer_") == 1 + 2 + 4


def test_flops_cli_counts_every_model_of_the_cascade():
    def flops(*args: str) -> dict:
        result = runner.invoke(app, ["flops", "--seq-len", "20", "--json", *args])
        assert result.exit_code == 0, result.output
        return json.loads(result.stdout)

    static = flops("--method", "static")
    layer = static["modules"][1]["fvcore"]
    embed, head = static["modules"][0]["fvcore"], static["modules"][-1]["fvcore"]
    cascade = flops("--method", "cascade")
    assert cascade["counters_agree"]
    assert len(cascade["modules"]) == sum(1 + k + 1 for k in (1, 2, 4, 6))
    assert cascade["modules"][0]["module"] == "model 1 (1 layer): embeddings"
    assert cascade["modules"][-1]["module"] == "model 4 (6 layers): exit head 0 (after layer 6)"
    # a sample that reaches the last model ran all four, each whole
    assert cascade["total_flops"] == sum(embed + k * layer + head for k in (1, 2, 4, 6))


def test_train_cli_trains_each_model_of_the_cascade_for_run_to_reuse(tmp_path, data_dir,
                                                                      monkeypatch):
    monkeypatch.chdir(tmp_path)
    backbone = tiny.save_tiny_backbone(tmp_path / "tiny-bert", num_layers=3)
    result = runner.invoke(app, [
        "train", "--method", "cascade", "--task", "rte", "--model", str(backbone),
        "--data-dir", str(data_dir), "--max-train-samples", "32", "--epochs", "1",
        "--max-seq-length", "48", "--out", str(tmp_path / "ckpt"), "--json"])
    assert result.exit_code == 0, result.output + str(result.exception)
    report = json.loads(result.stdout)
    parts = report["parts"]
    assert [p["method_settings"] for p in parts] == [{"layers": k} for k in (1, 2, 3)]
    assert all(p["finished"] and p["method"] == "static" for p in parts)
    assert [Path(p["checkpoint"]).parts[-3] for p in parts] == ["static"] * 3
    trained = {p["checkpoint"]: (Path(p["checkpoint"]) / "model.safetensors").stat().st_mtime_ns
               for p in parts}
    run_dir = _run(tmp_path, backbone, data_dir, "--method", "cascade", "--sweep", SWEEP)
    [variant] = R.read_run(run_dir).summary.variants
    assert variant.checkpoint.split(";") == list(trained)  # the trained models, not retrained
    assert {c: (Path(c) / "model.safetensors").stat().st_mtime_ns for c in trained} == trained
