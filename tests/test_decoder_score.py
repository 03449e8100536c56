"""Decoder runs through the results table, `eebench score`, `plot`, `submit` and `validate`.

A real tiny decoder run (run_decoder on the damped tiny Llama, seconds) and the committed
SmolLM2-135M run (read only) are scored, drawn, submitted and validated; a submission with one
number changed is refused in one line.
"""

from __future__ import annotations

import copy
import json
import shutil
from pathlib import Path

import numpy as np
import pytest
import torch

import eebench.cli.plot  # noqa: F401  (registers the commands)
import eebench.cli.score  # noqa: F401
import eebench.cli.submit  # noqa: F401
from eebench.errors import DataError
from eebench.io import sha256_file, write_json
from eebench.models.decoder_exits import ExitSettings
from eebench.models.decoders import quiet, tiny_tokenizer
from eebench.run.decoding import DecodeConfig, DecodeOptions, read_decoder_run, run_decoder
from eebench.score.decoder import OWN_REFERENCE, score_decoder
from eebench.score.decoder_table import decoder_frame, decoder_label, load_decoder_runs
from eebench.score.elue import curve_at
from eebench.tasks.lm import LMSettings
from eebench.testing.tiny_decoder import tiny_llama
from tests.cli import invoke

REPO = Path(__file__).resolve().parents[1]
SMOLLM2 = (REPO / "benchmarks" / "results" / "decoder-smollm2" / "smollm2-135m" / "decode" /
           "humaneval-gen" / "40ec2009ef4d")
# SmolLM2-135M's config (the committed run's model)
SMOLLM2_IMDB = SMOLLM2.parents[1] / "imdb-lm" / "80cb2ffd8cea"
SMOLLM2_SHAPE = {"layers": 30, "hidden": 576, "heads": 9, "kv_heads": 3, "head_dim": 64,
                 "intermediate": 1536, "vocab": 49152}


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory):
    """A real decoder run of the damped tiny Llama on humaneval-gen (2 prompts, 6 tokens)."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    root = tmp_path_factory.mktemp("decoder")
    model = root / "model"
    with quiet():
        tiny_llama(vocab_size=259).save_pretrained(str(model))
        tiny_tokenizer().save_pretrained(str(model))
    cfg = DecodeConfig(model=str(model), task="humaneval-gen",
                       data=LMSettings(samples=2, new_tokens=6, max_tokens=40),
                       exits=ExitSettings(layers=(1, 2, 3)), draft_lengths=(1, 2),
                       thresholds=(0.05, 0.5, 0.9))
    run = run_decoder(cfg, DecodeOptions(out=root / "runs", data_dir=root))
    torch.set_num_threads(before)
    return run


def _with_sample_main(run, dest: Path) -> Path:
    """A copy of `run` whose points record a per-sample main metric (their means are main)."""
    shutil.copytree(run.path, dest)
    lines = []
    for i, p in enumerate(run.points):
        spread = min(p.main, 100 - p.main, 5.0 + i % 3)
        lines.append(p.model_copy(update={"sample_main": [p.main - spread, p.main + spread]})
                     .model_dump_json() + "\n")
    (dest / "points.jsonl").write_text("".join(lines))
    summary = json.loads((dest / "summary.json").read_text())
    summary["files"]["points.jsonl"] = sha256_file(dest / "points.jsonl")
    write_json(dest / "summary.json", summary)
    return dest


def _one_line(result, code: int) -> str:
    assert result.exit_code == code, result.output
    assert len(result.stderr.strip().splitlines()) == 1, result.stderr
    return result.stderr


# ---------------------------------------------------------------------------- results table
def test_decoder_points_are_rows_of_the_results_table(tiny_run):
    from eebench.api import results

    frame = decoder_frame(load_decoder_runs([tiny_run.path]))
    assert len(frame) == len(tiny_run.points)
    assert frame.equals(results(tiny_run.path))
    for (_, row), p in zip(frame.iterrows(), tiny_run.points, strict=True):
        assert row["mean_flops"] == p.flops_per_token and row["mflops"] == p.mflops_per_token
        assert row["main"] == p.main and row["seed"] == tiny_run.config.data.seed
        assert row["run"] == str(tiny_run.path) and row["flops_convention"] == "mac2-matmul"
        assert row["label"] == p.method  # lens exits, one model: the method's name
    spec = frame[frame["method"] == "self-spec"]
    assert set(spec["sweep_param"]) == {"k+d"}
    assert sorted(spec["sweep_value"]) == [1.01, 1.02, 2.01, 2.02, 3.01, 3.02]
    assert list(frame[frame["method"] == "calm"]["sweep_value"]) == [0.05, 0.5, 0.9]
    assert frame["params_total"].isna().all() and list(frame["row"]) == list(range(len(frame)))


def test_the_label_shows_trained_exits_and_settings_off_their_default():
    run = read_decoder_run(SMOLLM2)
    calm = next(p for p in run.points if p.method == "calm")
    assert decoder_label(run, calm) == "calm"
    adapter = copy.copy(run)
    adapter.summary = run.summary.model_copy(update={"head": "adapter"})
    assert decoder_label(adapter, calm) == "calm (adapter exits)"
    full = run.points[0]
    assert decoder_label(adapter, full) == "full"
    margin = calm.model_copy(update={"setting": {"threshold": 0.5, "measure": "margin"}})
    assert decoder_label(run, margin, several_models=True) == "smollm2-135m/calm (margin)"


# ------------------------------------------------------------------------------------ score
def test_the_committed_smollm2_run_is_scored_against_its_own_static_truncation():
    scored = score_decoder(load_decoder_runs([SMOLLM2]))
    t = scored.report.tasks["humaneval-gen"]
    run = read_decoder_run(SMOLLM2)
    curve = sorted((p.flops_per_token, p.main) for p in run.points
                   if p.method in ("static", "full"))
    calm = [p for p in run.points if p.method == "calm"]
    by_hand = np.mean([p.main - curve_at([f for f, _ in curve], [m for _, m in curve],
                                         p.flops_per_token) for p in calm])
    assert t.methods["calm"].elue == pytest.approx(by_hand, abs=1e-12)
    assert t.methods["static"].elue == 0 and t.methods["full"].elue == 0
    # lossless self-speculation costs more than the full model: the curve is held there
    assert t.methods["self-spec"].elue == 0
    assert t.hv_ref.flops == run.points[0].flops_per_token and t.hv_ref.metric == 0
    assert scored.report.reference.name == OWN_REFERENCE
    on = {(p.label, p.sweep_value) for p, f in zip(t.points, t.on_front, strict=True) if f}
    assert ("full", 30.0) in on and ("static", 6.0) in on and ("calm", 0.5) in on


def test_eebench_score_prints_fronts_scores_csv_and_json(tiny_run, tmp_path):
    csv_path = tmp_path / "points.csv"
    result = invoke("score", tiny_run.path.parents[3], "--csv", csv_path, "--json")
    assert result.exit_code == 0, result.output
    for text in ("Pareto front: humaneval-gen", "own static truncation", "MFLOPs/token",
                 "fixed FLOPs budgets"):
        assert text in result.stderr
    data = json.loads(result.stdout)
    assert data["units"]["flops"] == "MFLOPs per token"
    assert data["reference"]["name"] == OWN_REFERENCE
    assert set(data["overall"]) == {"full", "static", "self-spec", "self-spec-adaptive", "calm"}
    assert data["elue_by_seed"]["calm"]["humaneval-gen"]["0"] == pytest.approx(
        data["overall"]["calm"])
    rows = csv_path.read_text().splitlines()
    assert len(rows) == 1 + len(tiny_run.points)


def test_compare_bootstraps_over_samples_and_refuses_points_without_them(tiny_run, tmp_path):
    older = tmp_path / "older"  # a run written before points recorded their samples' values
    shutil.copytree(tiny_run.path, older)
    lines = [p.model_copy(update={"sample_main": None}).model_dump_json() + "\n"
             for p in tiny_run.points]
    (older / "points.jsonl").write_text("".join(lines))
    summary = json.loads((older / "summary.json").read_text())
    summary["files"]["points.jsonl"] = sha256_file(older / "points.jsonl")
    write_json(older / "summary.json", summary)
    text = _one_line(invoke("score", older, "--compare", "calm", "static"), 1)
    assert "sample_main" in text
    copy_dir = _with_sample_main(tiny_run, tmp_path / "run")
    result = invoke("score", copy_dir, "--compare", "calm", "static", "--json",
                    "--bootstrap", 200)
    assert result.exit_code == 0, result.output
    compare = json.loads(result.stdout)["compare"]
    assert compare[0]["statistic"] == "token_agreement" and compare[0]["n_samples"] == 2
    assert compare[-1]["matched"] == "all pairs pooled"
    assert "paired bootstrap" in result.stderr


def test_decoder_runs_are_refused_with_encoder_runs_or_a_reference(tiny_run, tmp_path):
    from tests.test_score_cli import write_run

    encoder = write_run(tmp_path, "static", [(1, 10.0, 50.0), (2, 20.0, 60.0)])
    for command in ("score", "plot"):
        extra = ["-o", tmp_path / "fig"] if command == "plot" else []
        text = _one_line(invoke(command, encoder, tiny_run.path, *extra), 2)
        assert "not one axis" in text
        text = _one_line(invoke(command, tiny_run.path, "-r", tmp_path / "ref.json", *extra), 2)
        assert "own static truncation" in text


# ------------------------------------------------------------------------------------- plot
def test_plot_draws_each_method_the_reference_and_the_full_model(tiny_run, tmp_path):
    from eebench.plot.decoder import GID_FULL, plan_decoder_figures
    from eebench.plot.style import GID_METHOD, GID_REFERENCE

    result = invoke("plot", tiny_run.path, "-o", tmp_path / "fig", "--format", "svg")
    assert result.exit_code == 0, result.output
    assert (tmp_path / "fig" / "humaneval-gen-pareto.svg").is_file()
    assert "per token" in (tmp_path / "fig" / "index.md").read_text()
    (planned,) = plan_decoder_figures(load_decoder_runs([SMOLLM2]))
    ax = planned.build().axes[0]
    lines = {line.get_gid(): line for line in ax.get_lines() if line.get_gid()}
    assert {GID_METHOD + m for m in ("calm", "static", "self-spec")} <= set(lines)
    ref = lines[GID_REFERENCE].get_xydata()
    assert ref[-1].tolist() == pytest.approx([283.613184, 100.0])  # the full model ends it
    assert lines[GID_FULL].get_xydata()[0].tolist() == pytest.approx([283.613184, 100.0])
    assert "per token" in ax.get_xlabel()


# ---------------------------------------------------------------------- submit and validate
@pytest.fixture(scope="module")
def submission(tiny_run, tmp_path_factory):
    out = tmp_path_factory.mktemp("sub") / "decoder.json"
    result = invoke("submit", tiny_run.path, "-o", out)
    assert result.exit_code == 0, result.output
    return out


def test_a_decoder_submission_validates(submission):
    data = json.loads(submission.read_text())
    assert data["kind"] == "decoder" and data["model"]["shape"]["hidden"] == 32
    assert data["model"]["exit_layers"] == [1, 2, 3]
    result = invoke("validate", submission)
    assert result.exit_code == 0 and result.stderr.strip().endswith(": ok"), result.output


def _points(data):
    return data["tasks"]["humaneval-gen"]["runs"][0]["points"]


def _static_cheaper(data):
    p = _points(data)[1]
    p["flops_per_token"] *= 0.5
    p["mflops_per_token"] = p["flops_per_token"] / 1e6
    p["flops_speedup"] = _points(data)[0]["flops_per_token"] / p["flops_per_token"]


TAMPER = {
    "static FLOPs": (_static_cheaper, "its model's shapes and sample lengths give"),
    "MFLOPs": (lambda d: _points(d)[2].update(mflops_per_token=1.0), "flops_per_token / 1e6"),
    "speed-up": (lambda d: _points(d)[-1].update(flops_speedup=9.0), "flops_speedup"),
    "full agreement": (lambda d: _points(d)[0].update(main=50.0, metrics={
        "token_agreement": 50.0, "exact_match": 100.0}), "not 100 %"),
    "agreement no whole token": (lambda d: _points(d)[-1]["metrics"].update(
        token_agreement=33.3), "no whole number"),
    "model shape": (lambda d: d["model"]["shape"].update(intermediate=128), "FLOPs per token"),
    "sample length": (lambda d: d["tasks"]["humaneval-gen"]["runs"][0]["sample_tokens"].append(
        9), "sample token lengths"),
    "sample count": (lambda d: _points(d)[3].update(n_samples=3), "3 samples"),
    "metric range": (lambda d: _points(d)[-1]["metrics"].update(exact_match=150.0),
                     "outside [0, 100]"),
}


@pytest.mark.parametrize("name", TAMPER)
def test_validate_refuses_a_decoder_submission_that_lies(submission, tmp_path, name):
    change, reason = TAMPER[name]
    data = json.loads(submission.read_text())
    change(data)
    path = tmp_path / "tampered.json"
    path.write_text(json.dumps(data))
    text = _one_line(invoke("validate", path), 1)
    assert reason in text, text


def test_the_committed_smollm2_run_makes_a_valid_submission(monkeypatch):
    """Its recorded FLOPs per token are what SmolLM2-135M's shapes give (the config is given
    here: no model is read)."""
    import eebench.submit.decoder as decoder
    from eebench.submit.decoder_schema import DecoderShapeInfo
    from eebench.submit.validate import validate_data

    monkeypatch.setattr(decoder, "_shape", lambda name: DecoderShapeInfo(**SMOLLM2_SHAPE))
    monkeypatch.setattr("eebench.models.backbones.resolve_backbone", lambda name: name)
    sub = decoder.build_decoder_submission([SMOLLM2, SMOLLM2_IMDB])
    data = sub.model_dump(mode="json")
    assert validate_data(data).model.name == "smollm2-135m"
    assert len(_points(data)) == 26
    # the logit lens at layer 6 predicts IMDb's next tokens with a perplexity in the billions
    imdb = data["tasks"]["imdb-lm"]["runs"][0]["points"]
    assert max(p["metrics"]["perplexity"] for p in imdb) > 1e9


def test_trained_exits_are_scored_against_the_lens_runs_static_truncation(tiny_run, data_dir,
                                                                          tmp_path):
    """A run whose exits EE-Tuning trained has `ee-tuning` truncations, no `static` ones: it is
    scored against the static truncation of the untrained run of the same model, task and
    samples, and alone it is refused in one line."""
    torch.set_num_threads(1)
    cfg = tiny_run.config.model_copy(update={
        "exits": ExitSettings(layers=(1, 2, 3), head="adapter", rank=4), "tuning_steps": 2,
        "tuning_samples": 2})
    trained = run_decoder(cfg, DecodeOptions(out=tmp_path / "runs", data_dir=data_dir))
    assert "ee-tuning" in {p.method for p in trained.points}
    assert "static" not in {p.method for p in trained.points}
    scored = score_decoder([tiny_run, trained])
    curves = {label: curve for (_, label), curve in scored.curves.items()}
    tuned = next(label for label in curves if label.startswith("ee-tuning"))
    assert curves[tuned].static_label == "static"
    assert curves[tuned] == curves["static"]
    with pytest.raises(DataError, match="no static truncation to score it against"):
        score_decoder([trained])


# ----------------------------------------------------------------- the leaderboard page and schema
def test_the_leaderboard_page_shows_a_decoder_submission_in_its_own_section(submission, tiny_run,
                                                                           tmp_path):
    """Accepted, not rejected; a row per method with its score against the run's own static
    truncation, which is what `eebench score` gives the run (elue_by_seed)."""
    import html
    import re

    from eebench.score.decoder import elue_by_seed
    from eebench.submit.site import build_site
    from eebench.submit.site_decoder import decoder_rows

    subs = tmp_path / "submissions"
    subs.mkdir()
    shutil.copy(submission, subs / "decoder.json")
    site = build_site(subs, tmp_path / "site")
    assert [v.path.name for v in site.accepted] == ["decoder.json"] and not site.rejected
    rows = decoder_rows([site.accepted[0].submission])
    by_seed = elue_by_seed([tiny_run])
    methods = {p.method for p in tiny_run.points} - {"full"}
    assert {r.method for r in rows} == methods and {r.task for r in rows} == {"humaneval-gen"}
    seed = tiny_run.config.data.seed
    for r in rows:
        assert r.score == pytest.approx(by_seed[r.method]["humaneval-gen"][seed])
        assert r.points == sum(p.method == r.method for p in tiny_run.points)
        full = next(p.main for p in tiny_run.points if p.method == "full")
        lossless = [p.flops_speedup for p in tiny_run.points
                    if p.method == r.method and p.main >= full]
        assert r.lossless_speedup == (max(lossless) if lossless else None)
    page = (tmp_path / "site" / "index.html").read_text()
    table = re.search(r'<table id="decoders">.*?</table>', page, re.S).group(0)
    assert len(re.findall(r"<tr>", table)) == len(rows) + 1  # the header and a row per method
    assert all(f">{html.escape(m)}</td>" in table for m in methods)
    assert "0 submissions, 0 with an ELUE score; 1 decoder submission; 0 rejected." in page
    check = invoke("leaderboard", "check", subs)
    assert check.exit_code == 0, check.output


def test_a_run_of_trained_exits_is_scored_against_a_lens_submissions_truncation(submission):
    """As `eebench score` does: alone on the page it has no score (its cell says why); beside a
    submission of the same model's untrained exits on the same samples it is scored against that
    one's static truncation."""
    import html

    from eebench.score.elue import elue_deltas
    from eebench.submit.decoder_schema import DecoderSubmission
    from eebench.submit.site_decoder import NO_TRUNCATION, decoder_rows, decoder_table

    lens = json.loads(submission.read_text())
    tuned = copy.deepcopy(lens)
    tuned["name"] = "tuned"
    tuned["model"].update(head="adapter", rank=4)
    run = tuned["tasks"]["humaneval-gen"]["runs"][0]
    run["points"] = [p for p in run["points"] if p["method"] != "static"]
    tuned_sub, lens_sub = (DecoderSubmission.model_validate(d) for d in (tuned, lens))
    assert all(r.score is None for r in decoder_rows([tuned_sub]))
    assert html.escape(NO_TRUNCATION, quote=True) in decoder_table([tuned_sub])
    curve = sorted((p["flops_per_token"], p["main"]) for p in _points(lens)
                   if p["method"] in ("static", "full"))
    rows = [r for r in decoder_rows([tuned_sub, lens_sub]) if r.submission == "tuned"]
    for r in rows:
        mine = [p for p in run["points"] if p["method"] == r.method]
        expected = elue_deltas([f for f, _ in curve], [m for _, m in curve],
                               [p["flops_per_token"] for p in mine], [p["main"] for p in mine])
        assert r.score == pytest.approx(float(np.mean(expected)))
    other = copy.deepcopy(lens)  # another sample: no truncation to share
    other["tasks"]["humaneval-gen"]["runs"][0]["sample_ids"][0] = "HumanEval/999"
    assert all(r.score is None for r in decoder_rows([tuned_sub, DecoderSubmission.model_validate(
        other)]) if r.submission == "tuned")


def test_the_decoder_schema_is_committed_and_takes_a_decoder_submission(submission, tmp_path):
    import jsonschema

    from eebench.submit.decoder_schema import json_schema_text

    committed = REPO / "leaderboard" / "decoder-schema.json"
    assert committed.read_text(encoding="utf-8") == json_schema_text(), \
        "run: eebench leaderboard schema --kind decoder --out leaderboard/decoder-schema.json"
    schema = json.loads(committed.read_text())
    jsonschema.Draft202012Validator(schema).validate(json.loads(submission.read_text()))
    check = invoke("leaderboard", "schema", "--kind", "decoder", "--out", committed, "--check")
    assert check.exit_code == 0, check.output
    assert "is not a submission kind" in _one_line(invoke("leaderboard", "schema", "--kind",
                                                          "llm"), 2)
