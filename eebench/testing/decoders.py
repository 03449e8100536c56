"""The conformance kit's runs of a decoder method (eebench.methods.protocols.Decodes: static,
self-spec, CALM, EE-Tuning, a plugin's), as `eebench decode` runs it.

On the tiny damped Llama over the byte tokenizer (eebench.testing.tiny_decoder: its exits agree
with the full model often but not always), with a few made-up reviews as imdb-lm's data, one
decoder run per decoder task the method does, of that method alone: with logit-lens exits, or,
where the method does not fit those (EE-Tuning), adapter exits trained a few steps. Checked: the
run makes points of the method, each a valid DecoderPoint of the run's samples with its main
metric per sample (`sample_main`) in range, FLOPs per token below the full model's where the
point exits early; on humaneval-gen the run is timed (one prompt, one call), so the method's
real decodes to time (`timed_decodes`, if any) run too.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

REVIEWS = ("A quiet film that grows on you, with a lead who carries every scene.",
           "The plot makes no sense and the jokes land nowhere; two hours lost.",
           "Good music, weak script, and an ending that forgets the start.")


def check_decoder_runs(report: Any, method: Any, root: Path) -> None:
    """One decoder run per decoder task of `method` (see the module docstring)."""
    from eebench.methods.decoder_derived import decoder_refusal, decoder_tasks

    model, data = _tiny_decoder(root / "decoder"), _reviews(root / "decoder-data")
    for task in decoder_tasks(method):
        where = f"decoder run on {task}"
        cfg = next((c for c in _configs(model, task, method.name)
                    if decoder_refusal(method, c) is None), None)
        if cfg is None:
            report.problems.append(f"{where}: it fits neither logit-lens nor trained exits")
            continue
        with report.check(f"{where} ({cfg.exits.head} exits): it makes valid points"):
            _check_run(method, cfg, root / "decoder-runs", data)


def _configs(model: Path, task: str, name: str) -> list[Any]:
    from eebench.run.decoding import DecodeConfig

    common = {"model": str(model), "task": task, "methods": (name,),
              "timing": task == "humaneval-gen", "timing_prompts": 1, "timing_repeats": 1,
              "data": {"samples": 2, "new_tokens": 6, "max_tokens": 24, "seed": 0},
              "thresholds": (0.2, 0.9), "draft_lengths": (1, 2), "tuning_samples": 2}
    return [DecodeConfig(exits={"layers": (1, 2, 3)}, **common),
            DecodeConfig(exits={"layers": (1, 2, 3), "head": "adapter", "rank": 4},
                         tuning_steps=2, **common)]


def _check_run(method: Any, cfg: Any, out: Path, data: Path) -> None:
    from eebench.run.decoding import DecodeOptions, run_decoder

    run = run_decoder(cfg, DecodeOptions(out=out, data_dir=data, overwrite=True, device="cpu"))
    full, points = run.points[0], [p for p in run.points if p.method == method.name]
    assert full.method == "full", f"the first point is {full.method!r}, not the full model's"
    assert points, f"no point of {method.name!r} among {sorted({p.method for p in run.points})}"
    others = {p.method for p in run.points} - {"full", method.name}
    assert not others, f"points of other methods: {sorted(others)}"
    for p in points:
        assert p.n_samples == run.summary.n_samples, f"{p.setting}: n_samples {p.n_samples}"
        assert p.sample_main is not None and len(p.sample_main) == p.n_samples, \
            f"{p.setting}: sample_main {p.sample_main}"
        assert all(math.isfinite(v) and 0 <= v <= 100 for v in p.sample_main), p.sample_main
        assert math.isfinite(p.main) and p.flops_per_token > 0, f"{p.setting}: {p.main}"
        if p.mean_exit_layer is not None and p.mean_exit_layer < p.num_layers:
            assert p.flops_per_token < full.flops_per_token * 1.5, \
                f"{p.setting}: {p.flops_per_token} FLOPs per token"
        for timing in (p.timing, p.peer_timing):
            assert timing is None or timing.ms_per_token > 0, f"{p.setting}: {timing}"


def _tiny_decoder(path: Path) -> Path:
    """The damped tiny Llama over the byte tokenizer, as a model directory (once)."""
    if not (path / "config.json").is_file():
        from eebench.models.decoders import quiet, tiny_tokenizer
        from eebench.testing.tiny_decoder import tiny_llama

        with quiet():
            tiny_llama(vocab_size=259).save_pretrained(str(path))
            tiny_tokenizer().save_pretrained(str(path))
    return path


def _reviews(root: Path) -> Path:
    """A data directory whose IMDb/{train,test}.tsv hold the kit's reviews."""
    (root / "IMDb").mkdir(parents=True, exist_ok=True)
    rows = "".join(f"{text}\t{i % 2}\t{i}\t{7 if i % 2 else 2}\n"
                   for i, text in enumerate(REVIEWS))
    for split in ("train", "test"):
        (root / "IMDb" / f"{split}.tsv").write_text("sentence\tlabel\tid\trating\n" + rows,
                                                    encoding="utf-8")
    return root
