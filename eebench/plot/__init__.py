"""Figures of run results, drawn with matplotlib (no pyplot: every figure is a plain object).

    planned = plan_figures(load_runs(["runs/"]), reference, log_flops=False)
    write_figures(planned, Path("figures"), "png")   # one file per figure + index.md

Per task: main metric vs MFLOPs with the Pareto front and the reference curve, speed-up vs metric
drop; per task and method: the metric of each exit; per run: where samples exit. The figure
functions return the Figure, so callers and tests read the plotted data back from its artists.
"""

from eebench.plot.data import ExitCurve, SpeedupPoint, exit_curve, exit_logits, speedup_points
from eebench.plot.figures import exits_figure, histogram_figure, pareto_figure, speedup_figure
from eebench.plot.plan import (
    FORMATS,
    INDEX_FILE,
    PlannedFigure,
    index_markdown,
    plan_figures,
    write_figures,
)
from eebench.plot.style import GID_FRONT, GID_METHOD, GID_REFERENCE, method_styles

__all__ = [
    "FORMATS", "GID_FRONT", "GID_METHOD", "GID_REFERENCE", "INDEX_FILE", "ExitCurve",
    "PlannedFigure", "SpeedupPoint", "exit_curve", "exit_logits", "exits_figure",
    "histogram_figure", "index_markdown", "method_styles", "pareto_figure", "plan_figures",
    "speedup_figure", "speedup_points", "write_figures",
]
