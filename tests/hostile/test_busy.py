"""A second `eebench run` on a cell another process is running never exits 0: it runs the rest of
the grid, then says which cells it left and exits 1; nothing of the held run is written."""

from __future__ import annotations

from eebench.run import artifacts as R
from eebench.run import execute
from eebench.run.config import load_config
from eebench.run.grid import expand
from tests.hostile.helpers import fails, unchanged


def test_a_run_held_by_another_process_is_not_exit_0(tmp_path, bench):
    config = tmp_path / "grid.toml"
    config.write_text(f'model = "{bench.backbone}"\nmethods = ["pabee"]\ntasks = ["rte"]\n'
                      "max_seq_length = 32\nmax_eval_samples = 8\n"
                      "[train]\nmax_train_samples = 8\nepochs = 1\n[timing]\nenabled = false\n")
    out = tmp_path / "runs"
    held_dir = execute.run_dir_for(expand(load_config(config)).runs[0], out)
    held = execute._claim(held_dir)  # the other process: an OS lock on the run directory
    assert held is not None
    try:
        with unchanged(held_dir):
            line = fails("run", "--config", config, "--data-dir", bench.data, "--out", out,
                         "--checkpoints", tmp_path / "ckpt", code=1, banner=True,
                         needle="1 of 1 cells are being run by another process")
        assert "rerun the same command when it has finished" in line
        assert not (held_dir / R.SUMMARY_FILE).exists()
    finally:
        held.close()
