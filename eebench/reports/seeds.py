"""What a column of eebench's own runs says in its header: how many seeds its cells have, and
which of its seeds is a recipe search's own model, the one chosen on the dev set the column is
scored on (so optimistic by the choice). Shared by the `claims` and `full-models` kinds.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path


def seed_counts(counts: Iterable[int]) -> str:
    """How many seeds a column's cells have: "3 seeds"; with one-seed cells among them (a cell of
    one seed shows no ±), "3 seeds, 1 where a cell has no ±"; else "2 or 3 seeds"."""
    got = sorted(set(counts))
    if not got:
        return ""
    noun = "seed" if got == [1] else "seeds"
    if len(got) == 1:
        return f"{got[0]} {noun}"
    if got[0] == 1 and len(got) == 2:
        return f"{got[1]} seeds, 1 where a cell has no ±"
    return f"{', '.join(map(str, got[:-1]))} or {got[-1]} seeds"


def checkpoints(run) -> set[str]:
    """The keys of the checkpoints a run's models were read from (its variants' records)."""
    return {Path(c).name for v in run.variants if v.checkpoint for c in v.checkpoint.split(";")}


def searched_seeds(runs: list, search: list) -> list[int]:
    """The seeds of `runs` whose model is a run of the recipe search `search` itself: a
    checkpoint both read (the same recipe, task and seed trains the same checkpoint, which the
    grid reuses). That model is the one the search picked on the dev set."""
    theirs = set().union(*(checkpoints(r) for r in search)) if search else set()
    return sorted({r.config.seed for r in runs if checkpoints(r) & theirs})


def header(name: str, counts: Iterable[int], searched: list[int]) -> str:
    """A column's name with its seed counts and, where a seed is the search's own model, that
    it was chosen on dev: "MiniLM-L6 (recipes): 3 seeds; seed 1 the search's pick on dev"."""
    parts = [seed_counts(counts)]
    if searched:
        parts.append(f"seed{'s' if len(searched) > 1 else ''} {', '.join(map(str, searched))} "
                     "the search's pick on dev")
    said = "; ".join(p for p in parts if p)
    return f"{name}: {said}" if said else name


def headers(block, ctx, counts: dict[str, list[int]]) -> dict[str, str]:
    """Each column's header (`header`), by display name: `block.options["models"]` names the
    columns' run sets, `block.options["searches"]` (run set key -> its recipe search's run set
    key) the searches some of them took their recipes from."""
    searches = block.options.get("searches", {})
    out = {}
    for name, key in block.options["models"].items():
        search = ctx.runs(block.runs[searches[key]]) if key in searches else []
        seeds = searched_seeds(ctx.runs(block.runs[key]), search) if search else []
        out[name] = header(name, counts.get(name, []), seeds)
    return out
