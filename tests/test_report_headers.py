"""The headers of the columns of eebench's own runs in the claims and full-models tables: how
many seeds their cells have, and which seed is a recipe search's own model (chosen on dev)."""

from __future__ import annotations

from pathlib import Path

from eebench.reports import Block, Context, Runs, build
from eebench.reports.seeds import header, searched_seeds, seed_counts
from eebench.score import load_run

ROOT = Path(__file__).resolve().parent.parent
RESULTS = "benchmarks/results"


def _runs(folder: str, method: str, task: str) -> list:
    return [load_run(p.parent) for p in
            sorted((ROOT / RESULTS / folder).glob(f"*/{method}/{task}/*/summary.json"))]


def _table(block: Block) -> tuple[list[str], list[list[str]]]:
    """The block's table: its header cells and its rows' cells."""
    lines = [line for line in build(block, Context(root=ROOT, write=False)).splitlines()
             if line.startswith("|")]
    cells = [[c.strip() for c in line.strip("|").split("|")] for line in lines]
    return cells[0], cells[2:]


def test_a_header_says_how_many_seeds_its_cells_have():
    assert seed_counts([3, 3]) == "3 seeds" and seed_counts([1]) == "1 seed"
    assert seed_counts([3, 1, 3]) == "3 seeds, 1 where a cell has no ±"
    assert seed_counts([2, 3]) == "2 or 3 seeds" and seed_counts([]) == ""
    assert header("grid", [3], [1]) == "grid: 3 seeds; seed 1 the search's pick on dev"
    assert header("grid", [], []) == "grid"


def test_the_recipe_grids_seed_1_is_the_searchs_own_model_and_the_budgets_none():
    """The grid's static run at seed 1 reads the checkpoint the search trained for the recipe it
    chose on dev (the same recipe, task and seed); seeds 2 and 3, and the budget runs, do not."""
    search = _runs("recipes-minilm", "static", "rte")
    assert searched_seeds(_runs("minilm-recipes", "static", "rte"), search) == [1]
    assert searched_seeds(_runs("elue-minilm", "static", "rte"), search) == []


def test_the_claims_headers_say_seeds_and_the_searchs_pick_on_dev():
    block = Block(name="c", kind="claims", marker="c",
                  runs={"recipes": Runs(folder=f"{RESULTS}/minilm-recipes",
                                        tasks=("rte", "elue-mrpc", "elue-stsb", "cola")),
                        "budget": Runs(folder=f"{RESULTS}/elue-minilm"),
                        "search": Runs(folder=f"{RESULTS}/recipes-minilm")},
                  options={"file": "leaderboard/published.toml",
                           "models": {"recipes": "recipes", "budget": "budget"},
                           "searches": {"recipes": "search"}},
                  text={"body": "{table}", "none": "none"})
    head, rows = _table(block)
    assert head[3:6] == ["recipes: 3 seeds; seed 1 the search's pick on dev",
                         "budget: 3 seeds", "verdict"]
    assert any(row[5].endswith("(recipes)") for row in rows)  # verdicts name the short name


def test_a_full_models_column_with_one_seed_cells_says_so():
    """The 12-layer column mixes tasks of three seeds with tasks not yet past seed 1: its header
    says which cells have one seed (those without ±), never three for all."""
    block = Block(name="f", kind="full-models", marker="f",
                  runs={"mpnet": Runs(folder=f"{RESULTS}/mpnet-recipes",
                                      also=(f"{RESULTS}/mpnet-claims",), methods=("static",)),
                        "search": Runs(folder=f"{RESULTS}/recipes-mpnet")},
                  options={"file": "leaderboard/published.toml", "models": {"MPNet": "mpnet"},
                           "searches": {"mpnet": "search"}, "published": [],
                           "tasks": ["rte", "elue-mrpc", "cola"]},
                  text={"body": "{table}", "none": "none"})
    from eebench.reports.seeds import seed_counts

    head, rows = _table(block)
    cells = [row[2] for row in rows if row[2] != "–"]
    one, more = [c for c in cells if "±" not in c], [c for c in cells if "±" in c]
    assert head[2].endswith("seed 1 the search's pick on dev")
    assert "3 seeds" not in head[2] or more  # never three for all where a cell has one
    if one and more:
        assert head[2].startswith("MPNet: 3 seeds, 1 where a cell has no ±")
    elif not more:
        assert head[2].startswith("MPNet: 1 seed;")
    else:  # every cell of two or more seeds: the counts said as they are (2 or 3)
        assert head[2].startswith("MPNet: " + seed_counts([2, 3])) or \
            head[2].startswith("MPNet: 3 seeds")
