"""Reading run directories: find them, load their points, refuse what cannot be scored together.

A run directory (see eebench.run.artifacts) holds `config.json`; inputs may be run directories,
parents searched recursively, or glob patterns. A parent's runs are the directories below it that
hold results (`points.jsonl` or `summary.json`): one that holds only its config and environment
is a run that has not evaluated yet (a grid still running), and is not a result. Every run is
read through eebench.run.artifacts.verify_run, the one way a run becomes a result: an unfinished
run (results without `summary.json`) and a file changed since its summary recorded its sha256
are refused, named, never scored. Every check here fails with one line that names the file,
because a score silently computed over mismatched runs is worse than none.
"""

from __future__ import annotations

import glob
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from eebench.errors import DataError
from eebench.models.units import Unit, unit_of
from eebench.run.artifacts import (
    CONFIG_FILE,
    POINTS_FILE,
    PREDICTIONS_FILE,
    SUMMARY_FILE,
    OperatingPoint,
    RunConfig,
    VariantRecord,
    verify_run,
)

GLOB_CHARS = set("*?[")
RESULT_FILES = (POINTS_FILE, SUMMARY_FILE)  # a directory holding one holds a run's results


@dataclass
class Run:
    """One run directory: its config and operating points. The per-sample arrays are read from
    predictions.safetensors only when a statistic needs them (or given as `arrays` when they are
    already in memory)."""

    path: Path
    config: RunConfig
    points: list[OperatingPoint]
    arrays: dict[str, np.ndarray] | None = field(default=None, repr=False)
    # The models the run trained (its summary's record).
    variants: list[VariantRecord] = field(default_factory=list)

    @property
    def model(self) -> str:
        return self.config.model

    @property
    def unit(self) -> str:
        """What its exits decide about: "sequence" (a text), or "token" (sequence labelling:
        its `prediction` rows are a tag per word, the split's words in order)."""
        return self.exit_unit.name

    @property
    def exit_unit(self) -> Unit:
        """Its exit unit as the object the engine asks (eebench.models.units)."""
        return unit_of(self.config.method_settings.get("unit"))

    def variant_of(self, point: OperatingPoint) -> VariantRecord:
        """The recorded model a point was measured on."""
        for v in self.variants:
            if v.name == point.variant:
                return v
        raise DataError(f"{self.path / SUMMARY_FILE}: no record of variant {point.variant!r}",
                        hint="an unfinished run: rerun its `eebench run` command to finish it")

    def predictions(self) -> dict[str, np.ndarray]:
        """The per-sample arrays (labels [N], exit_layer [P, N], prediction [P, N]), loaded once."""
        if self.arrays is None:
            from safetensors.numpy import load_file

            path = self.path / PREDICTIONS_FILE
            if not path.is_file():
                raise DataError(f"{path}: missing (per-sample predictions are needed here)")
            try:
                self.arrays = load_file(str(path))
            except Exception as e:  # safetensors raises its own error types
                raise DataError(f"{path}: not a readable safetensors file ({e})") from None
        return self.arrays

    def labels(self) -> np.ndarray | list[np.ndarray] | None:
        """The labels alone, without reading the (larger) per-exit arrays: [N], or for a token
        run a tag per word of each sentence (`by_sentence`)."""
        got = self._arrays("labels", "words")
        labels = got.get("labels")
        if labels is None or not self.exit_unit.per_token:
            return labels
        return self.by_sentence(labels, got.get("words"))

    def by_sentence(self, per_word: np.ndarray, words: np.ndarray | None = None
                    ) -> list[np.ndarray]:
        """A token run's per-word row (the split's words in order) cut into its sentences."""
        words = self._arrays("words").get("words") if words is None else words
        if words is None or int(np.sum(words)) != len(per_word):
            raise DataError(f"{self.path / PREDICTIONS_FILE}: a token run's arrays without "
                            "matching `words` (words per sentence)")
        return np.split(per_word, np.cumsum(words)[:-1])

    def _arrays(self, *names: str) -> dict[str, np.ndarray]:
        """The named arrays there are, without reading the others."""
        if self.arrays is not None:
            return {k: self.arrays[k] for k in names if k in self.arrays}
        from safetensors import safe_open

        path = self.path / PREDICTIONS_FILE
        if not path.is_file():
            return {}
        try:
            with safe_open(str(path), framework="numpy") as f:
                return {k: f.get_tensor(k) for k in names if k in f.keys()}
        except Exception as e:  # safetensors raises its own error types
            raise DataError(f"{path}: not a readable safetensors file ({e})") from None


@dataclass(frozen=True)
class RawPoint:
    """One operating point of one run (one seed), before seeds are averaged."""

    point: OperatingPoint
    run: Run
    row: int  # its line in points.jsonl = its row in the [P, N] prediction arrays
    label: str  # the method as shown in tables: its name, or model/method when models differ


def find_run_dirs(inputs: Sequence[str | Path], decoders: bool = False) -> list[Path]:
    """Every run directory named by `inputs` (directories, parents, globs), sorted, no repeats;
    with `decoders`, the decoder runs below a parent too (eebench.score.decoder_table reads
    them: `is_decoder_run` tells them apart)."""
    found: set[Path] = set()
    for item in inputs:
        text = str(item)
        if GLOB_CHARS & set(text) and not Path(text).exists():
            matches = [Path(m) for m in sorted(glob.glob(text, recursive=True))]
            if not matches:
                raise DataError(f"{text}: the pattern matches nothing")
        else:
            matches = [Path(text)]
        for path in matches:
            found.update(_runs_under(path, decoders))
    return sorted(found)


def _runs_under(path: Path, decoders: bool = False) -> list[Path]:
    if not path.exists():
        raise DataError(f"{path}: no such file or directory")
    if path.is_file():
        if path.name in RESULT_FILES:
            return [path.parent]
        raise DataError(f"{path}: not a run directory (expected a directory holding {POINTS_FILE})")
    if (path / CONFIG_FILE).is_file():  # a run named itself: read (and refused) as it is
        return [path]
    runs = run_dirs_under(path, decoders)
    if not runs:
        raise DataError(f"{path}: no run directories in it (no {POINTS_FILE} found)")
    return runs


def run_dirs_under(folder: Path, decoders: bool = False) -> list[Path]:
    """The run directories below `folder` that hold results (RESULT_FILES), sorted: finished
    ones, and unfinished ones for load_run to refuse. A summary without its points is found too,
    so that deleting points.jsonl cannot hide a run. Decoder runs (`eebench decode`) are passed
    over unless `decoders` (they are scored apart: eebench.score.decoder)."""
    found = {p.parent for name in RESULT_FILES for p in Path(folder).rglob(name)}
    return sorted(p for p in found if decoders or not is_decoder_run(p))


def is_decoder_run(path: Path) -> bool:
    """Whether a directory is a decoder run (its config.json says `"kind": "decoder"`)."""
    import json

    try:
        data = json.loads((path / CONFIG_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False  # not readable here: load_run says why, naming the file
    return isinstance(data, dict) and data.get("kind") == "decoder"


def load_run(path: Path) -> Run:
    """Load one run directory, verified (verify_run: finished, every file as its summary
    recorded it); a missing/invalid file or an empty points.jsonl is a DataError."""
    config_path = path / CONFIG_FILE
    if not config_path.is_file():
        raise DataError(f"{config_path}: missing (every run directory holds its config)")
    if is_decoder_run(path):
        raise DataError(f"{path}: a decoder run (eebench decode): not scored with encoder runs",
                        hint="score, plot or submit decoder runs apart from encoder runs")
    files = verify_run(path)  # today's schemas, whatever version wrote the run
    config, points = files.config, files.points
    if not points:
        raise DataError(f"{path / POINTS_FILE}: no operating points in it")
    for n, p in enumerate(points, 1):
        where = f"{path / POINTS_FILE}:{n}"
        if p.main is None:
            raise DataError(f"{where}: no {p.main_metric} value (unlabelled splits are not scored)")
        if p.task != config.task or p.method != config.label:
            raise DataError(
                f"{where}: point for {p.method}/{p.task} in a run of {config.label}/{config.task}"
            )
    variants = files.summary.variants if files.summary is not None else []
    return Run(path=path, config=config, points=points, variants=variants)


def load_runs(inputs: Sequence[str | Path]) -> list[Run]:
    return [load_run(p) for p in find_run_dirs(inputs)]


def split_run_dirs(inputs: Sequence[str | Path]) -> tuple[list[Path], list[Path]]:
    """The run directories `inputs` name, as (encoder runs, decoder runs); both kinds at once
    are refused in one line (FLOPs per sample and per token are not one axis)."""
    from eebench.errors import UsageError

    found = find_run_dirs(inputs, decoders=True)
    decoders = [p for p in found if is_decoder_run(p)]
    encoders = [p for p in found if p not in set(decoders)]
    if encoders and decoders:
        raise UsageError(f"encoder runs ({encoders[0]}) and decoder runs ({decoders[0]}) given "
                         "together: FLOPs per sample and per token are not one axis",
                         hint="score, plot or submit them in separate calls")
    return encoders, decoders


def raw_points(runs: Iterable[Run]) -> list[RawPoint]:
    """Flatten runs into points, labelled by method (model/method when several models appear,
    and the exit heads' pooling when several poolings do)."""
    runs = list(runs)
    several_models = len({r.model for r in runs}) > 1
    several_poolings = len({r.config.pooling for r in runs}) > 1
    out = []
    for run in runs:
        for row, p in enumerate(run.points):
            label = f"{run.model}/{p.method}" if several_models else p.method
            if several_poolings:
                label = f"{label} ({run.config.pooling} pooling)"
            out.append(RawPoint(point=p, run=run, row=row, label=label))
    return out


def check_consistent(points: Iterable[RawPoint]) -> None:
    """Within a task, every point must share one split, FLOPs convention and main metric."""
    seen: dict[str, dict[str, tuple[str, Path]]] = {}
    for rp in points:
        p = rp.point
        task = seen.setdefault(p.task, {})
        for what, value in (
            ("FLOPs convention", p.flops_convention),
            ("split", p.split),
            ("main metric", p.main_metric),
        ):
            first = task.setdefault(what, (value, rp.run.path))
            if first[0] != value:
                raise DataError(
                    f"task {p.task}: mixed {what}s {first[0]!r} ({first[1]}) and {value!r} "
                    f"({rp.run.path})",
                    hint="score runs of one split and one FLOPs convention together",
                )
