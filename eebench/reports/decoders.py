"""Kind `decoders`: decoder runs (`eebench decode`) on each decoder task: every method's points
(quality, FLOPs and wall time per token, acceptance, the real-decoding checks), each label's
ELUE-style score against the static truncation, its Pareto figure, and the side-by-side timing
of self-speculation and transformers' `assistant_early_exit`.

Runs: `main` (a folder of decoder run directories). Options: `figures` (the folder the Pareto
figures go to, relative to the root), `link` (the same folder as the document links it), `part`
("results": the tables, scores and figures; "timing": the side-by-side table alone).
"""

from __future__ import annotations

from eebench.reports.core import Block, Context, page, register_kind
from eebench.reports.fmt import markdown, signed, title


def _runs(block: Block, ctx: Context) -> list:
    from eebench.score.collect import is_decoder_run, run_dirs_under
    from eebench.score.decoder_table import load_decoder_runs

    root = ctx.path(block.runs["main"].folder)
    paths = run_dirs_under(root, decoders=True) if root.is_dir() else []
    return load_decoder_runs(p for p in paths if is_decoder_run(p))


def _f(value: float | None, digits: int = 1) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def _check(p) -> str:  # noqa: ANN001 - a DecoderPoint
    if p.agrees is not None:
        return "agrees" if p.agrees else f"DIFFERS ({p.check})"
    if p.oracle_gap is not None:
        return f"real {p.real[p.main_metric]:.1f} ({p.oracle_gap:+.1f})"
    if p.chosen_k:
        return "k: " + " ".join(f"{k}×{n}" for k, n in p.chosen_k.items())
    return ""


def _points_table(runs: list, task: str) -> str:
    from eebench.score.decoder_table import decoder_label, several_models

    many = several_models(runs)
    rows, seen_full = [], False
    for run in runs:
        if run.config.task != task:
            continue
        for p in run.points:
            if p.method == "full":
                if seen_full:
                    continue
                seen_full = True
            t = p.timing
            rows.append({
                "method": decoder_label(run, p, many),
                "setting": " ".join(f"{k}={v}" for k, v in p.setting.items() if k != "measure"),
                p.main_metric: _f(p.main), "MFLOPs/token": _f(p.mflops_per_token),
                "FLOPs ×": _f(p.flops_speedup, 2),
                "wall ×": _f(t.wall_speedup, 2) if t and t.wall_speedup else "-",
                "wall × ÷ FLOPs ×": _f(t.wall_speedup / p.flops_speedup, 2)
                if t and t.wall_speedup else "-",
                "exit layer": _f(p.mean_exit_layer), "accepted %": _f(p.acceptance_rate),
                "checked by real decoding": _check(p)})
    return markdown(rows, "llrrrrrrrl")


def _scores(scored, task: str) -> str:
    tr = scored.report.tasks[task]
    rows = [{"method": label, "points": m.n_points, "best": _f(m.best_main),
             "ELUE-style score": signed(m.elue)}
            for label, m in sorted(tr.methods.items()) if label != "full"]
    return markdown(rows, "lrrr")


def _timing(runs: list) -> str:
    rows = []
    for run in runs:
        for p in run.points:
            if p.method != "self-spec" or p.timing is None:
                continue
            peer = p.peer_timing
            same = {(True, True): "both", (True, False): "eebench only",
                    (False, True): "peer only"}.get((bool(p.timing.same_tokens),
                                                     bool(peer and peer.same_tokens)), "neither")
            rows.append({
                "exits": "trained" if run.summary.head == "adapter" else "logit lens",
                "k": p.setting["k"], "d": p.setting["d"],
                "acceptance": f"{_f(p.acceptance_rate)} %",
                "eebench ms/token": _f(p.timing.ms_per_token),
                "wall ÷ greedy": _f(p.timing.wall_speedup, 2),
                "`assistant_early_exit` ms/token": _f(peer and peer.ms_per_token),
                "peer wall ÷ greedy": _f(peer and peer.wall_speedup, 2),
                "same tokens as greedy": same})
    if not rows:
        return "(no timed self-speculation point yet)"
    greedy = []
    for run in runs:
        full = next((p.timing for p in run.points if p.method == "full" and p.timing), None)
        if full is not None:
            exits = "trained exits" if run.summary.head == "adapter" else "logit-lens exits"
            repeats = len(full.raw_ms) // full.prompts
            greedy.append(f"{full.ms_per_token:.1f} ms a token in the run with {exits} "
                          f"({full.prompts} prompt{'s' if full.prompts > 1 else ''} x {repeats} "
                          f"timed calls of {full.new_tokens} tokens; its first call "
                          f"{full.first_call_ms / 1000:.1f} s, reported apart)")
    return ("The full model's greedy decoding took " + "; ".join(greedy) + ".\n\n"
            + markdown(rows, "lrrrrrrrl"))


@register_kind("decoders")
def decoders_block(block: Block, ctx: Context) -> dict:
    o = block.options
    runs = _runs(block, ctx)
    if not runs:
        return {"tasks": block.text.get("none", "No finished decoder run yet."), "n_runs": 0,
                "hardware": "-", "timing": "-", "tuning": "-"}
    timed = [r for r in runs if any(p.timing for p in r.points)]
    hardware = "; ".join(sorted({
        f"{e.get('gpu') or e.get('cpu') or 'CPU'} ({e.get('cpu_cores')} cores, "
        f"{e.get('torch_threads')} torch thread(s), fp32)" for e in (r.env for r in runs)}))
    values = {"n_runs": len(runs), "hardware": hardware,
              "timing": _timing(timed)}
    tuned = [r.summary for r in runs if r.summary.tuning_seconds]
    values["tuning"] = (f"{tuned[0].tuning_seconds / 60:.0f} minutes of one core, "
                        f"{len(tuned[0].tuning_losses)} steps, loss {tuned[0].tuning_losses[0]:.2f}"
                        f" to {tuned[0].tuning_losses[-1]:.2f}") if tuned else "no trained exits"
    if o.get("part") == "timing":
        return values
    from eebench.score.decoder import score_decoder

    scored = score_decoder(runs)
    from eebench.plot.decoder import plan_decoder_figures

    planned = plan_decoder_figures(runs)  # the links, whether or not the files are written
    figures = {f.task: f"{o['link']}/{f.name}.png" for f in planned}
    if ctx.figures and ctx.write:
        from eebench.plot.plan import write_figures

        write_figures(planned, ctx.path(o["figures"]), "png")
    tasks = []
    for task in sorted({r.config.task for r in runs}):
        figure = f"![{title(task)}: every decoder point]({figures[task]})" if task in figures \
            else ""
        tasks.append(page(block.text["task"], title=title(task), points=_points_table(runs, task),
                          scores=_scores(scored, task), figure=figure))
    values["tasks"] = "\n\n".join(tasks)
    return values
