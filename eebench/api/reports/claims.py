"""Kinds `full-models` (each model's full-depth dev score per task, its margin over the majority
baseline, next to published figures) and `claims` (each paper's claim in its own terms next to
what eebench measures in the same terms, and a verdict).

Both read a TOML file of published numbers (option `file`), every number with its source:

    [[figure]]          # a full model's published score (full-models)
    model = "BERT-base"
    task = "rte"        # the eebench task it is the score of (GLUE dev for GLUE tasks)
    value = 66.4
    source = "..."

    [[claim]]           # an early-exit paper's claim (claims)
    method = "pabee"    # the eebench method that re-implements it
    paper = "PABEE (Zhou et al., NeurIPS 2020)"
    model = "ALBERT-base"
    task = "MRPC"       # the paper's task, as it names it
    measured_on = ["elue-mrpc"]  # eebench tasks that stand for it: a run set's first with runs
    terms = "layers"    # how the speed-up counts: "layers" (L / the mean exit layer), "flops"
    base = 89.5         # (full FLOPs / the point's) or "time"; "elue": an ELUE score (`exit`)
    exit = 90.0         # the paper's full model, and with early exit ...
    speedup = 1.57      # ... at this speed-up
    source = "..."

A claim is measured on a model's runs as the change of the method's best point with at least the
claimed speed-up against the full model (static k = L) of the same seed, ± over seeds.
"""

from __future__ import annotations

import math
from collections import defaultdict
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from eebench.api.reports.core import Block, Context, kind
from eebench.api.reports.fmt import markdown, pm_over, title
from eebench.errors import DataError
from eebench.run.config import tomllib

DASH = "–"


class Figure(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    model: str
    task: str
    value: float
    split: str = "dev"
    metric: str = ""  # when not the task's main metric as eebench computes it, what it is
    source: str


class Claim(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    method: str
    paper: str
    model: str
    task: str  # the paper's task, as it names it
    # the eebench tasks that stand for it, in order: each run set is measured on the first it
    # has runs of; none where no eebench task does
    measured_on: list[str] = []
    metric: str = ""  # the paper's metric where it is not the task's main one ("f1")
    split: str = "dev"
    terms: Literal["layers", "flops", "time", "elue"]
    base: float | None = None  # the paper's full model (a change is claimed against it)
    exit: float  # with early exit; for "elue": the claimed ELUE score
    speedup: float | None = Field(default=None, gt=1)  # at this speed-up, counted in `terms`
    # A claim against another method ("outperforms PABEE"): the difference from `against`, each
    # measured the same way on the same seeds; `exit` is the claimed difference (0: "better"),
    # `base` is not given.
    against: str = ""
    source: str
    note: str = ""  # what the reader should know about the comparison

    @field_validator("measured_on", mode="before")
    @classmethod
    def _one_or_more(cls, v: Any) -> Any:
        return ([v] if v else []) if isinstance(v, str) else v

    @model_validator(mode="after")
    def _complete(self) -> Claim:
        if self.terms != "elue" and self.speedup is None:
            raise ValueError(f"a claim in {self.terms!r} terms needs `speedup`")
        if self.terms != "elue" and not self.against and self.base is None:
            raise ValueError(f"a claim in {self.terms!r} terms needs `base`")
        return self

    @property
    def change(self) -> float:
        """The claimed change: against the full model, the claimed ELUE score, or the claimed
        difference from the method it is set against."""
        return self.exit if self.terms == "elue" or self.against else self.exit - self.base

    def said(self) -> str:
        where = f"{self.model}, {self.task} {self.split}"
        if self.against:
            at = "ELUE score" if self.terms == "elue" else \
                f"best point at {self.speedup:.2f}× ({self.terms})"
            return f"{where}: {at} above {self.against}'s by {self.exit:+.1f}"
        if self.terms == "elue":
            return f"{where}: ELUE score {self.exit:+.2f}"
        metric = f" {self.metric}" if self.metric else ""
        return (f"{where}{metric}: {self.base:.1f} → {self.exit:.1f} ({self.change:+.1f}) at "
                f"{self.speedup:.2f}× ({self.terms})")


class Curve(BaseModel):
    """Points of a published curve (metric against GFLOPs per sample)."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    model: str
    task: str  # the eebench task it is the curve of
    split: str
    gflops: list[float] = Field(min_length=1)
    values: list[float] = Field(min_length=1)
    source: str

    @model_validator(mode="after")
    def _paired(self) -> Curve:
        if len(self.gflops) != len(self.values):
            raise ValueError(f"{len(self.gflops)} gflops for {len(self.values)} values")
        return self


class Published(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    figure: list[Figure] = []
    claim: list[Claim] = []
    curve: list[Curve] = []


def load_published(path) -> Published:
    """The published figures and claims of a TOML file; one line naming the file when bad."""
    from pydantic import ValidationError

    try:
        return Published.model_validate(tomllib.loads(path.read_text(encoding="utf-8")))
    except (OSError, tomllib.TOMLDecodeError) as e:
        raise DataError(f"{path}: {e}") from None
    except ValidationError as e:
        err = e.errors()[0]
        where = ".".join(str(x) for x in err["loc"])
        raise DataError(f"{path}: {where}: {err['msg']}") from None


def full_point(run):
    """A static run's full model (k = L), or None."""
    return next((p for p in run.points if p.method == "static"
                 and int(run.variant_of(p).exit_layers[0]) == p.num_layers), None)


def recipe(run) -> str:
    t = run.config.train
    return f"lr {t.lr:g} for {t.epochs} epochs" if t.lr is not None and t.epochs is not None \
        else ""


def full_scores(runs: list, pick: str = "all") -> dict[str, dict[str, Any]]:
    """Per task: the full model's dev score over seeds, the majority baseline of its dev
    labels, and the recipe. With several recipes of a task (a recipe search) `pick` = "best"
    keeps the best one's seeds; "all" expects one."""
    from eebench.tasks.metrics import majority_baseline
    from eebench.tasks.spec import get_task

    by: dict[tuple[str, str], list] = defaultdict(list)
    for r in runs:
        if r.config.method == "static" and (p := full_point(r)) is not None and p.main is not None:
            by[r.config.task, recipe(r)].append((r, p))
    out: dict[str, dict[str, Any]] = {}
    for (task, rec), got in sorted(by.items()):
        mean = sum(p.main for _, p in got) / len(got)
        if task in out and not (pick == "best" and mean > out[task]["mean"]):
            if pick != "best":
                raise DataError(f"{task}: full models of more than one recipe "
                                f"({out[task]['recipe']}; {rec}): pick one")
            continue
        run, p = got[0]
        floor = majority_baseline(get_task(task), run.labels()).get(p.main_metric)
        out[task] = {"mean": mean, "cell": pm_over([p.main for _, p in got]), "recipe": rec,
                     "seeds": len(got), "majority": floor, "layers": p.num_layers}
    return out


@kind("full-models")
def full_models(block: Block, ctx: Context) -> dict:
    """Options: `file` (published figures), `models` (display name -> run set key), `pick`
    (run set key -> "best" for a recipe search), `tasks`, `published_task` (an eebench task ->
    the task whose published figures stand beside it), `published` (the published models, in
    order)."""
    published = load_published(ctx.path(block.options["file"]))
    figures = {(f.model, f.task): f for f in published.figure}
    alias = block.options.get("published_task", {})
    scores = {name: full_scores(ctx.runs(block.runs[key]), block.options.get("pick", {})
                                .get(key, "all"))
              for name, key in block.options["models"].items()}
    rows, margins = [], []
    for task in block.options["tasks"]:
        got = {name: s[task] for name, s in scores.items() if task in s}
        if not got:
            continue
        floor = next(iter(got.values()))["majority"]
        row = {"task": title(task), "majority": DASH if floor is None else f"{floor:.1f}"}
        for name in scores:
            s = got.get(name)
            if s is None:
                row[name] = DASH
                continue
            # against its own dev labels (a run may score a subset)
            margin = None if s["majority"] is None else s["mean"] - s["majority"]
            margins.append((name, task, margin))
            extra = "" if margin is None else f" ({margin:+.1f})"
            row[name] = f"{s['cell']}{extra}"
        for model in block.options["published"]:
            f = figures.get((model, alias.get(task, task)))
            row[model] = DASH if f is None else f"{f.value:.1f}"
        rows.append(row)
    if not rows:
        return {"table": block.text["none"], "least": DASH, "recipes": DASH, "sources": ""}
    picked = {name for name, key in block.options["models"].items()
              if block.options.get("pick", {}).get(key) == "best"}
    recipes = "; ".join(f"{name}: " + ", ".join(f"{title(t)} {s['recipe']}" for t, s in
                                                 sorted(scores[name].items()) if s["recipe"])
                        for name in scores if name in picked and scores[name]) or DASH
    low = [m for m in margins if m[2] is not None]
    least = min(low, key=lambda m: m[2]) if low else None
    used = sorted({(f.model, f.task) for f in published.figure
                   if f.model in block.options["published"]})
    sources = "\n".join(f"- {m}, {title(t)}: {figures[m, t].source}"
                        + (f" ({figures[m, t].metric})" if figures[m, t].metric else "")
                        for m, t in used)
    return {"table": markdown(rows, "l" + "r" * (len(rows[0]) - 1)),
            "least": DASH if least is None else
            f"{least[2]:+.1f} ({least[0]}, {title(least[1])})",
            "recipes": recipes, "sources": sources}


def _speedups(points, base, claim: Claim) -> dict[int, float]:
    """Each point's speed-up over the full model `base` (the same seed's static k = L), in the
    claim's terms; "time" compares each point's real dynamic inference at batch size 1 with the
    full model timed in the same run."""
    if claim.terms == "layers":
        return {i: p.speedup for i, p in enumerate(points)}
    if claim.terms == "flops":
        return {i: base.mean_flops / p.mean_flops for i, p in enumerate(points)}
    return {i: full / dyn for i, p in enumerate(points)
            if (full := _latency(p, "full")) and (dyn := _latency(p, "dynamic"))}


def _latency(point, mode: str) -> float | None:
    """The point's median latency at batch size 1 in `mode` ("dynamic" or "full")."""
    for t in point.timings:
        if t.batch_size == 1 and t.mode == mode and "p50" in t.latency_ms:
            return t.latency_ms["p50"]
    return None


def _score(point, claim: Claim) -> float | None:
    return point.metrics.get(claim.metric) if claim.metric else point.main


def measure(runs: list, claim: Claim) -> dict[str, Any]:
    """The claim measured on these runs, per seed: its change (the method's best point among
    those with at least the claimed speed-up, minus that seed's full model, static k = L), or
    for "elue" the method's ELUE score against the runs' own static curve; against another
    method, the difference from that method's, seed by seed; mean ± over seeds."""
    import numpy as np

    from eebench.score import sample_std

    if not claim.measured_on:
        return {"status": "no task"}
    task = next((t for t in claim.measured_on if any(
        r.config.task == t and r.config.label == claim.method for r in runs)),
        claim.measured_on[0])
    mine, top = _per_seed(runs, claim, claim.method, task)
    if claim.against:
        theirs, _ = _per_seed(runs, claim, claim.against, task)
        mine = {seed: v - theirs[seed] for seed, v in mine.items() if seed in theirs}
    changes = [mine[seed] for seed in sorted(mine)]
    if not changes:
        return {"status": "out of range", "top": top} if top else {"status": "pending"}
    a = np.asarray(changes, dtype=float)
    cell = pm_over(changes, digits=2 if claim.terms == "elue" else 1)
    if len(claim.measured_on) > 1:
        cell += f" ({title(task)})"
    return {"status": "measured", "change": float(a.mean()), "std": sample_std(a),
            "seeds": len(a), "task": task, "cell": cell}


def _per_seed(runs: list, claim: Claim, label: str, task: str) -> tuple[dict[int, float], float]:
    """Per seed, what the claim measures of the runs of `label` on `task`, and the largest
    speed-up they reach (0 for an ELUE score)."""
    if claim.terms == "elue":
        return _elue_by_seed(runs, label, task), 0.0
    full = {r.config.seed: p for r in runs if r.config.task == task
            and r.config.method == "static" and (p := full_point(r)) is not None}
    out, top = {}, 0.0
    for r in runs:
        if r.config.task != task or r.config.label != label:
            continue
        base = full.get(r.config.seed)
        if base is None or _score(base, claim) is None:
            continue
        speed = _speedups(r.points, base, claim)
        top = max([top, *speed.values()])
        ok = [_score(r.points[i], claim) for i, s in speed.items()
              if s >= claim.speedup - 1e-9 and _score(r.points[i], claim) is not None]
        if ok:
            out[r.config.seed] = max(ok) - _score(base, claim)
    return out, top


def _elue_by_seed(runs: list, method: str, task: str) -> dict[int, float]:
    """The method's ELUE score on `task` against the runs' own static curve, per seed."""
    from eebench.score import build_reference, elue_by_seed, raw_points

    static = [r for r in runs if r.config.method == "static" and r.config.task == task]
    mine = [r for r in runs if r.config.label == method and r.config.task == task]
    if not static or not mine:
        return {}
    reference = build_reference(static, name="own-static")
    scores = elue_by_seed(raw_points(mine), reference)
    return {int(k): float(v) for k, v in scores.get(method, {}).get(task, {}).items()}


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


@kind("claims")
def claims(block: Block, ctx: Context) -> dict:
    """Options: `file` (the claims), `models` (display name -> run set key; the first with a
    measurement gives the verdict), `tolerance` (points)."""
    published = load_published(ctx.path(block.options["file"]))
    runs = {name: ctx.runs(block.runs[key]) for name, key in block.options["models"].items()}
    tolerance = float(block.options.get("tolerance", 1.0))
    rows, notes = [], []
    for n, claim in enumerate(published.claim, 1):
        row = {"method": claim.method, "the claim [source]": f"{claim.said()} [{n}]",
               "measured on": " or ".join(title(t) for t in claim.measured_on) or DASH}
        said = None
        for name, got_runs in runs.items():
            got = measure(got_runs, claim)
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
    return {"table": markdown(rows), "notes": "\n".join(notes), "tolerance": f"{tolerance:g}"}


@kind("published-curve")
def published_curve(block: Block, ctx: Context) -> dict:
    """A run set's points on one task (`task`; `methods`, static first) in one figure with a
    published curve of the same task (`file`, the curve of `model`), and a table of the
    published points beside the run set's static curve and each method's best point at no more
    FLOPs. Options: `file`, `model`, `task`, `methods`, `figure` (the PNG, relative to the
    root)."""
    from eebench.score import aggregate_seeds, build_reference, curve_at, raw_points, score

    o = block.options
    published = load_published(ctx.path(o["file"]))
    curve = next((c for c in published.curve if c.model == o["model"] and c.task == o["task"]),
                 None)
    if curve is None:
        raise DataError(f"{o['file']}: no curve of {o['model']} on {o['task']}")
    runs = [r for r in ctx.runs(block.runs["main"]) if r.config.task == o["task"]
            and r.config.label in o["methods"]]
    static = [r for r in runs if r.config.method == "static"]
    if not static:
        return {"table": block.text["none"], "n_runs": len(runs), "source": curve.source}
    reference = build_reference(static, name="static")
    report = score(aggregate_seeds(raw_points(runs)), reference).tasks[o["task"]]
    ref = reference.curve(o["task"])
    rows = []
    for gflops, value in zip(curve.gflops, curve.values, strict=True):
        flops = gflops * 1e9
        row = {"GFLOPs": f"{gflops:.2f}", f"{curve.model} ({curve.split})": f"{value:.1f}",
               f"static ({report.split})": f"{float(curve_at(ref.flops, ref.main, flops)):.1f}"}
        for label in [m for m in o["methods"] if m != "static"
                      and any(r.config.label == m for r in runs)]:
            fit = [p for p in report.points if p.label == label and p.flops <= flops]
            row[f"{label} ({report.split})"] = DASH if not fit else \
                f"{max(p.main for p in fit):.1f}"
        rows.append(row)
    if ctx.write and ctx.figures:
        _write_curve_figure(ctx.path(o["figure"]), report, reference, curve)
    return {"table": markdown(rows, "r" * len(rows[0])), "n_runs": len(runs),
            "source": curve.source}


def _write_curve_figure(path, report, reference, curve: Curve) -> None:
    from functools import partial

    from eebench.plot.figures import pareto_figure
    from eebench.plot.plan import PlannedFigure, write_figures
    from eebench.plot.style import method_styles

    def build():
        fig = pareto_figure(report, method_styles(p.label for p in report.points), reference)
        ax = fig.axes[0]
        ax.plot([g * 1e3 for g in curve.gflops], curve.values, linestyle=":", marker="s",
                color="black", linewidth=1.2, label=f"{curve.model} ({curve.split}, published)")
        ax.legend(fontsize="small", frameon=True, framealpha=0.9)
        return fig

    write_figures([PlannedFigure(path.stem, "published", report.task,
                                 f"{report.task}: the runs' points and {curve.model}'s "
                                 f"published curve", partial(build))], path.parent)


__all__ = ["Claim", "Curve", "Figure", "Published", "full_scores", "load_published", "measure",
           "verdict"]
