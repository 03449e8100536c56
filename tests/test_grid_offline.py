"""Expanding a grid is data work: the cells of a config on a registered backbone are listed
(`expand`, `eebench run --dry-run`) with no data and no model at hand. What a grid needs of its
backbone (its depth, positions, family, pooling) comes from the backbones' own table; what needs
the model is checked when a cell runs. A local model folder or checkpoint folder that is not there
yet still lists every cell, with what needs it unknown."""

from __future__ import annotations

import json

import pytest

from eebench.run.config import load_config
from eebench.run.grid import expand
from tests.cli import invoke

CONFIG = """model = "{model}"
methods = ["static", "pabee", "deebert"{token}]
tasks = ["rte", "mrpc", "stsb", "conll2003"]
seeds = [1, 2]
max_seq_length = 128
[timing]
samples = 20
"""


def _no_model(*args, **kwargs):
    raise AssertionError("a model was read while a grid was expanded")


@pytest.fixture
def nothing_on_disk(monkeypatch, tmp_path):
    """Every way a model reaches the process raises; the data directory is empty (the dry run
    counts training steps where a task's rows are on disk: here none are)."""
    import eebench.models.backbones as backbones
    import eebench.models.bundled as bundled
    import eebench.models.pooling as pooling  # imported first: it holds the real ones after

    for module, names in ((backbones, ("load_config", "backbone_config_dict", "from_pretrained",
                                       "load_hf_model", "load_tokenizer", "check_model_dir",
                                       "resolve_backbone", "check_trainable")),
                          (bundled, ("minilm_dir", "mpnet_dir")),
                          (pooling, ("resolve_backbone", "check_model_dir"))):
        for name in names:
            monkeypatch.setattr(module, name, _no_model)
    empty = tmp_path / "no-data"
    empty.mkdir()
    return empty


@pytest.mark.parametrize("model", ["minilm-l6", "mpnet-base", "bert-base", "roberta-base"])
def test_a_grid_expands_without_its_models(nothing_on_disk, tmp_path, model):
    path = tmp_path / "bench.toml"
    # TOKEE halts words live on BERT-style layers: refused on MPNet, its family from the table
    path.write_text(CONFIG.format(model=model, token="" if model == "mpnet-base" else ', "tokee"'))
    grid = expand(load_config(path))
    cells = {(r.label, r.task, r.seed) for r in grid.runs}
    # every pair a method can run, each seed
    assert {(m, t) for m, t, _ in cells} >= {
        ("static", "rte"), ("pabee", "rte"), ("deebert", "mrpc"),
        ("pabee", "stsb"), ("static", "stsb")}
    assert {s for *_, s in cells} == {1, 2}
    depth = {"minilm-l6": 6, "mpnet-base": 12, "bert-base": 12, "roberta-base": 12}[model]
    static = next(r for r in grid.runs if r.method == "static")
    assert static.sweep == [float(k) for k in range(1, depth + 1)]


def test_the_dry_run_lists_every_cell_without_data_or_models(nothing_on_disk, tmp_path):
    path = tmp_path / "bench.toml"
    path.write_text(CONFIG.format(model="minilm-l6", token=', "tokee"'))
    expected = expand(load_config(path))
    result = invoke("run", "--config", path, "--data-dir", nothing_on_disk, "--out",
                    tmp_path / "runs", "--checkpoints", tmp_path / "ckpt", "--dry-run", "--json")
    assert result.exit_code == 0, result.output
    rows = json.loads(result.stdout)
    assert [(r["method"], r["task"], r["seed"]) for r in rows] == [
        (c.label, c.config.task, c.config.seed) for c in _cells(expected)]
    assert {r["status"] for r in rows} == {"todo"}
    assert {r["train_steps"] for r in rows} == {None}  # no rows on disk to count
    assert not (tmp_path / "runs").exists() and not (tmp_path / "ckpt").exists()


def _cells(grid):
    from eebench.run.backends import cells_of

    return cells_of(grid.runs, grid.in_domain, grid.test, grid.test_out)


def test_the_table_says_what_the_bundled_models_say():
    """The registered backbones' depth and positions are their configs' (checked against the
    bundled MiniLM, which is at hand offline)."""
    from eebench.models.backbones import BACKBONES, load_config
    from eebench.models.families import family_of

    config = load_config("minilm-l6")
    backbone = BACKBONES.get("minilm-l6")
    assert backbone.layers == config.num_hidden_layers
    assert backbone.max_tokens == family_of(config).max_tokens(config)
    assert backbone.family == config.model_type


def test_a_local_backbones_config_is_read_once(tmp_path, monkeypatch):
    """A run asks for its backbone's config where its grid is expanded (depth, positions),
    where it runs and where it loads the weights: config.json is read once, and again only
    once it changes."""
    import eebench.models.backbones as backbones
    from eebench.run.config import BenchConfig
    from eebench.run.names import backbone_layers, backbone_max_tokens
    from tests.tiny import save_tiny_backbone

    model = tmp_path / "tiny"
    save_tiny_backbone(model)
    reads = []
    real = backbones._config_dict
    monkeypatch.setattr(backbones, "_config_dict",
                        lambda *a, **k: reads.append(a) or real(*a, **k))
    runs = expand(BenchConfig(model=str(model), methods=["static", "pabee"], tasks=["rte"])).runs
    assert runs[0].sweep == [1.0, 2.0, 3.0, 4.0]  # static: k = 1..4, the depth read
    assert (backbone_layers(str(model)), backbone_max_tokens(str(model))) == (4, 512)
    backbones.load_hf_model(str(model))
    assert len(reads) == 1
    config = json.loads((model / "config.json").read_text())
    (model / "config.json").write_text(json.dumps({**config, "note": "changed"}, indent=1))
    assert backbone_layers(str(model)) == 4 and len(reads) == 2


def _absent_model_grid(tmp_path, where):
    missing = tmp_path / "not-yet"
    path = tmp_path / "bench.toml"
    methods = ["static", "pabee", "deebert"] if where == "model" else ["pabee"]
    path.write_text(f'{where} = "{missing}"\nmethods = {json.dumps(methods)}\n'
                    'tasks = ["rte", "mrpc"]\nseeds = [1, 2]\n')
    return path, missing, methods


@pytest.mark.parametrize("where", ["model", "from_checkpoint"])
def test_a_grid_lists_its_cells_while_its_model_folder_is_absent(nothing_on_disk, tmp_path,
                                                                  where):
    """A local model folder or a checkpoint folder that is not there yet: the dry run lists
    every cell, with what needs the model (its key, sweep, training steps) unknown, and says
    why."""
    path, missing, methods = _absent_model_grid(tmp_path, where)
    grid = expand(load_config(path))
    assert grid.unread is not None and str(missing) in grid.unread
    assert all(r.sweep == [] for r in grid.runs if r.method == "static")  # the depth unknown
    args = ("run", "--config", path, "--data-dir", nothing_on_disk, "--out", tmp_path / "runs",
            "--checkpoints", tmp_path / "ckpt", "--dry-run")
    result = invoke(*args, "--json")
    assert result.exit_code == 0, result.output
    rows = json.loads(result.stdout)
    assert [(r["method"], r["task"], r["seed"]) for r in rows] == [
        (c.label, c.config.task, c.config.seed) for c in _cells(grid)]
    assert len(rows) == 2 * 2 * len(methods)
    assert {(r["key"], r["status"], r["train_steps"]) for r in rows} == {("?", "todo", None)}
    assert all(str(missing) in r["error"] for r in rows)
    table = invoke(*args)
    assert table.exit_code == 0 and "is not there" in table.stderr
    assert not (tmp_path / "runs").exists() and not (tmp_path / "ckpt").exists()


@pytest.mark.parametrize("where", ["model", "from_checkpoint"])
def test_running_a_grid_whose_model_folder_is_absent_is_one_line(tmp_path, where):
    """The grid the dry run listed is refused when it runs, in the line reading the folder
    gives, before any work."""
    path, missing, _ = _absent_model_grid(tmp_path, where)
    refused = invoke("run", "--config", path, "--data-dir", tmp_path, "--out", tmp_path / "runs",
                     "--checkpoints", tmp_path / "ckpt")
    assert refused.exit_code == 2, refused.output
    [line] = refused.stderr.strip().splitlines()
    assert str(missing) in line
    assert not (tmp_path / "runs").exists() and not (tmp_path / "ckpt").exists()
