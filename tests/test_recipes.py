"""The recipe searches (benchmarks/recipes/*.toml): each config lists its cells offline, and every
committed search run is one of its cells at a searched learning rate and epoch count."""

from __future__ import annotations

import json
import math
import re
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from eebench.cli import app

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

ROOT = Path(__file__).resolve().parent.parent
CONFIGS = sorted((ROOT / "benchmarks" / "recipes").glob("*.toml"))
runner = CliRunner()


@pytest.mark.parametrize("path", CONFIGS, ids=[p.stem for p in CONFIGS])
def test_a_recipe_search_lists_its_cells(path, data_dir, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    config = tomllib.loads(path.read_text(encoding="utf-8"))
    result = runner.invoke(app, ["run", "--config", str(path), "--dry-run", "--json",
                                 "--data-dir", str(data_dir), "--lr", "2e-5"])
    assert result.exit_code == 0, result.output + str(result.exception)
    rows = json.loads(result.stdout)
    assert sorted(r["task"] for r in rows) == sorted(config["tasks"])
    assert all(r["train_steps"] > 0 for r in rows)


@pytest.mark.parametrize("path", CONFIGS, ids=[p.stem for p in CONFIGS])
def test_committed_search_runs_are_cells_of_their_search(path):
    config = tomllib.loads(path.read_text(encoding="utf-8"))
    script = (path.parent / f"search_{path.stem.split('-')[0]}.sh").read_text()
    for summary in (ROOT / config["out"]).glob("*/*/*/*/summary.json"):
        run = json.loads((summary.parent / "config.json").read_text())
        assert run["task"] in config["tasks"] and run["model"] == config["model"]
        assert any(math.isclose(run["train"]["lr"], lr) for lr in _swept(script, "lr"))
        epochs = _swept(script, "epochs") if "for epochs in" in script \
            else [config["train"]["epochs"]]  # the MPNet search keeps the config's epochs
        assert run["train"]["epochs"] in epochs
        assert math.isfinite(json.loads(summary.read_text())["full_model"]["main"])


def _swept(script: str, name: str) -> list[float]:
    """The values a search script's `for NAME in ...` loop sweeps."""
    [values] = re.findall(rf"for {name} in ([^;\n]+)", script)
    return [float(v) for v in values.split()]
