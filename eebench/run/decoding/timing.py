"""Wall time of real decoding at batch size 1: greedy, self-spec, transformers' peer, CALM.

Each path decodes exactly `new_tokens` tokens after each of the first `timing_prompts` prompts:
one first (cold) call, reported apart, then `timing_repeats` timed calls per prompt. On CPU the
clock is time.perf_counter; with CUDA, torch.cuda.Event pairs (synchronised). Speed-ups are set
against full greedy decoding timed in the same process.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import torch
from torch import nn

from eebench.models.decoder_exits import DecoderExits
from eebench.rules.calm_decoding import calm_decode
from eebench.rules.self_speculation import (
    greedy_decode,
    hf_early_exit_generate,
    self_speculative_decode,
)
from eebench.run.decoding.records import DecodeConfig, DecoderPoint, DecodeTiming


def device_name(device: torch.device) -> str:
    if device.type == "cuda":
        return f"cuda: {torch.cuda.get_device_name(device)}"
    return f"cpu ({torch.get_num_threads()} threads)"


def _elapsed_ms(fn: Callable[[], object], device: torch.device) -> tuple[float, object]:
    if device.type == "cuda":
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        out = fn()
        end.record()
        torch.cuda.synchronize(device)
        return float(start.elapsed_time(end)), out
    t0 = time.perf_counter()
    out = fn()
    return (time.perf_counter() - t0) * 1e3, out


def time_path(decode: Callable[[torch.Tensor], list[int]], prompts: list[torch.Tensor],
              reference: list[list[int]], cfg: DecodeConfig, device: torch.device,
              baseline_ms: float | None = None) -> DecodeTiming:
    """Time `decode(prompt) -> tokens` over the prompts (the first call apart)."""
    n_new = cfg.data.new_tokens
    first, _ = _elapsed_ms(lambda: decode(prompts[0]), device)
    raw, same = [], True
    for prompt, ref in zip(prompts, reference):
        for _ in range(cfg.timing_repeats):
            ms, tokens = _elapsed_ms(lambda p=prompt: decode(p), device)
            raw.append(ms)
            same = same and list(tokens) == list(ref)
    per_token = sum(raw) / len(raw) / n_new
    return DecodeTiming(device=device_name(device), new_tokens=n_new, prompts=len(prompts),
                        first_call_ms=first, ms_per_token=per_token,
                        tokens_per_s=1e3 / per_token,
                        wall_speedup=None if baseline_ms is None else baseline_ms / per_token,
                        raw_ms=raw, same_tokens=same)


def time_points(model: nn.Module, exits: DecoderExits, prompts: list[torch.Tensor],
                reference: list[list[int]], points: list[DecoderPoint], cfg: DecodeConfig,
                tick: Callable[[str], None]) -> list[DecoderPoint]:
    """Timings added to the full point, the checked self-spec points (with transformers' peer
    at the same k and d) and the CALM points decoded for real."""
    device = next(model.parameters()).device
    prompts, reference = prompts[:cfg.timing_prompts], reference[:cfg.timing_prompts]
    n_new = cfg.data.new_tokens
    greedy = time_path(lambda p: greedy_decode(model, p[None], n_new)[0].tolist(), prompts,
                       reference, cfg, device)
    tick("timing")
    base, out = greedy.ms_per_token, []
    greedy = greedy.model_copy(update={"wall_speedup": 1.0})
    checked = set(cfg.checked_spec_points())
    real = set(cfg.real_thresholds())
    for point in points:
        s = point.setting
        update: dict = {}
        if point.method == "full":
            update = {"timing": greedy}
        elif point.method == "self-spec" and (s["k"], s["d"]) in checked:
            k, d = int(s["k"]), int(s["d"])
            update = {"timing": time_path(
                lambda p, k=k, d=d: self_speculative_decode(model, exits, p, n_new, k, d).tokens,
                prompts, reference, cfg, device, base),
                "peer_timing": time_path(
                lambda p, k=k, d=d: hf_early_exit_generate(model, p, n_new, k, d).tokens,
                prompts, reference, cfg, device, base)}
            tick("timing")
        elif point.method == "calm" and s["threshold"] in real:
            threshold = float(s["threshold"])
            update = {"timing": time_path(
                lambda p, t=threshold: calm_decode(model, exits, p, n_new, t, cfg.measure).tokens,
                prompts, reference, cfg, device, base)}
            tick("timing")
        out.append(point.model_copy(update=update) if update else point)
    return out
