"""Report blocks: pieces of a document (docs/results.md) declared as data and built from run
directories by one generator (`generate`). A block names its runs, its kind (which tables it
builds), its text and options, and the markers it goes between; the kinds share one run loader,
one `mean ± std` formatter and one way of placing a block (eebench.api.reports.core).

    from eebench.api.reports import Block, Context, Runs, generate

    block = Block(name="quality", kind="quality", marker="quality",
                  runs={"main": Runs(folder="benchmarks/results/elue-minilm")},
                  text={"body": "..."}, options={"half": 50})
    generate([block], Context(root=Path(".")), check=True)  # the documents that would change
"""

from eebench.api.reports import (  # noqa: F401
    ablation,
    claims,
    curves,
    difficulty,
    elue,
    full_models,
    quality,
    shift,
    tokens,
)
from eebench.api.reports.core import KINDS, Block, Context, Runs, build, generate, kind, page

__all__ = ["KINDS", "Block", "Context", "Runs", "build", "generate", "kind", "page"]
