"""What a grid config names is known, given once and spelt one way: its methods, rules and
tasks (the registries' names), the keys of its per-method and per-task tables, and a grid within
`MAX_GRID_RUNS` (`eebench.run.config` checks every config it reads or merges through here); and
what a grid needs of the backbone it names (its depth, its positions, its family), from the
backbones' own table wherever it says, so that expanding a grid reads no model.
"""

from __future__ import annotations

from typing import Any

from eebench.errors import EebenchError, UsageError

MAX_GRID_RUNS = 10_000  # seeds x tasks x methods x (1 + rules): the largest benchmark has 240


def backbone_layers(model: str) -> int:
    """The backbone's depth: a registered backbone's or a well-known hub id's from a table
    (`known_depth`: nothing is read or downloaded), else from its config (converted where its
    family needs it)."""
    from eebench.models.backbones import known_depth, load_config

    known = known_depth(model)
    return known if known is not None else int(load_config(model).num_hidden_layers)


def backbone_max_tokens(model: str) -> int | None:
    """The longest sequence the backbone holds (its family's count of positions): a registered
    backbone's from its table, else from the config of its local directory; None for a hub id
    (registered or not), whose length training checks once it has the model (listing a grid
    downloads nothing)."""
    from pathlib import Path

    from eebench.models.backbones import BACKBONES, load_config, resolve_backbone

    if model in BACKBONES:  # a bundled one's from the table; a hub id's (None) checked later
        return BACKBONES.get(model).max_tokens
    if not Path(resolve_backbone(model)).is_dir():
        return None
    from eebench.models.families import family_of

    config = load_config(model)
    return family_of(config).max_tokens(config)


def backbone_family(model: str) -> str:
    """The backbone's family (its config's model_type): a registered backbone's from its table,
    else from its config."""
    from eebench.models.backbones import BACKBONES, load_config

    if model in BACKBONES:
        return BACKBONES.get(model).family
    return str(getattr(load_config(model), "model_type", "?"))

def check_names(config: Any, where: str = "", own: bool = False) -> None:
    """Every name a config (a `BenchConfig`) gives is known, and given once: its methods, tasks,
    rules and eval task; the keys of [methods_settings] (a method; its settings checked by the
    method's own Settings model), [sweeps] (a method, or method+rule) and [tasks_settings] (a
    task, one table per task); the stages [train] overrides. `own`: the config as its file gives
    it, whose settings for a method (or a rule) must be for one it lists, where it lists them. The
    grid stays within MAX_GRID_RUNS. A length in [train] is refused: the top-level max_seq_length
    (or a task's) is the one a run trains and evaluates with. One line, exit code 2, naming the
    setting."""
    from eebench.methods.base import get_method
    from eebench.rules.catalog import get_rule
    from eebench.tasks.catalog import get_task

    def refuse(setting: str, message: str, hint: str | None = None) -> None:
        raise UsageError(f"{where}setting {setting}: {message}", hint=hint)

    def named(setting: str, lookup: Any, name: str, **settings: Any) -> str:
        try:
            return lookup(name, **settings).name
        except EebenchError as e:
            refuse(setting, e.message, e.hint)
            raise  # not reached

    runs = (len(config.seeds) * max(1, len(config.tasks)) * max(1, len(config.methods))
            * (1 + len(config.rules)))
    if runs > MAX_GRID_RUNS:
        refuse("seeds", f"the grid has {runs:,} runs (seeds x tasks x methods x (1 + rules)), "
               f"over the bound of {MAX_GRID_RUNS:,}", hint="split it into several configs")
    methods = _canonical("methods", [named("methods", get_method, m) for m in config.methods],
                         config.methods, refuse)
    rules = _canonical("rules", [named("rules", get_rule, r) for r in config.rules],
                       config.rules, refuse)
    _canonical("tasks", [named("tasks", get_task, t) for t in config.tasks], config.tasks,
               refuse)
    if config.eval_task is not None:
        named("eval_task", get_task, config.eval_task)
    _canonical("tasks_settings", [named(f"tasks_settings.{t}", get_task, t)
                                  for t in config.tasks_settings], list(config.tasks_settings),
               refuse)

    def listed(setting: str, method: str, rule: str | None = None) -> None:
        if own and methods and method not in methods:
            refuse(setting, f"{method} is not one of the config's methods "
                   f"({', '.join(config.methods)})", hint="add it to methods, or remove the "
                   "setting")
        if own and rule is not None and rules and rule not in rules:
            refuse(setting, f"{rule} is not one of the config's rules ({', '.join(config.rules)})",
                   hint="add it to rules, or remove the setting")

    for key, settings in config.methods_settings.items():
        listed(f"methods_settings.{key}",
               named(f"methods_settings.{key}", get_method, key, **settings))
    for key in config.sweeps:
        method, plus, rule = key.partition("+")
        m = named(f"sweeps.{key}", get_method, method)
        listed(f"sweeps.{key}", m, named(f"sweeps.{key}", get_rule, rule) if plus else None)
    stages = {m: [s.name for s in get_method(m, **config.methods_settings.get(m, {})).stages()]
              for m in methods}
    for table, train in (("train", config.train), *((f"tasks_settings.{t}.train", s.train)
                                                     for t, s in config.tasks_settings.items())):
        if "max_seq_length" in train.model_fields_set:  # `training` sets it from the budget
            refuse(f"{table}.max_seq_length", f"unknown in [{table}]: the length a run "
                   "trains and evaluates with is the top-level max_seq_length",
                   hint="move it to the top level, or to [tasks_settings.TASK]")
        for stage in train.stage_overrides:
            for m, names in stages.items():  # training refuses a stage its method lacks
                if stage not in names:
                    refuse(f"{table}.stage_overrides.{stage}", f"method {m} has no stage "
                           f"{stage!r}", hint=f"its stages are: {', '.join(names)}")


def _canonical(setting: str, names: list[str], given: list[str], refuse: Any) -> list[str]:
    """`names` (each given name's canonical one), refusing two that name the same thing."""
    seen: dict[str, str] = {}
    for name, as_given in zip(names, given):
        if name in seen:
            refuse(setting, f"{as_given!r} and {seen[name]!r} are the same {name!r}")
        seen[name] = as_given
    return names
