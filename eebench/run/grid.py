"""A benchmark config (a file with the command line merged in) -> its runs, each a validated
RunConfig, before anything trains: a typo in the last task or a bad sweep value should not wait
for hours of training to be found.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from eebench.errors import UsageError
from eebench.methods import derived
from eebench.methods.base import get_method
from eebench.methods.units import for_task
from eebench.models.units import unit_of
from eebench.run.artifacts import RunConfig
from eebench.run.config import BenchConfig, entry_configs
from eebench.tasks.catalog import get_task
from eebench.tasks.loaders import resolve_split
from eebench.tasks.spec import TaskSpec
from eebench.train.config import TrainConfig


@dataclass(frozen=True)
class Skipped:
    """A (method or method+rule, task) pair a grid leaves out, and why."""

    method: str
    task: str
    reason: str

    def __str__(self) -> str:
        return f"{self.method} on {self.task}: {self.reason}"


@dataclass(frozen=True)
class Grid:
    runs: list[RunConfig]
    skipped: list[Skipped]  # pairs left out, each with its reason
    # With an eval task (domain shift): run i's in-domain twin, the same training evaluated on
    # its own task (it shares the checkpoint), whose numbers the shifted ones are shown next to
    in_domain: list[RunConfig] = field(default_factory=list)
    # With a test_out: run i's test-split twin, the same models on the test split (labels
    # withheld, nothing timed), run into `test_out` right after it
    test: list[RunConfig] = field(default_factory=list)
    test_out: str | None = None
    # Why the model or checkpoint folder the grid names was not read (`model_unread`): the runs
    # are listed with what needs it unknown (depth, pooling, the weights' record, and so their
    # keys); running them expands the grid again, reading it (eebench.api.run)
    unread: str | None = None


def expand(config: BenchConfig, skip_unrunnable: bool = True, absent_ok: bool = True) -> Grid:
    """Every seed x task x method of `config`, seed by seed and task by task (a benchmark stopped
    half-way has whole seeds to show). A grid skips the pairs a method cannot run (entropy on
    regression); with `skip_unrunnable` off (one pair asked for by name) they are refused.
    A config with [[grids]] is the union of its entries' grids (eebench.run.subgrids).
    `absent_ok`: a local model or checkpoint folder that is not there leaves the runs listed
    with what needs it unknown (`Grid.unread`); off, it is refused in one line, as running the
    grid does."""
    if config.grids:
        return expand_union(config, skip_unrunnable, absent_ok)
    if config.test_out is not None and (config.split != "dev" or config.eval_task is not None):
        what = "--eval-task" if config.eval_task is not None else f"--split {config.split}"
        raise UsageError(f"test_out adds test-split runs beside dev runs; with {what} there "
                         "are none", hint="drop test_out (--test-out), or run the test split "
                         "with --split test")
    unread = model_unread(config) if absent_ok else None
    read = unread is None
    jobs = [(m, t, s) for s in config.seeds for t in config.tasks for m in config.methods]
    skipped: dict[tuple[str, str], str] = {}  # (method, task) -> reason, each pair once
    if skip_unrunnable:
        for m, t, _ in jobs:
            why = refusal(m, get_task(t))  # a unit it has no model for, a regression
            if why is not None:
                skipped[(m, t)] = why
        jobs = [(m, t, s) for m, t, s in jobs if (m, t) not in skipped]
    runs = []
    for m, t, s in jobs:
        runs.append(run_config_for(config, m, t, s, read=read))
        runs += [run_config_for(config, m, t, s, rule, read=read) for rule in
                 rules_for(config, m, t, skipped if skip_unrunnable else None)]
    left_out = [Skipped(m, t, why) for (m, t), why in skipped.items()]
    if config.test_out is not None:
        return Grid(runs, left_out, test=test_twins(config, runs, read),
                    test_out=config.test_out, unread=unread)
    if config.eval_task is None:
        return Grid(runs, left_out, unread=unread)
    own = config.model_copy(update={"eval_task": None})
    return Grid(runs, left_out, [run_config_for(own, r.method, r.trained_on, r.seed, r.rule,
                                                read=read) for r in runs], unread=unread)


def model_unread(config: BenchConfig) -> str | None:
    """Why the model a grid's runs are named by is not read while the grid is expanded, or
    None: a local model folder or checkpoint folder (a path: ./, / or ~) that is not there (yet).
    Nothing is read to find out; a registered backbone's facts are its table's."""
    from pathlib import Path

    source = config.from_checkpoint or config.model
    if not source.startswith((".", "/", "~")) or Path(source).expanduser().exists():
        return None
    what = "model folder" if config.from_checkpoint is None else "checkpoint folder"
    return f"{what} {source} is not there"


def expand_union(config: BenchConfig, skip_unrunnable: bool = True, absent_ok: bool = True
                 ) -> Grid:
    """The runs of every entry of the config's [[grids]], entry by entry; a cell (method or
    method+rule, task, seed) that two entries give is refused, naming both."""
    grids = []
    for i, entry in enumerate(entry_configs(config), 1):
        try:
            grids.append(expand(entry, skip_unrunnable, absent_ok))
        except UsageError as e:  # a sweep value, a method on a task: which entry says so
            raise UsageError(f"grids[{i}]: {e.message}", hint=e.hint) from None
    given: dict[tuple[str, str, int], int] = {}
    for i, grid in enumerate(grids, 1):
        for r in grid.runs:
            first = given.setdefault((r.label, r.task, r.seed), i)
            if first != i:
                raise UsageError(f"grids[{first}] and grids[{i}] both give {r.label} on {r.task}, "
                                 f"seed {r.seed}", hint="give each cell in one entry")
    return Grid(runs=[r for g in grids for r in g.runs],
                skipped=list(dict.fromkeys(s for g in grids for s in g.skipped)),
                in_domain=[r for g in grids for r in g.in_domain],
                test=[r for g in grids for r in g.test], test_out=config.test_out,
                unread=next((g.unread for g in grids if g.unread is not None), None))


def refusal(method: str, task: TaskSpec) -> str | None:
    """Why `method` cannot run on `task` (its unit, a regression its rule cannot do), or None;
    from the method's class, before anything is built (a grid's skipped pairs). Here, where it
    is used: it asks the method and rule registries."""
    from eebench.methods.base import METHODS
    from eebench.rules.catalog import get_rule

    cls = METHODS.get(method)
    unit = unit_of(getattr(task, "unit", None))
    if unit.generates:  # static does decoders too, in eebench decode
        return f"{task.name} is a decoder task: eebench decode runs it"
    if unit.name not in derived.units(cls):
        return (f"{method} has no token model (its {cls.rule} rule decides per text)"
                if unit.per_token else f"{method} does not do what task {task.name} asks "
                f"(it {unit.does})")
    rule = (derived.token_rule(cls) if unit.per_token else cls.rule) or ""
    if getattr(task, "is_regression", False) and rule and not get_rule(rule).supports_regression:
        return f"{method} cannot do regression (its {rule} rule needs classes)"
    return None


def test_twins(config: BenchConfig, runs: list[RunConfig], read: bool = True
               ) -> list[RunConfig]:
    """Each dev run's twin on the test split: the run `--split test --no-timing` names (the
    evaluation budget is dev's alone, `merge`), which reads the same checkpoints."""
    from eebench.run.config import merge

    twin = merge(config.model_copy(update={"test_out": None}),
                 {"split": "test", "timing": {"enabled": False}})
    return [run_config_for(twin, r.method, r.task, r.seed, r.rule, read=read) for r in runs]


def rules_for(config: BenchConfig, method: str, task: str,
              skipped: dict[tuple[str, str], str] | None) -> list[str]:
    """The config's other rules to sweep on `method`'s model for `task`: not its own rule, and
    only rules whose needs the model meets. Where one is not met, a grid notes the pair in
    `skipped` ((method+rule, task) -> the unmet need) and goes on; without `skipped` it is
    refused in one line."""
    from eebench.rules.catalog import get_rule

    spec = get_task(task)
    m = get_method(method, **for_task(config.methods_settings.get(method, {}), spec))
    out = []
    for name in config.rules:
        kind = get_rule(name)
        if kind.name == m.rule:
            continue  # the method's own rule: its plain run
        if kind.unit != m.unit:  # a text's rule on a token model, or the other way round
            why = (f"rule {kind.name!r} decides per {kind.unit}; {m.name}'s model on "
                   f"{spec.name} decides per {m.unit}")
            if skipped is None:
                raise UsageError(why, hint="`eebench rules` shows each rule's unit")
            skipped[(f"{m.name}+{kind.name}", spec.name)] = why
            continue
        # what a rule run trains (execute's own call): the method's one model; static trains
        # one per sweep value, so none here
        if len(m.variants([])) != 1:
            raise UsageError(f"--rule {kind.name}: {m.name} trains {derived.trains(m)}, each with "
                             "one exit: there is no exit to choose", hint="use --rule with methods "
                             "that put exits on one model (eebench methods)")
        try:
            kind.refuse_unless(derived.provided(m, spec.is_regression), f"{m.name} on {spec.name}")
        except UsageError as e:  # its model lacks what the rule needs: the reason, said once
            if skipped is None:
                raise
            skipped[(f"{m.name}+{kind.name}", spec.name)] = e.message
            continue
        out.append(kind.name)
    return out


def check_shift(trained: TaskSpec, evaluated: TaskSpec) -> None:
    """A model trained on one task is evaluated on another only where its outputs mean the same
    there: the same label space (each label id means the same thing, whatever the label strings:
    SST-2 and IMDb are both sentiment, CoLA's "1" is acceptability; see
    eebench.tasks.spec.LABEL_SPACES) and the same kind of input (one text or a pair). Refused in
    one line, before any work."""
    kind = {True: "sentence pairs", False: "single sentences"}

    def meaning(spec: TaskSpec) -> str:
        if spec.label_space is None:
            return "labels of no declared label space"
        if spec.label_meanings is None:
            return f"a {spec.label_space} score"
        return (f"{spec.label_space} labels (" + ", ".join(
            f"{label} = {m}" for label, m in zip(spec.labels or (), spec.label_meanings)) + ")")

    same_space = trained.label_space is not None and trained.label_space == evaluated.label_space
    if not same_space or trained.is_pair != evaluated.is_pair:
        def what(spec: TaskSpec) -> str:
            return f"{kind[spec.is_pair]} with {meaning(spec)}"

        raise UsageError(
            f"--eval-task {evaluated.name}: it has {what(evaluated)}, {trained.name} has "
            f"{what(trained)}", hint="a model can only be evaluated on a task with the same kind "
            "of input whose labels mean the same (`eebench tasks --json` shows each task's "
            "label_space)")


def run_config_for(config: BenchConfig, method: str, task: str, seed: int,
                   rule: str | None = None, read: bool = True) -> RunConfig:
    """One run of `config`: names, split, method settings, every sweep value (the method's own
    grid when none is given; with `rule`, that rule's, swept on the method's model) and training
    settings checked; the pooling resolved (None: the way the backbone was pretrained to
    pool). `read` off: the model is not at hand (`model_unread`), so what needs it stays
    unknown: the sweep unless given (a default one may need the depth), the pooling unless
    given (cls stands in), the weights' record, and the checks against the model's positions
    and family (made when the grid is expanded to run)."""
    from eebench.measure.flops import CONVENTIONS
    from eebench.models.pooling import check_pooling, resolve_pooling
    from eebench.run.names import backbone_layers

    spec = get_task(task)
    evaluated = spec if config.eval_task is None else get_task(config.eval_task)
    if evaluated.name != spec.name:
        check_shift(spec, evaluated)
    settings = for_task(config.methods_settings.get(method, {}), spec)  # a token model?
    weights, model = None, config.from_checkpoint or config.model
    if not read:
        pooling = check_pooling(config.pooling) if config.pooling is not None else "cls"
        m = get_method(method, **settings)
    elif config.from_checkpoint is None:
        pooling = resolve_pooling(config.model, config.pooling)
        m = get_method(method, **settings)
    else:  # weights made elsewhere, checked against the method and the task; nothing trains
        from eebench.train.imported import planned_import

        weights, m = planned_import(config.from_checkpoint, method, settings, spec,
                                    config.pooling)
        pooling = weights.pooling

    def depth() -> int:
        return weights.num_layers if weights is not None else backbone_layers(config.model)

    derived.check_task(m, spec)
    if read and weights is None and config.from_checkpoint is None:
        _check_length(config, spec, evaluated)
        if unit_of(spec.unit).per_token:  # imported weights: checked on loading
            _check_halting(rule or m.rule, config.model)
    split = resolve_split(evaluated, config.split)  # the loaders' names and aliases
    if split == "train":
        raise UsageError("--split train: runs are evaluated on dev or test",
                         hint="the training split is what the model learns from")
    if rule is None:
        sweep = config.sweeps.get(method)
        if sweep is None and read:
            sweep = derived.default_sweep(m, depth(), spec.is_regression, spec.num_labels)
        sweep = sweep or []  # unknown until the model is read
        for variant in m.variants(sweep):  # every sweep value checked before anything trains
            for value in variant.values:
                variant.method.exit_rule(value, spec.is_regression)
    else:
        from eebench.rules.catalog import get_rule

        kind = get_rule(rule)
        sweep = config.sweeps.get(f"{m.name}+{kind.name}")
        if sweep is None and read:
            sweep = kind.default_sweep(depth(), spec.is_regression, spec.num_labels)
        sweep = sweep or []  # unknown until the model is read
        for value in sweep:
            kind.check(value)
    train = config.training(spec, seed) if config.from_checkpoint is None else TrainConfig()
    if config.flops_convention not in CONVENTIONS:
        raise UsageError(f"unknown FLOPs convention {config.flops_convention!r}",
                         hint=f"choose from: {', '.join(CONVENTIONS)}")
    # Trained with the trained task's budget (above: the in-domain run's checkpoint), evaluated
    # with the evaluated task's length and sample budget, as that task's own runs are.
    budget = config.for_task(evaluated.name)
    shifted = evaluated.name != spec.name
    return RunConfig(
        model=model, pooling=pooling, method=m.name, method_settings=m.settings,
        task=evaluated.name, train_task=spec.name if shifted else None, rule=rule, split=split,
        seed=seed,
        sweep=[float(v) for v in sweep], train=train, max_seq_length=budget.max_seq_length,
        max_eval_samples=budget.max_eval_samples, flops_convention=config.flops_convention,
        timing=config.timing, weights=weights,
    )


def _check_length(config: BenchConfig, trained: TaskSpec, evaluated: TaskSpec) -> None:
    """The max_seq_length each task trains and is evaluated with fits the backbone's positions:
    refused before any work (a dry run refuses what the run would), naming the setting that
    gave it, as training would refuse it."""
    from eebench.run.names import backbone_max_tokens

    limit = backbone_max_tokens(config.model)
    for task in dict.fromkeys((trained.name, evaluated.name)):
        length = config.for_task(task).max_seq_length
        if limit is not None and length is not None and length > limit:
            raise UsageError(f"setting {config.length_setting(task)}: {length} exceeds the "
                             f"{limit} positions of model {config.model}",
                             hint=f"give {limit} or less, in the config or with --max-seq-length")


def _check_halting(rule: str, model: str) -> None:
    """A rule whose words halt on their own runs live on BERT-style layers only
    (eebench.models.token_halting_layer): refused in one line before anything trains."""
    from eebench.models.token_halting_layer import LIVE_FAMILIES
    from eebench.rules.catalog import get_rule
    from eebench.run.names import backbone_family

    if not rule or not getattr(get_rule(rule), "halts_tokens", False):
        return
    if model in LIVE_FAMILIES:
        return
    family = backbone_family(model)
    if family not in LIVE_FAMILIES:
        raise UsageError(f"rule {rule!r} halts words and runs live on {', '.join(LIVE_FAMILIES)} "
                         f"layers; {model} is {family!r}",
                         hint="sentence-level token rules (mean-entropy, sentee) run on every "
                              "family")
