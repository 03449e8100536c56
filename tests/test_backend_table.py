"""Where a grid runs is a table of the config, `[backend]`, under `eebench run`'s Backends flags:
each flag goes over its key through `merge`, the one function that puts flags over a file."""

from __future__ import annotations

import inspect
from pathlib import Path

import pytest

from eebench.cli.backends import BackendFlags, grid_request
from eebench.errors import UsageError
from eebench.run.config import load_config, merge
from tests.cli import invoke

GRID = 'model = "minilm-l6"\nmethods = ["pabee"]\ntasks = ["rte"]\n'


def _config(tmp_path: Path, table: str) -> Path:
    path = tmp_path / "bench.toml"
    path.write_text(GRID + "[backend]\n" + table)
    return path


def test_the_flags_go_over_the_table_key_by_key(tmp_path):
    path = _config(tmp_path, 'name = "slurm"\npartition = "gpu"\ntime_limit = 30\n'
                             'slurm_options = { qos = "high" }\n')
    cfg = load_config(path)
    assert (cfg.backend.name, cfg.backend.partition, cfg.backend.time_limit) == (
        "slurm", "gpu", 30)
    flags = BackendFlags(time_limit=60, slurm_option=["mem=8G"], no_wait=True)
    merged = merge(cfg, {"backend": flags.table()}).backend
    assert (merged.name, merged.partition, merged.time_limit, merged.wait) == (
        "slurm", "gpu", 60, False)
    assert merged.slurm_options == {"qos": "high", "mem": "8G"}
    assert merge(cfg, {"backend": BackendFlags().table()}).backend == cfg.backend  # none given
    request = grid_request(merged, dry_run=True)
    assert (request.options.backend, request.options.time_limit, request.options.wait,
            request.elsewhere) == ("slurm", 60, False, True)


def test_the_table_is_checked_as_the_flags_are(tmp_path):
    with pytest.raises(UsageError, match="partitoin"):
        load_config(_config(tmp_path, 'partitoin = "gpu"\n'))
    with pytest.raises(UsageError, match="backend.retries"):
        load_config(_config(tmp_path, "retries = -1\n"))
    cfg = load_config(_config(tmp_path, "retries = 1\n"))  # local: nothing retries
    with pytest.raises(UsageError, match="--retries does not apply to --backend local"):
        grid_request(cfg.backend, dry_run=True)


def test_the_command_line_reads_the_table(tmp_path):
    """A [backend] table reaches the run as its flags would: refused where they would be, and
    a flag given names the backend over the table's."""
    path = _config(tmp_path, 'stop_by = "2h"\n')
    args = ["run", "--config", path, "--out", tmp_path / "runs", "--checkpoints",
            tmp_path / "ckpt", "--data-dir", tmp_path, "--dry-run", "--json"]
    result = invoke(*args)
    assert result.exit_code == 2 and "--stop-by does not apply to --dry-run" in result.output
    path = _config(tmp_path, 'name = "ray"\n')
    result = invoke(*args, "--stop-by", "2h")
    assert result.exit_code == 2 and "--stop-by does not apply to --backend ray" in result.output
    assert invoke(*args, "--backend", "local").exit_code == 0  # the flag over the table


def test_run_command_takes_its_backend_flags_as_one_value():
    from eebench.cli.run import run_command

    assert len(inspect.signature(run_command).parameters) <= 30
    assert "backend_flags" in inspect.signature(run_command).parameters
