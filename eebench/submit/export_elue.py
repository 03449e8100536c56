"""ELUE test-file export: one prediction TSV per operating point of a test-split run.

ELUE scores test predictions it holds the labels for, and counts FLOPs itself from what each sample
executed. So every row says which modules ran, with their input shapes at the sample's real token
length n (hidden size d):

    index	pred	modules
    0	entailment	(15),emb; (15,384),layer_1; (384),exit_1; (15,384),layer_2; (384),exit_2

`index` is the test file's index column (the run's ids.txt), `pred` the label as the task's label
set names it (the score for regression), and `modules` the embeddings, layers 1..k and every exit
head evaluated on the way to the sample's exit layer k (a static model has only its one head).
An exit head on [CLS] reads one vector, `(d)`; a head that mean-pools reads every token, `(n,d)`:

    0	entailment	(15),emb; (15,384),layer_1; (15,384),exit_1; (15,384),layer_2; (15,384),exit_2

Everything comes from the run directory: ids.txt, predictions.safetensors (`exit_layer` [P, N],
`prediction` [P, N], `lengths` [N]) and the exit layers in the checkpoints' model_config.json.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from eebench.errors import DataError, UsageError
from eebench.io import atomic_files, read_text
from eebench.run.artifacts import (
    IDS_FILE,
    POINTS_FILE,
    PREDICTIONS_FILE,
    SUMMARY_FILE,
    RunFiles,
    verify_run,
)

HEADER = ("index", "pred", "modules")


@dataclass(frozen=True)
class Structure:
    """What a sample can execute: hidden size, the layers that carry an exit head, and how the
    heads pool ("cls": they read [CLS] alone; "mean": every token)."""

    hidden: int
    exit_layers: tuple[int, ...]
    pooling: str = "cls"
    # What a sample answered at exit j ran (the variant's `exit_paths`): complete models in turn,
    # each (layers, heads); empty: one model, its layers and heads up to the exit
    paths: tuple[tuple[tuple[int, tuple[int, ...]], ...], ...] = ()


@dataclass(frozen=True)
class ExportedFile:
    path: Path
    task: str
    sweep_param: str
    sweep_value: float
    rows: int
    avg_exit_layer: float
    mean_mflops: float


@dataclass(frozen=True)
class Export:
    files: list[ExportedFile]
    rows: int  # test rows in each file
    expected_rows: int | None  # the published size of the split, when known

    @property
    def complete(self) -> bool:
        return self.expected_rows is None or self.rows == self.expected_rows


def modules(length: int, exit_layer: int, structure: Structure) -> str:
    """The executed modules of one sample, with input shapes at its token length: along its
    exit's path, every complete model run on the way, each whole, in turn."""
    n, d = int(length), structure.hidden
    head_input = f"({n},{d})" if structure.pooling == "mean" else f"({d})"
    if structure.paths:
        runs = structure.paths[structure.exit_layers.index(int(exit_layer))]
        if len(runs) > 1 or runs[0][0] != int(exit_layer):
            return "; ".join(modules(n, layers, Structure(d, heads, structure.pooling))
                             for layers, heads in runs)
    parts = [f"({n}),emb"]
    for layer in range(1, int(exit_layer) + 1):
        parts.append(f"({n},{d}),layer_{layer}")
        if layer in structure.exit_layers:
            parts.append(f"{head_input},exit_{layer}")
    return "; ".join(parts)


def file_name(task: str, split: str, sweep_param: str, value: float) -> str:
    """`<task>_<sweep_param>-<value>.tsv`; a second test split (MNLI's mismatched) is named."""
    where = task if split == "test" else f"{task}-{split}"
    return f"{where}_{sweep_param}-{value:g}.tsv"


def _hidden_of(model: str) -> int:
    """The backbone's hidden size, for runs that did not record it (summary schema 1)."""
    from eebench.models.backbones import load_config

    return int(load_config(model).hidden_size)


def structures(run: RunFiles) -> list[Structure]:
    """One Structure per point: the recorded structure of the variant it was measured on."""
    if run.summary is None:
        raise DataError(f"{run.path}: the run has not finished (no {SUMMARY_FILE})",
                        hint="rerun the same `eebench run` command to finish it")
    hidden: int | None = None
    out = []
    for p in run.points:
        v = run.summary.variant(p.variant)
        if v.hidden_size is None and hidden is None:
            hidden = _hidden_of(run.config.model)
        paths = tuple(tuple((r.layers, tuple(r.heads)) for r in path) for path in v.exit_paths)
        out.append(Structure(v.hidden_size or hidden, tuple(v.exit_layers), v.pooling, paths))
    return out


def _pred_text(value, labels: tuple[str, ...] | None) -> str:
    if labels is None:
        return f"{float(value):.6g}"
    return labels[int(value)]


def export_elue(run_dir: Path, out_dir: Path) -> Export:
    """Write one TSV per operating point of a test-split run (names: `file_name`)."""
    from safetensors import SafetensorError
    from safetensors.numpy import load_file

    from eebench.tasks.catalog import get_task

    run_dir, out_dir = Path(run_dir), Path(out_dir)
    run = verify_run(run_dir)  # a finished run whose files match what its summary recorded
    cfg, points = run.config, run.points
    if not cfg.split.startswith("test"):
        raise UsageError(f"{run_dir}: a {cfg.split}-split run; ELUE takes test-set predictions",
                         hint=f"eebench run --split test ... (task {cfg.task})")
    spec = get_task(cfg.task)
    pred_path = run_dir / PREDICTIONS_FILE
    if not pred_path.is_file():
        raise DataError(f"{pred_path}: missing")
    try:
        arrays = load_file(str(pred_path))
    except SafetensorError as e:
        raise DataError(f"{pred_path}: not a readable safetensors file ({e})",
                        hint="rerun the run with --overwrite") from e
    for key in ("exit_layer", "prediction", "lengths"):
        if key not in arrays:
            raise DataError(f"{pred_path}: no {key!r} array", hint="rerun with --overwrite")
    exit_layer, prediction, lengths = arrays["exit_layer"], arrays["prediction"], arrays["lengths"]
    n = len(lengths)
    if exit_layer.shape != (len(points), n) or prediction.shape != exit_layer.shape:
        raise DataError(f"{pred_path}: arrays of shape {exit_layer.shape} and "
                        f"{prediction.shape} for {len(points)} points and {n} samples")
    ids_path = run_dir / IDS_FILE
    if not ids_path.is_file():
        raise DataError(f"{ids_path}: missing (it holds the test file's index column)",
                        hint="rerun the run with --overwrite")
    ids = read_text(ids_path, hint="rerun the run with --overwrite").splitlines()
    if len(ids) != n:
        raise DataError(f"{ids_path}: {len(ids)} ids for {n} samples")
    tabbed = next((row for row, i in enumerate(ids, 1) if "\t" in i), None)
    if tabbed is not None:  # it would add a fourth field to a three-column file
        raise DataError(f"{ids_path}:{tabbed}: the id holds a tab")

    names = [file_name(cfg.task, cfg.split, p.sweep_param, p.sweep_value) for p in points]
    if len(set(names)) != len(names):
        raise DataError(f"{run_dir / POINTS_FILE}: a sweep value appears twice")
    files = []
    # every file is checked and written to a temporary file first; they replace the previous
    # export together, so a bad point or a full disk leaves the output directory as it was
    with atomic_files() as staging:
        for row, (p, s, name) in enumerate(zip(points, structures(run), names)):
            layers = exit_layer[row]
            bad = sorted(set(np.unique(layers).tolist()) - set(s.exit_layers))
            if bad:
                raise DataError(f"{pred_path}: point {row} exits at layer {bad[0]}, which has no "
                                f"exit head (exits after layers {list(s.exit_layers)})")
            preds = prediction[row]
            if spec.labels is not None and (preds.min() < 0 or preds.max() >= len(spec.labels)):
                raise DataError(f"{pred_path}: point {row} predicts a label id outside "
                                f"0..{len(spec.labels) - 1}")
            lines = ["\t".join(HEADER)]
            lines += [f"{ids[i]}\t{_pred_text(prediction[row, i], spec.labels)}\t"
                      f"{modules(lengths[i], layers[i], s)}" for i in range(n)]
            path = out_dir / name
            staging.write_text(path, "\n".join(lines) + "\n")
            files.append(ExportedFile(path=path, task=cfg.task, sweep_param=p.sweep_param,
                                      sweep_value=p.sweep_value, rows=n,
                                      avg_exit_layer=p.avg_exit_layer,
                                      mean_mflops=p.mean_mflops))
    return Export(files=files, rows=n, expected_rows=spec.expected_rows.get(cfg.split))
