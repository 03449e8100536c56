"""`eebench run --from-checkpoint`: the authors' DeeBERT, PABEE and ElasticBERT checkpoints
(tiny ones, in their exact key names and shapes: tests/authors.py) as eebench's multi-exit model.

Parity: each exit's logits equal a forward written by hand from the authors' modeling code on the
same tensors; the exit decisions of eebench's rule over the stored logits, and of real dynamic
inference, equal the authors' per-sample loop. Then a run from an imported checkpoint is a run
like any other, and what is refused is refused in one line.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from typer.testing import CliRunner

from eebench.cli import app
from eebench.errors import DataError, EebenchError, UsageError
from eebench.methods.base import get_method
from eebench.models.convert import open_checkpoint
from eebench.models.convert.build import load_model
from eebench.models.convert.source import CONVERT_COMMAND
from tests import authors as A
from tests import tiny

runner = CliRunner()
# (name, method, family, the authors' checkpoint)
CASES = {
    "deebert-bert": ("deebert", "bert", lambda: A.deebert("bert")),
    "deebert-roberta": ("deebert", "roberta", lambda: A.deebert("roberta")),
    "pabee-bert": ("pabee", "bert", lambda: A.pabee("bert")),
    "pabee-albert": ("pabee", "albert", lambda: A.pabee("albert")),
    "elasticbert": ("elasticbert", "bert", A.elasticbert),
}
THRESHOLDS = [0.0, 0.05, 0.2, 0.4, 0.6, 0.7]  # entropy in nats (ln 2 = 0.693)
PATIENCES = [1, 2, 3]


@pytest.fixture(scope="module")
def written(tmp_path_factory):
    """Every case's checkpoint folder, config and state dict."""
    root = tmp_path_factory.mktemp("authors")
    out = {}
    for name, (_, _, make) in CASES.items():
        config, state = make()
        out[name] = (A.write(root / name, config, state), config, state)
    return out


@pytest.fixture(scope="module")
def batch(data_dir):
    """24 real RTE dev pairs, tokenised (padded batch) and one by one (no padding)."""
    from eebench.data.batching import collate, encode
    from eebench.tasks.loaders import load_split

    examples = load_split("rte", "dev", data_dir)
    data = encode(examples, tiny.tokenizer(), 40)
    b = collate(data, list(range(24)))
    singles = [(b["input_ids"][i][b["attention_mask"][i] == 1],
                b["token_type_ids"][i][b["attention_mask"][i] == 1]) for i in range(24)]
    return b, singles


def _reference_exits(name: str, state: dict, config: dict, ids, types) -> list[torch.Tensor]:
    method, family, _ = CASES[name]
    if method == "deebert":
        return A.deebert_exits(state, family, ids, types, config)[:-1]  # the L-th ramp: unused
    if method == "pabee":
        return A.pabee_exits(state, family, ids, types, config)
    return A.elasticbert_exits(state, ids, types, config)


@pytest.mark.parametrize("name", list(CASES))
def test_an_authors_checkpoint_is_found_and_recorded(name, written):
    folder, config, _ = written[name]
    checkpoint = open_checkpoint(str(folder))
    record = checkpoint.record()
    assert checkpoint.format.name == CASES[name][0]
    assert (record.num_layers, record.num_labels, record.pooling) == (A.LAYERS, A.LABELS, "cls")
    import hashlib

    digest = hashlib.sha256((folder / "model.safetensors").read_bytes()).hexdigest()
    assert record.sha256 == digest and record.source == str(folder)


@pytest.mark.parametrize("name", list(CASES))
def test_exit_logits_equal_the_authors_forward(name, written, batch):
    """In float64 on both sides, so that the comparison is tight (float32 differs in the order
    of its sums): the model's padded batch against the hand forward of each sample alone."""
    folder, config, state = written[name]
    model = load_model(open_checkpoint(str(folder)), get_method(CASES[name][0])).double()
    b, singles = batch
    with torch.no_grad():
        padded = model(b["input_ids"], b["attention_mask"], b["token_type_ids"])  # [E, B, C]
    assert padded.shape == (A.LAYERS, 24, A.LABELS)
    state64 = {k: v.double() if v.is_floating_point() else v for k, v in state.items()}
    for i, (ids, types) in enumerate(singles):
        with torch.no_grad():
            reference = torch.stack(_reference_exits(name, state64, config, ids, types))
        torch.testing.assert_close(padded[:, i], reference, atol=1e-9, rtol=1e-9)
    # every tensor of the checkpoint is used, bar DeeBERT's untrained last off-ramp
    dropped = open_checkpoint(str(folder)).convert(state).dropped
    assert all(".highway.2." in k for k in dropped) and bool(dropped) == name.startswith("deebert")


def _authors_decision(name: str, state: dict, config: dict, ids, types, value: float
                      ) -> tuple[int, int, bool]:
    """(exit layer, prediction, whether it answered from DeeBERT's untrained last off-ramp)."""
    method, family, _ = CASES[name]
    if method == "deebert":
        layer, logits = A.deebert_loop(state, family, ids, types, config, value)
        top = A.deebert_exits(state, family, ids, types, config)[-2]
        return layer, int(logits.argmax()), layer == A.LAYERS and not torch.equal(logits, top)
    exits = _reference_exits(name, state, config, ids, types)
    if method == "pabee":
        layer, logits = A.pabee_loop(exits, int(value))
    else:
        layer, logits = A.elasticbert_loop(exits, value)
    return layer, int(logits.argmax()), False


def _near_tie(name: str, state: dict, config: dict, ids, types, value: float) -> bool:
    """Whether one of the authors' entropies sits within float noise of the threshold (their
    entropy, log(sum e^x) - sum x e^x / sum e^x, runs a little below 0 on a saturated softmax,
    so that their loop exits at threshold 0 where the entropy is 0)."""
    if CASES[name][0] == "pabee":
        return False
    with torch.no_grad():
        exits = _reference_exits(name, state, config, ids, types)
    return any(abs(float(A.entropy(x)) - value) < 1e-4 for x in exits)


@pytest.mark.parametrize("name", list(CASES))
def test_exit_decisions_equal_the_authors_per_sample_loop(name, written, batch):
    """eebench's rule replayed over the stored logits (`simulate`) and real dynamic inference
    (`dynamic_batch`: the batch shrinks as samples exit) against the authors' loop, sample by
    sample. DeeBERT's loop may answer at the last layer from its untrained last off-ramp
    (formats.py): the exit layer is the same, the prediction is then the top classifier's."""
    from eebench.rules.engine import dynamic_batch, simulate

    folder, config, state = written[name]
    method = get_method(CASES[name][0])
    model = load_model(open_checkpoint(str(folder)), method)
    b, singles = batch
    with torch.no_grad():
        logits = model(b["input_ids"], b["attention_mask"], b["token_type_ids"])
    values = PATIENCES if method.name == "pabee" else THRESHOLDS
    mixed = ties = 0  # sweep values at which the samples exit at different layers; float ties
    for value in values:
        rule = method.exit_rule(float(value), False)
        simulated = simulate(rule, logits, False)
        real_exit, real_pred = dynamic_batch(model, rule, b, False)
        assert real_exit.tolist() == simulated.exit_index.tolist()
        assert real_pred.long().tolist() == simulated.prediction.tolist()
        for i, (ids, types) in enumerate(singles):
            with torch.no_grad():
                layer, pred, last_ramp = _authors_decision(name, state, config, ids, types, value)
            if simulated.exit_index[i] + 1 != layer:  # only a float tie at the threshold
                assert _near_tie(name, state, config, ids, types, value), (value, i)
                ties += 1
            elif not last_ramp:
                assert simulated.prediction[i] == pred, (value, i)
        mixed += len(set(simulated.exit_index.tolist())) > 1
    assert ties <= 2 and mixed >= 1 and len(set(logits.argmax(-1).flatten().tolist())) == A.LABELS


def test_an_authors_checkpoint_under_another_methods_heads_is_refused(written):
    from eebench.tasks.catalog import get_task
    from eebench.train.imported import planned_import

    rte = get_task("rte")
    with pytest.raises(UsageError) as e:  # PABEE's one shared pooler, DeeBERT's pooler per exit
        planned_import(str(written["pabee-bert"][0]), "deebert", {}, rte)
    assert "heads do not fit" in e.value.message and "--method pabee" in e.value.hint
    with pytest.raises(UsageError, match="trains"):  # static: one model per depth
        planned_import(str(written["deebert-bert"][0]), "static", {}, rte)
    with pytest.raises(UsageError, match="3 labels"):  # MNLI's three labels, two classifiers
        planned_import(str(written["deebert-bert"][0]), "deebert", {}, get_task("mnli"))
    with pytest.raises(UsageError, match="--pooling mean"):
        planned_import(str(written["deebert-bert"][0]), "deebert", {}, rte, "mean")
    # the same per-exit poolers and classifiers: a DeeBERT checkpoint reads as ElasticBERT's
    record, method = planned_import(str(written["deebert-bert"][0]), "elasticbert", {}, rte)
    assert (record.format, method.name) == ("deebert", "elasticbert")


def test_pickled_weights_are_refused_with_the_conversion_command(tmp_path):
    folder = tmp_path / "pickled"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps({"model_type": "bert"}))
    (folder / "pytorch_model.bin").write_bytes(b"not read")
    with pytest.raises(DataError) as e:
        open_checkpoint(str(folder))
    assert "never unpickles" in e.value.message
    assert CONVERT_COMMAND.replace("DIR", str(folder)) in e.value.hint


def test_a_plain_backbone_is_not_an_early_exit_checkpoint(tmp_path):
    folder = tiny.save_tiny_backbone(tmp_path / "plain", num_layers=2)
    with pytest.raises(DataError, match="not an early-exit checkpoint") as e:
        open_checkpoint(str(folder))
    assert "--model" in e.value.hint


def _fake_hub(tmp_path, monkeypatch, repo: str, files: dict[str, Path | bytes]) -> None:
    """A hub cache holding one snapshot of `repo` (what `hf download` leaves), offline."""
    import huggingface_hub.constants as hub

    cache = tmp_path / "hub"
    repo_dir = cache / f"models--{repo.replace('/', '--')}"
    snapshot = repo_dir / "snapshots" / ("0" * 40)
    snapshot.mkdir(parents=True)
    (repo_dir / "refs").mkdir()
    (repo_dir / "refs" / "main").write_text("0" * 40)
    (repo_dir / "blobs").mkdir()
    for n, (name, content) in enumerate(files.items()):  # the hub's layout: links to blobs
        data = content.read_bytes() if isinstance(content, Path) else content
        (repo_dir / "blobs" / f"blob{n}").write_bytes(data)
        (snapshot / name).symlink_to(Path("..", "..", "blobs", f"blob{n}"))
    monkeypatch.setattr(hub, "HF_HUB_CACHE", str(cache))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")


def test_a_hub_id_is_read_from_the_cache_offline_and_pickles_are_refused(
        tmp_path, monkeypatch, written):
    folder = written["pabee-bert"][0]
    files = {p.name: p for p in folder.iterdir() if p.is_file()}
    _fake_hub(tmp_path, monkeypatch, "authors/pabee-tiny", files)
    checkpoint = open_checkpoint("authors/pabee-tiny")
    assert checkpoint.format.name == "pabee"
    assert checkpoint.record().sha256 == open_checkpoint(str(folder)).record().sha256
    assert checkpoint.record().source == "authors/pabee-tiny"
    # a hub repository whose weights are only pickled: the conversion command, in one line
    pickled = {"config.json": files["config.json"], "pytorch_model.bin": b"not read"}
    _fake_hub(tmp_path / "p", monkeypatch, "authors/pickled", pickled)
    with pytest.raises(DataError) as e:
        open_checkpoint("authors/pickled")
    assert "no model.safetensors on the hub" in e.value.message
    assert "hf download authors/pickled" in e.value.hint and "save_file" in e.value.hint
    # offline and not in the cache: one line
    with pytest.raises(EebenchError, match="offline and not in the local cache"):
        open_checkpoint("authors/absent")


def _run(tmp_path, data_dir, folder, method, *extra):
    args = ["run", "--task", "rte", "--from-checkpoint", str(folder), "--method", method,
            "--data-dir", str(data_dir), "--max-seq-length", "40", "--max-eval-samples", "16",
            "--time-samples", "6", "--out", str(tmp_path / "runs"),
            "--checkpoints", str(tmp_path / "ckpt"), "--json", *extra]
    return runner.invoke(app, args)


def test_a_run_from_an_imported_checkpoint_scores_like_any_other(tmp_path, data_dir, written,
                                                                  monkeypatch):
    from eebench.run import artifacts as R
    from eebench.score import load_run

    monkeypatch.chdir(tmp_path)
    folder = written["elasticbert"][0]
    result = _run(tmp_path, data_dir, folder, "elasticbert")
    assert result.exit_code == 0, result.output + repr(result.exception)
    run_dir = Path(json.loads(result.stdout)["run_dir"])
    run_dir = run_dir if run_dir.is_absolute() else tmp_path / run_dir
    run = R.read_run(run_dir)
    weights = run.config.weights
    assert weights is not None and weights.format == "elasticbert"
    assert weights.sha256 == open_checkpoint(str(folder)).sha256
    assert run.config.model == str(folder)
    assert "weights" in json.loads((run_dir / R.CONFIG_FILE).read_text())
    [variant] = run.summary.variants
    assert variant.exit_layers == [1, 2, 3] and "imported" in variant.checkpoint
    for p in run.points:  # the sweep, the real dynamic inference check, the table
        assert p.disagreements == p.disagreements_near_threshold
        assert p.n_samples == 16 and p.main is not None
    scored = load_run(run_dir)
    assert len(scored.points) == len(run.points)
    score = runner.invoke(app, ["score", str(tmp_path / "runs"), "--json"])
    assert score.exit_code == 0, score.output
    # and submits like any other: a valid submission, its bounds those of the checkpoint's model
    sub = tmp_path / "sub.json"
    made = runner.invoke(app, ["submit", str(run_dir), "--out", str(sub)])
    assert made.exit_code == 0, made.output
    assert runner.invoke(app, ["validate", str(sub)]).exit_code == 0
    # a dry run plans no training for weights made elsewhere
    dry = _run(tmp_path, data_dir, folder, "elasticbert", "--dry-run")
    assert dry.exit_code == 0, dry.output
    assert [c["train_steps"] for c in json.loads(dry.stdout)] == [0]
    # the same command finds the finished run; other weights are another run
    again = _run(tmp_path, data_dir, folder, "elasticbert")
    assert json.loads(again.stdout)["run_dir"] == json.loads(result.stdout)["run_dir"]
    config, state = A.elasticbert(seed=5)
    other = A.write(tmp_path / "other", config, state)
    moved = _run(tmp_path, data_dir, other, "elasticbert")
    assert moved.exit_code == 0, moved.output
    assert json.loads(moved.stdout)["run_dir"] != json.loads(result.stdout)["run_dir"]


def test_from_checkpoint_refusals_are_one_line(tmp_path, data_dir, written):
    both = _run(tmp_path, data_dir, written["pabee-bert"][0], "pabee", "--model", "minilm-l6")
    assert both.exit_code == 2 and "not both" in both.output
    wrong = _run(tmp_path, data_dir, written["pabee-bert"][0], "deebert")
    assert wrong.exit_code == 2 and "--method pabee" in wrong.output
    missing = _run(tmp_path, data_dir, tmp_path / "nowhere", "pabee")
    assert missing.exit_code == 2 and "no such folder" in missing.output
    assert not (tmp_path / "runs").exists()


def test_the_fields_backbones_by_name_and_offline_in_one_line(tmp_path, data_dir, monkeypatch):
    """`eebench backbones` lists the field's backbones with their hub ids; offline and not
    cached, `--model roberta-base` is one line (item 3 of the same issue: models by name)."""
    from eebench.models.backbones import BACKBONES

    listed = runner.invoke(app, ["backbones", "--json"])
    rows = {r["name"]: r for r in json.loads(listed.stdout)}
    expected = {"bert-base": "bert", "bert-large": "bert", "roberta-base": "roberta",
                "albert-base-v2": "albert", "distilbert-base": "distilbert",
                "elasticbert-base": "bert"}
    for name, family in expected.items():
        assert rows[name]["family"] == family and rows[name]["pooling"] == "cls"
        assert rows[name]["lr"] == 2e-5
        assert BACKBONES.get(name).locate() in rows[name]["description"]
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "empty-cache"))
    monkeypatch.setattr("huggingface_hub.constants.HF_HUB_CACHE", str(tmp_path / "empty-cache"))
    result = runner.invoke(app, ["run", "--model", "roberta-base", "--method", "pabee", "--task",
                                 "rte", "--data-dir", str(data_dir), "--out",
                                 str(tmp_path / "runs"), "--checkpoints", str(tmp_path / "c")])
    assert result.exit_code == 1
    [line] = result.stderr.strip().splitlines()  # before any cell announces itself
    assert line.startswith("error:") and "offline" in line and "roberta-base" in line
