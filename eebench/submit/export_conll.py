"""CoNLL-format export of a token task's test-split run: one file per operating point, so that a
withheld test set can be scored blind (conlleval, seqeval, WNUT-17's wnuteval.py).

Each file holds the split's sentences in order, a word and its predicted tag per line, a blank
line after each sentence:

    EU B-ORG
    rejects O
    German B-MISC

Tags are IOB2, as eebench reads every token task (conlleval's chunking reads IOB1 and IOB2
alike); a word cut by `max_seq_length` is tagged `O`, as it was scored. The words are not in the
run directory: they are read from the task's data and must be the run's own (its
`samples_sha256`).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from eebench.errors import DataError, UsageError
from eebench.io import atomic_files
from eebench.run.artifacts import PREDICTIONS_FILE, samples_hash, verify_run


@dataclass(frozen=True)
class ConllFile:
    path: Path
    sweep: str  # the point's sweep values, as tables show them
    sentences: int
    avg_exit_layer: float
    mean_mflops: float


def file_name(task: str, split: str, label: str) -> str:
    """`<task>_<sweep values>.conll` (`conll2003_threshold=0.3.conll`); a dev run is named."""
    where = task if split == "test" else f"{task}-{split}"
    return f"{where}_{label.replace(',', '_')}.conll"


def export_conll(run_dir: Path, out_dir: Path, data_dir: Path | None) -> list[ConllFile]:
    """Write one CoNLL file per operating point of a token task's run (names: `file_name`)."""
    from eebench.tasks.catalog import get_task
    from eebench.tasks.loaders import load_split

    run_dir, out_dir = Path(run_dir), Path(out_dir)
    files = verify_run(run_dir)  # finished, its files as its summary recorded them
    cfg, spec = files.config, get_task(files.config.task)
    from eebench.models.units import unit_of

    if not unit_of(spec.unit).per_token:
        raise UsageError(f"{run_dir}: a run on {cfg.task}, which labels texts",
                         hint="eebench export-elue writes a text task's test files")
    from safetensors.numpy import load_file

    examples = load_split(spec, cfg.split, data_dir)
    try:
        arrays = load_file(str(run_dir / PREDICTIONS_FILE))
    except Exception as e:  # safetensors raises its own error types
        raise DataError(f"{run_dir / PREDICTIONS_FILE}: not readable ({e})") from None
    words = arrays.get("words")
    if words is None or len(words) > len(examples):
        raise DataError(f"{run_dir}: no words per sentence for {len(examples)} sentences")
    cuts = np.cumsum(words)[:-1]
    if cfg.max_eval_samples is not None and len(words) < len(examples):
        from eebench.run.execute import EVAL_SUBSET_SEED

        examples = examples.take(cfg.max_eval_samples, EVAL_SUBSET_SEED)
    if samples_hash(examples.ids, examples.texts) != files.summary.samples_sha256:
        raise DataError(f"{run_dir}: the {cfg.task} {cfg.split} data found here is not the "
                        "run's own (samples_sha256 differs)", hint="pass the --data-dir it ran on")
    out, written = {}, []
    for row, p in enumerate(files.points):
        tags = np.split(np.asarray(arrays["prediction"][row]), cuts)
        lines = []
        for sentence, predicted in zip(examples.texts, tags, strict=True):
            lines += [f"{w} {spec.labels[int(t)]}" for w, t in zip(sentence, predicted,
                                                                    strict=True)] + [""]
        label = ",".join(f"{k}={v:g}" for k, v in p.sweep.items())
        path = out_dir / file_name(cfg.task, cfg.split, label)
        out[path] = "\n".join(lines) + "\n"
        written.append(ConllFile(path, label, len(tags), p.avg_exit_layer, p.mean_mflops))
    if len(out) != len(written):
        raise DataError(f"{run_dir}: two points with the same sweep values")
    with atomic_files() as staging:  # every file or none
        for path, text in out.items():
            staging.write_text(path, text)
    return written
