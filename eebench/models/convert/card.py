"""The model card of an exported model: README.md in the Hugging Face hub's card format (a YAML
metadata block between `---` lines, then Markdown), with the run's table of operating points and
how to load the model. `read_table` reads the table back (what a test, or a script, checks).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

TABLE_TITLE = "## Operating points"
CHOSEN = "**chosen**"


@dataclass(frozen=True)
class Row:
    """One operating point as the card shows it."""

    sweep: dict[str, float]  # its named sweep values
    main: float | None  # the main metric, percent (None: an unlabelled split)
    avg_exit_layer: float
    mflops: float
    flops_speedup: float  # the full model's MFLOPs / the point's
    layer_speedup: float  # num_layers / avg_exit_layer
    measured_speedup: float | None = None  # full / dynamic mean latency at batch size 1
    chosen: bool = False


@dataclass(frozen=True)
class Card:
    name: str
    method: str
    paper: str
    rule: str  # the rule's name, "entropy", "patience", ...
    task: str  # its registry name
    task_title: str
    split: str
    n_samples: int
    main_metric: str
    backbone: str  # what the model was built from (a --model value or a checkpoint source)
    family: str
    num_layers: int
    exit_layers: list[int]
    pooling: str
    hardware: str
    load_command: str
    rows: list[Row]
    flops_convention: str = "mac2-matmul"
    notes: list[str] = field(default_factory=list)


def _number(x: float | None, digits: int = 2) -> str:
    return "n/a" if x is None else f"{x:.{digits}f}"


def _sweep(values: dict[str, float]) -> str:
    return ", ".join(f"{k}={v:g}" for k, v in values.items())


def _yaml(card: Card) -> str:
    """The card's metadata (written as JSON values: YAML reads them as they are)."""
    lines = ["---", "library_name: transformers", "pipeline_tag: text-classification",
             "tags:", *(f"- {json.dumps(t)}" for t in ("early-exit", "eebench", card.method,
                                                        card.rule, card.family)),
             "metrics:", f"- {json.dumps(card.main_metric)}", "---"]
    return "\n".join(lines)


def render(card: Card) -> str:
    """README.md: metadata, what the model is, its operating points, how to load it."""
    exits = ", ".join(map(str, card.exit_layers))
    head = ["| point | " + " | ".join((card.main_metric, "avg exit layer", "MFLOPs",
                                       "FLOPs speed-up", "layer speed-up",
                                       "measured speed-up (bs 1)")) + " | chosen |",
            "|---" * 8 + "|"]
    rows = [f"| {_sweep(r.sweep)} | {_number(r.main)} | {_number(r.avg_exit_layer)} | "
            f"{_number(r.mflops, 1)} | {_number(r.flops_speedup)}x | {_number(r.layer_speedup)}x"
            f" | {_number(r.measured_speedup)}{'x' if r.measured_speedup is not None else ''} | "
            f"{CHOSEN if r.chosen else ''} |" for r in card.rows]
    text = f"""{_yaml(card)}

# {card.name}

A {card.family} early-exit classifier for {card.task_title} (`{card.task}`), trained with
**{card.method}** ({card.paper}) and exiting by the **{card.rule}** rule. It has
{card.num_layers} layers and an exit after layers {exits}; the exit heads pool
with `{card.pooling}`. Made from `{card.backbone}` and exported by
eebench (`eebench export-model`).

{TABLE_TITLE}

Measured on {card.task}'s {card.split} split ({card.n_samples} samples) by one full pass and
the rule swept over the stored exit logits; MFLOPs per sample along each sample's path at its
real token length ({card.flops_convention}); FLOPs speed-up against the full model (every
layer, the last exit); measured speed-up: real dynamic inference against the full model.
The chosen point is the one config.json's `early_exit.operating_point` records.

{chr(10).join(head + rows)}

Hardware: {card.hardware}.

## How to load it

Evaluate it like any eebench run (the one-pass sweep and real dynamic inference), offline:

```bash
{card.load_command}
```

The backbone alone loads in plain transformers, without custom code (the exit heads, under
`exit_heads.`, are left aside):

```python
from transformers import AutoModel, AutoTokenizer

model = AutoModel.from_pretrained("path/to/this/folder")
tokenizer = AutoTokenizer.from_pretrained("path/to/this/folder")
```

config.json's `early_exit` block says the rest: the method and its settings, the exit layers,
the heads, the pooling, the rule and the chosen operating point.
"""
    if card.notes:
        text += "\n## Notes\n\n" + "".join(f"- {n}\n" for n in card.notes)
    return text


def read_table(text: str) -> list[dict[str, str]]:
    """The operating-point table of a card, one dict per row by column name."""
    lines = text.split(TABLE_TITLE, 1)[1].splitlines()
    start = next(i for i, ln in enumerate(lines) if ln.startswith("|"))
    table = []
    for ln in lines[start:]:
        if not ln.startswith("|"):
            break
        table.append([c.strip() for c in ln.strip().strip("|").split("|")])
    header, _, *body = table
    return [dict(zip(header, row, strict=True)) for row in body]

