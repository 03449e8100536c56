"""`eebench submit`, `validate`, `export-elue`, `export-conll`, `leaderboard build|check|schema`.

Thin: each command calls eebench.submit and prints. Verdicts and tables go to stderr, `--json` to
stdout alone. A file that fails validation is one line naming the file and the reason, and exit
code 1.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from eebench.cli.app import app, make_app
from eebench.cli.common import (
    DataDirOption,
    JsonOption,
    err_console,
    out_dir,
    out_file,
    print_json,
    resolve_data_dir,
)
from eebench.errors import DataError, EebenchError, UsageError, printable
from eebench.score.policy import Extrapolate

PANEL = "Leaderboard"

leaderboard_app = make_app("The static leaderboard page and the submission JSON Schema.")
app.add_typer(leaderboard_app, name="leaderboard", rich_help_panel=PANEL)


ReferencesOption = typer.Option(
    "--references", help="Folder of reference curve files that ELUE scores are recomputed "
    "against (default: references/ next to the submissions' folder, and the leaderboard's "
    "curves shipped with eebench).", show_default=False)


def _references(folder: Path | None):
    """The reference curves in `folder`, or None (each file's default, next to its folder)."""
    from eebench.submit.rescore import References

    return None if folder is None else References.from_dir(folder)


@app.command("submit", rich_help_panel=PANEL)
def submit_command(
    runs: Annotated[list[str], typer.Argument(
        help="Run directories, parent directories or glob patterns (one model and method).",
        show_default=False)],
    out: Annotated[Path, typer.Option("--out", "-o", help="Where to write the submission JSON.",
                                      show_default=False)],
    reference: Annotated[Path | None, typer.Option(
        "--reference", "-r", help="Reference curves JSON: adds the ELUE score.",
        show_default=False)] = None,
    name: Annotated[str | None, typer.Option(
        "--name", help="Name on the leaderboard (default: <model>-<method>).",
        show_default=False)] = None,
    data_dir: Path | None = DataDirOption,
    extrapolate: Annotated[Extrapolate, typer.Option(
        "--extrapolate", help="Reference curve outside its FLOPs range (with --reference).",
    )] = Extrapolate.clamp,
    json_out: bool = JsonOption,
) -> None:
    """Build a leaderboard submission (JSON) from run directories of one model and method.

    It holds every operating point, hashes of the data files and per-sample predictions, the
    hardware and software versions, and the ELUE score when a reference is given."""
    from eebench.score.collect import split_run_dirs
    from eebench.submit.build import build_submission, write_submission

    out_file(out, "the submission", example="submission.json")
    _, decoders = split_run_dirs(runs)
    if decoders:  # every method of the runs, FLOPs per token (eebench.submit.decoder)
        _decoder_submit(decoders, out, reference, name, json_out)
        return
    sub = build_submission(runs, data_dir=resolve_data_dir(data_dir), reference=reference,
                           name=name, extrapolate=extrapolate.value)
    write_submission(sub, out)
    n_runs = sum(len(t.runs) for t in sub.tasks.values())
    score = f", ELUE {sub.elue.overall:+.2f}" if sub.elue is not None else ""
    err_console.print(f"wrote {out}: {sub.name} ({sub.model.name}, {sub.method.name}), "
                      f"{len(sub.tasks)} tasks, {n_runs} runs{score}", soft_wrap=True)
    if json_out:
        print_json(sub.model_dump(mode="json"))


def _decoder_submit(runs: list[Path], out: Path, reference: Path | None, name: str | None,
                    json_out: bool) -> None:
    from eebench.errors import UsageError
    from eebench.submit.build import write_submission
    from eebench.submit.decoder import build_decoder_submission

    if reference is not None:
        raise UsageError("--reference: decoder runs are scored against their own static "
                         "truncation, not a reference file", hint="leave out --reference")
    sub = build_decoder_submission(runs, name)
    write_submission(sub, out)  # type: ignore[arg-type]
    n_runs = sum(len(t.runs) for t in sub.tasks.values())
    methods = sorted({p.method for t in sub.tasks.values() for r in t.runs for p in r.points})
    err_console.print(f"wrote {out}: {sub.name} ({sub.model.name}, decoder: "
                      f"{', '.join(methods)}), {len(sub.tasks)} tasks, {n_runs} runs",
                      soft_wrap=True)
    if json_out:
        print_json(sub.model_dump(mode="json"))


@app.command("validate", rich_help_panel=PANEL)
def validate_command(
    files: Annotated[list[Path], typer.Argument(help="Submission JSON files.",
                                                show_default=False)],
    references: Annotated[Path | None, ReferencesOption] = None,
    json_out: bool = JsonOption,
) -> None:
    """Check submission files: size, JSON, schema, consistency, plausible FLOPs and parameters,
    and the ELUE score recomputed against the reference the file names.

    Prints `ok` or the one-line reason per file; the exit code is 1 when any file fails."""
    from eebench.submit.rescore import References, default_references
    from eebench.submit.validate import validate_file

    given = _references(references)
    by_folder: dict[Path, References] = {}  # each folder's default references, loaded once

    def refs_for(f: Path) -> References | None:
        if given is not None:
            return given
        folder = f.resolve().parent
        if folder not in by_folder:
            try:
                by_folder[folder] = default_references(folder)
            except DataError:
                return None  # validate_file says why, for this file
        return by_folder[folder]

    verdicts = [validate_file(f, references=refs_for(f)) for f in files]
    for v in verdicts:  # a file's name escaped: a newline in it cannot split its line
        typer.echo(f"{printable(str(v.path))}: {'ok' if v.ok else v.reason}", err=True)
    if json_out:
        print_json([{"file": str(v.path), "ok": v.ok, "reason": v.reason} for v in verdicts])
    if not all(v.ok for v in verdicts):
        raise typer.Exit(1)


@app.command("export-elue", rich_help_panel=PANEL)
def export_elue_command(
    run: Annotated[Path, typer.Argument(help="A test-split run directory.", show_default=False)],
    out: Annotated[Path, typer.Option("--out", "-o", help="Directory for the TSV files.",
                                      show_default=False)],
    json_out: bool = JsonOption,
) -> None:
    """Write ELUE's test-prediction files (index, pred, modules) for every operating point."""
    from rich.table import Table

    from eebench.submit.export_elue import export_elue

    result = export_elue(run, out_dir(out, "the ELUE files"))
    table = Table(title=f"ELUE test files in {out}")
    for col in ("file", "rows", "avg exit layer", "MFLOPs"):
        table.add_column(col, justify="left" if col == "file" else "right")
    for f in result.files:
        table.add_row(f.path.name, str(f.rows), f"{f.avg_exit_layer:.2f}", f"{f.mean_mflops:.2f}")
    err_console.print(table)
    if not result.complete:
        err_console.print(f"warning: {result.rows} of {result.expected_rows} test rows: ELUE "
                          "scores complete test files (run without --max-eval-samples)",
                          soft_wrap=True)
    if json_out:
        print_json({"rows": result.rows, "expected_rows": result.expected_rows,
                    "complete": result.complete,
                    "files": [{"path": str(f.path), "task": f.task, "sweep_param": f.sweep_param,
                               "sweep_value": f.sweep_value, "rows": f.rows,
                               "avg_exit_layer": f.avg_exit_layer, "mean_mflops": f.mean_mflops}
                              for f in result.files]})


@app.command("export-conll", rich_help_panel=PANEL)
def export_conll_command(
    run: Annotated[Path, typer.Argument(help="A token task's run directory (a test-split run "
                                        "for blind scoring).", show_default=False)],
    out: Annotated[Path, typer.Option("--out", "-o", help="Directory for the CoNLL files.",
                                      show_default=False)],
    data_dir: Path | None = DataDirOption,
    json_out: bool = JsonOption,
) -> None:
    """Write a token task's predictions in CoNLL format (word, tag), one file per point; the
    words are read from the run's data."""
    from rich.table import Table

    from eebench.submit.export_conll import export_conll

    files = export_conll(run, out_dir(out, "the CoNLL files"), resolve_data_dir(data_dir))
    table = Table(title=f"CoNLL files in {out}")
    for col in ("file", "sentences", "avg exit layer", "MFLOPs"):
        table.add_column(col, justify="left" if col == "file" else "right")
    for f in files:
        table.add_row(f.path.name, str(f.sentences), f"{f.avg_exit_layer:.2f}",
                      f"{f.mean_mflops:.2f}")
    err_console.print(table)
    if json_out:
        print_json([{"path": str(f.path), "sweep": f.sweep, "sentences": f.sentences,
                     "avg_exit_layer": f.avg_exit_layer, "mean_mflops": f.mean_mflops}
                    for f in files])


@leaderboard_app.command("build")
def leaderboard_build(
    submissions: Annotated[Path, typer.Argument(help="Directory of submission JSON files.",
                                                show_default=False)],
    out: Annotated[Path, typer.Option("--out", "-o", help="Output directory for index.html.")
                   ] = Path("leaderboard/site"),
    references: Annotated[Path | None, ReferencesOption] = None,
    json_out: bool = JsonOption,
) -> None:
    """Validate every submission and write a static, self-contained leaderboard page."""
    from eebench.submit.site import build_site

    site = build_site(submissions, out_dir(out, "the page"), _references(references))
    for v in site.rejected:
        typer.echo(f"rejected {printable(str(v.path))}: {v.reason}", err=True)
    err_console.print(f"wrote {site.index}: {len(site.accepted)} submissions, "
                      f"{len(site.rejected)} rejected", soft_wrap=True)
    if json_out:
        print_json({"index": str(site.index),
                    "accepted": [str(v.path) for v in site.accepted],
                    "rejected": [{"file": str(v.path), "reason": v.reason}
                                 for v in site.rejected]})


@leaderboard_app.command("check")
def leaderboard_check(
    submissions: Annotated[Path, typer.Argument(help="Directory of submission JSON files.",
                                                show_default=False)],
    out: Annotated[Path | None, typer.Option(
        "--out", "-o", help="Build the page here (default: a temporary directory).",
        show_default=False)] = None,
    references: Annotated[Path | None, ReferencesOption] = None,
    json_out: bool = JsonOption,
) -> None:
    """The pull-request check: validate every submission (ELUE scores recomputed) and build the
    page from them; exit code 1 when any file is refused, one line per refused file."""
    import tempfile

    from eebench.submit.rescore import default_references
    from eebench.submit.site import build_site

    out_dir(out, "the page")
    refs = _references(references) or default_references(submissions)
    with tempfile.TemporaryDirectory(prefix="eebench-leaderboard-") as tmp:
        site = build_site(submissions, out or Path(tmp), refs)
    for v in site.rejected:
        typer.echo(f"{printable(str(v.path))}: {v.reason}", err=True)
    used = {(r.path, r.sha256): r.curves.name for r in
            (v.reference for v in site.accepted) if r is not None}
    for (path, digest), name in sorted(used.items()):  # for the reviewer: what was scored
        typer.echo(printable(f"reference {name}: {path} sha256 {digest}"), err=True)
    page = f", page {site.index}" if out is not None else ", page built"
    err_console.print(f"{len(site.accepted)} accepted, {len(site.rejected)} refused{page}",
                      soft_wrap=True, highlight=False)
    if json_out:
        print_json({"accepted": [str(v.path) for v in site.accepted],
                    "rejected": [{"file": str(v.path), "reason": v.reason}
                                 for v in site.rejected],
                    "references": [{"name": name, "path": str(path), "sha256": digest}
                                   for (path, digest), name in sorted(used.items())],
                    "index": str(site.index) if out is not None else None})
    if site.rejected:
        raise typer.Exit(1)


@leaderboard_app.command("schema")
def leaderboard_schema(
    out: Annotated[Path | None, typer.Option(
        "--out", "-o", help="Write the JSON Schema here (default: stdout).", show_default=False)
    ] = None,
    check: Annotated[bool, typer.Option(
        "--check", help="Fail if --out differs from the schema instead of writing it.")] = False,
    kind: Annotated[str, typer.Option(
        "--kind", help="encoder (leaderboard/schema.json) or decoder "
        "(leaderboard/decoder-schema.json): the kind of submission.")] = "encoder",
) -> None:
    """The submission format as JSON Schema, generated from the pydantic models."""
    from eebench.io import atomic_write_text, read_text
    from eebench.submit import decoder_schema, schema

    kinds = {"encoder": schema.json_schema_text, "decoder": decoder_schema.json_schema_text}
    if kind not in kinds:
        raise UsageError(f"--kind {kind!r} is not a submission kind", hint="encoder or decoder")
    text = kinds[kind]()
    if out is None:
        typer.echo(text, nl=False)
        return
    out_file(out, "the JSON Schema", example="schema.json")
    if check:
        current = read_text(out)
        if current != text:
            raise EebenchError(f"{out} is out of date",
                               hint=f"eebench leaderboard schema --kind {kind} --out {out}")
        err_console.print(f"{out} is up to date")
        return
    atomic_write_text(out, text)
    err_console.print(f"wrote {out}")
