"""`eebench methods`: the registered early-exit methods (built-in and plugins), as plain data."""

from __future__ import annotations

import typer

from eebench.cli.app import app
from eebench.cli.common import JsonOption, err_console, print_json

PANEL = "Methods and models"


def _print_table(title: str, columns: tuple[str, ...], rows: list[tuple[str, ...]]) -> None:
    """A listing's table, on stderr (--json writes stdout)."""
    from rich.table import Table

    table = Table(title=title, title_justify="left")
    for col in columns:
        table.add_column(col, overflow="fold")
    for row in rows:
        table.add_row(*row)
    err_console.print(table)


def _tasks(r: dict) -> str:
    """The tasks a method does, in words: texts, tokens (with its rule there), decoders."""
    words = {"sequence": "texts", "token": f"tokens ({r['token_rule'] or 'k'})"}
    out = [words[u] for u in r["units"] if u in words]
    if r["decoder_tasks"]:
        batch = "a batch above 1 possible" if r["decodes_batches"] else "batch size 1 only"
        out.append(f"decoder: {', '.join(r['decoder_tasks'])} ({batch})")
    return " + ".join(out)


@app.command("methods", rich_help_panel=PANEL)
def methods(as_json: bool = JsonOption) -> None:
    """List the early-exit methods: paper, sweep parameter, the tasks they do (texts, tokens:
    sequence labelling, with the rule there), decoder tasks (eebench decode) with the batch size
    their decoding allows, regression support, settings."""
    from eebench.methods.base import METHODS, get_method
    from eebench.methods.derived import describe

    rows = [describe(get_method(name)) for name in METHODS.names()]
    if as_json:
        print_json(rows)
        return
    _print_table(f"{len(rows)} methods", ("method", "sweep", "tasks", "regression", "settings",
                                          "paper"),
                 [(r["name"], f"{r['sweep_param']} ({r['trains']})", _tasks(r),
                   "—" if not {"sequence", "token"} & set(r["units"]) else
                   "yes" if r["supports_regression"] else "no",
                   " ".join(f"{k}={v}" for k, v in r["settings"].items()) or "—", r["paper"])
                  for r in rows])
    err_console.print("[dim]details and default sweeps: docs/methods.md; decoder methods run "
                      "with eebench decode (docs/decoders.md), the others with eebench run")


@app.command("rules", rich_help_panel=PANEL)
def rules(as_json: bool = JsonOption) -> None:
    """List the exit rules: what each reads, what it needs of a model, its sweep parameter. Any
    rule sweeps on any trained model that gives what it needs: eebench run --rule."""
    from eebench.methods.base import METHODS, get_method
    from eebench.methods.derived import token_rule
    from eebench.rules.catalog import RULES, all_needs, get_rule

    methods = [get_method(name) for name in METHODS.names()]
    rows = []
    for name in RULES.names():
        row = get_rule(name).describe()
        row["default_for"] = [m.name for m in methods
                              if row["name"] in (m.rule, token_rule(m))]  # a text's, a token's
        rows.append(row)
    if as_json:
        print_json(rows)
        return
    _print_table(f"{len(rows)} exit rules", ("rule", "unit", "sweep", "needs", "default for",
                                             "what it does"),
                 [(r["name"], r["unit"], r["sweep_param"], ", ".join(r["needs"]) or "—",
                   ", ".join(r["default_for"]) or "—", r["description"]) for r in rows])
    err_console.print("[dim]needs: " + "; ".join(f"{k} = {v}" for k, v in all_needs().items()))
    err_console.print("[dim]sweep one on a method's model: eebench run --method pabee "
                      "--rule entropy ...; docs/methods.md")


@app.command("backbones", rich_help_panel=PANEL)
def backbones(
    as_json: bool = JsonOption,
    list_families: bool = typer.Option(
        False, "--families", help="List the supported architecture families instead."),
) -> None:
    """List the registered backbones: their kind (encoder or decoder), family, depth and size, how
    an encoder's exit heads pool by default and the learning rate it fine-tunes at (any local
    model directory or hub id of a supported family works too)."""
    from eebench.models.backbones import BACKBONES
    from eebench.models.decoders import DECODER_FAMILIES
    from eebench.models.model_config import SUPPORTED_FAMILIES

    if list_families:
        rows = [{"family": name, "kind": "encoder", "description": text}
                for name, text in SUPPORTED_FAMILIES.items()]
        rows += [{"family": name, "kind": "decoder", "description": f.description}
                 for name, f in DECODER_FAMILIES.items()]
        if as_json:
            print_json(rows)
            return
        from rich.table import Table

        table = Table(title=f"{len(rows)} backbone families", title_justify="left")
        table.add_column("family")
        table.add_column("kind")
        table.add_column("what its entry says", overflow="fold")
        for r in rows:
            table.add_row(r["family"], r["kind"], r["description"])
        err_console.print(table)
        err_console.print("[dim]the family is the model directory's config.json model_type; "
                          "docs/methods.md, docs/backbones.md")
        return

    from eebench.train.config import TrainConfig

    rows = []
    for name, b in BACKBONES.items():
        decoder = b.kind == "decoder"
        rows.append({"name": name, "kind": b.kind, "description": b.description,
                     "family": b.family, "layers": b.layers, "params": b.params,
                     "pooling": None if decoder else b.pooling,
                     "lr": None if decoder else (b.lr or TrainConfig().lr)})
    if as_json:
        print_json(rows)
        return

    from rich.markup import escape
    from rich.table import Table

    table = Table(title=f"{len(rows)} backbones", title_justify="left")
    for col in ("model", "kind", "family", "layers", "params", "pooling", "lr"):
        table.add_column(col, justify="right" if col in ("layers", "params", "lr") else "left")
    table.add_column("description", overflow="fold")
    for r in rows:
        table.add_row(r["name"], r["kind"], r["family"],
                      "—" if r["layers"] is None else str(r["layers"]), _params(r["params"]),
                      r["pooling"] or "—", "—" if r["lr"] is None else f"{r['lr']:g}",
                      escape(r["description"]))  # "eebench[mpnet]" is text, not markup
    err_console.print(table)
    err_console.print("[dim]--model also takes a local model directory or a Hugging Face hub id "
                      f"of a supported family ({', '.join(SUPPORTED_FAMILIES)}; decoders: "
                      f"{', '.join(DECODER_FAMILIES)}; `eebench backbones --families`); "
                      "--pooling cls|mean overrides an encoder's default pooling, --lr the "
                      "learning rate; decoders run the decoder tasks (imdb-lm, humaneval-gen)")


def _params(n: float | None) -> str:
    if n is None:
        return "—"
    return f"{n / 1e9:.2f}B" if n >= 1e9 else f"{n / 1e6:.1f}M"
