"""Hand-made runs for the score stage's per-sample analyses: every array chosen by the test,
written as a run directory (or kept in memory) that reads back like one `eebench run` wrote."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from eebench.io import atomic_write_text, write_json
from eebench.run import artifacts as R
from eebench.run.upgrade import exit_paths
from eebench.score.difficulty import Samples


def run_files(path: Path, exit_layer: np.ndarray, prediction: np.ndarray,
              labels: np.ndarray | None, logits: np.ndarray, mflops: list[float],
              sweep: list[float], task: str = "sst2", method: str = "deebert",
              split: str = "dev") -> R.RunFiles:
    """Config, points and summary of a joint-method run over these arrays ([P, N] rows per
    sweep value, logits [E, N, C] with an exit after each of E layers)."""
    num_layers, n = logits.shape[0], exit_layer.shape[1]
    config = R.RunConfig(model="tiny", method=method, task=task, split=split, seed=1,
                         sweep=sweep, max_seq_length=64, flops_convention="mac2-matmul")
    points = []
    for p, value in enumerate(sweep):
        layers = exit_layer[p].astype(int)
        metrics = {} if labels is None else {
            "accuracy": float((prediction[p] == labels).mean() * 100)}
        points.append(R.OperatingPoint(
            method=method, variant="all", task=task, split=split, seed=1,
            sweep={"threshold": value}, n_samples=n, num_layers=num_layers,
            metrics=metrics, main_metric="accuracy", main=metrics.get("accuracy"),
            avg_exit_layer=float(layers.mean()),
            exit_histogram=np.bincount(layers, minlength=num_layers + 1)[1:].tolist(),
            flops_convention="mac2-matmul", mean_flops=mflops[p] * 1e6, mean_mflops=mflops[p],
            speedup=num_layers / layers.mean(), layer_saving=1 - layers.mean() / num_layers,
            params_total=1000, params_mean_used=500.0))
    summary = R.RunSummary(
        model="tiny", method=method, task=task, split=split, seed=1, config_hash=config.key(),
        n_samples=n, num_points=len(points), variants=[R.VariantRecord(
            name="all", sweep_values=[{"threshold": v} for v in sweep],
            exit_layers=list(range(1, num_layers + 1)),
            exit_paths=exit_paths(list(range(1, num_layers + 1)), False),
            hidden_size=8, pooling="cls", logits_key="exit_logits")])
    return R.RunFiles(Path(path), config, points, summary)


def samples(exit_layer, prediction, labels, logits, mflops, sweep, lengths=None, **kw
            ) -> Samples:
    n = exit_layer.shape[1]
    run = run_files(Path("mem"), exit_layer, prediction, labels, logits, mflops, sweep, **kw)
    return Samples(run, [str(i) for i in range(n)], exit_layer, prediction, labels,
                   np.full(n, 10) if lengths is None else lengths, {"exit_logits": logits})


def write_run(root: Path, exit_layer, prediction, labels, logits, mflops, sweep, lengths,
              ids: list[str] | None = None, **kw) -> Path:
    """The run as a directory under `root` (its files as `eebench run` writes them)."""
    from safetensors.numpy import save_file

    run = run_files(root, exit_layer, prediction, labels, logits, mflops, sweep, **kw)
    run_dir = Path(root) / run.config.key()
    run_dir.mkdir(parents=True)
    write_json(run_dir / R.CONFIG_FILE, run.config)
    write_json(run_dir / R.ENV_FILE, {})
    R.write_points(run_dir / R.POINTS_FILE, run.points)
    arrays = {"exit_layer": exit_layer.astype(np.int16), "prediction": prediction.astype(np.int16),
              "lengths": np.asarray(lengths, dtype=np.int64), "exit_logits": logits}
    if labels is not None:
        arrays["labels"] = labels.astype(np.int16)
    save_file({k: np.ascontiguousarray(v) for k, v in arrays.items()},
              str(run_dir / R.PREDICTIONS_FILE))
    n = exit_layer.shape[1]
    atomic_write_text(run_dir / R.IDS_FILE, "".join(f"{i}\n" for i in ids or range(n)))
    run.summary.files = R.file_hashes(run_dir)
    write_json(run_dir / R.SUMMARY_FILE, run.summary)
    return run_dir
