"""Decoders are sweeps too: one teacher-forced pass decides every greedy operating point.

`record_exits` runs the full model greedily for exactly N new tokens (the trajectory), then ONE
teacher-forced forward over prompt + trajectory, and keeps for every exit layer (and the last
layer) at every generated position only the argmax token, the max softmax probability and the
top-2 margin (p1 - p2). The vocabulary-sized logits live for one exit and one chunk of positions
at a time: the trace is [exits + 1, N] numbers, never [exits, N, vocab].

From a trace, without running the model again:

- `simulate_self_spec(trace, k, d)`: self-speculative greedy decoding that drafts d tokens with
  the first k layers and exit k. While a round's drafts have all matched, the draft's prefix IS the
  greedy trajectory, so the real draft at generated position i is exit k's teacher-forced argmax
  there; the round accepts the leading drafts equal to the trajectory and emits one more (the
  verifier's token). A round starting at token s drafts d' = min(d, N - s - 1) (the last round is
  truncated so exactly N tokens come out), exactly as `self_speculative_decode` does.
- `simulate_calm(trace, threshold, measure)`: CALM's per-token exit under an ORACLE cache (every
  earlier token's states are the full model's): token i exits at the first exit whose confidence
  >= threshold (else the last layer) and predicts that exit's argmax. It is the engine's
  `simulate` replaying CALM's rule (eebench.rules.calm) over the stored confidences, the rule
  real decoding runs in the one dynamic loop (eebench.rules.calm_decoding).
- `adaptive_self_spec(trace, ks, d, m)`: DEL's idea, simply: after the first m tokens (decoded
  with `probe_k`) the acceptance every exit would have had on them is known (a real decoder reads
  it from the verifier's states), so pick the k with the most tokens per unit cost on them and
  decode the rest with it.

Prompts are traced one at a time (`record_exits` per prompt): no padding, exact positions.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

import numpy as np
import torch
from torch import nn

from eebench.errors import UsageError
from eebench.models.decoder_exits import DecoderExits, embed, num_layers, read_logits, run_layers
from eebench.rules.calm import CalmRule, Measure
from eebench.rules.engine import simulate
from eebench.rules.self_speculation import SpecRounds, greedy_decode


@dataclass
class ExitTrace:
    """What one teacher-forced pass over a greedy trajectory recorded. Row r of `argmax`,
    `maxprob` and `margin` is exit layer `layers[r]`; the last row is the full model (layer L)."""

    prompt_len: int
    tokens: np.ndarray  # [N] the full model's greedy tokens
    layers: tuple[int, ...]  # exit layers, then L
    argmax: np.ndarray  # [E + 1, N] int64
    maxprob: np.ndarray  # [E + 1, N] float64
    margin: np.ndarray  # [E + 1, N] float64: top-1 minus top-2 probability

    @property
    def n_new(self) -> int:
        return len(self.tokens)

    def row(self, k: int) -> int:
        if k not in self.layers:
            raise UsageError(f"no exit at layer {k} in this trace",
                             hint=f"layers: {list(self.layers)}")
        return self.layers.index(k)

    def matches(self, k: int) -> np.ndarray:
        """[N] bool: exit k's teacher-forced argmax equals the greedy token."""
        return self.argmax[self.row(k)] == self.tokens


@torch.no_grad()
def record_exits(model: nn.Module, exits: DecoderExits, prompt_ids: torch.Tensor, n_new: int,
                 chunk: int = 256) -> ExitTrace:
    """Greedy trajectory of one prompt ([P] or [1, P]) and every exit's argmax and confidence at
    each of its N generated positions, from one teacher-forced pass."""
    prompt = prompt_ids.reshape(1, -1)
    if n_new < 1:
        raise UsageError("record_exits needs n_new >= 1")
    tokens = greedy_decode(model, prompt, n_new)
    ids = torch.cat([prompt, tokens[:, :-1]], dim=1)  # the last token is never an input
    p = prompt.shape[1]
    layers = (*exits.layers, num_layers(model))
    rows = [[], [], []]
    hidden, done = embed(model, ids), 0
    for k in layers:
        hidden = run_layers(model, hidden, done, k)
        done = k
        generated = hidden[0, p - 1:]  # position P-1+i predicts generated token i
        parts = [read_logits(exits.logits(model, k, generated[s:s + chunk]))
                 for s in range(0, n_new, chunk)]
        for out, got in zip(rows, zip(*parts)):
            out.append(torch.cat(got))
    arg, top, gap = (torch.stack(r).cpu().numpy() for r in rows)
    return ExitTrace(prompt_len=p, tokens=tokens[0].cpu().numpy(), layers=layers,
                     argmax=arg.astype(np.int64), maxprob=top.astype(np.float64),
                     margin=gap.astype(np.float64))


# -- self-speculation ------------------------------------------------------------------------------
def simulate_self_spec(trace: ExitTrace, k: int, d: int, start: int = 0,
                       stop: int | None = None) -> SpecRounds:
    """Rounds that drafting with exit k, d tokens a round, makes over generated tokens
    [start, stop) (all of them by default); the round boundaries fall exactly at `stop`."""
    if d < 0:
        raise UsageError(f"draft length must be >= 0, got {d}")
    matches = trace.matches(k)
    stop = trace.n_new if stop is None else stop
    sim, s = SpecRounds(k, d), start
    while s < stop:
        drafts = min(d, stop - s - 1)
        accepted = 0
        while accepted < drafts and matches[s + accepted]:
            accepted += 1
        sim.accepted.append(accepted)
        sim.drafted.append(drafts)
        s += accepted + 1
    return sim


def sweep_self_spec(trace: ExitTrace, ks: Iterable[int], ds: Iterable[int]
                    ) -> dict[tuple[int, int], SpecRounds]:
    """Every (k, d) at once: the sweep the one pass pays for. (Rounds of several prompts pool
    with `SpecRounds.then`.)"""
    ds = tuple(ds)
    return {(k, d): simulate_self_spec(trace, k, d) for k in ks for d in ds}


def layer_passes(total_layers: int, head: float = 0.0) -> Callable[[int, int], float]:
    """A round's cost in sequential layer passes (a latency proxy, DEL's "tokens per layer"):
    d' + 1 draft passes of k layers (the last feeds the verifier), one verification pass of the
    L - k remaining layers over all positions at once, and `head` per exit-head or LM-head
    pass. In FLOPs a round costs more than greedy (every position passes all L layers once,
    rejected ones again later); speculation pays off in time, which this counts."""
    return lambda k, drafted: (drafted + 1) * k + (total_layers - k) + (drafted + 1) * head


def adaptive_self_spec(trace: ExitTrace, ks: Sequence[int], d: int, m: int,
                       round_cost: Callable[[int, int], float] | None = None,
                       probe_k: int | None = None) -> tuple[int, SpecRounds]:
    """Choose k per prompt from its first m tokens, then simulate the rest with it.

    The first m tokens are decoded with `probe_k` (default: the deepest candidate); on them every
    candidate's rounds are simulated and the k with the most tokens per unit of `round_cost`
    (default `layer_passes` of the trace's model) wins; tokens m..N use it. Returns (k, rounds of
    the whole decode)."""
    if not ks:
        raise UsageError("adaptive_self_spec needs at least one candidate k")
    m = max(1, min(m, trace.n_new))
    cost = round_cost or layer_passes(trace.layers[-1])
    probe = simulate_self_spec(trace, probe_k if probe_k is not None else max(ks), d, 0, m)

    def rate(k: int) -> float:
        sim = simulate_self_spec(trace, k, d, 0, m)
        return sim.emitted / sum(cost(k, drafted) for drafted in sim.drafted)

    best = max(ks, key=rate)
    return best, probe.then(simulate_self_spec(trace, best, d, m))


# -- CALM under an oracle cache --------------------------------------------------------------------
@dataclass
class CalmSim:
    """Per generated token: the layer it exits at, how many exit heads were read on the way
    (the last layer's own head not counted), its prediction; and top-1 agreement with greedy."""

    exit_layers: np.ndarray
    exits_evaluated: np.ndarray
    predictions: np.ndarray
    agreement: float


def confidence(trace: ExitTrace, measure: Measure) -> np.ndarray:
    if measure not in ("maxprob", "margin"):
        raise UsageError(f"unknown confidence measure {measure!r}", hint="maxprob or margin")
    return trace.maxprob if measure == "maxprob" else trace.margin


def simulate_calm(trace: ExitTrace, threshold: float, measure: Measure = "maxprob") -> CalmSim:
    """Each token exits at the first exit whose confidence >= threshold, else at layer L: CALM's
    rule (eebench.rules.calm) replayed by `engine.simulate` over the trace's stored argmax and
    confidences, its exits' signals (the trace keeps no logits: the one column handed as logits
    is each exit's argmax, which the rule does not read)."""
    confidence(trace, measure)  # a measure the trace has
    tokens = torch.from_numpy(trace.argmax)
    signals = {"argmax": tokens, "maxprob": torch.from_numpy(trace.maxprob),
               "margin": torch.from_numpy(trace.margin)}
    first = simulate(CalmRule(threshold, measure), tokens[..., None], False, signals).exit_index
    n_exits = len(trace.layers) - 1
    predictions = trace.argmax[first, np.arange(trace.n_new)]
    return CalmSim(exit_layers=np.asarray(trace.layers)[first],
                   exits_evaluated=np.minimum(first + 1, n_exits),
                   predictions=predictions,
                   agreement=float(np.mean(predictions == trace.tokens)))
