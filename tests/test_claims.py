"""The published figures and claims (leaderboard/published.toml) and the report kinds that set
them beside eebench's own numbers (eebench.reports: published, full_models, claims), checked
on committed runs."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from eebench.errors import DataError
from eebench.reports import Block, Context, Runs, build
from eebench.reports.claims import covers, measure, verdict
from eebench.reports.full_models import full_scores
from eebench.reports.published import Claim, load_published
from eebench.score import load_run
from eebench.tasks.catalog import get_task

ROOT = Path(__file__).resolve().parent.parent
PUBLISHED = ROOT / "leaderboard" / "published.toml"
MINILM = ROOT / "benchmarks" / "results" / "elue-minilm" / "minilm-l6"


def _runs(*methods: str, task: str) -> list:
    return [load_run(p.parent) for m in methods
            for p in sorted((MINILM / m / task).glob("*/summary.json"))]


def test_every_published_number_has_a_source_and_names_an_eebench_task():
    published = load_published(PUBLISHED)
    assert published.figure and published.claim
    for f in published.figure:
        get_task(f.task)  # an eebench task, or KeyError
        assert f.source.strip() and -100 <= f.value <= 100
    for c in published.claim:
        for task in c.measured_on:
            get_task(task)
        assert c.source.strip() and c.terms in ("layers", "flops", "time", "elue")
        assert c.terms == "elue" or c.speedup > 1
        assert c.terms == "elue" or c.against or c.base is not None


def test_a_bad_file_is_refused_in_one_line_naming_it(tmp_path):
    bad = tmp_path / "p.toml"
    bad.write_text('[[claim]]\nmethod = "pabee"\n')
    with pytest.raises(DataError, match=r"p\.toml: claim\.0\.paper"):
        load_published(bad)
    bad.write_text("[[claim]\n")
    with pytest.raises(DataError, match=r"p\.toml"):
        load_published(bad)


def _claim(**kw) -> Claim:
    return Claim(**{"method": "pabee", "paper": "p", "model": "m", "task": "MRPC",
                    "measured_on": "elue-mrpc", "base": 89.5, "exit": 90.0, "speedup": 1.57,
                    "terms": "layers", "source": "s", **kw})


@pytest.mark.parametrize("terms", ["layers", "flops", "time"])
def test_a_claim_is_measured_as_the_best_point_at_its_speedup_against_the_same_seeds_full_model(
        terms):
    runs = _runs("static", "pabee", task="elue-mrpc")
    assert runs, "the committed MiniLM benchmark runs"
    claim = _claim(terms=terms, speedup=1.2 if terms == "time" else 1.57)
    got = measure(runs, claim)
    expected = []
    for seed in (1, 2, 3):  # by hand from the points
        static = next(r for r in runs if r.config.method == "static" and r.config.seed == seed)
        full = max(static.points, key=lambda p: p.mean_flops)
        pabee = next(r for r in runs if r.config.method == "pabee" and r.config.seed == seed)
        fast = [p.main for p in pabee.points if _speedup(p, full, terms) >= claim.speedup]
        expected.append(max(fast) - full.main)
    assert got["status"] == "measured" and got["seeds"] == 3
    assert got["change"] == pytest.approx(np.mean(expected))
    assert got["std"] == pytest.approx(np.std(expected, ddof=1))


def _speedup(p, full, terms: str) -> float:
    if terms == "layers":
        return p.num_layers / p.avg_exit_layer
    if terms == "flops":
        return full.mean_flops / p.mean_flops
    bs1 = {t.mode: t.latency_ms["p50"] for t in p.timings if t.batch_size == 1}
    return bs1["full"] / bs1["dynamic"]


def test_an_elue_claim_is_the_methods_elue_score_against_its_own_static_curve_per_seed():
    from eebench.score import build_reference, curve_at

    runs = _runs("static", "pabee", task="elue-mrpc")
    got = measure(runs, _claim(terms="elue", base=None, speedup=None, exit=-1.32))
    static = [r for r in runs if r.config.method == "static"]
    reference = build_reference(static, name="own").curve("elue-mrpc")
    per_seed = [np.mean([p.main - curve_at(reference.flops, reference.main, p.mean_flops)
                         for p in r.points])
                for r in sorted(runs, key=lambda r: r.config.seed) if r.config.method == "pabee"]
    assert got["seeds"] == 3 and got["change"] == pytest.approx(np.mean(per_seed))


def test_a_claim_needs_its_base_and_speedup_unless_it_is_an_elue_score():
    with pytest.raises(ValueError, match="needs `base`"):
        _claim(base=None)
    with pytest.raises(ValueError, match="needs `speedup`"):
        _claim(speedup=None)
    assert _claim(base=None, against="deebert", exit=0.0).change == 0.0
    assert _claim(terms="elue", base=None, speedup=None).change == 90.0
    assert measure([], _claim(measured_on=""))["status"] == "no task"


def test_a_speedup_the_method_never_reaches_or_a_method_not_run_is_said_so():
    runs = _runs("static", "pabee", task="elue-mrpc")
    top = max(p.speedup for r in runs if r.config.method == "pabee" for p in r.points)
    far = measure(runs, _claim(speedup=top + 1))
    assert far["status"] == "out of range" and far["top"] == pytest.approx(top)
    assert "cannot be tested here" in verdict(_claim(speedup=top + 1), far, 1.0)
    assert measure(runs, _claim(method="berxit"))["status"] == "pending"
    assert verdict(_claim(), {"status": "pending"}, 1.0) == "not measured yet"


def test_a_cell_says_how_many_seeds_reach_the_speedup_when_some_do_not():
    runs = _runs("static", "pabee", task="elue-mrpc")
    tops = sorted(max(p.speedup for p in r.points) for r in runs if r.config.method == "pabee")
    assert len(tops) == 3 and tops[1] < tops[2]
    speedup = (tops[1] + tops[2]) / 2  # one seed reaches it
    between = measure(runs, _claim(speedup=speedup))
    assert between["seeds"] == 1 and between["of_seeds"] == 3
    assert between["cell"].endswith(f"(1 of 3 seeds reach {speedup:.2f}×)")
    every = measure(runs, _claim(speedup=tops[0]))
    assert every["seeds"] == every["of_seeds"] == 3 and "seeds reach" not in every["cell"]


def test_a_run_set_named_to_hold_some_methods_and_tasks_shows_a_dash_for_the_rest():
    grid = Runs(folder="benchmarks/results/elue-minilm", methods=("static", "pabee"),
                tasks=("elue-mrpc",))
    assert covers(grid, _claim()) and covers(Runs(folder="x"), _claim(method="berxit"))
    assert not covers(grid, _claim(method="berxit"))  # a method the grid does not run
    assert not covers(grid, _claim(against="deebert"))  # nor the one it is set against
    assert not covers(grid, _claim(measured_on="rte"))  # no task of the claim's
    block = Block(name="c", kind="claims", marker="c", runs={"m": grid},
                  options={"file": "leaderboard/published.toml", "models": {"MiniLM-L6": "m"}},
                  text={"body": "{table}", "none": "none"})
    rows = [line for line in build(block, Context(root=ROOT, write=False)).splitlines()
            if line.startswith("|")][2:]  # under the header and its rule
    claims = load_published(PUBLISHED).claim
    for row, claim in zip(rows, claims, strict=True):
        cell = row.split("|")[4].strip()
        if not covers(grid, claim):
            assert cell == "–", row
        elif claim.measured_on:
            assert cell not in ("–", "not run yet"), row  # PABEE on ELUE MRPC is in


def test_the_verdict_says_within_noise_for_the_tolerance_or_two_seed_deviations():
    claim = _claim(base=90.0, exit=90.0)  # no change claimed
    near = {"status": "measured", "change": -0.9, "std": 0.1}
    assert verdict(claim, {**near, "change": 0.0}, 1.0) == "agrees"
    assert verdict(claim, near, 1.0) == "within noise"
    assert verdict(claim, {**near, "change": -1.1}, 1.0) == "disagrees"
    assert verdict(claim, {**near, "change": -1.1, "std": 0.6}, 1.0) == "within noise"  # 2 std
    assert verdict(claim, {**near, "std": None}, 1.0) == "within noise"  # one seed


def test_full_models_are_the_static_k_l_points_with_their_majority_baseline():
    runs = _runs("static", task="rte")
    got = full_scores(runs)["rte"]
    mains = [max(r.points, key=lambda p: p.mean_flops).main for r in runs]
    assert got["seeds"] == 3 and got["mean"] == pytest.approx(np.mean(mains))
    labels = runs[0].labels()
    assert got["majority"] == pytest.approx(100 * np.bincount(labels).max() / len(labels))


def test_a_recipe_search_keeps_each_tasks_best_recipe_and_a_grid_refuses_two():
    search = [load_run(p.parent) for p in sorted(
        (ROOT / "benchmarks" / "results" / "recipes-minilm").rglob("summary.json"))
        if "/rte/" in str(p)]
    assert len(search) > 1
    best = full_scores(search, pick="best")["rte"]
    assert best["mean"] == pytest.approx(max(max(r.points, key=lambda p: p.mean_flops).main
                                             for r in search))
    with pytest.raises(DataError, match="more than one recipe"):
        full_scores(search)


def test_the_claims_kind_tabulates_every_claim_with_its_source():
    block = Block(name="c", kind="claims", marker="c",
                  runs={"m": Runs(folder="benchmarks/results/elue-minilm")},
                  options={"file": "leaderboard/published.toml", "models": {"MiniLM-L6": "m"}},
                  text={"body": "{table}\n\n{notes}", "none": "none"})
    text = build(block, Context(root=ROOT, write=False))
    claims = load_published(PUBLISHED).claim
    for n, c in enumerate(claims, 1):
        assert f"[{n}] {c.paper}: {c.source}" in text
    assert text.count("\n| ") == len(claims) + 1  # the header and a row per claim


def test_a_published_curve_is_set_beside_the_static_curve_and_each_methods_best_point(tmp_path):
    from eebench.score import build_reference, curve_at

    figure = tmp_path / "fig" / "curve.png"
    block = Block(name="e", kind="published-curve", marker="e",
                  runs={"main": Runs(folder="benchmarks/results/elue-mpnet")},
                  options={"file": "leaderboard/published.toml", "model": "ElasticBERT-base",
                           "task": "elue-sst2", "methods": ["static", "deebert"],
                           "figure": str(figure)},
                  text={"body": "{table}", "none": "none"})
    text = build(block, Context(root=ROOT))
    assert figure.is_file() and (figure.parent / "index.md").is_file()
    curve = next(c for c in load_published(PUBLISHED).curve if c.task == "elue-sst2")
    static = [load_run(p.parent) for p in sorted((ROOT / "benchmarks" / "results" / "elue-mpnet"
                                                  / "mpnet-base" / "static" / "elue-sst2")
                                                 .glob("*/summary.json"))]
    ref = build_reference(static, name="s").curve("elue-sst2")
    deebert = [p for p in load_run(next((ROOT / "benchmarks" / "results" / "elue-mpnet"
                                         / "mpnet-base" / "deebert" / "elue-sst2")
                                        .glob("*/summary.json")).parent).points]
    rows = [line.split("|")[1:-1] for line in text.splitlines() if line.startswith("|")][2:]
    assert len(rows) == len(curve.gflops)
    for cells, g, v in zip(rows, curve.gflops, curve.values, strict=True):
        cells = [c.strip() for c in cells]
        assert cells[1] == f"{v:.1f}"
        assert cells[2] == f"{float(curve_at(ref.flops, ref.main, g * 1e9)):.1f}"
        fit = [p.main for p in deebert if p.mean_flops <= g * 1e9]
        assert cells[3] == (f"{max(fit):.1f}" if fit else "–")


def test_run_cost_counts_the_training_each_run_records_and_says_when_it_cannot():
    import json

    ner = Runs(folder="benchmarks/results/ner-minilm", tasks=("wnut17",), seeds=(1,))
    block = Block(name="c", kind="run-cost", marker="c", runs={"main": ner},
                  text={"body": "{total} {counted}\n\n{table}", "none": "none"})
    text = build(block, Context(root=ROOT, write=False))
    summaries = [json.loads(p.read_text()) for p in sorted(
        (ROOT / "benchmarks/results/ner-minilm/minilm-l6").glob("*/wnut17/*/summary.json"))
        if json.loads((p.parent / "config.json").read_text())["seed"] == 1]
    assert summaries and all(s.get("train_seconds") for s in summaries)
    hours = sum(s["train_seconds"] for s in summaries) / 3600
    assert f"{hours:.1f} training" in text
    old = Block(name="o", kind="run-cost", marker="o", options={"recipe": True},
                runs={"main": Runs(folder="benchmarks/results/recipes-minilm", tasks=("rte",))},
                text={"body": "{total} {counted}\n\n{table}", "none": "none"})
    text = build(old, Context(root=ROOT, write=False))
    assert "wall time" in text and "training (min)" not in text and "lr 0.0001 for 5 epochs" in text


def test_run_cost_counts_a_model_that_runs_share_once():
    """The 12-layer benchmark's cascade sweeps static's models: its recorded training is theirs,
    so the total counts it once (the committed ELUE MRPC runs of seed 1)."""
    import json

    runs = Runs(folder="benchmarks/results/mpnet-recipes", tasks=("elue-mrpc",), seeds=(1,),
                methods=("static", "cascade"))
    block = Block(name="c", kind="run-cost", marker="c", runs={"main": runs},
                  text={"body": "{total} | {counted} | {wall}\n\n{table}", "none": "none"})
    text = build(block, Context(root=ROOT, write=False))
    summaries = {p.parent.parent.parent.name: json.loads(p.read_text()) for p in (
        ROOT / "benchmarks/results/mpnet-recipes/mpnet-base").glob("*/elue-mrpc/*/summary.json")
        if json.loads((p.parent / "config.json").read_text())["seed"] == 1}
    static, cascade = summaries["static"], summaries["cascade"]
    ckpts = {c.split("/")[-1] for v in cascade["variants"] for c in v["checkpoint"].split(";")}
    assert ckpts <= {v["checkpoint"].split("/")[-1] for v in static["variants"]}
    wall = (static["wall_seconds"] + cascade["wall_seconds"]) / 3600
    assert (f"{static['train_seconds'] / 3600:.1f} | training, a model counted once where runs "
            f"share it | {wall:.1f}") in text
    [row] = [line for line in text.splitlines() if "| cascade " in line]
    assert [c.strip() for c in row.split("|")][3] == str(len(ckpts))  # its models


def test_the_full_models_kind_without_runs_says_so(tmp_path):
    block = Block(name="f", kind="full-models", marker="f",
                  runs={"a": Runs(folder=str(tmp_path / "none"))},
                  options={"file": str(PUBLISHED), "models": {"A": "a"}, "tasks": ["rte"],
                           "published": ["BERT-base"]},
                  text={"body": "{table} | {least} | {recipes} | {sources}",
                        "none": "No full model yet."})
    assert "No full model yet. | – | – |" in build(block, Context(root=ROOT, write=False))


def test_a_claim_is_measured_on_the_first_of_its_tasks_a_run_set_has():
    runs = _runs("static", "pabee", task="elue-mrpc")
    either = measure(runs, _claim(measured_on=["rte", "elue-mrpc"]))
    alone = measure(runs, _claim(measured_on="elue-mrpc"))
    assert either["task"] == "elue-mrpc" and either["change"] == alone["change"]
    assert either["cell"] == alone["cell"] + " (MRPC (ELUE))"
    assert measure(runs, _claim(measured_on=["rte"]))["status"] == "pending"


def test_a_claim_across_tasks_is_the_mean_over_the_tasks_per_seed():
    tasks = ["elue-mrpc", "elue-scitail", "rte"]
    runs = [r for t in tasks for r in _runs("static", "pabee", "pcee", task=t)]
    one = {t: measure(runs, _claim(measured_on=t)) for t in tasks}
    got = measure(runs, _claim(measured_on=[*tasks, "cola"], across=True))
    assert got["tasks"] == tasks  # CoLA: no runs of the set
    assert got["seeds"] == 3 and got["cell"].endswith(" (3 tasks)")
    assert got["change"] == pytest.approx(np.mean([one[t]["change"] for t in tasks]))
    # against another method: only tasks with runs of both (PCEE ran on SciTail alone here)
    pcee = [r for r in runs if r.config.method != "pcee" or r.config.task == "elue-scitail"]
    vs = measure(pcee, _claim(method="pcee", against="pabee", terms="elue", speedup=None,
                              base=None, exit=0.0, measured_on=tasks, across=True))
    alone = measure(pcee, _claim(method="pcee", against="pabee", terms="elue", speedup=None,
                                 base=None, exit=0.0, measured_on="elue-scitail"))
    assert vs["tasks"] == ["elue-scitail"] and vs["change"] == pytest.approx(alone["change"])


@pytest.mark.parametrize("terms", ["layers", "elue"])
def test_a_claim_against_another_method_is_the_difference_seed_by_seed(terms):
    runs = _runs("static", "pabee", "deebert", task="elue-mrpc")
    kw = {"speedup": None} if terms == "elue" else {}
    pabee = measure(runs, _claim(terms=terms, **kw))
    deebert = measure(runs, _claim(method="deebert", terms=terms, **kw))
    got = measure(runs, _claim(terms=terms, base=None, against="deebert", exit=0.0, **kw))
    assert got["seeds"] == 3 and got["change"] == pytest.approx(pabee["change"]
                                                                - deebert["change"])
    said = _claim(terms=terms, against="deebert", exit=0.0, **kw).said()
    assert said.endswith("above deebert's")  # "better": no margin claimed, none printed
    assert _claim(terms=terms, against="deebert", exit=1.5, **kw).said().endswith(
        "above deebert's by +1.5")


def test_a_time_claim_leaves_out_the_points_and_runs_that_were_not_timed():
    """`[timing] points` or timing off: a point without timings has no speed-up in time terms,
    and a seed whose run timed nothing is not among the seeds measured (not one that 'does not
    reach' the speed-up)."""
    runs = _runs("static", "pabee", task="elue-mrpc")
    claim = _claim(terms="time", speedup=1.2)
    every = measure(runs, claim)
    seed3 = next(r for r in runs if r.config.method == "pabee" and r.config.seed == 3)
    seed3.points = [p.model_copy(update={"timings": []}) for p in seed3.points]
    two = measure(runs, claim)
    assert (two["seeds"], two["of_seeds"]) == (2, 2) and "seeds reach" not in two["cell"]
    assert every["seeds"] == 3
    seed2 = next(r for r in runs if r.config.method == "pabee" and r.config.seed == 2)
    timed = [p for p in seed2.points if p.timings]
    seed2.points = [p if i % 2 else p.model_copy(update={"timings": []})
                    for i, p in enumerate(seed2.points)]
    fewer = measure(runs, claim)
    assert fewer["status"] == "measured" and len(timed) > sum(bool(p.timings)
                                                             for p in seed2.points)
