"""`eebench score` and `eebench reference build`: read run directories, print fronts and scores.

Tables go to stdout (`eebench score ... | less`); with `--json` stdout holds the JSON alone and
the tables go to stderr. Notes (`wrote ...`) go to stderr. Everything is computed before anything
is printed: everything a user can get wrong (an empty directory, mixed FLOPs conventions, a
reference without the task, a NaN metric) is one line on stderr, nothing on stdout, and exit
code 1, raised by eebench.score and printed at the CLI boundary.
"""

from __future__ import annotations

import math
import sys
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

from eebench.cli.app import app, make_app
from eebench.cli.common import err_console, out_file, print_json
from eebench.errors import os_error
from eebench.io import atomic_write_text
from eebench.score.policy import Extrapolate

# The tables, on stdout: unwrapped (160 columns) in a file or a pipe, like err_console's.
out_console = Console(width=None if sys.stdout.isatty() else 160)


def _tables_console(json_out: bool) -> Console:
    """Where the tables go: stdout, or stderr when stdout holds the --json output."""
    return err_console if json_out else out_console


reference_app = make_app("Reference curves for the ELUE score, built from static first-k runs.")
app.add_typer(reference_app, name="reference", rich_help_panel="Benchmark")

RunsArgument = typer.Argument(
    help="Run directories, parent directories (searched for points.jsonl) or glob patterns.",
    show_default=False,
)


def _row(table, *cells: str) -> None:
    """A row of plain text: names and numbers are not console markup (and not parsing them as
    markup saves a good part of printing the tables)."""
    from rich.text import Text

    table.add_row(*map(Text, cells))


def _fmt(value: float | None, digits: int = 2, signed: bool = False) -> str:
    if value is None or not math.isfinite(value):
        return "-"
    return f"{value:+.{digits}f}" if signed else f"{value:.{digits}f}"


def _pm(mean: float, std: float, n: int) -> str:
    return _fmt(mean) if n < 2 else f"{mean:.2f} ± {std:.2f}"


@app.command("score", rich_help_panel="Benchmark")
def score_command(
    runs: Annotated[list[str], RunsArgument],
    reference: Annotated[Path | None, typer.Option(
        "--reference", "-r", help="Reference curves JSON (from `eebench reference build`); "
        "without it, fronts and hypervolumes only.", show_default=False,
    )] = None,
    extrapolate: Annotated[Extrapolate, typer.Option(
        "--extrapolate",
        help="Reference curve outside its FLOPs range: clamp (hold the end value) or linear.",
    )] = Extrapolate.clamp,
    json_out: Annotated[bool, typer.Option("--json", help="Print JSON to stdout.")] = False,
    csv_path: Annotated[Path | None, typer.Option(
        "--csv", help="Also write one row per (seed-averaged) operating point to this CSV "
        "file, written whole or not at all.",
        show_default=False,
    )] = None,
    compare: Annotated[tuple[str, str] | None, typer.Option(
        "--compare", help="Paired bootstrap of method A against method B at matched FLOPs.",
        metavar="A B", show_default=False,
    )] = None,
    n_resamples: Annotated[int, typer.Option(
        "--bootstrap", help="Bootstrap resamples (--compare).")] = 1000,
    seed: Annotated[int, typer.Option("--seed", help="Seed of the bootstrap.")] = 0,
    budgets: Annotated[list[float] | None, typer.Option(
        "--budget", help="A FLOPs budget in percent of the full model's FLOPs (repeat it): "
        "each method's main metric there, on its own step Pareto front. Default: 25 50 75 100.",
        show_default=False,
    )] = None,
) -> None:
    """Score runs: Pareto fronts, hypervolume, ELUE score against a reference curve, ranking,
    the quality of the exited predictions (calibration, consistency, overthinking), fixed FLOPs
    budgets and ELUE's parameter buckets."""
    from eebench.api.results import check_score_options, score

    check_score_options(extrapolate.value, compare, n_resamples, seed, budgets)
    out_file(csv_path, "the CSV file", "--csv", example="points.csv")
    loaded: list[int] = []
    report = score(runs, reference, extrapolate.value, compare, n_resamples, seed, budgets,
                   on_loaded=loaded.append)
    s = report.sections
    if csv_path is not None:  # before the tables: a file that cannot be written is one line
        _write_csv(report, csv_path)
    console = _tables_console(json_out)
    _print_report(console, report, loaded[0], s.by_seed or {})
    _print_quality(console, report, s.run_quality, s.budgets, s.percents, s.buckets)
    if s.comparisons:
        _print_comparisons(console, s.comparisons, compare)
    if csv_path is not None:
        err_console.print(f"wrote {csv_path}")
    if json_out:
        print_json(report.to_dict())


QUALITY_HEADS = {"ece": "ECE %", "nll": "NLL", "consistency": "consist. %",
                 "exit_gain": "gain %", "exit_loss": "loss %"}


def _q_cell(p, name: str) -> str:
    if name not in p.quality:
        return "-"
    mean, std, n = p.quality[name]
    digits = 3 if name == "nll" else 2
    return f"{mean:.{digits}f}" + (f" ± {std:.{digits}f}" if n > 1 else "")


def _print_quality(console: Console, report, run_quality, budget_rows, percents, buckets
                   ) -> None:
    """Quality of each front point, per-run quality, the budgets and the parameter buckets."""
    from rich.table import Table

    for t in report.tasks.values():
        rows = sorted((p for p, on in zip(t.points, t.on_front, strict=True)
                       if on and p.quality), key=lambda p: p.flops)
        if not rows:
            continue
        table = Table(title=f"Quality of the exited predictions on the front: {t.task} "
                            "(ECE: 15 bins; consistency, gain, loss against full depth)")
        for name in ("method", "sweep", "MFLOPs", *QUALITY_HEADS.values()):
            table.add_column(name, justify="left" if name in ("method", "sweep") else "right")
        for p in rows:
            _row(table, p.label, f"{p.sweep_param}={p.sweep_value:g}", _fmt(p.mflops, 1),
                          *(_q_cell(p, q) for q in QUALITY_HEADS))
        console.print(table)
    if run_quality:
        table = Table(title="Per run: each exit's accuracy on its own, overthinking (an earlier "
                            "exit right, the last wrong) and its mirror (seed mean ± std)")
        for name in ("task", "method", "exit accuracy % (layer: acc)", "overthinking %",
                     "underthinking %"):
            table.add_column(name, justify="left" if name != "overthinking %" else "right")
        for m in run_quality:
            acc = "  ".join(f"{k}: {a:.1f}" for k, (a, _) in zip(m.exit_layers, m.exit_accuracy,
                                                                 strict=True))
            _row(table, m.task, m.label, acc, _pm(*m.overthinking, len(m.seeds)),
                          _pm(*m.underthinking, len(m.seeds)))
        console.print(table)
    table = Table(title="Main metric at fixed FLOPs budgets (% of the full model's FLOPs; best "
                        "point within the budget, seed mean ± std)")
    table.add_column("task")
    table.add_column("method")
    for pct in percents:
        table.add_column(f"{pct:g}%", justify="right")
    cells: dict[tuple[str, str], dict[float, str]] = {}
    for b in budget_rows:
        cells.setdefault((b.task, b.label), {})[b.percent] = (
            "-" if b.main is None else _pm(b.main, b.main_std, b.seeds))
    for (task, label), by_pct in cells.items():
        _row(table, task, label, *(by_pct.get(float(pct), "-") for pct in percents))
    console.print(table)
    if not buckets:  # decoder runs record no parameter counts
        return
    table = Table(title="ELUE parameter buckets")
    for name in ("method", "parameters (M)", "bucket"):
        table.add_column(name)
    for label, (n, bucket) in buckets.items():
        _row(table, label, f"{n / 1e6:.1f}", bucket)
    console.print(table)


def _elue_cell(value: float | None, per_seed: dict[int, float]) -> str:
    """The seed-averaged ELUE score, ± the spread of the seeds' own scores when there are two."""
    from eebench.score import sample_std

    text = _fmt(value, signed=True)
    if text != "-" and len(per_seed) > 1:
        text += f" ± {sample_std(list(per_seed.values())):.2f}"
    return text


def _mflops_head(report) -> str:
    """The FLOPs column's head: MFLOPs (per sample), or MFLOPs/token (decoder runs)."""
    return "MFLOPs" if report.flops_unit.endswith("sample") else "MFLOPs/token"


def _print_report(console: Console, report, n_runs: int, by_seed: dict) -> None:
    from rich.table import Table

    tasks = list(report.tasks)
    if report.reference is not None:
        table = Table(title=f"ELUE score (points above {report.reference.name!r}, "
                            f"extrapolate {report.extrapolate})")
        table.add_column("method")
        for t in tasks:
            table.add_column(t, justify="right")
        table.add_column("overall", justify="right", style="bold")
        table.add_column("mean rank", justify="right")
        elue = report.elue
        for r in report.ranking:
            _row(table, r.label, *(_elue_cell(elue[r.label].get(t),
                                                by_seed.get(r.label, {}).get(t, {}))
                                     for t in tasks),
                          _fmt(r.overall, signed=True), _fmt(r.mean_rank, 1))
        console.print(table)
    else:
        table = Table(title="Hypervolume of each method's front (normalised; no --reference, "
                            "so no ELUE score)")
        table.add_column("method")
        for t in tasks:
            table.add_column(t, justify="right")
        for label in sorted({p.label for t in report.tasks.values() for p in t.points}):
            _row(table, label, *(_fmt(m.hypervolume, 3) if (m := report.tasks[t].methods.get(
                label)) else "-" for t in tasks))
        console.print(table)
    for t in report.tasks.values():
        front = Table(title=f"Pareto front: {t.task} ({t.main_metric}, {t.split})")
        for name in ("method", "sweep", _mflops_head(report), t.main_metric, "seeds"):
            front.add_column(name, justify="left" if name in ("method", "sweep") else "right")
        if report.reference is not None:
            front.add_column("ELUE Δ", justify="right")
        rows = [(p, d) for p, on, d in zip(t.points, t.on_front, t.deltas, strict=True) if on]
        rows.sort(key=lambda row: row[0].flops)
        for p, d in rows:
            cells = [p.label, f"{p.sweep_param}={p.sweep_value:g}", _fmt(p.mflops, 1),
                     _pm(p.main, p.main_std, len(p.seeds)), str(len(p.seeds))]
            if report.reference is not None:
                cells.append(_fmt(d, signed=True))
            _row(front, *cells)
        ref = t.hv_ref
        front.caption = (
            f"{len(rows)} of {len(t.points)} points on the front; hypervolume {t.hypervolume:.3f}, "
            f"AUC {t.auc:.3f} from ({ref.flops / 1e6:.1f} {report.flops_unit}: "
            f"{ref.flops_source}, {ref.metric:.2f}: {ref.metric_source})"
        )
        console.print(front)
    n_points = sum(len(t.points) for t in report.tasks.values())
    console.print(f"{n_runs} run directories, {n_points} operating points, {len(tasks)} tasks")


def _where(p) -> str:
    return f"{p.sweep_param}={p.sweep_value:g} ({p.mflops:.1f})"


def _print_comparisons(console: Console, comparisons, names: tuple[str, str]) -> None:
    from rich.table import Table

    a, b = names
    table = Table(title=f"{a} − {b}: paired bootstrap at matched FLOPs (nearest point of {b})")
    for name in ("task", f"{a} (MFLOPs)", f"{b} (MFLOPs)", "statistic", "A − B", "95% CI", "p"):
        table.add_column(name, justify="left" if name in ("task", "statistic") else "right")
    for c in comparisons:
        r = c.result
        pa = "all pairs" if c.a is None else _where(c.a)
        pb = "" if c.b is None else _where(c.b)
        _row(table, c.task, pa, pb, c.statistic, f"{r.difference:+.3f}",
                      f"[{r.ci_low:+.3f}, {r.ci_high:+.3f}]", f"{r.p_value:.4f}")
    console.print(table)


def _write_csv(report, path: Path) -> None:
    """One row per seed-averaged point (ScoreReport.to_dataframe), written whole or not at all."""
    try:
        atomic_write_text(path, report.to_dataframe().to_csv(index=False))
    except OSError as e:
        err = os_error(e, "cannot write the CSV file")
        if err is None:
            raise
        raise err from e


@reference_app.command("build")
def reference_build(
    runs: Annotated[list[str], RunsArgument],
    out: Annotated[Path, typer.Option(
        "--out", "-o", help="Where to write the reference JSON.", show_default=False)],
    name: Annotated[str | None, typer.Option(
        "--name", help="Name (default: <model>-static).", show_default=False)] = None,
    json_out: Annotated[bool, typer.Option("--json", help="Print JSON to stdout.")] = False,
) -> None:
    """Build reference curves (one per task, k = 1..L) from static runs, averaging seeds."""
    from rich.table import Table

    from eebench.score import build_reference, load_runs
    from eebench.score.reference import save_reference

    out_file(out, "the reference curves", example="reference.json")
    ref = build_reference(load_runs(runs), name=name)
    save_reference(ref, out)
    for task, curve in ref.tasks.items():
        table = Table(title=f"{ref.name}: {task} ({curve.main_metric}, {ref.split})")
        for col in ("k", "MFLOPs", curve.main_metric, "seeds"):
            table.add_column(col, justify="right")
        for p in curve.points:
            _row(table, str(p.layers), _fmt(p.mflops, 1), _pm(p.main, p.main_std, len(p.seeds)),
                          str(len(p.seeds)))
        _tables_console(json_out).print(table)
    err_console.print(f"wrote {out} ({len(ref.tasks)} tasks, {len(ref.provenance.runs)} runs)")
    if json_out:
        print_json(ref.model_dump(mode="json"))
