"""The training options that `eebench train` and `eebench run` both take: one declaration and one
help text each. A command gives its own default: `train` TrainConfig's (shown in its --help),
`run` None, which leaves a --config file's setting standing (`eebench.run.config.merge`)."""

from __future__ import annotations

from typing import Annotated

import typer

from eebench.train.config import TrainConfig

D = TrainConfig()

Pooling = Annotated[str | None, typer.Option(
    "--pooling", help="How the exit heads pool the tokens: cls or mean (default: the way the "
    "backbone was pretrained to pool; see `eebench backbones`).", show_default=False)]
MaxTrainSamples = Annotated[int | None, typer.Option(
    "--max-train-samples", help="Train on a seeded random subset of N examples.",
    show_default=False)]
Epochs = Annotated[int | None, typer.Option("--epochs", help="Epochs per stage.")]
BatchSize = Annotated[int | None, typer.Option(
    "--batch-size", help="Training rows per optimiser step (the global batch over --processes).")]
LearningRate = Annotated[float | None, typer.Option(
    "--lr", help=f"Peak learning rate (default: the backbone's, see `eebench backbones`; else "
    f"{D.lr:g}).", show_default=False)]
MaxSeqLength = Annotated[int | None, typer.Option(
    "--max-seq-length", help="Tokens an input is cut to.")]
Precision = Annotated[str | None, typer.Option(
    "--precision", help="Training precision: auto (bf16 where the device has it natively and "
    "fast: a CUDA GPU of compute capability 8.0+, a CPU with AMX or an AMD CPU with AVX-512 "
    "BF16; else fp32), fp32, or bf16 (forward passes under bfloat16 autocast).")]
GroupByLength = Annotated[bool | None, typer.Option(
    "--group-by-length/--no-group-by-length",
    help="Batch training rows of similar length (less padding).")]
Setting = Annotated[list[str] | None, typer.Option(
    "--setting", "-s", help="A method setting key=value (repeatable).", show_default=False)]
