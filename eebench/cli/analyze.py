"""`eebench analyze` (which inputs exit early, and why) and `eebench select` (the cheapest exit
threshold with a consistency guarantee), both on one finished run directory.

The computations are in eebench.score.difficulty and eebench.score.select; here are the options,
the texts of the listed samples (from the task's data, when there is a data directory: checked to
be the run's own samples against the hash of them the run records), the figure and
analysis.json (written together or not at all), and the printing.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Annotated

import typer

from eebench.cli.app import app
from eebench.cli.common import (
    DataDirOption,
    JsonOption,
    err_console,
    out_dir,
    print_json,
    resolve_data_dir,
)

RunArgument = typer.Argument(help="A finished run directory (from `eebench run`).",
                             show_default=False)


@app.command("analyze", rich_help_panel="Benchmark")
def analyze_command(
    run: Annotated[Path, RunArgument],
    point: Annotated[float | None, typer.Option(
        "--point", help="The sweep value to analyse (default: the point whose FLOPs are nearest "
        "half the full model's).", show_default=False)] = None,
    top: Annotated[int, typer.Option("--top", min=0, help="Easiest and hardest samples listed.")
                   ] = 5,
    data_dir: Path | None = DataDirOption,
    out: Annotated[Path | None, typer.Option(
        "--out", "-o", help="Directory for the figure of exit layer against length and "
        "analysis.json.", show_default=False)] = None,
    json_out: bool = JsonOption,
) -> None:
    """Input difficulty: Spearman's rho of the exit layer with first-exit confidence, length and
    cross-exit agreement, and the easiest and hardest samples with their texts."""
    from eebench.score.difficulty import analyze, attach_texts, load_samples

    out_dir(out, "the analysis")
    samples = load_samples(run)
    result = analyze(samples, point, top)
    data_dir = resolve_data_dir(data_dir)
    if data_dir is None:
        result.texts = "not loaded: no --data-dir or $EEBENCH_DATA_DIR (ids only)"
    else:
        from eebench.tasks.loaders import load_split

        examples = load_split(samples.run.config.task, samples.run.config.split, data_dir)
        texts = dict(zip(examples.ids, examples.texts, strict=True))
        checked = check_texts(samples, texts, examples.source)
        attach_texts(result, texts)
        if not checked:
            result.texts += (" (not checked: the run records no hash of its samples, it was "
                             "written before eebench recorded one)")
    data = dataclasses.asdict(result)
    if out is not None:
        import json

        from eebench.io import atomic_files

        figure = out / "exit-layer-vs-length.png"
        data["figure"] = str(figure)
        fig = length_figure(samples, result)
        with atomic_files() as staged:  # the figure and analysis.json, together or neither
            with staged.path(figure) as tmp:
                fig.savefig(tmp, format="png")
            staged.write_text(out / "analysis.json", json.dumps(data, indent=2) + "\n")
    if json_out:
        print_json(data)
        return
    _print_analysis(result)


def check_texts(samples, texts: dict[str, tuple[str, ...]], source: str) -> bool:
    """Whether the data's texts are the run's own samples: the run's hash of its samples (ids
    with texts, eebench.run.artifacts.samples_hash) recomputed from the data. Another file
    (another task's, another release, rows shuffled) is refused in one line; False: the run
    records no hash (written before it was), so the texts cannot be checked."""
    from eebench.errors import DataError
    from eebench.run.artifacts import samples_hash

    recorded = samples.run.summary.samples_sha256
    if recorded is None:
        return False
    missing = [i for i in samples.ids if i not in texts]
    if missing or samples_hash(samples.ids, [texts[i] for i in samples.ids]) != recorded:
        why = (f"{len(missing)} of its {len(samples.ids)} sample ids are not in it" if missing
               else "its texts of the run's sample ids are not the ones the run evaluated")
        raise DataError(f"{source}: not the data run {samples.run.path} was made with ({why})",
                        hint="point --data-dir at the data the run was evaluated on")
    return True


def length_figure(samples, result):
    """Exit layer against token length at the analysed point: every sample (jittered a little
    up and down so that the layers' rows show their density) and the mean exit layer per length
    decile."""
    import numpy as np

    from eebench.plot.style import OKABE_ITO, new_figure, task_title

    p = next(i for i, q in enumerate(samples.points) if q.sweep_value == result.sweep_value)
    layers = samples.exit_layer[p].astype(float)
    lengths = samples.lengths.astype(float)
    jitter = np.random.default_rng(0).uniform(-0.18, 0.18, len(layers))
    fig, ax = new_figure()
    ax.scatter(lengths, layers + jitter, s=6, alpha=0.35, color=OKABE_ITO[0], linewidths=0,
               label="samples")
    edges = np.unique(np.quantile(lengths, np.linspace(0, 1, 11)))
    if len(edges) > 1:
        bins = np.clip(np.searchsorted(edges, lengths, side="right") - 1, 0, len(edges) - 2)
        mids = [lengths[bins == b].mean() for b in range(len(edges) - 1) if (bins == b).any()]
        means = [layers[bins == b].mean() for b in range(len(edges) - 1) if (bins == b).any()]
        ax.plot(mids, means, marker="o", color=OKABE_ITO[1], linewidth=1.5, markersize=4,
                label="mean per length decile")
    rho = next(c for c in result.correlations if c.quantity == "length").rho
    ax.set_xlabel("tokens")
    ax.set_ylabel("exit layer")
    ax.set_yticks(range(1, samples.points[p].num_layers + 1))
    ax.set_title(f"{task_title(result.task)}: {result.method}, {result.sweep_param} = "
                 f"{result.sweep_value:g}, Spearman ρ = "
                 f"{'n/a' if rho is None else f'{rho:+.2f}'}", fontsize="medium")
    ax.legend(fontsize="small")
    return fig


def _print_analysis(result) -> None:
    from rich.table import Table

    how = " (nearest half the full model's FLOPs)" if result.default_point else ""
    err_console.print(
        f"[bold]{result.method} · {result.task} · seed {result.seed}[/]: {result.sweep_param} = "
        f"{result.sweep_value:g}{how}: {result.mean_mflops:.1f} of {result.full_mflops:.1f} "
        f"MFLOPs, average exit layer {result.avg_exit_layer:.2f}")
    t = Table(title="Spearman's ρ with the exit layer")
    for col in ("quantity", "ρ", "p-value", "n"):
        t.add_column(col, justify="right")
    for c in result.correlations:
        t.add_row(c.quantity, "-" if c.rho is None else f"{c.rho:+.3f}",
                  "-" if c.p_value is None else f"{c.p_value:.2g}", str(c.n))
    err_console.print(t)
    for name, items in (("easiest", result.easiest), ("hardest", result.hardest)):
        t = Table(title=f"{name} samples (texts: {result.texts})")
        for col in ("id", "layer", "conf.", "agree", "label", "pred", "text"):
            t.add_column(col, justify="left" if col == "text" else "right")
        for it in items:
            text = it.get("text") or ""
            t.add_row(it["id"], str(it["exit_layer"]), f"{it['first_exit_confidence']:.3f}",
                      f"{it['agreement']:.2f}", it.get("label", "-"), it["prediction"],
                      text if len(text) <= 100 else text[:99] + "…")
        err_console.print(t)


@app.command("select", rich_help_panel="Benchmark")
def select_command(
    run: Annotated[Path, RunArgument],
    consistency: Annotated[float, typer.Option(
        "--consistency", help="Wanted consistency with the full model, 1 - epsilon.")] = 0.95,
    delta: Annotated[float, typer.Option(
        "--delta", help="Allowed chance that the guarantee fails.")] = 0.05,
    seed: Annotated[int, typer.Option("--seed", help="Seed of the calibration/test split.")] = 0,
    json_out: bool = JsonOption,
) -> None:
    """The cheapest sweep value whose consistency with the full model is at least 1 - epsilon
    with confidence 1 - delta (Clopper-Pearson bound on a calibration half, fixed-sequence
    testing), and what it realises on the other half."""
    from eebench.score.difficulty import load_samples
    from eebench.score.select import select

    result = select(load_samples(run), consistency, delta, seed)
    if json_out:
        print_json(dataclasses.asdict(result))
        return
    from rich.table import Table

    t = Table(title=f"{result.method} · {result.task}: consistency ≥ {result.target:g} with "
                    f"confidence {1 - result.delta:g} ({result.n_calibration} calibration "
                    f"samples, split seed {result.seed})")
    for col in (result.sweep_param, "MFLOPs", "consistent", "lower bound", "passed"):
        t.add_column(col, justify="right")
    for s in result.steps:
        t.add_row(f"{s.sweep_value:g}", f"{s.mean_mflops:.1f}", f"{s.consistent}/{s.n}",
                  f"{s.lower_bound:.4f}", "yes" if s.passed else "no (stop)")
    err_console.print(t)
    full = result.full["test"]
    if result.chosen is None:
        err_console.print("[yellow]no sweep value passed[/]: keep the full model")
    else:
        c = result.chosen
        err_console.print(
            f"chosen {result.sweep_param} = {c['sweep_value']:g}: {c['mean_mflops']:.1f} of "
            f"{c['full_mflops']:.1f} MFLOPs; on the {result.n_test} test samples: consistency "
            f"{c['test']['consistency']:.4f}, {c['test']['main_metric']} "
            f"{c['test']['main']:.2f} (full model {full['main']:.2f}), average exit layer "
            f"{c['test']['avg_exit_layer']:.2f}")
