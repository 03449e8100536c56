"""`eebench export-model RUN --out DIR`: a run's model as a folder others load, and back.

A tiny backbone trained on real RTE rows is exported; the folder loads in plain transformers
(the backbone, without custom code), its card renders and its table reads back, and
`eebench run --from-checkpoint DIR` on the same split gives the same weights, the same exit
logits and the same decisions, bit for bit.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch
from safetensors.numpy import load_file
from typer.testing import CliRunner

import eebench.cli.export_model  # noqa: F401 - registers `export-model` (until commands.py does)
from eebench.cli import app
from eebench.cli.export_model import choose_point, export_run
from eebench.errors import UsageError
from eebench.models.convert.card import read_table
from eebench.run import artifacts as R
from eebench.train.checkpoint import load_trained
from eebench.train.config import TrainConfig
from tests import tiny

runner = CliRunner()
EVAL = ["--task", "rte", "--max-seq-length", "40", "--max-eval-samples", "16",
        "--time-samples", "6", "--json"]


@pytest.fixture(scope="module")
def backbone(tmp_path_factory):
    return tiny.save_tiny_backbone(tmp_path_factory.mktemp("tiny-bert"), num_layers=3)


def _invoke(*args) -> dict:
    result = runner.invoke(app, list(args))
    assert result.exit_code == 0, result.output + repr(result.exception)
    return json.loads(result.stdout)


def _run_dir(root: Path, out: dict) -> Path:
    path = Path(out["run_dir"])
    return path if path.is_absolute() else root / path


@pytest.fixture(scope="module")
def trained(tmp_path_factory, backbone, data_dir):
    """A finished pabee run (one shared pooler) and a deebert run (a pooler per exit)."""
    root = tmp_path_factory.mktemp("runs")
    runs = {}
    for method in ("pabee", "deebert"):
        out = _invoke("run", "--method", method, "--model", str(backbone), "--data-dir",
                      str(data_dir), "--max-train-samples", "32", "--epochs", "1", *EVAL,
                      "--out", str(root / "runs"), "--checkpoints", str(root / "ckpt"))
        runs[method] = _run_dir(root, out)
    return root, runs


@pytest.mark.parametrize("method", ["pabee", "deebert"])
def test_export_then_import_is_bit_identical(method, trained, data_dir, tmp_path):
    root, runs = trained
    run_dir, folder = runs[method], tmp_path / "exported"
    done = _invoke("export-model", str(run_dir), "--out", str(folder), "--json")
    assert done["method"] == method and done["exit_layers"] == [1, 2, 3]
    for name in ("model.safetensors", "config.json", "README.md", "tokenizer.json"):
        assert (folder / name).is_file(), name
    assert not list(folder.glob("*.bin")) and not list(folder.glob("*.pt"))
    config = json.loads((folder / "config.json").read_text())
    block = config["early_exit"]
    run = R.read_run(run_dir)
    assert (block["method"], block["exit_layers"], block["pooling"], block["num_labels"]) == \
        (method, [1, 2, 3], run.config.pooling, 2)
    assert block["heads"]["shared_pooler"] is (method == "pabee")
    assert block["rule"]["name"] == ("patience" if method == "pabee" else "entropy")
    assert block["operating_point"]["sweep"] in [p.sweep for p in run.points]

    # back in: the same run on the same split, from the folder, trains nothing
    again = _invoke("run", "--method", method, "--from-checkpoint", str(folder), "--data-dir",
                    str(data_dir), *EVAL, "--out", str(tmp_path / "runs"),
                    "--checkpoints", str(tmp_path / "ckpt"))
    imported = _run_dir(tmp_path, again)
    back = R.read_run(imported)
    assert back.config.weights.format == "eebench" and back.config.train == TrainConfig()
    # the weights, tensor for tensor
    original, _, _ = load_trained(Path(run.summary.variants[0].checkpoint))
    model, _, _ = load_trained(Path(back.summary.variants[0].checkpoint))
    mine, theirs = original.state_dict(), model.state_dict()
    assert mine.keys() == theirs.keys()
    assert all(torch.equal(mine[k], theirs[k]) for k in mine)
    # the logits and every decision, bit for bit
    a = load_file(str(run_dir / R.PREDICTIONS_FILE))
    b = load_file(str(imported / R.PREDICTIONS_FILE))
    for key in ("exit_logits", "exit_layer", "prediction", "labels"):
        assert np.array_equal(a[key], b[key]), key
    assert [p.sweep for p in back.points] == [p.sweep for p in run.points]
    assert [p.main for p in back.points] == [p.main for p in run.points]
    assert [p.mean_flops for p in back.points] == [p.mean_flops for p in run.points]


def test_the_backbone_loads_in_plain_transformers(trained, tmp_path):
    from transformers import AutoModel, AutoTokenizer

    root, runs = trained
    run_dir = runs["deebert"]
    export_run(run_dir, tmp_path / "m")
    hf = AutoModel.from_pretrained(str(tmp_path / "m")).eval()  # no trust_remote_code
    assert type(hf).__name__ == "BertModel" and hf.config.num_hidden_layers == 3
    tokenizer = AutoTokenizer.from_pretrained(str(tmp_path / "m"))
    run = R.read_run(run_dir)
    model, _, _ = load_trained(Path(run.summary.variants[0].checkpoint))
    batch = tokenizer(["a first sentence", "and a rather longer second one"], padding=True,
                      return_tensors="pt")
    with torch.no_grad():
        out = hf(**batch, output_hidden_states=True)
        hidden, inputs = model.embed(batch["input_ids"], batch["attention_mask"],
                                     batch["token_type_ids"])
        for i in range(3):
            hidden = model.layer(i, hidden, inputs)
        torch.testing.assert_close(out.last_hidden_state, hidden)
        if model.pooling == "cls":  # the pooler is the last exit's: its classifier reads it
            logits = model(batch["input_ids"], batch["attention_mask"], batch["token_type_ids"])
            last = model.heads[-1].classifier(out.pooler_output)
            torch.testing.assert_close(last, logits[-1])


def test_the_card_renders_and_its_table_reads_back(trained, tmp_path):
    from huggingface_hub import ModelCard

    root, runs = trained
    run_dir = runs["pabee"]
    run = R.read_run(run_dir)
    export_run(run_dir, tmp_path / "m", point=run.points[0].sweep_value)
    text = (tmp_path / "m" / "README.md").read_text()
    card = ModelCard(text)  # the hub's parser: YAML metadata, then Markdown
    assert card.data.library_name == "transformers"
    assert {"early-exit", "pabee"} <= set(card.data.tags)
    rows = read_table(text)
    points = sorted(run.points, key=lambda p: p.sweep_value)
    assert len(rows) == len(points)
    main = points[0].main_metric
    full = run.summary.full_model.get("mean_mflops") or max(p.mean_mflops for p in points)
    for row, p in zip(rows, points, strict=True):
        assert row["point"] == ", ".join(f"{k}={v:g}" for k, v in p.sweep.items())
        assert float(row[main]) == pytest.approx(p.main, abs=0.005)
        assert float(row["MFLOPs"]) == pytest.approx(p.mean_mflops, abs=0.05)
        assert float(row["FLOPs speed-up"].rstrip("x")) == pytest.approx(
            full / p.mean_mflops, abs=0.005)
        assert float(row["layer speed-up"].rstrip("x")) == pytest.approx(p.speedup, abs=0.005)
        assert row["measured speed-up (bs 1)"].endswith("x")  # the run was timed
    assert [r["chosen"] for r in rows] == ["**chosen**"] + [""] * (len(rows) - 1)
    assert "Hardware:" in text and "eebench run --from-checkpoint" in text
    assert "AutoModel.from_pretrained" in text


def test_the_default_point_is_the_cheapest_near_the_best(trained):
    _, runs = trained
    points = R.read_run(runs["deebert"]).points
    chosen = choose_point(points)
    best = max(p.main for p in points)
    assert chosen.main >= best - 1.0
    assert all(p.mean_flops >= chosen.mean_flops for p in points if p.main >= best - 1.0)
    assert choose_point(points, points[-1].sweep_value) is points[-1]
    with pytest.raises(UsageError, match="no such sweep value"):
        choose_point(points, 123.0)


def test_a_busy_out_folder_is_refused_before_the_model_loads(trained, tmp_path, monkeypatch):
    root, runs = trained
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "x").write_text("")

    def load_trained(*args, **kwargs):  # noqa: ANN002, ANN003, ANN202
        raise AssertionError("the model was loaded before --out was checked")

    monkeypatch.setattr("eebench.train.checkpoint.load_trained", load_trained)
    busy = runner.invoke(app, ["export-model", str(runs["pabee"]), "--out",
                               str(tmp_path / "full")])
    assert busy.exit_code == 2 and "not empty" in busy.output, busy.output


def test_export_refusals_are_one_line(trained, tmp_path, backbone, data_dir):
    root, runs = trained
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "x").write_text("")
    busy = runner.invoke(app, ["export-model", str(runs["pabee"]), "--out",
                               str(tmp_path / "full")])
    assert busy.exit_code == 2 and "not empty" in busy.output
    again = runner.invoke(app, ["export-model", str(runs["pabee"]), "--out",
                                str(tmp_path / "full"), "--overwrite"])
    assert again.exit_code == 0 and not (tmp_path / "full" / "x").exists()
    moved = runner.invoke(app, ["export-model", str(runs["pabee"]), "--out",
                                str(tmp_path / "m"), "--checkpoint", str(tmp_path / "nowhere")])
    assert moved.exit_code == 1 and "--checkpoint" in moved.output
    # static trains one model per depth: not one model to export
    static = _invoke("run", "--method", "static", "--model", str(backbone), "--data-dir",
                     str(data_dir), "--max-train-samples", "16", "--epochs", "1",
                     "--sweep", "1,2", *EVAL, "--no-timing", "--out", str(tmp_path / "runs"),
                     "--checkpoints", str(tmp_path / "ckpt"))
    refused = runner.invoke(app, ["export-model", str(_run_dir(tmp_path, static)), "--out",
                                  str(tmp_path / "s")])
    assert refused.exit_code == 2 and "trained 2 models" in refused.output


def test_an_imported_authors_checkpoint_exports_and_comes_back(tmp_path, data_dir):
    """PABEE's ALBERT (one shared pooler, a bare Linear pooler) in, out, and in again."""
    from tests import authors as A

    config, state = A.pabee("albert")
    folder = A.write(tmp_path / "authors", config, state)
    first = _run_dir(tmp_path, _invoke(
        "run", "--method", "pabee", "--from-checkpoint", str(folder), "--data-dir",
        str(data_dir), *EVAL, "--no-timing", "--out", str(tmp_path / "runs"),
        "--checkpoints", str(tmp_path / "ckpt")))
    export_run(first, tmp_path / "exported")
    block = json.loads((tmp_path / "exported" / "config.json").read_text())["early_exit"]
    assert block["run"]["weights"]["format"] == "pabee"  # where the weights first came from
    second = _run_dir(tmp_path, _invoke(
        "run", "--method", "pabee", "--from-checkpoint", str(tmp_path / "exported"),
        "--data-dir", str(data_dir), *EVAL, "--no-timing", "--out", str(tmp_path / "runs"),
        "--checkpoints", str(tmp_path / "ckpt")))
    assert second != first
    a = load_file(str(first / R.PREDICTIONS_FILE))
    b = load_file(str(second / R.PREDICTIONS_FILE))
    for key in ("exit_logits", "exit_layer", "prediction"):
        assert np.array_equal(a[key], b[key]), key


@pytest.mark.parametrize("family", tiny.FAMILIES)
@pytest.mark.parametrize("method", ["pabee", "deebert"])
def test_every_family_goes_out_and_back_tensor_for_tensor(family, method, tmp_path):
    """The folder, written from a model (no run): AutoModel reads the backbone, and the
    `eebench` format reads every tensor back into the same multi-exit model."""
    from transformers import AutoModel

    from eebench.methods.base import get_method
    from eebench.models.convert import open_checkpoint
    from eebench.models.convert.build import load_model
    from eebench.models.convert.export import write_folder

    model = tiny.tiny_model(method, depth=3, family=family)
    write_folder(tmp_path / "m", model, tiny.tokenizer(), {"task": "rte"}, "card\n")
    hf = AutoModel.from_pretrained(str(tmp_path / "m"))
    assert hf.config.model_type == family
    checkpoint = open_checkpoint(str(tmp_path / "m"))
    assert checkpoint.format.name == "eebench"
    back = load_model(checkpoint, get_method(method))
    mine, theirs = model.state_dict(), back.state_dict()
    assert mine.keys() == theirs.keys()
    assert all(torch.equal(mine[k], theirs[k]) for k in mine)
    ids = tiny.tokenizer()(["one short input", "and a second, longer input"], padding=True,
                           return_tensors="pt")
    types = ids.get("token_type_ids")
    with torch.no_grad():
        assert torch.equal(model(ids["input_ids"], ids["attention_mask"], types),
                           back(ids["input_ids"], ids["attention_mask"], types))
