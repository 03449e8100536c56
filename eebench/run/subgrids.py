"""Several grids in one config: `[[grids]]`, for a benchmark whose seeds or tasks are not all
run alike (seed 1 of every method timed, further seeds of a few methods untimed).

    methods = ["static", "deebert", "pabee", "sweet"]
    tasks = ["elue-mrpc", "elue-sst2"]
    seeds = [1]

    [[grids]]                          # seed 1: every method, real inference timed at 5 points
    timing = { points = 5 }

    [[grids]]                          # seeds 2 and 3: the full model, DeeBERT and PABEE
    methods = ["static", "deebert", "pabee"]
    seeds = [2, 3]
    sweeps = { static = [12] }
    timing = { enabled = false }

Each entry is the config with the fields it gives (eebench.run.config.GridEntry: methods, tasks,
seeds, sweeps, timing, methods_settings) over the config's own, by `merge`, the function that
puts the command line over a file, so tables merge key by key as flags do. The config's grid is
the union of its entries' cells, entry by entry in the file's order (each entry seed by seed and
task by task); a cell (method, task, seed) that two entries give is refused, naming both. The
command line goes over every entry as over the config, except --method, --task and --seed: they
select cells of the union instead of replacing its lists. Without [[grids]] none of this applies.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from eebench.errors import UsageError
from eebench.run.config import BenchConfig, GridEntry, merge, overlay
from eebench.run.names import check_names

if TYPE_CHECKING:
    from eebench.run.grid import Grid

SELECTION = ("methods", "tasks", "seeds")  # flags that select cells of the union


def entry_configs(config: BenchConfig, where: str = "") -> list[BenchConfig]:
    """Each entry of the config's [[grids]] as a config of its own: the entry over the config,
    validated and checked (a name, a setting) as the command line over a file is."""
    base = config.model_copy(update={"grids": []})
    out = []
    for i, entry in enumerate(config.grids, 1):
        try:
            out.append(merge(base, entry.model_dump(exclude_unset=True)))
        except UsageError as e:
            raise UsageError(f"{where}grids[{i}]: {e.message}", hint=e.hint) from None
    return out


def check_grids(config: BenchConfig, where: str = "") -> None:
    """A file's [[grids]], before any work: each entry a valid config, and its own settings
    for a method (methods_settings, sweeps) for one of the methods it runs."""
    for i, (entry, own) in enumerate(zip(config.grids, entry_configs(config, where), strict=True),
                                     1):
        given = entry.model_dump(exclude_unset=True)
        probe = BenchConfig(methods=own.methods, tasks=own.tasks, rules=own.rules,
                            methods_settings=given.get("methods_settings", {}),
                            sweeps=given.get("sweeps", {}))
        check_names(probe, where=f"{where}grids[{i}]: ", own=True)


def flags_over_grids(config: BenchConfig, entries: list[dict[str, Any]],
                     overrides: dict[str, Any]) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """The command line over a config's [[grids]] (`entries`, as dumped): its settings over each
    entry's own, as over the config's; --method, --task and --seed keep, in each entry, the cells
    they name (an entry left without any is dropped). A name no entry runs, or a selection that
    leaves no cell, is refused in one line. Returns the entries and the settings for the config
    itself, less the selection (the config's lists stay the entries' defaults)."""
    chosen = {k: overrides[k] for k in SELECTION if overrides.get(k)}
    rest = {k: v for k, v in overrides.items() if k not in SELECTION}
    over = {k: v for k, v in rest.items() if k in GridEntry.model_fields}
    wanted = {k: {_canonical(k, v) for v in values} for k, values in chosen.items()}
    found: dict[str, set[Any]] = {k: set() for k in chosen}
    kept = []
    for entry in entries:
        entry = overlay(entry, over)
        for k in chosen:
            have = entry.get(k) or getattr(config, k)
            entry[k] = [v for v in have if _canonical(k, v) in wanted[k]]
            found[k] |= {_canonical(k, v) for v in entry[k]}
        if all(entry[k] for k in chosen):
            kept.append(entry)
    for k, values in chosen.items():
        missing = [v for v in values if _canonical(k, v) not in found[k]]
        if missing:
            raise UsageError(f"setting {k}: {missing[0]!r} is in none of the config's [[grids]]",
                             hint="--method, --task and --seed select cells of its grids")
    if not kept:
        raise UsageError("no entry of the config's [[grids]] has a cell with " + ", ".join(
            f"--{k[:-1]} {' '.join(map(str, v))}" for k, v in chosen.items()),
            hint="--method, --task and --seed select cells of its grids")
    return kept, rest


def _canonical(kind: str, value: Any) -> Any:
    """A method's or a task's own name (an alias, another case), a seed as it is."""
    if kind == "methods":
        from eebench.methods.base import METHODS

        return METHODS.get(value).name
    if kind == "tasks":
        from eebench.tasks.catalog import get_task

        return get_task(value).name
    return value


def expand_union(config: BenchConfig, skip_unrunnable: bool = True) -> Grid:
    """The runs of every entry of the config's [[grids]], entry by entry; a cell (method or
    method+rule, task, seed) that two entries give is refused, naming both."""
    from eebench.run.grid import Grid, expand

    grids = []
    for i, entry in enumerate(entry_configs(config), 1):
        try:
            grids.append(expand(entry, skip_unrunnable))
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
                test=[r for g in grids for r in g.test], test_out=config.test_out)
