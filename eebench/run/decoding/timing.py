"""Wall time of real decoding at batch size 1: greedy, and what each decoder method decodes for
real (self-spec beside transformers' peer, CALM).

Each path decodes exactly `new_tokens` tokens after each of the first `timing_prompts` prompts:
one first (cold) call, reported apart, then `timing_repeats` timed calls per prompt. On CPU the
clock is time.perf_counter; with CUDA, torch.cuda.Event pairs (synchronised). Speed-ups are set
against full greedy decoding timed in the same process.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import torch

from eebench.errors import DataError
from eebench.methods.decoder_derived import decodes_batches, timed_decodes
from eebench.methods.decoding import DecodeContext
from eebench.rules.self_speculation import greedy_decode
from eebench.run.decoding.records import DecodeConfig, DecoderPoint, DecodeTiming

TIMED_FIELDS = {"timing", "peer_timing"}  # what a method's real decodes fill on its point


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


def time_points(ctx: DecodeContext, methods: dict[str, Any], points: list[DecoderPoint],
                tick: Callable[[str], None]) -> list[DecoderPoint]:
    """Timings added to the full point (the first) and to the points whose method has real
    decodes to time (`derived.timed_decodes`: self-spec's checked points with transformers'
    peer at the same k and d, CALM at the thresholds decoded for real)."""
    cfg, model = ctx.cfg, ctx.model
    device = next(model.parameters()).device
    prompts = ctx.samples[:cfg.timing_prompts]
    reference = [t.tokens.tolist() for t in ctx.traces[:cfg.timing_prompts]]
    n_new = cfg.data.new_tokens
    greedy = time_path(lambda p: greedy_decode(model, p[None], n_new)[0].tolist(), prompts,
                       reference, cfg, device)
    tick("timing")
    base = greedy.ms_per_token
    out = [points[0].model_copy(update={"timing": greedy.model_copy(
        update={"wall_speedup": 1.0})})]
    for point in points[1:]:
        method = methods.get(point.method)
        decodes = timed_decodes(method, ctx, point) if method is not None else {}
        wrong = set(decodes) - TIMED_FIELDS
        if wrong:
            raise DataError(f"method {point.method!r} times {sorted(wrong)}: a point has "
                            f"{', '.join(sorted(TIMED_FIELDS))}")
        update = {name: time_path(decode, prompts, reference, cfg, device, base)
                  for name, decode in decodes.items()}
        if update:
            tick("timing")
        out.append(point.model_copy(update=update) if update else point)
    if cfg.timing_batch:
        out = time_batches(ctx, methods, out, tick)
    return out


def cut_prompts(prompts: list[torch.Tensor], batch: int) -> torch.Tensor:
    """The first `batch` prompts, each cut to the shortest one's length (its last tokens, where
    generation continues), as one batch [batch, P] that needs no padding."""
    if len(prompts) < batch:
        raise DataError(f"timing at batch size {batch} needs {batch} prompts, the run has "
                        f"{len(prompts)}", hint="raise --samples or lower --timing-batch")
    length = min(len(p) for p in prompts[:batch])
    return torch.stack([p[len(p) - length:] for p in prompts[:batch]])


def time_batches(ctx: DecodeContext, methods: dict[str, Any], points: list[DecoderPoint],
                 tick: Callable[[str], None]) -> list[DecoderPoint]:
    """`batch_timing` of the full model and of each point whose method's decoding batches
    (a truncation at exit k): the batch decoded at once, first call apart, against the full
    model decoding the same cut prompts one at a time; the rows must equal those bs-1 decodes
    (`same_tokens`)."""
    from eebench.models.decoder_exits import num_layers
    from eebench.rules.decoder_tf import truncated_greedy_batch

    cfg, model, exits = ctx.cfg, ctx.model, ctx.exits
    device = next(model.parameters()).device
    batch, n_new, total = cfg.timing_batch, cfg.data.new_tokens, num_layers(model)
    ids = cut_prompts(ctx.samples, batch)
    one = [row[None] for row in ids]
    singles = [greedy_decode(model, row, n_new)[0].tolist() for row in one]
    baseline = time_path(lambda p: greedy_decode(model, p, n_new)[0].tolist(), one, singles,
                         cfg, device)

    def timed(k: int) -> DecodeTiming:
        reference = [truncated_greedy_batch(model, exits, row, n_new, k)[0].tolist()
                     for row in one]  # the same truncation, one prompt at a time
        t = time_path(lambda p: truncated_greedy_batch(model, exits, p, n_new, k).tolist(),
                      [ids], [reference], cfg, device)
        per_token = t.ms_per_token / batch
        return t.model_copy(update={
            "batch": batch, "prompts": batch, "ms_per_token": per_token,
            "tokens_per_s": 1e3 / per_token, "wall_speedup": baseline.ms_per_token / per_token})

    out = []
    for point in points:
        method = methods.get(point.method)
        batches = point.method == "full" or (method is not None and decodes_batches(method))
        k = point.setting.get("k")
        if batches and isinstance(k, int) and (k == total or k in exits.layers):
            point = point.model_copy(update={"batch_timing": timed(k)})
        out.append(point)
    tick("timing")
    return out
