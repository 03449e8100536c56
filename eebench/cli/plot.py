"""`eebench plot`: figures of run results, one file per figure and an index.md.

Everything is drawn headless (matplotlib's Agg backend, imported inside the command). Bad input
(no runs, an unreadable reference) is one line and exit code 1; an unknown format is a usage
error, exit code 2.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from eebench.cli.app import app
from eebench.cli.common import err_console, out_dir, print_json, progress
from eebench.errors import UsageError

FORMATS = ("png", "svg", "pdf")  # eebench.plot.FORMATS, kept here so --help imports nothing


@app.command("plot", rich_help_panel="Benchmark")
def plot_command(
    runs: Annotated[list[str], typer.Argument(
        help="Run directories, parent directories (searched for points.jsonl) or glob patterns.",
        show_default=False,
    )],
    out: Annotated[Path, typer.Option(
        "--out", "-o", help="Directory for the figures and index.md (created if missing).",
        show_default=False,
    )],
    reference: Annotated[Path | None, typer.Option(
        "--reference", "-r", help="Reference curves JSON (from `eebench reference build`) to "
        "draw under each task's front.", show_default=False,
    )] = None,
    fmt: Annotated[str, typer.Option(
        "--format", help=f"File format of the figures: {', '.join(FORMATS)}.")] = "png",
    log_flops: Annotated[bool, typer.Option(
        "--log-flops", help="Logarithmic FLOPs axis.")] = False,
    json_out: Annotated[bool, typer.Option(
        "--json", help="Print the written files and captions as JSON to stdout.")] = False,
) -> None:
    """Plot runs: metric vs FLOPs with the Pareto front, exit histograms, per-exit metrics and
    speed-ups, one file per figure plus an index.md."""
    if fmt not in FORMATS:  # checked here, not by click, for a one-line error
        raise UsageError(f"unknown figure format {fmt!r}", hint=f"use one of {', '.join(FORMATS)}")
    out_dir(out, "the figures")
    import matplotlib

    matplotlib.use("Agg")
    from eebench.plot import INDEX_FILE, plan_figures, write_figures
    from eebench.score import load_reference, load_run
    from eebench.score.collect import split_run_dirs

    encoders, decoders = split_run_dirs(runs)
    if decoders:  # main metric vs MFLOPs per token, against the runs' own static truncation
        from eebench.plot.decoder import plan_decoder_figures
        from eebench.score.decoder_table import load_decoder_runs

        if reference is not None:
            raise UsageError("--reference: decoder runs are drawn against their own static "
                             "truncation, not a reference file", hint="leave out --reference")
        loaded = load_decoder_runs(decoders)
        planned = plan_decoder_figures(loaded, log_flops=log_flops)
    else:
        ref = load_reference(reference) if reference is not None else None
        loaded = [load_run(p) for p in encoders]
        planned = plan_figures(loaded, ref, log_flops=log_flops)
    with progress(transient=True, disable=not err_console.is_terminal) as bar:
        task = bar.add_task("plot", total=len(planned), info="")
        paths = write_figures(planned, out, fmt,
                              on_saved=lambda p: bar.update(task, advance=1, info=p.name))
    err_console.print(f"wrote {len(paths)} figures from {len(loaded)} run directories and "
                      f"{INDEX_FILE} to {out}")
    if json_out:
        print_json({
            "out": str(out), "index": str(out / INDEX_FILE), "format": fmt,
            "figures": [{"file": str(p), "kind": f.kind, "task": f.task, "caption": f.caption}
                        for f, p in zip(planned, paths)],
        })
