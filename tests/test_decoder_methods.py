"""The decoder methods in the method registry: `eebench methods` lists them with the decoder tasks
each does, the decoder run asks them for its points (`--method` picks), every point carries its
main metric per sample, trained exits make EE-Tuning's points, a plugin adds a decoder method
through the entry-point group, and the two commands refuse each other's methods and tasks in
one line. The fast tier uses the damped tiny Llama (eebench.testing.tiny_decoder)."""

from __future__ import annotations

import json
from importlib.metadata import EntryPoint
from pathlib import Path

import numpy as np
import pytest
import torch

from eebench import registry
from eebench.methods import EarlyExitMethod, decoder_derived, get_method
from eebench.methods.base import METHODS
from eebench.methods.protocols import Decodes
from eebench.models.decoder_exits import ExitSettings
from eebench.run.decoding import DecodeConfig, DecodeOptions, read_decoder_run, run_decoder
from eebench.tasks.lm import LMSettings
from eebench.testing import check_method
from tests.cli import invoke

pytestmark = pytest.mark.usefixtures("one_thread")  # tests/conftest.py

REPO = Path(__file__).resolve().parents[1]
COMMITTED = (REPO / "benchmarks/results/decoder-smollm2/smollm2-135m/decode/humaneval-gen/"
             "40ec2009ef4d")
DECODER = ["static", "ee-tuning", "self-spec", "self-spec-adaptive", "calm"]


def _cfg(model, task: str, **kw) -> DecodeConfig:
    exits = kw.pop("exits", ExitSettings(layers=(1, 2, 3)))
    return DecodeConfig(model=str(model), task=task, exits=exits,
                        data=LMSettings(samples=2, new_tokens=6, max_tokens=32),
                        thresholds=(0.2, 0.9), draft_lengths=(1, 2), **kw)


def test_eebench_methods_lists_the_decoder_methods_with_their_tasks():
    result = invoke("methods", "--json")
    assert result.exit_code == 0, result.output
    rows = {r["name"]: r for r in json.loads(result.stdout) if r["name"] in METHODS.builtin()}
    assert [n for n, r in rows.items() if r["decoder_tasks"]] == DECODER
    tasks = {n: rows[n]["decoder_tasks"] for n in DECODER}
    assert tasks["self-spec"] == tasks["self-spec-adaptive"] == ["humaneval-gen"]
    assert tasks["static"] == tasks["calm"] == tasks["ee-tuning"] == ["imdb-lm", "humaneval-gen"]
    assert rows["static"]["units"] == ["sequence", "token", "generated"]
    assert all(rows[n]["units"] == ["generated"] for n in DECODER[1:])
    assert {n for n in DECODER if rows[n]["decodes_batches"]} == {"static", "ee-tuning"}
    assert rows["pabee"]["decodes_batches"] is None and rows["pabee"]["decoder_tasks"] == []
    for name, cited in (("self-spec", "LayerSkip"), ("self-spec-adaptive", "DEL"),
                        ("calm", "Confident Adaptive Language Modeling"),
                        ("ee-tuning", "EE-Tuning")):
        assert cited in rows[name]["paper"], name
    table = invoke("methods")
    assert table.exit_code == 0 and "batch size 1 only" in table.stderr.replace("\n", " ")


def test_a_decoder_method_implements_decodes_and_the_contract_stays_15():
    for name in DECODER:
        assert isinstance(get_method(name), Decodes), name
    assert decoder_derived.decodings(get_method("self-spec")) == ("greedy",)
    assert decoder_derived.decodings(get_method("calm")) == ("greedy", "teacher-forced")
    assert len([n for n in dir(EarlyExitMethod) if not n.startswith("_")]) == 15


def test_the_committed_decoder_run_keeps_its_hash(tmp_path):
    """A run's name is its config's hash without `methods` when none were named: the committed
    run's, and that of a config written before the field existed (no "methods" key at all)."""
    run = read_decoder_run(COMMITTED)
    assert run.config.methods is None and run.config.key() == COMMITTED.name
    older = json.loads((COMMITTED / "config.json").read_text())
    del older["methods"]
    assert DecodeConfig.model_validate(older).key() == COMMITTED.name


def test_the_chosen_methods_are_sorted_and_hashed_only_when_given():
    every = _cfg("m", "humaneval-gen")
    some = _cfg("m", "humaneval-gen", methods=("static", "calm", "calm"))
    assert some.methods == ("calm", "static")
    assert some.key() == _cfg("m", "humaneval-gen", methods=("calm", "static")).key()
    assert some.key() != every.key()


def test_a_run_of_named_methods_makes_only_their_points(damped_dir, tmp_path):
    run = run_decoder(_cfg(damped_dir, "humaneval-gen", methods=("calm",)),
                      DecodeOptions(out=tmp_path, data_dir=tmp_path))
    assert [p.method for p in run.points] == ["full", "calm", "calm"]
    assert run.config.methods == ("calm",)


def test_every_point_has_its_samples_main_metric(damped_dir, data_dir, tmp_path):
    greedy = run_decoder(_cfg(damped_dir, "humaneval-gen"),
                         DecodeOptions(out=tmp_path, data_dir=data_dir))
    reviews = run_decoder(_cfg(damped_dir, "imdb-lm"), DecodeOptions(out=tmp_path,
                                                                     data_dir=data_dir))
    assert {p.method for p in greedy.points} == {"full", *DECODER} - {"ee-tuning"}
    assert {p.method for p in reviews.points} == {"full", "static", "calm"}  # no ee-tuning
    for p in greedy.points:  # N tokens a prompt: the pooled agreement is the prompts' mean
        assert len(p.sample_main) == p.n_samples == 2
        assert np.mean(p.sample_main) == pytest.approx(p.main)
    weights = [t - 1 for t in reviews.summary.sample_tokens]  # predicted positions per review
    for p in reviews.points:  # pooled over positions: the reviews' token-weighted mean
        assert len(p.sample_main) == 2
        assert np.average(p.sample_main, weights=weights) == pytest.approx(p.main)
    assert greedy.points[0].sample_main == reviews.points[0].sample_main == [100.0, 100.0]
    static = [p for p in greedy.points if p.method == "static"]
    assert min(v for p in static for v in p.sample_main) < 100  # per prompt, not a copy of main
    lines = (greedy.path / "points.jsonl").read_text().splitlines()
    assert all("sample_main" in json.loads(line) for line in lines)


def test_trained_exits_make_ee_tuning_points(damped_dir, data_dir, tmp_path):
    cfg = _cfg(damped_dir, "imdb-lm", exits=ExitSettings(layers=(1, 2, 3), head="adapter",
                                                          rank=4),
               tuning_steps=2, tuning_samples=2)
    run = run_decoder(cfg, DecodeOptions(out=tmp_path, data_dir=data_dir))
    assert [p.method for p in run.points] == ["full"] + ["ee-tuning"] * 3 + ["calm"] * 2
    assert all(len(p.sample_main) == 2 for p in run.points)
    assert [p.setting["k"] for p in run.points[1:4]] == [1, 2, 3]
    assert run.summary.exits_file and len(run.summary.tuning_losses) == 2


def test_runs_that_tune_alike_share_one_training(damped_dir, data_dir, tmp_path, monkeypatch):
    """EE-Tuning's exits are kept in the tuning folder: the other task's run with the same
    tuning reads them (its losses and wall time with them) instead of training again; exits
    changed there are refused in one line."""
    import eebench.train.exit_tuning as tuning
    from eebench.errors import DataError
    from eebench.run.decoding.run import tuning_dir

    trained = []
    real = tuning.train_exits
    monkeypatch.setattr(tuning, "train_exits", lambda *a, **k: trained.append(1) or real(*a, **k))
    exits = ExitSettings(layers=(1, 2, 3), head="adapter", rank=4)
    lm = run_decoder(_cfg(damped_dir, "imdb-lm", exits=exits, tuning_steps=2, tuning_samples=2),
                     DecodeOptions(out=tmp_path, data_dir=data_dir))
    gen = run_decoder(_cfg(damped_dir, "humaneval-gen", exits=exits, tuning_steps=2,
                           tuning_samples=2), DecodeOptions(out=tmp_path, data_dir=data_dir))
    assert trained == [1]
    assert lm.summary.tuning_key == gen.summary.tuning_key
    assert lm.summary.tuning_losses == gen.summary.tuning_losses
    assert lm.summary.tuning_seconds == gen.summary.tuning_seconds > 0
    assert (lm.path / "exits.safetensors").read_bytes() == (gen.path / "exits.safetensors"
                                                            ).read_bytes()
    folder = tuning_dir(gen.config, tmp_path)
    assert (folder / "tuning.json").is_file()
    with open(folder / "exits.safetensors", "ab") as f:
        f.write(b"\0")
    with pytest.raises(DataError, match="does not match the sha256"):
        run_decoder(_cfg(damped_dir, "humaneval-gen", exits=exits, tuning_steps=2,
                         tuning_samples=2, measure="margin"),
                    DecodeOptions(out=tmp_path, data_dir=data_dir))


PLUGIN = '''
from eebench.methods import EarlyExitMethod, register_method


@register_method("deepest-exit")
class DeepestExit(EarlyExitMethod):
    """Static truncation at the deepest exit only: a plugin's decoder method."""

    paper = "a test's"
    description = "the model truncated at its deepest exit"
    encoder_tasks = False

    def greedy_points(self, ctx):
        from eebench.rules.decoder_tf import truncated_greedy

        k = ctx.exits.layers[-1]
        tokens = [truncated_greedy(ctx.model, ctx.exits, p, ctx.n_new, k) for p in ctx.samples]
        return [ctx.point(self.name, {"k": k}, ctx.score(tokens), ctx.flops.static(k),
                          mean_exit_layer=float(k))]
'''


@pytest.fixture
def plugin(monkeypatch, tmp_path):
    """A plugin package whose entry point (eebench.methods) names a decoder method; the method
    registry is a copy (nothing installed, no other test sees it)."""
    for attr in ("_items", "_aliases", "_sources"):
        monkeypatch.setattr(METHODS, attr, dict(getattr(METHODS, attr)))
    monkeypatch.setattr(METHODS, "_plugins_loaded", False)
    (tmp_path / "deepest_exit_plugin.py").write_text(PLUGIN)
    monkeypatch.syspath_prepend(str(tmp_path))
    found = [EntryPoint("deepest-exit", "deepest_exit_plugin:DeepestExit", "eebench.methods")]
    monkeypatch.setattr(registry, "entry_points",
                        lambda group: [e for e in found if e.group == group])


def test_a_plugin_adds_a_decoder_method_through_the_entry_point_group(plugin, damped_dir,
                                                                      tmp_path):
    listed = {r["name"]: r for r in json.loads(invoke("methods", "--json").stdout)}
    assert listed["deepest-exit"]["decoder_tasks"] == ["humaneval-gen"]
    out = tmp_path / "runs"
    every = run_decoder(_cfg(damped_dir, "humaneval-gen"),
                        DecodeOptions(out=out, data_dir=tmp_path))
    assert [p.method for p in every.points][-1] == "deepest-exit"  # by default, with the rest
    result = invoke("decode", "--model", damped_dir, "--samples", 2, "--new-tokens", 6,
                    "--exits", "1,2,3", "--method", "deepest-exit", "--data-dir", tmp_path,
                    "--out", out, "--json")
    assert result.exit_code == 0, result.output
    points = json.loads(result.stdout)["points"]
    assert [p["method"] for p in points] == ["full", "deepest-exit"]
    static = next(p for p in every.points if p.method == "static" and p.setting["k"] == 3)
    assert points[1]["main"] == static.main and points[1]["sample_main"] == static.sample_main
    report = check_method("deepest-exit", workdir=tmp_path / "kit")
    assert report.ok and report.skipped, str(report)


@pytest.mark.parametrize("args, message", [
    (["run", "--method", "calm", "--task", "elue-sst2"], "'calm' is a decoder method"),
    (["run", "--method", "self-spec", "--task", "rte"], "`eebench decode` runs it"),
    (["run", "--method", "pabee", "--task", "imdb-lm"], "'imdb-lm' is a decoder task"),
    (["run", "--method", "static", "--task", "humaneval-gen"], "eebench decode --task"),
    (["decode", "--method", "pabee"], "not a decoder method"),
    (["decode", "--method", "ee-tuning"], "--head adapter --tune-steps"),
    (["decode", "--method", "self-spec", "--task", "imdb-lm"], "does not do imdb-lm"),
    (["decode", "--method", "static", "--head", "adapter", "--tune-steps", "2"], "ee-tuning's"),
])
def test_each_command_refuses_the_others_methods_and_tasks_in_one_line(args, message, tmp_path):
    extra = ["--dry-run"] if args[0] == "run" else ["--model", tmp_path, "--exits", "1,2,3"]
    result = invoke(*args, *extra, "--out", tmp_path / "runs")
    assert result.exit_code == 2, result.output
    assert message in result.stderr and len(result.stderr.strip().splitlines()) == 1


def test_a_run_another_process_holds_is_refused_in_one_line(damped_dir, data_dir, tmp_path):
    """A decoder run holds `.lock` in its directory while it works (an flock: it goes with its
    process); a second process on the same run is refused, and once the lock is let go the run
    goes ahead and leaves no lock held."""
    from eebench.errors import DataError
    from eebench.io.locks import held_elsewhere, take_lock
    from eebench.run.decoding import decoder_run_dir

    cfg = _cfg(damped_dir, "imdb-lm")
    run_dir = decoder_run_dir(cfg, tmp_path)
    run_dir.mkdir(parents=True)
    holder = take_lock(run_dir / ".lock")
    with pytest.raises(DataError, match="another process is running it"):
        run_decoder(cfg, DecodeOptions(out=tmp_path, data_dir=data_dir))
    assert not (run_dir / "summary.json").exists()
    holder.close()
    run = run_decoder(cfg, DecodeOptions(out=tmp_path, data_dir=data_dir))
    assert run.path == run_dir and (run_dir / "summary.json").is_file()
    assert not held_elsewhere(run_dir / ".lock")
    again = run_decoder(cfg, DecodeOptions(out=tmp_path, data_dir=data_dir, overwrite=True))
    assert not again.skipped and (run_dir / ".lock").is_file()


def test_methods_whose_decoding_batches_are_timed_at_a_batch_above_1(damped_dir, tmp_path):
    """`timing_batch`: the full model and each truncation decoded as one batch of prompts cut
    to one length, rows equal to decoding them one at a time; the methods that decode one
    prompt at a time get no batch timing."""
    from eebench.errors import UsageError
    from eebench.models.decoder_exits import DecoderExits
    from eebench.models.decoders import load_causal_lm
    from eebench.rules.decoder_tf import truncated_greedy, truncated_greedy_batch

    model = load_causal_lm(str(damped_dir))
    exits = DecoderExits(model, ExitSettings(layers=(1, 2, 3)))
    batch = torch.randint(0, 259, (3, 7), generator=torch.Generator().manual_seed(0))
    for k in (1, 3, 4):
        rows = truncated_greedy_batch(model, exits, batch, 5, k)
        assert rows.tolist() == [truncated_greedy(model, exits, p, 5, k) for p in batch]
    cfg = _cfg(damped_dir, "humaneval-gen", timing=True, timing_prompts=1, timing_repeats=1,
               timing_batch=2)
    assert cfg.key() != _cfg(damped_dir, "humaneval-gen", timing=True, timing_prompts=1,
                             timing_repeats=1).key()
    run = run_decoder(cfg, DecodeOptions(out=tmp_path, data_dir=tmp_path))
    timed = {(p.method, p.setting.get("k")) for p in run.points if p.batch_timing}
    assert timed == {("full", 4), ("static", 1), ("static", 2), ("static", 3)}
    for p in run.points:
        if p.batch_timing:
            assert p.batch_timing.batch == 2 and p.batch_timing.same_tokens is True
            assert p.batch_timing.wall_speedup > 0
    with pytest.raises(UsageError, match="needs --timing"):
        run_decoder(_cfg(damped_dir, "humaneval-gen", timing_batch=2),
                    DecodeOptions(out=tmp_path, data_dir=tmp_path))
    with pytest.raises(UsageError, match="needs as many prompts"):
        run_decoder(_cfg(damped_dir, "humaneval-gen", timing=True, timing_batch=3),
                    DecodeOptions(out=tmp_path, data_dir=tmp_path))
