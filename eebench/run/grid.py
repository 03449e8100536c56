"""A benchmark config (a file with the command line merged in) -> its runs, each a validated
RunConfig, before anything trains: a typo in the last task or a bad sweep value should not wait
for hours of training to be found.
"""

from __future__ import annotations

from dataclasses import dataclass

from eebench.errors import UsageError
from eebench.methods.base import get_method
from eebench.run.artifacts import RunConfig
from eebench.run.config import BenchConfig
from eebench.tasks.loaders import resolve_split
from eebench.tasks.spec import get_task


@dataclass(frozen=True)
class Grid:
    runs: list[RunConfig]
    skipped: list[tuple[str, str]]  # (method, task) pairs left out: the method cannot do the task


def expand(config: BenchConfig, skip_unrunnable: bool = True) -> Grid:
    """Every seed x task x method of `config`, seed by seed and task by task (a benchmark stopped
    half-way has whole seeds to show). A grid skips the pairs a method cannot run (entropy on
    regression); with `skip_unrunnable` off (one pair asked for by name) they are refused."""
    jobs = [(m, t, s) for s in config.seeds for t in config.tasks for m in config.methods]
    skipped: list[tuple[str, str]] = []
    if skip_unrunnable:
        runnable = [(m, t, s) for m, t, s in jobs
                    if get_method(m).supports_regression or not get_task(t).is_regression]
        skipped = sorted({(m, t) for m, t, _ in jobs} - {(m, t) for m, t, _ in runnable})
        jobs = runnable
    return Grid([run_config_for(config, m, t, s) for m, t, s in jobs], skipped)


def run_config_for(config: BenchConfig, method: str, task: str, seed: int) -> RunConfig:
    """One run of `config`: names, split, method settings, every sweep value (the method's own
    grid when none is given) and training settings checked; the pooling resolved (None: the way
    the backbone was pretrained to pool)."""
    from eebench.measure.flops import CONVENTIONS
    from eebench.models.backbones import resolve_pooling
    from eebench.run.execute import backbone_layers

    pooling = resolve_pooling(config.model, config.pooling)
    spec = get_task(task)
    m = get_method(method, **config.methods_settings.get(method, {}))
    m.check_task(spec)
    split = resolve_split(spec, config.split)  # the loaders' names and aliases
    if split == "train":
        raise UsageError("--split train: runs are evaluated on dev or test",
                         hint="the training split is what the model learns from")
    sweep = config.sweeps.get(method)
    if sweep is None:
        sweep = m.default_sweep(backbone_layers(config.model), spec.is_regression,
                                spec.num_labels)
    for variant in m.variants(sweep):  # every sweep value checked before anything trains
        for value in variant.values:
            variant.method.exit_rule(value, spec.is_regression)
    train = config.training(spec, seed)
    if config.flops_convention not in CONVENTIONS:
        raise UsageError(f"unknown FLOPs convention {config.flops_convention!r}",
                         hint=f"choose from: {', '.join(CONVENTIONS)}")
    budget = config.for_task(spec.name)
    return RunConfig(
        model=config.model, pooling=pooling, method=m.name, method_settings=m.settings,
        task=spec.name, split=split, seed=seed, sweep=[float(v) for v in sweep],
        train=train, max_seq_length=budget.max_seq_length,
        max_eval_samples=budget.max_eval_samples, flops_convention=config.flops_convention,
        timing=config.timing,
    )
