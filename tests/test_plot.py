"""`eebench plot` on real (tiny) runs: the files and their names, and what each figure shows.

Figure contents are read back from the matplotlib artists (tagged with gids), and compared with
numbers computed here independently: from points.jsonl, from the stored exit logits and labels,
and from the scoring package's Pareto mask.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
from safetensors.numpy import load_file
from typer.testing import CliRunner

import eebench.cli.plot  # adds the command to the app
from eebench import score as sc
from eebench.cli import app
from eebench.errors import UsageError
from eebench.plot import (
    FORMATS,
    GID_FRONT,
    GID_METHOD,
    GID_REFERENCE,
    exit_curve,
    plan_figures,
    write_figures,
)
from eebench.tasks.catalog import get_task
from eebench.tasks.metrics import compute_metrics
from tests import tiny

runner = CliRunner()
METHODS = ("deebert", "pabee", "static")


@pytest.fixture(scope="session")
def bench(tmp_path_factory, data_dir) -> SimpleNamespace:
    """Real runs on RTE with a 3-layer tiny backbone: static k = 1, 2, 3, deebert, and pabee with
    two seeds (for error bars); plus a reference built from the static run."""
    root = tmp_path_factory.mktemp("plot-bench")
    backbone = tiny.save_tiny_backbone(root / "tiny-bert", num_layers=3)
    runs = root / "runs"
    for method, extra in (("static", ["--sweep", "1,2,3"]), ("deebert", ["--sweep", "0,0.3,0.6"]),
                          ("pabee", ["--seed", "1", "--seed", "2"])):
        result = runner.invoke(app, [
            "run", "--method", method, "--task", "rte", "--model", str(backbone),
            "--data-dir", str(data_dir), "--max-train-samples", "32", "--epochs", "1",
            "--max-seq-length", "48", "--max-eval-samples", "20", "--time-samples", "6",
            "--no-timing", "--out", str(runs), "--checkpoints", str(root / "ckpt"), *extra])
        assert result.exit_code == 0, result.output + str(result.exception)
    reference = root / "ref.json"
    result = runner.invoke(app, ["reference", "build", str(runs / "tiny-bert" / "static"),
                                 "--out", str(reference)])
    assert result.exit_code == 0, result.output
    return SimpleNamespace(root=root, runs=runs, reference=reference)


def _planned(bench, reference: bool = True, log_flops: bool = False) -> dict:
    ref = sc.load_reference(bench.reference) if reference else None
    return {f.name: f for f in plan_figures(sc.load_runs([bench.runs]), ref, log_flops)}


def _lines(ax) -> dict:
    return {line.get_gid(): line for line in ax.get_lines() if line.get_gid()}


def _points(bench):
    return sc.aggregate_seeds(sc.raw_points(sc.load_runs([bench.runs])))


EXPECTED = {"rte-pareto", "rte-speedup", "rte-calibration", "rte-consistency",
            *(f"rte-{m}-exits" for m in METHODS),
            "rte-static-s42-exit-histogram", "rte-deebert-s42-exit-histogram",
            "rte-pabee-s1-exit-histogram", "rte-pabee-s2-exit-histogram"}


def test_plot_writes_every_figure_under_a_stable_name_and_an_index(bench):
    out = bench.root / "figures"
    args = ["plot", str(bench.runs), "--out", str(out), "--reference", str(bench.reference),
            "--json"]
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output + str(result.exception)
    written = {p.name for p in out.iterdir()}
    assert written == {f"{name}.png" for name in EXPECTED} | {"index.md"}
    for name in EXPECTED:
        assert (out / f"{name}.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    listed = re.findall(r"^- \[([^\]]+)\]\(([^)]+)\): (.+)$", (out / "index.md").read_text(),
                        re.M)
    assert sorted(link for _, link, _ in listed) == sorted(f"{n}.png" for n in EXPECTED)
    assert all(text == link and caption.strip() for text, link, caption in listed)
    data = json.loads(result.stdout)  # stdout holds the JSON alone
    assert {Path(f["file"]).name for f in data["figures"]} == {f"{n}.png" for n in EXPECTED}
    # the same names in another format
    pareto = _planned(bench)["rte-pareto"]
    assert write_figures([pareto], out / "svg", "svg") == [out / "svg" / "rte-pareto.svg"]
    assert (out / "svg" / "rte-pareto.svg").read_text().lstrip().startswith("<?xml")
    assert "[rte-pareto.svg](rte-pareto.svg)" in (out / "svg" / "index.md").read_text()


def test_pareto_figure_shows_each_method_the_front_and_the_reference(bench):
    points = [p for p in _points(bench) if p.task == "rte"]
    fig = _planned(bench)["rte-pareto"].build()
    ax = fig.axes[0]
    lines = _lines(ax)
    assert sorted(g for g in lines if g.startswith(GID_METHOD)) == [GID_METHOD + m
                                                                    for m in METHODS]
    for m in METHODS:  # one line per method through its seed-averaged points, by FLOPs
        mine = sorted((p for p in points if p.label == m), key=lambda p: (p.flops, p.main))
        np.testing.assert_allclose(lines[GID_METHOD + m].get_xydata(),
                                   [[p.mflops, p.main] for p in mine])
    x = np.array([p.mflops for p in points])
    y = np.array([p.main for p in points])
    mask = sc.pareto_mask(x, y)
    front = lines[GID_FRONT]
    assert front.get_drawstyle() == "steps-post"
    np.testing.assert_allclose(front.get_xydata(),
                               np.unique(np.stack([x[mask], y[mask]], axis=1), axis=0))
    curve = sc.load_reference(bench.reference).curve("rte")
    np.testing.assert_allclose(lines[GID_REFERENCE].get_xydata(),
                               [[p.mflops, p.main] for p in curve.points])
    assert "MFLOPs per sample" in ax.get_xlabel()
    assert ax.get_ylabel() == "accuracy (%)"
    assert "RTE" in ax.get_title()
    legend = [t.get_text() for t in ax.get_legend().get_texts()]
    assert any(t.startswith("pabee (ELUE ") for t in legend)
    # pabee has two seeds: its error bars are ±1 std of the metric over them
    pabee = sorted((p for p in points if p.label == "pabee"), key=lambda p: (p.flops, p.main))
    assert all(len(p.seeds) == 2 for p in pabee)
    bars = [c for c in ax.containers if c.has_yerr]
    assert len(bars) == 1
    heights = [seg[1][1] - seg[0][1] for seg in bars[0].lines[2][-1].get_segments()]
    np.testing.assert_allclose(heights, [2 * p.main_std for p in pabee])


def test_pareto_figure_without_reference_and_with_log_flops(bench):
    ax = _planned(bench, reference=False, log_flops=True)["rte-pareto"].build().axes[0]
    assert GID_REFERENCE not in _lines(ax)
    assert ax.get_xscale() == "log" and "log scale" in ax.get_xlabel()
    assert not any("ELUE" in t.get_text() for t in ax.get_legend().get_texts())


def test_quality_figures_show_each_methods_stored_values(bench):
    from eebench.score import aggregate_seeds, load_runs, raw_points
    from eebench.score.quality import fill_quality

    runs = load_runs([bench.runs])
    fill_quality(runs)
    points = aggregate_seeds(raw_points(runs))
    planned = _planned(bench)
    for name, quantity in (("rte-calibration", "ece"), ("rte-consistency", "consistency")):
        assert planned[name].kind == name.split("-")[1]
        lines = _lines(planned[name].build().axes[0])
        assert sorted(lines) == [GID_METHOD + m for m in METHODS]
        for m in METHODS:
            want = sorted((p.mflops, p.quality[quantity][0]) for p in points if p.label == m)
            line = lines[GID_METHOD + m]
            got = sorted(zip(np.asarray(line.get_xdata(), dtype=float),
                             np.asarray(line.get_ydata(), dtype=float), strict=True))
            assert np.allclose(got, want)
    # the never-exit point agrees with full depth on every sample
    static_full = [p for p in points if p.label == "static" and p.sweep_value == 3]
    assert static_full[0].quality["consistency"][0] == 100.0


def test_exit_histogram_is_the_share_of_samples_per_layer(bench):
    run = next(r for r in sc.load_runs([bench.runs]) if r.config.method == "deebert")
    ax = _planned(bench)["rte-deebert-s42-exit-histogram"].build().axes[0]
    image = ax.get_images()[0].get_array()
    expected = [[100 * c / p.n_samples for c in p.exit_histogram] for p in run.points]
    np.testing.assert_allclose(image, expected)
    assert image.shape == (3, 3)  # three thresholds x three layers
    assert [t.get_text() for t in ax.get_xticklabels()] == ["1", "2", "3"]
    assert ax.get_xlabel() == "exit layer"


def _accuracy_per_exit(run_dir: Path) -> list[float]:
    arrays = load_file(str(run_dir / "predictions.safetensors"))
    logits = arrays["exit_logits"]
    return [float((logits[j].argmax(-1) == arrays["labels"]).mean() * 100)
            for j in range(logits.shape[0])]


def test_exits_figure_shows_each_exit_on_all_samples(bench):
    planned = _planned(bench)
    runs = sc.load_runs([bench.runs])
    # pabee, two seeds: the mean over seeds of each exit's accuracy, from the logits
    pabee = [r for r in runs if r.config.method == "pabee"]
    expected = np.mean([_accuracy_per_exit(r.path) for r in pabee], axis=0)
    ax = planned["rte-pabee-exits"].build().axes[0]
    line = _lines(ax)[GID_METHOD + "pabee"]
    np.testing.assert_allclose(line.get_xdata(), [1, 2, 3])
    np.testing.assert_allclose(line.get_ydata(), expected)
    assert ax.get_xlabel() == "exit layer" and ax.get_ylabel() == "accuracy (%)"
    labels = pabee[0].labels()
    majority = max(np.mean(labels == 0), np.mean(labels == 1)) * 100
    assert any(np.allclose(ln.get_ydata(), majority) for ln in ax.get_lines()
               if not ln.get_gid())
    # static: exit k is the k-layer model, whose point in points.jsonl has the same accuracy
    static = next(r for r in runs if r.config.method == "static")
    line = _lines(planned["rte-static-exits"].build().axes[0])[GID_METHOD + "static"]
    np.testing.assert_allclose(line.get_xdata(), [1, 2, 3])
    np.testing.assert_allclose(line.get_ydata(), [p.main for p in static.points])


def test_speedup_figure_measures_the_drop_from_the_full_model(bench):
    runs = sc.load_runs([bench.runs])
    ax = _planned(bench)["rte-speedup"].build().axes[0]
    lines = _lines(ax)
    assert sorted(lines) == [GID_METHOD + m for m in METHODS]
    static = next(r for r in runs if r.config.method == "static")
    full = static.points[-1].main  # k = 3 = every layer
    expected = sorted((3 / p.sweep_value, full - p.main) for p in static.points)
    np.testing.assert_allclose(lines[GID_METHOD + "static"].get_xydata(), expected)
    deebert = next(r for r in runs if r.config.method == "deebert")
    full = _accuracy_per_exit(deebert.path)[-1]
    expected = sorted((p.speedup, full - p.main) for p in deebert.points)
    np.testing.assert_allclose(lines[GID_METHOD + "deebert"].get_xydata(), expected)
    assert "speed-up" in ax.get_xlabel() and "(points)" in ax.get_ylabel()


def test_exit_curve_of_a_regression_task_uses_its_main_metric(bench):
    from scipy.stats import pearsonr, spearmanr

    run = next(r for r in sc.load_runs([bench.runs]) if r.config.method == "pabee")
    rng = np.random.default_rng(0)
    labels = rng.uniform(0, 5, size=20).astype(np.float32)
    logits = rng.normal(size=(2, 20, 1)).astype(np.float32)  # two exits, after layers 1 and 3
    variant = run.variants[0].model_copy(update={"exit_layers": [1, 3]})
    fake = replace(run, arrays={"exit_logits": logits, "labels": labels}, variants=[variant])
    curve = exit_curve(fake, get_task("stsb"))
    assert curve.layers.tolist() == [1, 3]
    for j in range(2):
        p, y = logits[j, :, 0], labels
        want = (pearsonr(p, y)[0] + spearmanr(p, y)[0]) / 2 * 100
        assert curve.values("pearson_and_spearman")[j] == pytest.approx(want, abs=1e-4)
        spec = get_task("stsb")
        assert curve.metrics[j] == compute_metrics(spec, logits[j], labels)


def _fails(args: list[str], code: int):
    result = runner.invoke(app, args)
    assert result.exit_code == code, (args, result.output)
    assert len(result.stderr.strip().splitlines()) == 1, result.stderr
    assert result.stdout == ""
    return result


def test_bad_input_is_one_line_and_an_exit_code(bench, tmp_path):
    out = str(tmp_path / "figs")
    empty = tmp_path / "empty"
    empty.mkdir()
    _fails(["plot", str(empty), "--out", out], 1)
    _fails(["plot", str(tmp_path / "missing"), "--out", out], 1)
    bad_ref = tmp_path / "ref.json"
    bad_ref.write_text("{not json")
    _fails(["plot", str(bench.runs), "--out", out, "--reference", str(bad_ref)], 1)
    _fails(["plot", str(bench.runs), "--out", out, "--format", "bmp"], 2)
    a_file = tmp_path / "a-file"
    a_file.write_text("")
    _fails(["plot", str(bench.runs), "--out", str(a_file)], 1)
    with pytest.raises(UsageError):
        write_figures([], tmp_path / "x", "bmp")
    assert eebench.cli.plot.FORMATS == FORMATS  # the CLI's copy of the list stays in step
    assert not (tmp_path / "figs").exists()


def test_importing_the_plot_command_imports_no_heavy_library():
    code = ("import sys, eebench.cli.plot; "
            "print([m for m in ('matplotlib', 'torch') if m in sys.modules])")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_styles_stay_distinct_past_the_palette():
    """A leaderboard may show more submissions than there are colours: the pairs never repeat."""
    from eebench.plot import method_styles

    styles = method_styles(f"submission {i:02d}" for i in range(80))
    assert len({(s.color, s.marker) for s in styles.values()}) == 80
    # the benchmark's ten methods: ten colours
    ten = method_styles(["static", "deebert", "pabee", "maxprob", "fastbert", "pcee",
                         "elasticbert", "sweet", "berxit", "cascade"])
    assert len({s.color for s in ten.values()}) == 10
