"""The committed decoder runs (`eebench decode`, under benchmarks/results): each reads back
verified (every file as its summary's sha256 says), sits under the name its config hashes to, and
says what the run promised: every self-speculation point decoded for real equals greedy decoding
and the simulated acceptance, self-speculation is lossless at every point, a CALM point decoded for
real reports its gap to the oracle as the difference of the two agreements, and FLOPs speed-ups
are the full model's FLOPs per token over the point's."""

from __future__ import annotations

import pytest

from eebench.run.decoding import read_decoder_run
from tests.committed import RESULTS, decoder_runs, is_decoder

RUNS = decoder_runs()


@pytest.mark.audit
@pytest.mark.parametrize("run_dir", RUNS, ids=[str(p.relative_to(RESULTS)) for p in RUNS])
def test_a_committed_decoder_run_says_what_its_files_hold(run_dir):
    run = read_decoder_run(run_dir)  # refuses a file that is not what the summary recorded
    assert run.config.key() == run_dir.name == run.summary.config_hash
    points = run.points
    assert len(points) == run.summary.num_points
    [full] = [p for p in points if p.method == "full"]
    assert full.flops_per_token == run.summary.full_model["flops_per_token"]
    for p in points:
        assert p.flops_speedup == pytest.approx(full.flops_per_token / p.flops_per_token)
    spec = [p for p in points if p.method.startswith("self-spec")]
    assert all(p.main == 100.0 for p in spec)  # lossless: the verifier's tokens are greedy's
    checked = [p for p in spec if p.agrees is not None]
    assert all(p.agrees for p in checked)
    assert all(p.check["tokens_differ"] == 0 and p.check["rounds_differ"] == 0 for p in checked)
    if run.config.task == "humaneval-gen":  # greedy: self-speculation decoded for real
        assert checked and run.summary.all_checks_agree is True
    else:  # teacher-forced: nothing is decoded, nothing checked
        assert not spec and run.summary.all_checks_agree is None
    for p in (p for p in points if p.timing is not None and p.method.startswith("self-spec")):
        assert p.timing.same_tokens is True
        assert p.peer_timing is None or p.peer_timing.same_tokens is True
    calm_real = [p for p in points if p.method == "calm" and p.real is not None]
    for p in calm_real:
        assert p.oracle_gap == pytest.approx(p.real[p.main_metric] - p.main)
    static = sorted((p for p in points if p.method in ("static", "ee-tuning")),
                    key=lambda p: p.setting["k"])
    flops = [p.flops_per_token for p in static]
    assert flops == sorted(flops) and flops[-1] < full.flops_per_token


@pytest.mark.audit
def test_the_decoder_benchmark_is_committed():
    assert any(is_decoder(p.parent) for p in RESULTS.rglob("config.json")), (
        f"no committed decoder run under {RESULTS}")


@pytest.mark.audit
def test_every_decoder_method_ran_on_both_tasks_with_lens_and_trained_exits():
    """The decoder benchmark (benchmarks/decoder_smollm2.sh): every registered decoder method
    that does a task has points on it, from untrained (logit-lens) and from EE-Tuned exits."""
    from eebench.methods import decoder_derived

    runs = [read_decoder_run(p) for p in decoder_runs(narrowed=False)]
    for task in ("humaneval-gen", "imdb-lm"):
        made = {(r.summary.head, p.method) for r in runs if r.config.task == task
                for p in r.points}
        for name in decoder_derived.decoder_methods(task):
            head = "adapter" if name == "ee-tuning" else "lens"
            assert (head, name) in made, (task, name)
        assert any(head == "adapter" for head, _ in made), task
