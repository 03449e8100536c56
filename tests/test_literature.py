"""The papers' own settings (benchmarks/literature/*.toml) are runnable as they are: each lists its
cells with `eebench run --dry-run`, offline, without downloading its hub model or data."""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from eebench.cli import app
from eebench.errors import EebenchError
from eebench.methods import derived
from eebench.methods.base import get_method
from eebench.models.backbones import known_depth
from eebench.tasks.catalog import get_task
from eebench.tasks.loaders import load_split

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

ROOT = Path(__file__).resolve().parent.parent
CONFIGS = sorted((ROOT / "benchmarks" / "literature").glob("*.toml"))
runner = CliRunner()
# cells per config: a paper's tasks x its methods (and the rules swept on their models), less the
# pairs a method cannot run (ElasticBERT's entropy rule on the STS-B regression task)
CELLS = {"berxit-bert-base": 7, "cascadebert-mrpc": 1, "deebert-bert-base": 6,
         "deebert-roberta-base": 6, "elasticbert-base": 5, "fastbert-bert-base": 3,
         "pabee-albert-base": 5, "pabee-bert-base": 5, "pcee-bert-base": 3, "sweet-bert-base": 1}


def test_every_paper_setting_is_checked():
    assert {p.stem for p in CONFIGS} == set(CELLS)


@pytest.mark.parametrize("path", CONFIGS, ids=[p.stem for p in CONFIGS])
def test_a_paper_setting_dry_runs_offline(path, data_dir, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")  # a download would fail, not wait
    config = tomllib.loads(path.read_text(encoding="utf-8"))
    assert known_depth(config["model"]) == 12  # a base-size hub model, its depth known
    result = runner.invoke(app, ["run", "--config", str(path), "--dry-run", "--json",
                                 "--data-dir", str(data_dir)])
    assert result.exit_code == 0, result.output + str(result.exception)
    rows = json.loads(result.stdout)
    assert len(rows) == CELLS[path.stem]
    rules = config.get("rules", [])
    expected = {(", ".join([m, *(f"{m}+{r}" for r in rules)]), get_task(t).name, s)
                for m in config["methods"] for t in config["tasks"] for s in config["seeds"]
                if derived.supports_regression(get_method(m)) or not get_task(t).is_regression}
    assert {(r["method"], r["task"], r["seed"]) for r in rows} == expected
    assert {r["status"] for r in rows} == {"todo"}
    train = config.get("train", {})
    for row in rows:  # a split on disk: its optimizer steps, as the paper's recipe gives them
        spec = get_task(row["task"])
        budget = {**train, **config.get("tasks_settings", {}).get(spec.name, {}).get("train", {})}
        try:
            n = min(len(load_split(spec, "train", data_dir)),
                    budget.get("max_train_samples", math.inf))
        except EebenchError:  # not on disk (the hub's when run): known only from a subset size
            n = budget.get("max_train_samples")
            if n is None:
                assert row["train_steps"] is None
                continue
        method = get_method(config["methods"][0], **config.get("methods_settings", {}).get(
            config["methods"][0], {}))
        parts = method.models(12)  # a cascade: each model
        stages = sum(len(part.stages()) for part in parts)
        epochs = budget["epochs"] * (stages - len(budget.get("stage_overrides", {}))) + sum(
            over.get("epochs", budget["epochs"])
            for over in budget.get("stage_overrides", {}).values())
        assert row["train_steps"] == math.ceil(n / budget["batch_size"]) * epochs, row
    assert list(tmp_path.iterdir()) == []  # a dry run writes nothing
