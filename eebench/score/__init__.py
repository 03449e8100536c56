"""Scoring: the results table, Pareto fronts, ELUE scores against a reference curve,
hypervolume/AUC, seeds, ranks.

Numpy and pandas, no torch. `results_frame(run_records(raw_points(runs)))` is the results table
(one row per operating point per run); `aggregate_seeds` averages its seeds into Points;
`score(points, reference)` turns them into a ScoreReport (eebench.score.report), which the CLI
prints, `--json` dumps and `--csv` writes. In all output metrics are in percent and FLOPs in
MFLOPs per sample, as ELUE reports them.
"""

from eebench.score.collect import (
    RawPoint,
    Run,
    check_consistent,
    find_run_dirs,
    load_run,
    load_runs,
    raw_points,
)
from eebench.score.elue import DEFAULT_EXTRAPOLATE, EXTRAPOLATE, curve_at, elue_deltas, overall
from eebench.score.pareto import front_auc, hypervolume, normalized, pareto_mask
from eebench.score.reference import (
    ReferenceCurves,
    build_reference,
    load_reference,
    save_reference,
)
from eebench.score.report import (
    REPORT_SCHEMA_VERSION,
    HvReference,
    MethodTask,
    ScoreReport,
    TaskReport,
    elue_by_seed,
    hv_reference,
    score,
)
from eebench.score.stats import (
    Point,
    Rank,
    aggregate_seeds,
    compare_methods,
    rank_methods,
    sample_std,
    seed_points,
)
from eebench.score.table import results_frame, run_records, submission_records

__all__ = [
    "DEFAULT_EXTRAPOLATE", "EXTRAPOLATE", "REPORT_SCHEMA_VERSION", "HvReference", "MethodTask",
    "Point", "RawPoint", "Rank", "ReferenceCurves", "Run", "ScoreReport", "TaskReport",
    "aggregate_seeds", "build_reference", "check_consistent", "compare_methods", "curve_at",
    "elue_by_seed", "elue_deltas", "find_run_dirs", "front_auc", "hv_reference", "hypervolume",
    "load_reference", "load_run", "load_runs", "normalized", "overall", "pareto_mask",
    "rank_methods", "raw_points", "results_frame", "run_records", "sample_std", "save_reference",
    "score", "seed_points", "submission_records",
]
