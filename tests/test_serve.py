"""The serving replay's parts on a tiny random model: arrivals, cohorts, the three schedulers'
admissions on a simulated clock (exact times), and every answer checked against the offline
one-pass simulation on the real clock."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from eebench.data.batching import collate, encode
from eebench.errors import DataError, UsageError
from eebench.methods.base import get_method
from eebench.models.outputs import collect_exit_logits
from eebench.rules.base import ExitRule, StepResult
from eebench.rules.engine import dynamic_batch
from eebench.serve import arrivals as A
from eebench.serve.cohort import Cohort
from eebench.serve.replay import offline_decisions
from eebench.serve.report import latency_of, result_of
from eebench.serve.scheduler import Served, StepClock, serve
from eebench.tasks.loaders import Examples
from tests import tiny

WORDS = "the film was a long and quiet study of grief that never quite lands".split()


def _data(n: int = 24):
    texts = [(" ".join(WORDS[: 2 + (i * 5) % (len(WORDS) - 1)]),) for i in range(n)]
    ex = Examples("sst2", "dev", texts, [i % 2 for i in range(n)], [str(i) for i in range(n)],
                  "test")
    return encode(ex, tiny.tokenizer(), 32)


def _sharp(method: str):
    """A tiny random model whose heads tell samples apart: a random backbone gives every input
    nearly the same pooled state, so the heads' weights are scaled up and their logits centred
    over the data; then samples exit at every depth, decided by margins far above float noise."""
    model, data = tiny.tiny_model(method, depth=4, pooling="mean", dropout=0.0), _data()
    with torch.no_grad():
        for head in model.heads:
            head.classifier.weight.mul_(1000)
        out = collect_exit_logits(model, [collate(data, list(range(len(data))))])
        for j, head in enumerate(model.heads):
            head.classifier.bias.sub_(out.logits[j].mean(0))
    return model, data


class ExitAt(ExitRule):
    """Every sample exits at exit `k`: a schedule that can be worked out by hand."""

    def __init__(self, k: int):
        self.k = k

    def start(self, n, device=None):
        return {}

    def step(self, state, exit_index, logits, signals=None):
        n = logits.shape[0]
        return StepResult(state, torch.full((n,), exit_index >= self.k),
                          torch.full((n,), float("inf")))


# -- arrivals --------------------------------------------------------------------------------
def test_poisson_is_seeded_sorted_and_at_its_rate():
    t = A.poisson(50.0, 4000, seed=3)
    assert t[0] == 0 and np.all(np.diff(t) >= 0)
    assert np.array_equal(t, A.poisson(50.0, 4000, seed=3))
    assert A.mean_rate(t) == pytest.approx(50.0, rel=0.05)


def test_bursty_arrives_in_bursts_at_the_same_mean_rate():
    t = A.bursty(50.0, 4000, burst=8, seed=1)
    assert len(t) == 4000 and np.all(np.diff(t) >= 0)
    sizes = np.unique(t, return_counts=True)[1]
    assert sizes.mean() == pytest.approx(8, rel=0.15)  # requests per instant
    assert A.mean_rate(t) == pytest.approx(50.0, rel=0.15)


def test_a_trace_is_read_shifted_and_rescaled(tmp_path):
    path = tmp_path / "trace.txt"
    path.write_text("# seconds\n10.0\n10.5\n\n11,extra\n12.0  # last\n")
    t = A.read_trace(path)
    assert t.tolist() == [0.0, 0.5, 1.0, 2.0]
    assert A.mean_rate(A.rescale(t, 6.0)) == pytest.approx(6.0)
    path.write_text("1\n0.5\n")
    with pytest.raises(DataError, match=r"trace.txt:2: timestamps must be finite and in order"):
        A.read_trace(path)
    path.write_text("1\nsoon\n")
    with pytest.raises(DataError, match=r"trace.txt:2: not a timestamp"):
        A.read_trace(path)
    with pytest.raises(UsageError, match="positive number of requests per second"):
        A.poisson(0, 10)


# -- cohorts and schedulers ------------------------------------------------------------------
@pytest.mark.parametrize("method,value", [("pabee", 1), ("deebert", 0.4)])
def test_a_cohort_decides_as_dynamic_batch_does(method, value):
    model, data = _sharp(method)
    rule = get_method(method).exit_rule(value, False)
    batch = collate(data, list(range(len(data))))
    exits, preds = dynamic_batch(model, rule, batch, False)
    cohort = Cohort(model, rule, batch, np.arange(len(data)), False)
    got_exit, got_pred = np.full(len(data), -1), np.full(len(data), -1.0)
    while not cohort.done:
        req, e, p = cohort.advance()
        got_exit[req], got_pred[req] = e, p
    assert np.array_equal(got_exit, exits.numpy()) and np.array_equal(got_pred, preds.numpy())


def _by_hand(scheduler: str, max_batch: int) -> Served:
    """4 layers, every sample exits at exit 1; each model step costs 1 s on the clock."""
    model, data = tiny.tiny_model("pabee", depth=4), _data(4)
    return serve(model, lambda: ExitAt(1), data, np.arange(4), np.array([0, 0, 0.5, 0.5]),
                 scheduler, max_batch, False, StepClock(fixed=1.0))


def test_batch_shrinking_admits_only_when_the_batch_has_left():
    s = _by_hand("shrink", max_batch=3)
    # t=0 admit 0,1 (embedding: 1 s), exit 0 at t=2, exit 1 at t=3 answers both; 2,3 waited
    assert s.start.tolist() == [0, 0, 3, 3]
    assert s.finish.tolist() == [3, 3, 6, 6]
    assert s.exit_index.tolist() == [1, 1, 1, 1] and s.step_rows == [2, 2, 2, 2]


def test_continuous_rebatching_fills_free_places_at_the_embedding():
    s = _by_hand("continuous", max_batch=3)
    # round 2 (t=2) has one free place: request 2 enters while 0 and 1 are still in flight;
    # request 3 enters once they have left (t=5); each depth runs on its own, a step a round
    assert s.start.tolist() == [0, 0, 2, 5]
    assert s.finish.tolist() == [4, 4, 7, 9]
    assert s.step_rows == [2, 2, 1, 1, 1, 1]
    in_flight = [int(((s.start <= t) & (t < s.finish)).sum()) for t in np.arange(0, 9, 0.5)]
    assert max(in_flight) == 3  # never more than --max-batch


def test_the_full_model_answers_at_its_last_exit_in_whole_batches():
    s = _by_hand("full", max_batch=2)
    assert s.exit_index.tolist() == [3, 3, 3, 3]
    assert s.start.tolist() == [0, 0, 5, 5] and s.finish.tolist() == [5, 5, 10, 10]


def test_an_idle_server_waits_for_the_next_arrival():
    model, data = tiny.tiny_model("pabee", depth=4), _data(2)
    s = serve(model, lambda: ExitAt(0), data, np.arange(2), np.array([0.0, 100.0]), "shrink",
              4, False, StepClock(fixed=1.0))
    assert s.start.tolist() == [0, 100] and s.latency.tolist() == [2, 2]


@pytest.mark.parametrize("scheduler", ["full", "shrink", "continuous"])
@pytest.mark.parametrize("method,value", [("pabee", 1), ("deebert", 0.4)])
def test_every_answer_equals_the_offline_simulation(scheduler, method, value):
    model, data = _sharp(method)
    rule = get_method(method)
    out = collect_exit_logits(model, [collate(data, list(range(len(data))))])
    offline, full = offline_decisions(lambda: rule.exit_rule(value, False), out.logits, False)
    assert len(set(offline.exit_index.tolist())) >= 3  # samples exit at several depths
    samples = np.random.default_rng(0).integers(0, len(data), 60)
    served = serve(model, lambda: rule.exit_rule(value, False), data, samples,
                   A.bursty(400.0, 60, burst=4, seed=0), scheduler, 8, False)  # real time
    res = result_of(served, 400.0, full if scheduler == "full" else offline, False, 1000.0)
    assert res.checked == 60 and res.disagreements == 0
    assert np.all(served.finish >= served.start) and np.all(served.start >= served.arrival)


def test_latency_figures_of_a_handmade_replay():
    s = Served("shrink", np.arange(4), np.array([0.0, 0.0, 1.0, 1.0]),
               np.array([0.0, 0.0, 1.5, 1.5]), np.array([0.01, 0.02, 1.6, 2.0]),
               np.zeros(4, np.int64), np.zeros(4), [2, 1, 2])
    lat = latency_of(s, target_ms=100.0)
    assert lat.p50_ms == pytest.approx(310.0) and lat.max_ms == pytest.approx(1000.0)
    assert lat.within_target == 0.5 and lat.throughput_rps == pytest.approx(2.0)
    assert lat.mean_queue_ms == pytest.approx(250.0) and lat.mean_batch == pytest.approx(5 / 3)


def test_the_check_counts_a_wrong_answer():
    model, data = _sharp("pabee")
    rule = get_method("pabee")
    out = collect_exit_logits(model, [collate(data, list(range(len(data))))])
    offline, _ = offline_decisions(lambda: rule.exit_rule(1, False), out.logits, False)
    served = serve(model, lambda: rule.exit_rule(1, False), data, np.arange(len(data)),
                   np.zeros(len(data)), "continuous", 4, False, StepClock())
    assert result_of(served, 1.0, offline, False, 1.0).disagreements == 0
    served.exit_index[3] += 1  # a request answered one exit too late
    served.prediction[5] = 1 - served.prediction[5]  # and one answered wrong
    assert result_of(served, 1.0, offline, False, 1.0).disagreements == 2


def test_continuous_rebatching_never_holds_more_than_max_batch():
    model, data = _sharp("deebert")
    rule = get_method("deebert")
    s = serve(model, lambda: rule.exit_rule(0.4, False), data, np.arange(48) % len(data),
              A.bursty(1.0, 48, burst=6, seed=2), "continuous", 5, False,
              StepClock(fixed=0.1, per_row=0.05))
    events = sorted([(t, 1) for t in s.start] + [(t, -1) for t in s.finish],
                    key=lambda e: (e[0], e[1]))  # an answer frees its place before a start
    assert max(np.cumsum([d for _, d in events])) == 5  # full, and never over
    assert max(s.step_rows) <= 5 and np.all(s.start >= s.arrival)
