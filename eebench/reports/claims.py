"""Kind `claims`: each paper's claim in its own terms (leaderboard/published.toml, read by
eebench.reports.published) next to what eebench measures in the same terms, and a verdict.

A claim is measured on a model's runs as the change of the method's best point with at least the
claimed speed-up against the full model (static k = L) of the same seed, ± over seeds; an
ELUE-score claim as the method's ELUE score against its runs' own static curve; a claim against
another method as the difference from that method's, seed by seed.
"""

from __future__ import annotations

import math
from typing import Any

from eebench.reports.core import Block, Context, Runs, register_kind
from eebench.reports.fmt import markdown, pm_over, title
from eebench.reports.full_models import DASH, full_point
from eebench.reports.published import Claim, load_published
from eebench.reports.seeds import headers


def _speedups(points, base, claim: Claim) -> dict[int, float]:
    """Each point's speed-up over the full model `base` (the same seed's static k = L), in the
    claim's terms; "time" compares each point's real dynamic inference at batch size 1 with the
    full model timed in the same run (the point's own full-model timing where the run paired
    them, `[timing] baseline = "paired"`, else the one the run shares)."""
    if claim.terms == "layers":
        return {i: p.speedup for i, p in enumerate(points)}
    if claim.terms == "flops":
        return {i: base.mean_flops / p.mean_flops for i, p in enumerate(points)}
    from eebench.score.table import p50

    return {i: full / dyn for i, p in enumerate(points)
            if (full := p50(p.timings, 1, "full")) and (dyn := p50(p.timings, 1))}


def _score(point, claim: Claim) -> float | None:
    return point.metrics.get(claim.metric) if claim.metric else point.main


def measure(runs: list, claim: Claim) -> dict[str, Any]:
    """The claim measured on these runs, per seed: its change (the method's best point among
    those with at least the claimed speed-up, minus that seed's full model, static k = L), or
    for "elue" the method's ELUE score against the runs' own static curve; against another
    method, the difference from that method's, seed by seed; mean ± over seeds. On the first
    task of `measured_on` with runs, or (`across`) the mean over all of them per seed."""
    import numpy as np

    from eebench.score import sample_std

    if not claim.measured_on:
        return {"status": "no task"}
    # a task counts once it has runs of the method, of the one it is set against, and static's
    labels = ("static", claim.method, *([claim.against] if claim.against else []))
    have = [t for t in claim.measured_on
            if all(any(r.config.task == t and r.config.label == m for r in runs) for m in labels)]
    tasks = (have if claim.across else have[:1]) or claim.measured_on[:1]
    per_task, tried, top = [], [], 0.0
    for task in tasks:
        got = _per_seed(runs, claim, labels[1:], task)  # one pass over the task's runs
        mine, reach, ran = got[claim.method]
        top = max(top, reach)
        if claim.against:
            theirs, _, also = got[claim.against]
            mine = {seed: v - theirs[seed] for seed, v in mine.items() if seed in theirs}
            ran &= also
        per_task.append(mine)
        tried.append(ran)
    # a seed counts where every task measured it: its change is the mean over the tasks
    seeds = sorted(set.intersection(*(set(m) for m in per_task)))
    ran = set.intersection(*tried)
    changes = [float(np.mean([m[seed] for m in per_task])) for seed in seeds]
    if not changes:
        return {"status": "out of range", "top": top} if top else {"status": "pending"}
    a = np.asarray(changes, dtype=float)
    cell = pm_over(changes, digits=2 if claim.terms == "elue" else 1)
    if claim.across:
        cell += f" ({len(tasks)} task{'s' if len(tasks) > 1 else ''})"
    elif len(claim.measured_on) > 1:
        cell += f" ({title(tasks[0])})"
    if len(seeds) < len(ran):  # the other seeds' runs never reach the claimed speed-up
        cell += f" ({len(seeds)} of {len(ran)} seeds reach {claim.speedup:.2f}×)"
    return {"status": "measured", "change": float(a.mean()), "std": sample_std(a),
            "seeds": len(a), "of_seeds": len(ran), "task": tasks[0], "tasks": tasks,
            "cell": cell}


def _per_seed(runs: list, claim: Claim, labels: tuple[str, ...], task: str
              ) -> dict[str, tuple[dict[int, float], float, set[int]]]:
    """For each of `labels`, per seed, what the claim measures of its runs on `task`, the
    largest speed-up they reach (0 for an ELUE score), and the seeds whose runs it looked at
    (a seed whose points never reach the claimed speed-up is among them, not among the first;
    in "time" terms a run that timed no point, `[timing] points` or timing off, is not)."""
    runs = [r for r in runs if r.config.task == task]
    if claim.terms == "elue":
        from eebench.reports.curves import own_elue_by_seed

        by_seed = own_elue_by_seed(runs)
        out = {}
        for label in labels:
            got = {int(s): float(v) for s, v in by_seed.get(label, {}).get(task, {}).items()}
            out[label] = (got, 0.0, set(got))
        return out
    full = {r.config.seed: p for r in runs
            if r.config.method == "static" and (p := full_point(r)) is not None}
    out = {}
    for label in labels:
        changes, top, ran = {}, 0.0, set()
        for r in runs:
            base = full.get(r.config.seed)
            if r.config.label != label or base is None or _score(base, claim) is None:
                continue
            speed = _speedups(r.points, base, claim)
            if not speed:  # nothing timed: not measured in time terms
                continue
            ran.add(r.config.seed)
            top = max([top, *speed.values()])
            ok = [_score(r.points[i], claim) for i, s in speed.items()
                  if s >= claim.speedup - 1e-9 and _score(r.points[i], claim) is not None]
            if ok:
                changes[r.config.seed] = max(ok) - _score(base, claim)
        out[label] = (changes, top, ran)
    return out


def verdict(claim: Claim, got: dict[str, Any], tolerance: float) -> str:
    """agrees: the measured change is at least the claimed one; within noise: below it by at
    most `tolerance` points (or two seed deviations, when larger); disagrees: further below;
    else why it cannot be said."""
    if got["status"] == "pending":
        return "not measured yet"
    if got["status"] == "no task":
        return "cannot be tested here: the task is not an eebench task"
    if got["status"] == "out of range":
        return f"cannot be tested here: the largest speed-up is {got['top']:.2f}×"
    std = got["std"] if got["std"] is not None and not math.isnan(got["std"]) else 0.0
    allowed = max(tolerance, 2 * std)
    if got["change"] >= claim.change:
        return "agrees"
    return "within noise" if got["change"] >= claim.change - allowed else "disagrees"


def covers(spec: Runs, claim: Claim) -> bool:
    """Whether a run set named to hold some methods or tasks only (its grid's) can ever measure
    the claim: its method (and the one it is set against) among them, and one of its tasks."""
    wanted = {claim.method, *([claim.against] if claim.against else [])}
    if spec.methods and not wanted <= set(spec.methods):
        return False
    return not spec.tasks or bool(set(claim.measured_on) & set(spec.tasks))


@register_kind("claims")
def claims(block: Block, ctx: Context) -> dict:
    """Options: `file` (the claims), `models` (display name -> run set key; the first with a
    measurement gives the verdict), `tolerance` (points), `searches` (run set key -> the run set
    of the recipe search it took its recipes from). A run set that names its methods or tasks
    (its grid's) shows a dash for a claim it does not cover, not "not run yet". Each column's
    header says how many seeds its cells have, and which seed is the search's own model, picked
    on the dev set the claims are measured on (eebench.reports.seeds)."""
    published = load_published(ctx.path(block.options["file"]))
    specs = {name: block.runs[key] for name, key in block.options["models"].items()}
    runs = {name: ctx.runs(spec) for name, spec in specs.items()}
    tolerance = float(block.options.get("tolerance", 1.0))
    rows, notes, counts = [], [], {name: [] for name in runs}
    for n, claim in enumerate(published.claim, 1):
        row = {"method": claim.method, "the claim [source]": f"{claim.said()} [{n}]",
               "measured on": (", " if claim.across else " or ").join(
                   title(t) for t in claim.measured_on) or DASH}
        said = None
        for name, got_runs in runs.items():
            if not covers(specs[name], claim):
                row[name] = DASH
                continue
            got = measure(got_runs, claim)
            if got["status"] == "measured":
                counts[name].append(got["of_seeds"])
            row[name] = {"measured": got.get("cell"), "pending": "not run yet",
                         "no task": DASH}.get(got["status"], f"max {got.get('top', 0):.2f}×")
            if said is None and got["status"] == "no task":
                said = verdict(claim, got, tolerance)
            elif said is None and got["status"] != "pending":
                said = f"{verdict(claim, got, tolerance)} ({name})"
        row["verdict"] = said or "not measured yet"
        rows.append(row)
        notes.append(f"[{n}] {claim.paper}: {claim.source}." + (f" {claim.note}" if claim.note
                                                                 else ""))
    if not rows:
        return {"table": block.text["none"], "notes": "", "tolerance": f"{tolerance:g}"}
    named = headers(block, ctx, counts)
    rows = [{named.get(k, k): v for k, v in row.items()} for row in rows]
    return {"table": markdown(rows), "notes": "\n".join(notes), "tolerance": f"{tolerance:g}"}


__all__ = ["covers", "measure", "verdict"]
