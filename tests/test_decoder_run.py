"""A decoder run: every operating point of a causal LM's exits over a decoder task, in a run
directory, checked against real decoding; `eebench decode` prints it.

The fast tier uses the tiny Llama whose upper layers are damped (eebench.testing.tiny_decoder),
so its exits agree with the full model often but not always; the slow tier runs SmolLM2-135M.
"""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from eebench.cli import app
from eebench.models.decoder_exits import ExitSettings
from eebench.models.decoders import tiny_decoder_dir
from eebench.run.decoding import (
    DecodeConfig,
    DecodeOptions,
    DecoderPoint,
    read_decoder_run,
    run_decoder,
)
from eebench.tasks.lm import LMSettings

pytestmark = pytest.mark.usefixtures("one_thread")  # tests/conftest.py

runner = CliRunner()

# the tiny Llama's shapes: hidden 32, 4 heads of 8 over 2 KV heads, intermediate 64, vocab 259
WEIGHTS = 2 * (32 * 32 + 2 * 32 * 16 + 32 * 32 + 3 * 32 * 64)  # q, k, v, o, MLP per position
PER_KEY = 2 * 2 * 4 * 8  # QK^T and AV per attended position
HEAD = 2 * 32 * 259  # an exit head (logit lens) or the LM head
N_NEW = 8


def _cfg(model, task, **kw) -> DecodeConfig:
    data = LMSettings(samples=2, new_tokens=N_NEW, max_tokens=40)
    return DecodeConfig(model=str(model), task=task, data=data,
                        exits=ExitSettings(layers=(1, 2, 3)),
                        thresholds=(0.05, 0.2, 0.5, 0.9), **kw)


@pytest.fixture(scope="module")
def greedy_run(damped_dir, tmp_path_factory):
    out = tmp_path_factory.mktemp("runs")
    cfg = _cfg(damped_dir, "humaneval-gen", timing=True, timing_prompts=1, timing_repeats=1)
    # humaneval-gen reads the package's prompts whenever a data directory is in use (any)
    return run_decoder(cfg, DecodeOptions(out=out, data_dir=out)), out


def test_a_greedy_run_writes_its_directory_with_every_method(greedy_run):
    run, _ = greedy_run
    for name in ("config.json", "env.json", "points.jsonl", "summary.json"):
        assert (run.path / name).is_file()
    assert run.path.parts[-3:-1] == ("decode", "humaneval-gen")
    assert run.path.name == run.config.key()
    lines = (run.path / "points.jsonl").read_text().splitlines()
    points = [DecoderPoint.model_validate_json(line) for line in lines]
    assert [p.method for p in points] == [p.method for p in run.points]
    methods = {p.method for p in points}
    assert methods == {"full", "static", "self-spec", "self-spec-adaptive", "calm"}
    assert sorted(p.setting["k"] for p in points if p.method == "static") == [1, 2, 3]
    assert len([p for p in points if p.method == "self-spec"]) == 3 * 3  # every (k, d)
    assert len([p for p in points if p.method == "calm"]) == 4  # every threshold
    for p in points:
        assert p.main_metric == "token_agreement" and set(p.metrics) == {
            "token_agreement", "exact_match"}
        assert p.n_samples == 2 and p.n_tokens == 2 * N_NEW and p.num_layers == 4
        assert p.mflops_per_token == pytest.approx(p.flops_per_token / 1e6)
    full = next(p for p in points if p.method == "full")
    assert full.main == 100 and full.flops_speedup == 1
    for p in points:
        if p.method.startswith("self-spec"):
            assert p.main == 100  # lossless by construction
            assert p.mean_accepted is not None and p.tokens_per_round >= 1
    assert all(p.chosen_k for p in points if p.method == "self-spec-adaptive")
    assert run.summary.num_points == len(points) and run.summary.n_samples == 2


def test_static_flops_per_token_are_counted_by_hand(greedy_run):
    """Exit k over generated positions P-1..P+N-2 (each attending p + 1 keys): k layers and one
    head per token; the full model: 4 layers and the LM head."""
    run, _ = greedy_run

    def by_hand(k: int) -> float:
        per_prompt = [k * (WEIGHTS + PER_KEY * (P + (N_NEW - 1) / 2)) + HEAD
                      for P in run.summary.sample_tokens]
        return sum(per_prompt) / len(per_prompt)

    for p in run.points:
        if p.method in ("static", "full"):
            assert p.flops_per_token == pytest.approx(by_hand(int(p.setting["k"])), rel=1e-12)


def test_the_truncated_model_decodes_its_own_tokens(greedy_run):
    """Static quality comes from the truncated model's own greedy decode: on the damped model
    the shallowest exit disagrees somewhere, the static points are not all 100."""
    run, _ = greedy_run
    static = [p.main for p in run.points if p.method == "static"]
    assert min(static) < 100


def test_every_checked_self_spec_point_agrees_with_greedy_and_the_simulation(greedy_run):
    run, _ = greedy_run
    checked = [p for p in run.points if p.agrees is not None]
    assert {(p.setting["k"], p.setting["d"]) for p in checked} == {(1, 4), (2, 4), (3, 4)}
    for p in checked:
        assert p.method == "self-spec" and p.agrees, p.check
        assert p.check == {"prompts": 2, "tokens_differ": 0, "rounds_differ": 0}
        # timed, and transformers' peer at the same k and d gives the same tokens
        assert p.timing.same_tokens and p.peer_timing.same_tokens
        assert p.timing.ms_per_token > 0 and p.timing.wall_speedup > 0
    assert run.summary.all_checks_agree is True


def test_calm_reports_the_oracle_against_real_decoding(greedy_run):
    run, _ = greedy_run
    calm = {p.setting["threshold"]: p for p in run.points if p.method == "calm"}
    real = {t for t, p in calm.items() if p.real is not None}
    assert real == {0.05, 0.5, 0.9}  # lowest, middle, highest
    for t in real:
        p = calm[t]
        assert p.oracle_gap == pytest.approx(p.real["token_agreement"] - p.main)
        assert p.real["flops_per_token"] > 0 and p.timing is not None
    assert 1 <= calm[0.05].mean_exit_layer <= calm[0.9].mean_exit_layer <= 4
    full = next(p for p in run.points if p.method == "full")
    assert full.timing.wall_speedup == 1 and full.timing.same_tokens


def test_a_rerun_with_the_same_config_is_skipped(greedy_run):
    run, out = greedy_run
    before = (run.path / "points.jsonl").stat().st_mtime_ns
    again = run_decoder(run.config, DecodeOptions(out=out, data_dir=out))
    assert again.skipped and again.path == run.path
    assert again.points == run.points
    assert (run.path / "points.jsonl").stat().st_mtime_ns == before
    assert read_decoder_run(run.path).summary == run.summary


def test_a_teacher_forced_run_on_reviews(damped_dir, data_dir, tmp_path):
    run = run_decoder(_cfg(damped_dir, "imdb-lm"),
                      DecodeOptions(out=tmp_path, data_dir=data_dir))
    assert run.path.parts[-2] == "imdb-lm"
    methods = [p.method for p in run.points]
    assert methods == ["full", "static", "static", "static", "calm", "calm", "calm", "calm"]
    lengths = run.summary.sample_tokens
    count = sum(t - 1 for t in lengths)
    for p in run.points:
        assert p.decoding == "teacher-forced" and p.main_metric == "top1_agreement"
        assert set(p.metrics) == {"top1_agreement", "perplexity", "next_token_accuracy"}
        assert p.n_tokens == count
    full = run.points[0]
    assert full.main == 100
    for p in run.points[:4]:  # k layers and a head at every predicted position, by hand
        k = int(p.setting["k"])
        hand = sum(k * ((t - 1) * WEIGHTS + PER_KEY * (t - 1) * t // 2) + (t - 1) * HEAD
                   for t in lengths) / count
        assert p.flops_per_token == pytest.approx(hand, rel=1e-12)
    calm = run.points[4:]
    assert [p.mean_exit_layer for p in calm] == sorted(p.mean_exit_layer for p in calm)
    assert all(p.metrics["perplexity"] > 0 for p in calm)


def test_eebench_decode_prints_the_table_and_json(tmp_path):
    model = tiny_decoder_dir(tmp_path / "tiny")
    args = ["decode", "--model", str(model), "--samples", "1", "--new-tokens", "4",
            "--thresholds", "0.1,0.5", "--drafts", "1,2", "--data-dir", str(tmp_path),
            "--out", str(tmp_path / "runs")]
    result = runner.invoke(app, args, terminal_width=250)
    assert result.exit_code == 0, result.output
    assert not result.stdout
    for text in ("self-spec", "calm", "static", "agrees", "MFLOPs/tok", "token_agreement"):
        assert text in result.stderr
    again = runner.invoke(app, [*args, "--json"])
    assert again.exit_code == 0, again.output
    data = json.loads(again.stdout)
    assert data["skipped"] is True and {p["method"] for p in data["points"]} == {
        "full", "static", "self-spec", "self-spec-adaptive", "calm"}


@pytest.mark.parametrize("extra, code, message", [
    (["--task", "sst2"], 2, "not a decoder task"),
    (["--drafts", "1,x"], 2, "comma-separated"),
    (["--thresholds", "1.5"], 2, "within [0, 1]"),
    (["--ks", "2", "--exits", "1"], 2, "not exit layers"),
    (["--tune-steps", "3"], 2, "adapter"),
    (["--samples", "0"], 2, "samples"),
])
def test_eebench_decode_refuses_bad_settings_in_one_line(tmp_path, extra, code, message):
    # refused before any model is read (the directory is not one)
    result = runner.invoke(app, ["decode", "--model", str(tmp_path), "--out",
                                 str(tmp_path / "runs"), "--exits", "1,2,3", *extra])
    assert result.exit_code == code, result.output
    assert message in result.stderr and len(result.stderr.strip().splitlines()) == 1


@pytest.mark.slow
def test_smollm2_decoder_run_agrees_with_real_decoding(tmp_path):
    cfg = DecodeConfig(model="smollm2-135m", task="humaneval-gen",
                       data=LMSettings(samples=2, new_tokens=8),
                       exits=ExitSettings(layers=(6, 12, 18, 24)), draft_lengths=(2, 4),
                       thresholds=(0.5, 0.9))
    run = run_decoder(cfg, DecodeOptions(out=tmp_path, data_dir=tmp_path))
    assert run.summary.all_checks_agree is True
    assert {p.method for p in run.points} == {"full", "static", "self-spec",
                                              "self-spec-adaptive", "calm"}
    static = {p.setting["k"]: p.main for p in run.points if p.method == "static"}
    assert static[24] >= static[6]


def test_score_passes_over_decoder_runs_and_refuses_one_named(greedy_run):
    from eebench.errors import DataError
    from eebench.score.collect import find_run_dirs, load_run, run_dirs_under

    run, out = greedy_run
    assert run_dirs_under(out) == []
    with pytest.raises(DataError, match="a decoder run"):
        load_run(find_run_dirs([run.path])[0])
