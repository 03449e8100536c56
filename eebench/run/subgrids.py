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

The pieces sit where the import order puts them: this module selects an entry's cells (below
eebench.run.config, whose `merge` calls it); `check_grids` and `entry_configs` are in
eebench.run.config, `expand_union` in eebench.run.grid.
"""

from __future__ import annotations

from typing import Any

from eebench.errors import UsageError

SELECTION = ("methods", "tasks", "seeds")  # flags that select cells of the union


def select_cells(config: Any, entries: list[dict[str, Any]],
                 overrides: dict[str, Any]) -> list[dict[str, Any]]:
    """--method, --task and --seed over a config's [[grids]] (`entries`, as dumped, the command
    line's other settings already over each): each entry keeps the cells they name (an entry left
    without any is dropped). A name no entry runs, or a selection that leaves no cell, is refused
    in one line. The config's own lists stay the entries' defaults."""
    chosen = {k: overrides[k] for k in SELECTION if overrides.get(k)}
    wanted = {k: {_canonical(k, v) for v in values} for k, values in chosen.items()}
    found: dict[str, set[Any]] = {k: set() for k in chosen}
    kept = []
    for entry in entries:
        entry = dict(entry)
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
    return kept


def _canonical(kind: str, value: Any) -> Any:
    """A method's or a task's own name (an alias, another case), a seed as it is."""
    if kind == "methods":
        from eebench.methods.base import METHODS

        return METHODS.get(value).name
    if kind == "tasks":
        from eebench.tasks.catalog import get_task

        return get_task(value).name
    return value


