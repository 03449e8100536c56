"""Checks of a decoder submission (eebench.submit.schema.DecoderSubmission) from anyone: what
no schema can say, recomputed from the file's own numbers.

`check_decoder_submission` refuses, in one line naming where:

- a point whose mflops_per_token is not flops_per_token / 1e6, or whose flops_speedup is not the
  full model's FLOPs per token over its own;
- the full model's and each static truncation's FLOPs per token that the recorded shapes, exit
  head, sample token lengths and generated tokens do not give (eebench.measure.decoder_flops,
  as the run counted them);
- a metric that is not the task's, out of its range, or a share no whole number of tokens (or,
  for exact_match, samples) gives; main not its main metric;
- sample counts that disagree (n_samples, sample_ids, sample_tokens; n_tokens: samples x
  generated tokens, or every predicted position);
- a run without exactly one full-model point at 100 % agreement, static exits that are not
  exit layers, a mean exit layer outside 1..L, seeds or environments that do not match.
"""

from __future__ import annotations

import math

from eebench.errors import DataError, EebenchError
from eebench.submit.counts import check_task_metrics, is_whole
from eebench.submit.decoder_schema import (
    DecoderPointEntry,
    DecoderRunEntry,
    DecoderSubmission,
    DecoderTaskEntry,
)

TOKEN_SHARES = ("token_agreement", "top1_agreement", "next_token_accuracy")  # over tokens
SAMPLE_SHARES = ("exact_match",)  # over samples
REL = 1e-9  # FLOPs are sums of integers divided by counts: equal to float rounding


# ------------------------------------------------------------------------------------ checks
def _close(a: float, b: float, rel: float = 1e-6) -> bool:
    return math.isclose(a, b, rel_tol=rel, abs_tol=1e-9)


def _recomputed(sub: DecoderSubmission, run: DecoderRunEntry, k: int) -> float:
    """FLOPs per token of the model truncated at exit k (k = L: the full model), as the run
    counted them."""
    from eebench.measure.decoder_flops import (
        DecoderShape,
        exit_head_flops,
        greedy_flops,
        static_flops,
        teacher_forced_flops,
    )

    s = DecoderShape(**sub.model.shape.model_dump())
    head = exit_head_flops(s, sub.model.rank)
    lengths = run.sample_tokens
    if run.decoding == "greedy":
        n_new = run.new_tokens or 0
        per = [greedy_flops(s, p, n_new).per_token if k == s.layers
               else static_flops(s, p, n_new, k, head).per_token for p in lengths]
        return sum(per) / len(per)
    count = sum(t - 1 for t in lengths)
    return sum(teacher_forced_flops(s, t, k, None if k == s.layers else head)
               for t in lengths) / count


def _check_metrics(p: DecoderPointEntry, where: str, t: DecoderTaskEntry, spec, n_tokens: int,
                   n_samples: int) -> None:
    from eebench.tasks.lm_metrics import PERCENT

    if set(p.metrics) != set(t.metrics):
        raise DataError(f"{where}: metrics {sorted(p.metrics)} differ from the task's {t.metrics}")
    for name, value in p.metrics.items():
        if name in PERCENT and not 0 <= value <= 100:
            raise DataError(f"{where}: {name} {value} is outside [0, 100]")
        if name == "perplexity" and value < 1:
            raise DataError(f"{where}: perplexity {value} is below 1")
        count = n_tokens if name in TOKEN_SHARES else n_samples if name in SAMPLE_SHARES else 0
        if count and not is_whole(value * count / 100):
            raise DataError(f"{where}: {name} {value:.6g} is no whole number of its {count} "
                            f"{'tokens' if name in TOKEN_SHARES else 'samples'}")
    if p.main != p.metrics[spec.main_metric]:
        raise DataError(f"{where}: main {p.main} is not its {spec.main_metric} "
                        f"{p.metrics[spec.main_metric]}")


def _check_run(sub: DecoderSubmission, task: str, t: DecoderTaskEntry, run: DecoderRunEntry,
               where: str, spec) -> None:
    L = sub.model.shape.layers
    n = len(run.sample_ids)
    if len(run.sample_tokens) != n or len(set(run.sample_ids)) != n:
        raise DataError(f"{where}: {n} sample ids (each once) for {len(run.sample_tokens)} "
                        "sample token lengths")
    if run.decoding != spec.decoding:
        raise DataError(f"{where}: decoding {run.decoding!r} is not the task's {spec.decoding!r}")
    if run.decoding == "greedy":
        if run.new_tokens is None:
            raise DataError(f"{where}: a greedy run without its new_tokens")
        n_tokens = n * run.new_tokens
    else:
        if any(x < 2 for x in run.sample_tokens):
            raise DataError(f"{where}: a teacher-forced text of fewer than 2 tokens")
        n_tokens = sum(x - 1 for x in run.sample_tokens)
    if run.environment >= len(sub.environments):
        raise DataError(f"{where}: environment {run.environment} does not exist "
                        f"({len(sub.environments)} given)")
    full = [p for p in run.points if p.method == "full"]
    if len(full) != 1:
        raise DataError(f"{where}: {len(full)} points of the full model, not one")
    full_flops = full[0].flops_per_token
    for j, p in enumerate(run.points):
        at = f"{where}.points.{j}"
        if p.n_samples != n or p.n_tokens != n_tokens:
            raise DataError(f"{at}: {p.n_samples} samples and {p.n_tokens} tokens, not the run's "
                            f"{n} samples and {n_tokens} tokens")
        _check_metrics(p, at, t, spec, n_tokens, n)
        if not _close(p.mflops_per_token, p.flops_per_token / 1e6):
            raise DataError(f"{at}: mflops_per_token {p.mflops_per_token} is not "
                            "flops_per_token / 1e6")
        if not _close(p.flops_speedup, full_flops / p.flops_per_token):
            raise DataError(f"{at}: flops_speedup {p.flops_speedup} is not the full model's "
                            f"FLOPs per token over its own ({full_flops / p.flops_per_token:.6g})")
        if p.mean_exit_layer is not None and not 1 <= p.mean_exit_layer <= L:
            raise DataError(f"{at}: mean_exit_layer {p.mean_exit_layer} is outside 1..{L}")
        if p.method not in ("full", "static"):
            continue
        k = p.setting.get("k")
        if p.method == "full" and k != L or p.method == "static" and (
                k not in sub.model.exit_layers or k == L):
            raise DataError(f"{at}: {p.method} at k={k} in a {L}-layer model with exits "
                            f"{sub.model.exit_layers}")
        if p.method == "full" and p.main != 100:
            raise DataError(f"{at}: the full model agrees {p.main} % with itself, not 100 %")
        expected = _recomputed(sub, run, int(k))  # type: ignore[arg-type]
        if not _close(p.flops_per_token, expected, REL):
            raise DataError(f"{at}: {p.method} k={k} costs {p.flops_per_token:.10g} FLOPs per "
                            f"token, not the {expected:.10g} its model's shapes and sample "
                            "lengths give")


def check_decoder_submission(sub: DecoderSubmission) -> None:
    """Everything the schema cannot say (the module docstring); DataError on the first."""
    from eebench.tasks.catalog import get_task

    m = sub.model
    if m.shape.heads * m.shape.head_dim <= 0 or m.shape.heads % m.shape.kv_heads:
        raise DataError(f"model.shape: {m.shape.heads} heads over {m.shape.kv_heads} "
                        "key/value heads")
    if sorted(set(m.exit_layers)) != m.exit_layers or m.exit_layers[-1] >= m.shape.layers:
        raise DataError(f"model.exit_layers {m.exit_layers}: not ascending exits below the "
                        f"{m.shape.layers} layers")
    if (m.head == "adapter") != (m.rank is not None):
        raise DataError("model.rank: an adapter's bottleneck, given exactly for adapter exits")
    seeds: set[int] = set()
    for task, t in sub.tasks.items():
        try:
            spec = get_task(task)
        except EebenchError as e:
            raise DataError(f"tasks.{task}: unknown task", hint=e.hint) from None
        if spec.name != task or getattr(spec, "decoding", None) is None:
            raise DataError(f"tasks.{task}: not a decoder task")
        check_task_metrics(task, t.main_metric, t.metrics, spec)
        run_seeds = [r.seed for r in t.runs]
        if len(set(run_seeds)) != len(run_seeds):
            raise DataError(f"tasks.{task}: a seed appears in two runs ({sorted(run_seeds)})")
        seeds.update(run_seeds)
        for i, run in enumerate(t.runs):
            _check_run(sub, task, t, run, f"tasks.{task}.runs.{i}", spec)
    if sorted(set(sub.seeds)) != sorted(seeds) or len(set(sub.seeds)) != len(sub.seeds):
        raise DataError(f"seeds {sub.seeds} are not the seeds of the runs {sorted(seeds)}")
