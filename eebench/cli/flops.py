"""`eebench flops`: the per-module FLOPs of a model at a token length, from both counters.

Anyone can check the counting convention with it, e.g. BERT-base at 128 tokens:
`eebench flops --model-config bert-base --seq-len 128 --json` gives 22,348,434,432 FLOPs. Named
base shapes of every family (eebench.models.families.SHAPES: bert-base, roberta-base,
albert-base, distilbert-base, mpnet-base, elasticbert-base) need no download.
"""

from __future__ import annotations

import copy
from typing import Annotated

import typer

from eebench.cli.app import app
from eebench.cli.common import JsonOption, err_console, print_json
from eebench.errors import UsageError


def _config(name: str):
    """A backbone config only (no weights): a named base shape (`bert-base` is transformers'
    BertConfig defaults: hidden 768, 12 layers, 12 heads, ff 3072), else the backbone's own
    config (an ElasticBERT one converted to BERT's)."""
    from eebench.models.backbones import load_config
    from eebench.models.families import SHAPES, shape_config

    return shape_config(name) if name in SHAPES else load_config(name)


def _pooling(name: str, pooling: str | None) -> str:
    """The heads' pooling: the user's, else the backbone's own (a shape that is no registered
    backbone pools [CLS], as the released base checkpoints were pretrained to)."""
    from eebench.models.backbones import BACKBONES
    from eebench.models.families import SHAPES
    from eebench.models.pooling import check_pooling, resolve_pooling

    if pooling is None and name in SHAPES and name not in BACKBONES:
        return "cls"
    return resolve_pooling(name, pooling) if pooling is None else check_pooling(pooling)


MAX_LABELS = 1_000_000  # far above any task's labels; huge counts overflow tensor sizes


@app.command("flops", rich_help_panel="Methods and models")
def flops_command(
    model_config: Annotated[str, typer.Option(
        "--model-config", help="Backbone whose config to count: a base shape (bert-base, "
        "roberta-base, albert-base, distilbert-base, mpnet-base, elasticbert-base), minilm-l6, a "
        "local model directory or a hub id. Weights are never loaded.")] = "minilm-l6",
    method: Annotated[str, typer.Option("--method", "-m", help="Exit heads to put on it.")
                      ] = "static",
    seq_len: Annotated[int, typer.Option("--seq-len", "-n", help="Real token length.")] = 128,
    num_labels: Annotated[int, typer.Option("--num-labels")] = 2,
    convention: Annotated[str, typer.Option(
        "--convention", help="FLOPs convention (see docs/flops.md).")] = "mac2-matmul",
    pooling: Annotated[str | None, typer.Option(
        "--pooling", help="How the exit heads pool: cls or mean (default: the way the backbone "
        "was pretrained to pool; see `eebench backbones`).", show_default=False)] = None,
    unit: Annotated[str, typer.Option(
        "--unit", help="sequence: a label per text (pooled heads); token: a tag per token "
        "(token heads, sequence labelling).")] = "sequence",
    live: Annotated[int | None, typer.Option(
        "--live", help="Token models: count every layer with only this many of the n tokens "
        "live (token-level exit: the others halted, their states copied; keys and values still "
        "cover all n).", show_default=False)] = None,
    json_out: bool = JsonOption,
) -> None:
    """Count FLOPs per module (embeddings, each layer, each exit head) with fvcore and torch."""
    import torch
    from transformers import AutoModel

    from eebench.measure.flops import CONVENTIONS
    from eebench.methods.base import get_method
    from eebench.models.build import assemble

    if convention not in CONVENTIONS:
        raise UsageError(f"unknown FLOPs convention {convention!r}",
                         hint=f"choose from: {', '.join(CONVENTIONS)}")
    if not 1 <= num_labels <= MAX_LABELS:
        raise UsageError(f"--num-labels must be in 1..{MAX_LABELS:,}, got {num_labels}")
    from eebench.models.units import UNITS, unit_of

    if unit not in UNITS:
        raise UsageError(f"--unit is {' or '.join(UNITS)}, got {unit!r}")
    per_token = unit_of(unit).per_token
    if live is not None and (not per_token or not 0 <= live <= seq_len):
        raise UsageError(f"--live counts a token model's layers with 0..{seq_len} live tokens",
                         hint="with --unit token and --live at most --seq-len")
    pooling = _pooling(model_config, pooling)
    config = _config(model_config)
    m = get_method(method, **({"unit": unit} if per_token else {}))
    # a live count reads which tokens are live: real (random) weights, not shapes only
    device = "cpu" if live is not None else "meta"

    def build(part):  # a fresh config each: assembling a static model cuts its layers
        with torch.device(device):  # meta: shapes only, counting needs no values, no memory
            hf = AutoModel.from_config(copy.deepcopy(config), attn_implementation="eager")
            return assemble(hf, part, num_labels, pooling=pooling)

    # a method with several models runs them one after another: count each
    models = [build(part) for part in m.models(config.num_hidden_layers)]
    several = len(models) > 1
    if not 1 <= seq_len <= min(model.max_tokens for model in models):
        raise UsageError(f"--seq-len must be in 1..{models[0].max_tokens}")
    rows = []
    for s, model in enumerate(models):
        n = model.num_layers
        prefix = f"model {s + 1} ({n} layer{'s' * (n != 1)}): " if several else ""
        rows += _count(model, seq_len, convention, prefix, live)
    totals = {c: sum(r[c] for r in rows) for c in ("fvcore", "torch")}
    result = {
        "model_config": model_config, "method": method, "seq_len": seq_len, "unit": unit,
        "live": live,
        "num_labels": num_labels, "pooling": pooling, "convention": convention,
        "convention_description": CONVENTIONS[convention],
        "modules": rows, "total_flops": totals["fvcore"], "total_flops_torch": totals["torch"],
        "total_mflops": totals["fvcore"] / 1e6, "counters_agree": all(r["agree"] for r in rows),
        "note": "total = every module once: the full path with every exit head evaluated"
                + (", every model run in turn" if several else ""),
    }
    if json_out:
        print_json(result)
    else:
        from rich.table import Table

        what = f"{len(models)} models run in turn" if several else f"{method} heads"
        t = Table(title=f"FLOPs of {model_config} + {what} ({pooling} pooling) at "
                        f"n = {seq_len} ({convention})")
        for col in ("module", "fvcore", "FlopCounterMode"):
            t.add_column(col, justify="right" if col != "module" else "left")
        for r in rows:
            t.add_row(r["module"], f"{r['fvcore']:,}", f"{r['torch']:,}")
        t.add_row("[bold]total", f"[bold]{totals['fvcore']:,}", f"[bold]{totals['torch']:,}")
        err_console.print(t)
        err_console.print(f"{totals['fvcore'] / 1e6:,.1f} MFLOPs; counters agree: "
                          f"{result['counters_agree']}")
    if not result["counters_agree"]:
        raise typer.Exit(1)


def _count(model, seq_len: int, convention: str, prefix: str = "", live: int | None = None
           ) -> list[dict]:
    """One row per module of `model` (embeddings, each layer, each exit head): its FLOPs at
    `seq_len` tokens from fvcore and from torch's FlopCounterMode; with `live`, each layer
    computes that many of the tokens (eebench.models.token_halting_layer)."""
    import torch

    from eebench.measure.flops import fvcore_flops, layer_piece, torch_flops

    device = next(model.parameters()).device
    with torch.device(device), torch.no_grad():
        ids = torch.zeros(1, seq_len, dtype=torch.long)
        ones = torch.ones(1, seq_len, dtype=torch.long)
        hidden, inputs = model.embed(ids, ones, torch.zeros_like(ones))
    pieces = [("embeddings", model.embed, (ids, ones, torch.zeros_like(ones)))]
    if live is None:
        pieces += [(f"layer {i + 1}", *layer_piece(model, i, hidden, inputs))
                   for i in range(model.num_layers)]
    else:
        from eebench.models.token_halting_layer import check_live, live_layer

        check_live(model)
        running = torch.arange(seq_len)[None, :] < live  # the first `live` tokens
        pieces += [(f"layer {i + 1} ({live} of {seq_len} live)",
                    lambda h, a, i=i: live_layer(model.layers[i], h, a, running),
                    (hidden, inputs.attention_mask)) for i in range(model.num_layers)]
    # a head that reads the previous exit's state is counted with the state it gets in a run
    stateful = getattr(model, "stateful", False)
    previous = model.previous_states(hidden, ones) if stateful else None
    pieces += [(f"exit head {j} (after layer {k})",
                (lambda h, m, j=j: model.head(j, h, m, previous[j])) if stateful else
                (lambda h, m, j=j: model.head(j, h, m)),
                (hidden, ones)) for j, k in enumerate(model.exit_layers)]
    rows = []
    for name, fn, args in pieces:
        fv = fvcore_flops(fn, args, convention, owner=model)
        tc = torch_flops(fn, args, convention)
        rows.append({"module": prefix + name, "fvcore": fv, "torch": tc, "agree": fv == tc})
    return rows
