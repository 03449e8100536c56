"""Run directories as results from Python: the table, reference curves, scores, figures and
a submission (the calls `eebench score`, `plot`, `reference build` and `submit` make)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from eebench.api.grid import data_dir_of
from eebench.errors import UsageError

if TYPE_CHECKING:
    import pandas as pd

    from eebench.score.reference import ReferenceCurves
    from eebench.score.report import ScoreReport
    from eebench.submit.schema import Submission

Runs = str | Path | Sequence[str | Path]  # run directories, their parents or glob patterns


def _loaded(runs: Runs) -> list:
    from eebench.score import load_runs

    return load_runs([runs] if isinstance(runs, str | Path) else list(runs))


def _reference(reference: str | Path | ReferenceCurves | None) -> ReferenceCurves | None:
    if reference is None or not isinstance(reference, str | Path):
        return reference
    from eebench.score import load_reference

    return load_reference(Path(reference))


def results(runs: Runs) -> pd.DataFrame:
    """The results table: a row per operating point per run (columns: eebench.score.table)."""
    from eebench.score import raw_points, results_frame, run_records

    return results_frame(run_records(raw_points(_loaded(runs))))


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
          extrapolate: str = "clamp") -> ScoreReport:
    """Seeds averaged, Pareto fronts, hypervolume and (with a reference curve) ELUE scores, as
    `eebench score` computes them; `report.to_dict()` is its JSON."""
    from eebench.score import (
        EXTRAPOLATE,
        aggregate_seeds,
        check_consistent,
        raw_points,
    )
    from eebench.score import (
        score as score_points,
    )
    from eebench.score.quality import fill_quality

    if extrapolate not in EXTRAPOLATE:
        raise UsageError(f"unknown extrapolation {extrapolate!r}",
                         hint=f"choose from: {', '.join(EXTRAPOLATE)}")
    loaded = _loaded(runs)
    fill_quality(loaded)
    raw = raw_points(loaded)
    check_consistent(raw)
    return score_points(aggregate_seeds(raw), _reference(reference), extrapolate)


def plot(runs: Runs, out: str | Path, reference: str | Path | ReferenceCurves | None = None,
         fmt: str = "png", log_flops: bool = False) -> list[Path]:
    """The figures of `eebench plot` (one file each, and index.md) written to `out`."""
    import matplotlib

    matplotlib.use("Agg")
    from eebench.plot import plan_figures, write_figures

    planned = plan_figures(_loaded(runs), _reference(reference), log_flops=log_flops)
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


