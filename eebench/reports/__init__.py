"""Report blocks: pieces of a document (docs/results.md) declared as data and built from run
directories by one generator (`generate`). A block names its runs, its kind (which tables it
builds: a name in the `KINDS` registry, eebench.registry, each kind's module imported when a
block first names it), its text and options, and the markers it goes between; the kinds share
one run loader, one `mean ± std` formatter and one way of placing a block (eebench.reports.core).

    from eebench.reports import Block, Context, Runs, generate

    block = Block(name="quality", kind="quality", marker="quality",
                  runs={"main": Runs(folder="benchmarks/results/elue-minilm")},
                  text={"body": "..."}, options={"half": 50})
    generate([block], Context(root=Path(".")), check=True)  # the documents that would change

A stage after score, plot and submit (it reads runs, scores them, draws figures and writes
submissions), before the command line; `benchmarks/report.py` is its command.
"""

from eebench.reports.core import (
    KINDS,
    Block,
    Context,
    Runs,
    build,
    generate,
    page,
    register_kind,
)

__all__ = ["KINDS", "Block", "Context", "Runs", "build", "generate", "page", "register_kind"]
