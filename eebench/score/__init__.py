"""Scoring: the results table, Pareto fronts, ELUE scores against a reference curve,
hypervolume/AUC, seeds, ranks.

Numpy and pandas, no torch. `results_frame(run_records(raw_points(runs)))` is the results table
(one row per operating point per run); `aggregate_seeds` averages its seeds into Points;
`score(points, reference)` turns them into a ScoreReport (eebench.score.report), which the CLI
prints, `--json` dumps and `--csv` writes. In all output metrics are in percent and FLOPs in
MFLOPs per sample, as ELUE reports them.

The names below are loaded on first use (numpy, pandas): the command line reads
eebench.score.policy (the named extrapolation policies) for its options without loading them.
"""

from importlib import import_module

_FROM = {
    "collect": ("RawPoint", "Run", "check_consistent", "find_run_dirs", "load_run", "load_runs",
                "raw_points"),
    "elue": ("curve_at", "elue_deltas", "overall"),
    "pareto": ("front_auc", "hypervolume", "normalized", "pareto_mask"),
    "policy": ("DEFAULT_EXTRAPOLATE", "EXTRAPOLATE", "Extrapolate"),
    "reference": ("ReferenceCurves", "build_reference", "load_reference", "save_reference"),
    "report": ("REPORT_SCHEMA_VERSION", "HvReference", "MethodTask", "ScoreReport", "TaskReport",
               "elue_by_seed", "hv_reference", "score"),
    "stats": ("Point", "Rank", "aggregate_seeds", "compare_methods", "rank_methods",
              "sample_std", "seed_points"),
    "table": ("results_frame", "run_records", "submission_records"),
}
_LAZY = {name: f"eebench.score.{module}" for module, names in _FROM.items() for name in names}

__all__ = sorted(_LAZY)


def __getattr__(name: str):
    if name in _LAZY:
        return getattr(import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'eebench.score' has no attribute {name!r}")
