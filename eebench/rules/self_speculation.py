"""Real greedy decoding of a causal LM: plain, and self-speculative (LayerSkip), and the peer.

These check the one-pass simulation of eebench.rules.decoder_sweep: what it predicts for a
(k, draft length d) must be what decoding really does, round by round.

- `greedy_decode`: exactly `n_new` tokens with a KV cache, no stop at EOS. A batch [B, P] of
  prompts of one length (unpadded) decodes together; prompts of different lengths are decoded one
  call each (no left padding: positions stay exact).
- `self_speculative_decode` (batch size 1 only): each round drafts d tokens with the first k
  layers and exit k, autoregressively, then the whole model verifies them, REUSING the draft's
  work: layers < k of every drafted position are already in the cache (the draft ran them), and
  the layer-k hidden states the draft computed are saved, so verification runs only layers k..L
  on the round's positions. The longest prefix of drafts that equals the model's greedy choice is
  accepted, plus one token from the verifier (its correction, or a bonus after d accepted), and
  every cache layer is cropped back to the accepted length. Lossless: the tokens equal greedy's.
- `hf_early_exit_generate`: transformers' own `generate(assistant_early_exit=k)`, side by side,
  with its rounds.

A round. The cache holds positions 0..c-1 in every layer; `pending` (the prompt in round one, then
the verifier's last token) is not yet in it. With d' = min(d, tokens still to make - 1) drafts:

    layers 0..k-1 on pending            -> its layer-k states (saved); exit k -> draft y_0
    layers 0..k-1 on y_j, for j < d'    -> state saved; exit k -> y_{j+1} (no exit after y_d'-1:
                                           its state is the verifier's last input)
    layers k..L-1 on all saved states   -> greedy g_0..g_d' at the last d' + 1 positions
    a = leading j with y_j = g_j        -> emit y_0..y_{a-1} and g_a; crop every layer to
                                           c + |pending| + a; g_a is the next pending token

so every position of a round goes through each layer once (k layers while drafting, L - k while
verifying); rejected drafts' positions are cropped and computed again later.

transformers' `assistant_early_exit` (generation/candidate_generator.py,
`EarlyExitCandidateGenerator`) drafts by running the same model with
`config.num_hidden_layers` set to k, so its draft reads layer k through the model's final norm and
LM head (the logit lens; trained exit heads are not used). The assistant keeps its own
DynamicCache of the first k layers, cropped after each round, and the verifier runs all L layers
on the candidates with the main model's cache: layers < k of drafted tokens are computed twice
(no reuse). The number of drafts per round is the assistant's `num_assistant_tokens`, read from
`model.generation_config` (not from generate's keyword arguments; default 20, schedule
"constant"), and drafting also stops early when the draft's probability falls below
`assistant_confidence_threshold` (default 0.4); `hf_early_exit_generate` sets d and 0 for the
duration of the call so its rounds are those described above.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch
from torch import nn

from eebench.errors import UsageError
from eebench.models.decoder_exits import (
    DecoderExits,
    cached_length,
    crop_cache,
    embed,
    final_logits,
    new_cache,
    num_layers,
    run_layers,
)


def _prompt(prompt_ids: torch.Tensor, batch_one: bool) -> torch.Tensor:
    ids = prompt_ids if prompt_ids.dim() == 2 else prompt_ids[None]
    if ids.shape[1] < 1:
        raise UsageError("a prompt needs at least one token")
    if batch_one and ids.shape[0] != 1:
        raise UsageError("this decoder takes one prompt at a time (batch size 1)",
                         hint="loop over the prompts")
    return ids


@torch.no_grad()
def greedy_decode(model: nn.Module, prompt_ids: torch.Tensor, n_new: int) -> torch.Tensor:
    """Exactly `n_new` greedy tokens [B, n_new] (prompts [B, P] of one length, unpadded)."""
    ids = _prompt(prompt_ids, batch_one=False)
    cache, total = new_cache(model), num_layers(model)
    out, step = [], ids
    for _ in range(n_new):
        hidden = run_layers(model, embed(model, step), 0, total, cache)
        step = final_logits(model, hidden[:, -1:]).argmax(-1)
        out.append(step)
    return torch.cat(out, dim=1) if out else ids[:, :0]


@dataclass
class SpecRounds:
    """The rounds of a self-speculative decode (real or simulated) with exit k and draft length
    d: per round the drafts made and the drafts accepted (each round also emits one verifier
    token)."""

    k: int
    d: int
    accepted: list[int] = field(default_factory=list)
    drafted: list[int] = field(default_factory=list)

    @property
    def rounds(self) -> int:
        return len(self.accepted)

    @property
    def emitted(self) -> int:
        """Tokens the rounds produced: accepted drafts plus one verifier token per round."""
        return sum(self.accepted) + self.rounds

    @property
    def acceptance_rate(self) -> float:
        """Accepted drafts over drafts made (nan when none was made)."""
        drafted = sum(self.drafted)
        return sum(self.accepted) / drafted if drafted else float("nan")

    @property
    def mean_accepted(self) -> float:
        return sum(self.accepted) / self.rounds if self.rounds else float("nan")

    @property
    def tokens_per_round(self) -> float:
        return self.emitted / self.rounds if self.rounds else float("nan")

    def then(self, other: SpecRounds) -> SpecRounds:
        """These rounds followed by `other`'s (k and d: other's)."""
        return SpecRounds(other.k, other.d, self.accepted + other.accepted,
                          self.drafted + other.drafted)


@dataclass
class SpecDecode(SpecRounds):
    """A real self-speculative decode: its rounds and the tokens it produced."""

    tokens: list[int] = field(default_factory=list)


def _check_exit(exits: DecoderExits, k: int, d: int) -> None:
    if k not in exits.layers:
        raise UsageError(f"no exit at layer {k}", hint=f"exits: {list(exits.layers)}")
    if d < 0:
        raise UsageError(f"draft length must be >= 0, got {d}")


@torch.no_grad()
def self_speculative_decode(model: nn.Module, exits: DecoderExits, prompt_ids: torch.Tensor,
                            n_new: int, k: int, d: int) -> SpecDecode:
    """LayerSkip self-speculative greedy decoding of `n_new` tokens (batch size 1 only):
    draft d tokens with layers 1..k and exit k, verify with layers k+1..L reusing the draft's
    cache and layer-k states. See the module docstring for one round."""
    _check_exit(exits, k, d)
    pending = _prompt(prompt_ids, batch_one=True)
    total, cache = num_layers(model), new_cache(model)
    result = SpecDecode(k, d)
    while len(result.tokens) < n_new:
        drafts_wanted = min(d, n_new - len(result.tokens) - 1)
        start = cached_length(cache, 0)  # every layer holds positions 0..start-1
        hidden = run_layers(model, embed(model, pending), 0, k, cache)
        saved, drafts = [hidden], []
        for _ in range(drafts_wanted):
            draft = exits.logits(model, k, hidden[:, -1:]).argmax(-1)  # [1, 1]
            drafts.append(int(draft))
            hidden = run_layers(model, embed(model, draft), 0, k, cache)
            saved.append(hidden)
        states = torch.cat(saved, dim=1)
        positions = torch.arange(start, start + states.shape[1], device=states.device)[None]
        top = run_layers(model, states, k, total, cache, position_ids=positions)
        verified = final_logits(model, top[:, -(drafts_wanted + 1):]).argmax(-1)[0].tolist()
        accepted = 0
        while accepted < drafts_wanted and drafts[accepted] == verified[accepted]:
            accepted += 1
        result.tokens += drafts[:accepted] + [verified[accepted]]
        result.accepted.append(accepted)
        result.drafted.append(drafts_wanted)
        crop_cache(cache, start + pending.shape[1] + accepted)
        pending = torch.tensor([[verified[accepted]]], device=states.device)
    return result


@torch.no_grad()
def hf_early_exit_generate(model: nn.Module, prompt_ids: torch.Tensor, n_new: int, k: int,
                           d: int) -> SpecDecode:
    """transformers' self-speculation peer: `generate(assistant_early_exit=k)`, greedy, exactly
    `n_new` tokens, d drafts per round (no confidence stop), batch size 1. The draft is the logit
    lens at layer k (the model's own norm and head), whatever exits a caller trained.

    Its rounds are read by wrapping `EarlyExitCandidateGenerator.update_candidate_strategy`
    (called once per round with the verifier's logits and the matches) for the duration of the
    call: not thread-safe with other generate calls in the same process."""
    from transformers.generation.candidate_generator import EarlyExitCandidateGenerator as Gen

    ids = _prompt(prompt_ids, batch_one=True)
    config = model.generation_config
    saved = {name: getattr(config, name, None) for name in
             ("num_assistant_tokens", "num_assistant_tokens_schedule",
              "assistant_confidence_threshold")}
    result, update = SpecDecode(k, d), Gen.update_candidate_strategy

    def record(self, input_ids, scores, num_matches):  # noqa: ANN001 (transformers' signature)
        result.accepted.append(int(num_matches))
        result.drafted.append(int(scores.shape[1]) - 1)
        return update(self, input_ids, scores, num_matches)

    try:
        config.num_assistant_tokens = d
        config.num_assistant_tokens_schedule = "constant"
        config.assistant_confidence_threshold = 0.0
        Gen.update_candidate_strategy = record
        out = model.generate(ids, attention_mask=torch.ones_like(ids), assistant_early_exit=k,
                             do_sample=False, max_new_tokens=n_new, min_new_tokens=n_new)
    finally:
        Gen.update_candidate_strategy = update
        for name, value in saved.items():
            setattr(config, name, value)
    result.tokens = out[0, ids.shape[1]:].tolist()
    return result
