"""Run directories as results from Python: the table, reference curves, scores, figures and
a submission (the calls `eebench score`, `plot`, `reference build` and `submit` make)."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from numbers import Integral, Real
from pathlib import Path
from typing import TYPE_CHECKING

from eebench.api.grid import data_dir_of
from eebench.errors import DataError, UsageError
from eebench.score.policy import EXTRAPOLATE

if TYPE_CHECKING:
    import pandas as pd

    from eebench.score.reference import ReferenceCurves
    from eebench.score.report import ScoreReport
    from eebench.submit.schema import Submission

Runs = str | Path | Sequence[str | Path]  # run directories, their parents or glob patterns
MAX_RESAMPLES = 1_000_000  # p-values to about ±0.001 long before; more only costs time
MAX_SEED = 2**32 - 1  # numpy's and torch's seeds
MAX_BUDGET = 1000.0  # percent of the full model's FLOPs


def check_score_options(extrapolate: str, compare: Sequence[str] | None, n_resamples: int,
                        seed: int, budgets: Sequence[float] | None) -> None:
    """What `score` accepts, checked before any run is read, for `eebench score` and a caller of
    the library alike (one place: the command line passes its options through): one UsageError
    line naming the option."""
    if extrapolate not in EXTRAPOLATE:
        raise UsageError(f"unknown extrapolation {extrapolate!r}",
                         hint=f"choose from: {', '.join(EXTRAPOLATE)}")
    if compare is not None and (isinstance(compare, str) or len(compare) != 2
                                or not all(isinstance(c, str) for c in compare)):
        raise UsageError(f"--compare takes two method labels (A B), got {compare!r}")
    if not _within(n_resamples, Integral, 1, MAX_RESAMPLES):
        raise UsageError(f"--bootstrap must be in 1..{MAX_RESAMPLES:,}, got {n_resamples!r}")
    if not _within(seed, Integral, 0, MAX_SEED):
        raise UsageError(f"--seed must be in 0..{MAX_SEED}, got {seed!r}")
    for b in budgets or []:
        if not _within(b, Real, 0, MAX_BUDGET) or b == 0:
            raise UsageError(f"--budget must be a percentage in (0, {MAX_BUDGET:g}], got {b!r}")


def _within(value: object, kind: type, low: float, high: float) -> bool:
    """`value` a number of `kind` (not a bool), finite, in [low, high]."""
    return isinstance(value, kind) and not isinstance(value, bool) and \
        math.isfinite(value) and low <= value <= high


def _inputs(runs: Runs) -> list[str | Path]:
    return [runs] if isinstance(runs, str | Path) else list(runs)


def _loaded(runs: Runs) -> list:
    from eebench.score import load_runs

    return load_runs(_inputs(runs))


def _split(runs: Runs) -> tuple[list[Path], list[Path]]:
    """(encoder run directories, decoder run directories); both at once refused."""
    from eebench.score.collect import split_run_dirs

    return split_run_dirs(_inputs(runs))


def _no_reference(reference: object, what: str) -> None:
    if reference is not None:
        raise UsageError(f"{what}: decoder runs are scored against their own static "
                         "truncation, not a reference file", hint="leave out --reference")


def _reference(reference: str | Path | ReferenceCurves | None) -> ReferenceCurves | None:
    if reference is None or not isinstance(reference, str | Path):
        return reference
    from eebench.score import load_reference

    return load_reference(Path(reference))


def results(runs: Runs) -> pd.DataFrame:
    """The results table: a row per operating point per run (columns: eebench.score.table);
    decoder runs' rows count FLOPs per token (eebench.score.decoder_table)."""
    from eebench.score import load_run, raw_points, results_frame, run_records

    encoders, decoders = _split(runs)
    if decoders:
        from eebench.score.decoder_table import decoder_frame, load_decoder_runs

        return decoder_frame(load_decoder_runs(decoders))
    return results_frame(run_records(raw_points([load_run(p) for p in encoders])))


def reference(runs: Runs, name: str | None = None, out: str | Path | None = None
              ) -> ReferenceCurves:
    """Reference curves (the ELUE score's baseline) from `static` runs, as `eebench reference
    build` makes them; written to `out` when given."""
    from eebench.score import build_reference, save_reference

    curves = build_reference(_loaded(runs), name)
    if out is not None:
        save_reference(curves, Path(out))
    return curves


def score(runs: Runs, reference: str | Path | ReferenceCurves | None = None,
          extrapolate: str = "clamp", compare: tuple[str, str] | None = None,
          n_resamples: int = 1000, seed: int = 0, budgets: Sequence[float] | None = None,
          on_loaded: Callable[[int], None] | None = None) -> ScoreReport:
    """What `eebench score` computes: seeds averaged, Pareto fronts, hypervolume, (with a
    reference curve) ELUE scores and each seed's, the quality of the exited predictions, the
    metric at FLOPs budgets (percent of the full model's; default 25, 50, 75, 100), ELUE's
    parameter buckets, and (`compare`: two method labels) a paired bootstrap of the two;
    `report.to_dict()` is its JSON. `on_loaded` hears how many runs were read."""
    import eebench.score
    from eebench.score import aggregate_seeds, check_consistent, raw_points
    from eebench.score.quality import fill_quality
    from eebench.score.sections import score_sections

    check_score_options(extrapolate, compare, n_resamples, seed, budgets)
    try:
        encoders, decoders = _split(runs)
    except DataError:
        _reference(reference)  # a bad reference file is named before missing runs
        raise
    if decoders:
        _no_reference(reference, "--reference")
        return _score_decoders(decoders, extrapolate, compare, n_resamples, seed, budgets,
                               on_loaded)
    ref = _reference(reference)
    loaded = [eebench.score.load_run(p) for p in encoders]
    if on_loaded is not None:
        on_loaded(len(loaded))
    fill_quality(loaded)  # from the stored arrays, for runs written without them
    raw = raw_points(loaded)
    check_consistent(raw)
    points = aggregate_seeds(raw)
    report = eebench.score.score(points, ref, extrapolate)
    report.sections = score_sections(raw, points, ref, extrapolate, compare, n_resamples, seed,
                                     budgets)
    return report


def _score_decoders(paths: list[Path], extrapolate: str, compare: tuple[str, str] | None,
                    n_resamples: int, seed: int, budgets: Sequence[float] | None,
                    on_loaded: Callable[[int], None] | None) -> ScoreReport:
    """`score` of decoder runs: fronts per task, ELUE-style scores against each run's own
    static truncation, budgets, and a paired bootstrap over samples (eebench.score.decoder)."""
    from eebench.score.decoder import (
        FULL_BUDGETS,
        budget_table,
        compare_decoder,
        elue_by_seed,
        score_decoder,
    )
    from eebench.score.decoder_table import load_decoder_runs
    from eebench.score.sections import ScoreSections

    loaded = load_decoder_runs(paths)
    if on_loaded is not None:
        on_loaded(len(loaded))
    scored = score_decoder(loaded, extrapolate)
    percents = list(budgets) if budgets else list(FULL_BUDGETS)
    scored.report.sections = ScoreSections(
        by_seed=elue_by_seed(loaded, extrapolate),
        comparisons=compare_decoder(loaded, scored.points, compare[0], compare[1],
                                    n_resamples=n_resamples, seed=seed) if compare else [],
        run_quality=[], budgets=budget_table(scored.frame, scored.points, percents),
        percents=percents, buckets={})
    return scored.report


def plot(runs: Runs, out: str | Path, reference: str | Path | ReferenceCurves | None = None,
         fmt: str = "png", log_flops: bool = False) -> list[Path]:
    """The figures of `eebench plot` (one file each, and index.md) written to `out`."""
    import matplotlib

    matplotlib.use("Agg")
    from eebench.plot import plan_figures, write_figures

    encoders, decoders = _split(runs)
    if decoders:  # per task: main metric vs MFLOPs per token (eebench.plot.decoder)
        from eebench.plot.decoder import plan_decoder_figures
        from eebench.score.decoder_table import load_decoder_runs

        _no_reference(reference, "reference")
        planned = plan_decoder_figures(load_decoder_runs(decoders), log_flops=log_flops)
    else:
        from eebench.score import load_run

        planned = plan_figures([load_run(p) for p in encoders], _reference(reference),
                               log_flops=log_flops)
    return write_figures(planned, Path(out), fmt)


def submission(runs: Runs, data_dir: str | Path | None = None,
               reference: str | Path | None = None, name: str | None = None,
               extrapolate: str = "clamp", out: str | Path | None = None) -> Submission:
    """A leaderboard submission from one method's runs, validated (ELUE scores recomputed when
    a reference is given); written to `out` when given."""
    from eebench.submit.build import build_submission, write_submission

    inputs = [runs] if isinstance(runs, str | Path) else list(runs)
    sub = build_submission(inputs, data_dir_of(data_dir),
                           Path(reference) if reference is not None else None, name, extrapolate)
    if out is not None:
        write_submission(sub, Path(out))
    return sub


