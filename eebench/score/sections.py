"""What `eebench score` reports beyond the fronts and the ELUE scores (eebench.score.report):
each seed's own ELUE score, paired comparisons of two methods, the quality of the exited
predictions (per point and per run), the metric at fixed FLOPs budgets and ELUE's parameter
buckets. `score_sections` computes them from the runs' points; `ScoreReport.to_dict` carries
them into the one JSON document `eebench score --json` prints."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from eebench.score.collect import RawPoint
from eebench.score.table import QUALITY

DEFAULT_RESAMPLES = 1000
ECE_BINS = 15


@dataclass
class ScoreSections:
    by_seed: dict[str, dict[str, dict[int, float]]] | None  # label -> task -> seed -> ELUE
    comparisons: list[Any]  # eebench.score.stats.Comparison, one per task
    run_quality: list[Any]  # eebench.score.quality.RunQuality
    budgets: list[Any]  # eebench.score.quality.BudgetRow
    percents: list[float]  # the budgets asked for, in percent of the full model's FLOPs
    buckets: dict[str, tuple[int, str]]  # label -> (parameters, ELUE bucket)

    def to_dict(self, report: Any) -> dict[str, Any]:
        """The sections of `eebench score --json` (keys next to the report's own)."""
        by_seed = None if self.by_seed is None else {
            label: {task: {str(s): v for s, v in seeds.items()} for task, seeds in tasks.items()}
            for label, tasks in self.by_seed.items()}
        return {
            "elue_by_seed": by_seed,
            "compare": [comparison_dict(c) for c in self.comparisons] or None,
            "quality": quality_dict(report, self.run_quality),
            "budgets": [{"method": b.label, "task": b.task, "percent": b.percent,
                         "mflops": b.mflops, "main": b.main, "main_std": b.main_std,
                         "n_seeds": b.seeds} for b in self.budgets],
            "param_buckets": {label: {"params": n, "bucket": bucket}
                              for label, (n, bucket) in self.buckets.items()},
        }


def score_sections(raw: Sequence[RawPoint], points: Sequence[Any], ref: Any, extrapolate: str,
                   compare: tuple[str, str] | None = None,
                   n_resamples: int = DEFAULT_RESAMPLES, seed: int = 0,
                   budgets: Sequence[float] | None = None) -> ScoreSections:
    """The sections for the runs' points `raw` (seed-averaged: `points`), against `ref`."""
    from eebench.score.quality import DEFAULT_BUDGETS, budget_table, param_buckets, run_qualities
    from eebench.score.report import elue_by_seed
    from eebench.score.stats import compare_methods

    percents = list(budgets) if budgets else list(DEFAULT_BUDGETS)
    return ScoreSections(
        by_seed=elue_by_seed(raw, ref, extrapolate) if ref is not None else None,
        comparisons=compare_methods(points, compare[0], compare[1], n_resamples=n_resamples,
                                    seed=seed) if compare else [],
        run_quality=run_qualities(raw), budgets=budget_table(raw, percents), percents=percents,
        buckets=param_buckets(raw))


def quality_dict(report: Any, run_quality: Sequence[Any]) -> dict[str, Any]:
    points = [{"task": p.task, "method": p.label, "sweep_param": p.sweep_param,
               "sweep_value": p.sweep_value, "mflops": p.mflops, "pareto": on,
               **{q: p.quality[q][0] if q in p.quality else None for q in QUALITY},
               **{f"{q}_std": p.quality[q][1] if q in p.quality else None for q in QUALITY}}
              for t in report.tasks.values() for p, on in zip(t.points, t.on_front, strict=True)]
    runs = [{"task": m.task, "method": m.label, "seeds": list(m.seeds),
             "exit_layers": m.exit_layers,
             "exit_accuracy": [a for a, _ in m.exit_accuracy],
             "exit_accuracy_std": [s for _, s in m.exit_accuracy],
             "overthinking": m.overthinking[0], "overthinking_std": m.overthinking[1],
             "underthinking": m.underthinking[0], "underthinking_std": m.underthinking[1]}
            for m in run_quality]
    return {"ece_bins": ECE_BINS, "points": points, "runs": runs}


def comparison_dict(c: Any) -> dict[str, Any]:
    b = c.result
    return {
        "task": c.task,
        "a": None if c.a is None else {"method": c.a.label, "sweep_value": c.a.sweep_value,
                                       "mflops": c.a.mflops, "main": c.a.main},
        "b": None if c.b is None else {"method": c.b.label, "sweep_value": c.b.sweep_value,
                                       "mflops": c.b.mflops, "main": c.b.main},
        "matched": "nearest in FLOPs" if c.a is not None else "all pairs pooled",
        "pairing": c.pairing,
        "statistic": c.statistic, "difference": b.difference, "ci_low": b.ci_low,
        "ci_high": b.ci_high, "confidence": b.confidence, "p_value": b.p_value,
        "n_samples": b.n_samples, "n_resamples": b.n_resamples, "seed": b.seed,
    }
