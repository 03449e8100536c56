"""Fine-tuning: every stage of a method in order, resumable, bit-for-bit reproducible on CPU.

A method says what trains when (`method.stages()`: DeeBERT trains the backbone and last exit,
then the other exits on a frozen backbone; PABEE and static train everything at once) and what
the loss over exits is. This file does the rest the same way for every method: AdamW without
weight decay on biases and LayerNorm, linear warm-up and decay per stage, gradient clipping,
periodic dev evaluation of every exit, and checkpoints.

Resuming: the checkpoint directory is named by a hash of everything that determines the result.
The batch order is a function of (seed, stage, epoch) (eebench.batching), the learning rate a
function of the step, and the checkpoint holds weights, optimizer, RNG state and counters, so
rerunning an interrupted command continues and ends with the same weights as an uninterrupted run.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from eebench import checkpoint as ckpt
from eebench.checkpoint import load_trained  # noqa: F401  (the evaluator loads from here)
from eebench.errors import DataError, EebenchError, UsageError

if TYPE_CHECKING:
    import torch

    from eebench.methods.base import EarlyExitMethod, Stage
    from eebench.tasks.spec import TaskSpec

PRECISIONS = ("fp32", "bf16")
BIAS_INITS = ("label_mean", "zero")
STAGE_FIELDS = ("epochs", "lr", "warmup_ratio", "weight_decay", "max_grad_norm")


@dataclass
class TrainConfig:
    """Fine-tuning settings. Defaults follow BERT's GLUE recipe (lr 2e-5, batch 32, 128 tokens)."""

    epochs: int = 3
    batch_size: int = 32
    lr: float = 2e-5
    # A stage that trains exit heads alone on a frozen backbone (DeeBERT's second stage) starts
    # from random heads and needs a larger step than fine-tuning; None uses `lr`.
    heads_lr: float | None = 5e-4
    warmup_ratio: float = 0.1
    weight_decay: float = 0.01
    adam_eps: float = 1e-8
    max_grad_norm: float = 1.0
    max_seq_length: int = 128
    max_train_samples: int | None = None  # a seeded subset of the training split
    seed: int = 42
    # "bf16": forward passes under bfloat16 autocast (weights, gradients and optimizer stay in
    # float32); about twice as fast on CPUs with AMX/AVX-512-BF16 and on recent GPUs.
    precision: str = "fp32"
    group_by_length: bool = False  # batch rows of similar length together (less padding)
    # Regression heads start with their bias at the training labels' mean ("label_mean") or at 0
    # ("zero"). From 0, heads that share a pooler (PABEE) can stay at the mean prediction.
    regression_bias_init: str = "label_mean"
    # stage name -> overrides of STAGE_FIELDS, e.g. {"highway": {"lr": 1e-3, "epochs": 1}}
    stage_overrides: dict[str, dict[str, Any]] = field(default_factory=dict)
    # These do not change the result, so they stay out of the checkpoint hash:
    eval_every: int = 0  # dev evaluation every N steps (0: at the end of each epoch only)
    save_every: int = 200  # checkpoint every N steps (and at every epoch and stage end)
    eval_batch_size: int = 64
    device: str | None = None  # None: cuda when available, else cpu

    NOT_HASHED: ClassVar[tuple[str, ...]] = ("eval_every", "save_every", "eval_batch_size",
                                              "device")

    def validate(self) -> None:
        """Refuse impossible settings with one line (they may come from a TOML file)."""
        ints = ("epochs", "batch_size", "max_seq_length", "seed", "eval_every", "save_every",
                "eval_batch_size", "max_train_samples")
        floats = ("lr", "heads_lr", "warmup_ratio", "weight_decay", "adam_eps", "max_grad_norm")
        for name in ints + floats:
            value = getattr(self, name)
            kinds = int if name in ints else (int, float)
            if value is None and name in ("max_train_samples", "heads_lr"):
                continue
            if isinstance(value, bool) or not isinstance(value, kinds):
                raise UsageError(f"training setting {name} must be a number, got {value!r}")
        checks = [
            (self.max_train_samples is None or self.max_train_samples > 0,
             f"--max-train-samples must be positive, got {self.max_train_samples}"),
            (self.precision in PRECISIONS,
             f"--precision must be one of {', '.join(PRECISIONS)}, got {self.precision!r}"),
            (self.regression_bias_init in BIAS_INITS,
             f"regression_bias_init must be one of {', '.join(BIAS_INITS)}, got "
             f"{self.regression_bias_init!r}"),
            (isinstance(self.group_by_length, bool),
             f"group_by_length must be true or false, got {self.group_by_length!r}"),
            (min(self.epochs, self.batch_size, self.max_seq_length, self.eval_batch_size) >= 1,
             "epochs, batch_size, max_seq_length and eval_batch_size must be at least 1"),
            (min(self.lr, self.adam_eps, self.max_grad_norm,
                 self.lr if self.heads_lr is None else self.heads_lr) > 0,
             "lr, heads_lr, adam_eps and max_grad_norm must be positive"),
            (0 <= self.warmup_ratio < 1, f"warmup_ratio must be in [0, 1): {self.warmup_ratio}"),
            (min(self.weight_decay, self.save_every, self.eval_every) >= 0,
             "weight_decay, save_every and eval_every must not be negative"),
        ]
        for ok, message in checks:
            if not ok:
                raise UsageError(message)
        for stage, over in self.stage_overrides.items():
            bad = set(over) - set(STAGE_FIELDS) if isinstance(over, dict) else {"?"}
            if bad:
                raise UsageError(f"stage {stage!r}: cannot override {sorted(bad)[0]!r}",
                                 hint=f"stage settings are: {', '.join(STAGE_FIELDS)}")
            replace(self, **over, stage_overrides={}).validate()

    def hashed(self) -> dict[str, Any]:
        return {k: v for k, v in asdict(self).items() if k not in self.NOT_HASHED}

    def for_stage(self, stage: str, heads_only: bool) -> TrainConfig:
        """This config with the stage's overrides applied (heads_lr for a heads-only stage)."""
        lr = self.heads_lr if heads_only and self.heads_lr is not None else self.lr
        return replace(self, **{"lr": lr, **self.stage_overrides.get(stage, {})})


def run_config(method: EarlyExitMethod, spec: TaskSpec, backbone: str, train_examples: Any,
               cfg: TrainConfig, pooling: str) -> dict[str, Any]:
    """Everything that determines the trained weights; its hash names the checkpoint.
    `pooling` is the resolved choice ("cls" or "mean"): the heads' structure."""
    local = Path(backbone)
    return {
        "schema_version": ckpt.SCHEMA_VERSION,
        "backbone": str(local.resolve()) if local.is_dir() else backbone,
        "method": method.name,
        "method_settings": method.settings,
        "pooling": pooling,
        "task": spec.name,
        "train": hashed_train(cfg, spec),
        "data": {"n": len(train_examples), "fingerprint": ckpt.data_fingerprint(train_examples)},
    }


def hashed_train(cfg: TrainConfig, spec: TaskSpec) -> dict[str, Any]:
    """The training settings that determine a task's weights: the regression head's initial bias
    only for regression (so classification checkpoints keep their names)."""
    train = cfg.hashed()
    if not spec.is_regression:
        train.pop("regression_bias_init")
    return train


def linear_schedule(step: int, total: int, warmup: int) -> float:
    """LR multiplier at `step` (0-based): linear warm-up to 1, then linear decay to 0 (as HF)."""
    if step < warmup:
        return step / max(1, warmup)
    return max(0.0, (total - step) / max(1, total - warmup))


def optimizer_groups(model: torch.nn.Module, params: list, weight_decay: float) -> list[dict]:
    """Two AdamW groups: weight decay on weights, none on biases and LayerNorm (BERT recipe)."""
    no_decay = {id(p) for n, p in model.named_parameters() if n.endswith("bias")}
    for module in model.modules():
        if "norm" in type(module).__name__.lower():
            no_decay |= {id(p) for p in module.parameters(recurse=False)}
    groups = [
        {"params": [p for p in params if id(p) not in no_decay], "weight_decay": weight_decay},
        {"params": [p for p in params if id(p) in no_decay], "weight_decay": 0.0},
    ]
    return [g for g in groups if g["params"]]


def evaluate_exits(model: torch.nn.Module, data: Any, spec: TaskSpec, batch_size: int,
                   device: Any) -> list[dict[str, float]]:
    """Every exit's dev metrics from one batched pass (no RNG is used: training is unaffected)."""
    import torch

    from eebench.batching import eval_batches, restore_order
    from eebench.tasks.metrics import compute_metrics

    was_training = model.training
    model.eval()
    chunks, index = [], []
    with torch.no_grad():
        for batch in eval_batches(data, batch_size, sort_by_length=True, device=device):
            chunks.append(model(**_inputs(batch)).float().cpu())
            index.append(batch["index"].cpu())
    model.train(was_training)
    logits = restore_order(torch.cat(index), torch.cat(chunks, dim=1), dim=1)  # [E, N, C]
    preds = logits[..., 0] if spec.is_regression else logits.argmax(-1)
    return [compute_metrics(spec, preds[j].numpy(), list(data.labels)) for j in range(len(preds))]


def _inputs(batch: dict) -> dict:
    return {k: batch[k] for k in ("input_ids", "attention_mask", "token_type_ids") if k in batch}


def train(method: EarlyExitMethod, task_spec: TaskSpec, backbone: str, train_examples: Any,
          dev_examples: Any | None, cfg: TrainConfig, out_dir: Path, console: Any = None,
          overwrite: bool = False, on_step: Callable[[int], None] | None = None,
          pooling: str | None = None) -> Path:
    """Fine-tune `method` on `task_spec`; returns the checkpoint directory
    `<out_dir>/<model>/<method>/<task>/<config-hash>/`. A finished checkpoint returns at once; an
    unfinished one is resumed. `on_step(global_step)` runs after every optimizer step. `pooling`
    ("cls", "mean"; None: the backbone's own) is how the exit heads pool the tokens."""
    from eebench.models.backbones import resolve_pooling

    cfg.validate()
    pooling = resolve_pooling(backbone, pooling)
    method.check_task(task_spec)
    if train_examples.labels is None:
        raise DataError(f"{task_spec.name}: the training split has no labels")
    if cfg.max_train_samples is not None and cfg.max_train_samples < len(train_examples):
        train_examples = train_examples.take(cfg.max_train_samples, cfg.seed)
    if len(train_examples) == 0:
        raise DataError(f"{task_spec.name}: the training split is empty")
    config = run_config(method, task_spec, backbone, train_examples, cfg, pooling)
    key = ckpt.config_hash(config)
    path = ckpt.checkpoint_path(out_dir, backbone, method.name, task_spec.name, key)
    if overwrite:
        ckpt.remove(path)
    ckpt.recover(path)
    state = ckpt.read_state(path)
    if state is not None and state.config_hash != key:
        raise EebenchError(
            f"checkpoint {path} was written for another configuration ({state.config_hash})",
            hint="rerun with --overwrite or choose another --out",
        )
    if state is not None and state.finished:
        if console is not None:
            console.print(f"already trained: {path}")
        return path
    trainer = _Trainer(method, task_spec, backbone, train_examples, dev_examples, cfg, path,
                       state or ckpt.TrainState(config_hash=key, config=config), console, on_step,
                       pooling)
    trainer.run()
    return path


class _Trainer:
    """One training run: the loop over stages, epochs and steps, with checkpoints."""

    def __init__(self, method, spec, backbone, train_examples, dev_examples, cfg, path, state,
                 console, on_step, pooling):
        import torch

        from eebench.batching import encode
        from eebench.models.multi_exit import build_model, load_tokenizer

        self.method, self.spec, self.cfg, self.path, self.state = method, spec, cfg, path, state
        self.console, self.on_step = console, on_step
        self.device = cfg.device or ("cuda" if torch.cuda.is_available() else "cpu")
        torch.manual_seed(cfg.seed)  # head initialisation
        self.model = build_model(backbone, method, spec.num_labels, pooling=pooling)
        max_pos = getattr(self.model.config, "max_position_embeddings", None)
        if max_pos is not None and cfg.max_seq_length > max_pos:
            raise UsageError(f"--max-seq-length {cfg.max_seq_length} exceeds the model's "
                             f"{max_pos} positions")
        self.tokenizer = load_tokenizer(backbone)
        if state.global_step > 0 or state.stage > 0:
            self._check_model_config()
            ckpt.load_weights(self.model, path)
            ckpt.set_rng_state(ckpt.load_rng(path), self.device)
        elif spec.is_regression and cfg.regression_bias_init == "label_mean":
            mean = float(sum(train_examples.labels) / len(train_examples.labels))
            with torch.no_grad():
                for head in self.model.heads:  # heads of plug-in methods may differ
                    bias = getattr(getattr(head, "classifier", None), "bias", None)
                    if bias is not None:
                        bias.fill_(mean)
        self.model.to(self.device)
        self.train_data = encode(train_examples, self.tokenizer, cfg.max_seq_length,
                                 spec.is_regression)
        self.dev_data = None
        if dev_examples is not None and dev_examples.labels is not None and len(dev_examples):
            self.dev_data = encode(dev_examples, self.tokenizer, cfg.max_seq_length,
                                   spec.is_regression)
        self.optimizer, self.schedule = None, None
        self.rng = ckpt.rng_state(self.device)  # the RNG state at the last finished step
        self.saved_step = state.global_step

    def _check_model_config(self) -> None:
        stored = ckpt.read_model_config(self.path)
        built = json.loads(json.dumps(self.model.model_config(), default=str))
        stored.pop("source", None), built.pop("source", None)  # ./x and /abs/x are one model
        if stored != built:
            raise EebenchError(f"checkpoint {self.path} holds a different model structure",
                               hint="rerun with --overwrite")

    def log(self, msg: str) -> None:
        if self.console is not None:
            self.console.print(msg)

    def save(self) -> None:
        with ckpt.hold_interrupts():
            ckpt.save_checkpoint(self.path, self.model, self.tokenizer, self.state,
                                 None if self.state.finished else self.optimizer,
                                 None if self.state.finished else self.schedule, self.rng)
        self.saved_step = self.state.global_step

    def evaluate(self, stage: Stage, loss: float | None) -> None:
        if self.dev_data is None:
            return
        metrics = evaluate_exits(self.model, self.dev_data, self.spec, self.cfg.eval_batch_size,
                                 self.device)
        main = self.spec.main_metric
        self.state.history.append({
            "stage": stage.name, "epoch": self.state.epoch, "global_step": self.state.global_step,
            "train_loss": loss,
            "exits": [{"exit": j, "layer": self.model.exit_layers[j], "main": m.get(main),
                       "metrics": m} for j, m in enumerate(metrics)],
        })
        shown = " ".join(f"{m.get(main, float('nan')):.1f}" for m in metrics)
        self.log(f"  dev {main} per exit @ step {self.state.global_step}: {shown}")

    def run(self) -> None:
        import torch

        deterministic = torch.are_deterministic_algorithms_enabled()
        warn_only = torch.is_deterministic_algorithms_warn_only_enabled()
        torch.use_deterministic_algorithms(True, warn_only=True)
        stages = self.method.stages()
        unknown = set(self.cfg.stage_overrides) - {s.name for s in stages}
        if unknown:
            raise UsageError(f"method {self.method.name!r} has no stage {sorted(unknown)[0]!r}",
                             hint=f"its stages are: {', '.join(s.name for s in stages)}")
        try:
            for index in range(self.state.stage, len(stages)):
                self.run_stage(stages[index])
                with ckpt.hold_interrupts():
                    self.state.stage, self.state.epoch = index + 1, 0
                    self.state.step_in_epoch = self.state.stage_step = 0
                    self.optimizer, self.schedule = None, None
                    self.state.finished = index + 1 == len(stages)
                self.save()
        except KeyboardInterrupt:
            # Save unless there is nothing new, or a stage's optimizer is not restored yet.
            ready = self.optimizer is not None or self.state.stage_step == 0
            if self.state.global_step > self.saved_step and ready:
                self.log("interrupted: saving a checkpoint")
                self.save()
            raise
        finally:
            torch.use_deterministic_algorithms(deterministic, warn_only=warn_only)
            for p in self.model.parameters():
                p.requires_grad_(True)
        self.model.eval()

    def run_stage(self, stage: Stage) -> None:
        import torch
        from rich.progress import Progress

        from eebench.batching import steps_per_epoch, train_batches

        model, state = self.model, self.state
        trainable = list({id(p): p for p in stage.trainable(model)}.values())
        chosen = {id(p) for p in trainable}
        for p in model.parameters():
            p.requires_grad_(id(p) in chosen)
        backbone = {id(p) for p in model.backbone_parameters()}
        cfg = self.cfg.for_stage(stage.name, heads_only=not chosen & backbone)
        per_epoch = steps_per_epoch(len(self.train_data), cfg.batch_size)
        total = per_epoch * cfg.epochs
        warmup = math.ceil(total * cfg.warmup_ratio)
        # The fused kernel updates all tensors in one pass: 4x faster than the per-tensor loop on
        # a CPU, where AdamW over MiniLM's 12M-entry embedding matrix otherwise costs 0.2 s a step.
        fused = torch.device(self.device).type in ("cpu", "cuda")
        optimizer = torch.optim.AdamW(optimizer_groups(model, trainable, cfg.weight_decay),
                                      lr=cfg.lr, eps=cfg.adam_eps, fused=fused or None)
        if state.stage_step > 0:
            ckpt.load_optimizer(optimizer, self.path)
        self.optimizer = optimizer
        exits = stage.exit_indices(model.num_exits)
        self.log(f"stage {stage.name!r}: {len(trainable)} tensors, lr {cfg.lr:g}, "
                 f"{cfg.epochs} epoch(s) x {per_epoch} steps, loss on the exits after layers "
                 f"{','.join(str(model.exit_layers[j]) for j in exits)}")
        model.train()
        with Progress(console=self.console, disable=self.console is None) as bar:
            task = bar.add_task(f"{stage.name}", total=total, completed=state.stage_step)
            for epoch in range(state.epoch, cfg.epochs):
                state.epoch, loss_sum, n = epoch, 0.0, 0
                order_epoch = 1000 * state.stage + epoch  # a fresh order per stage and epoch
                for batch in train_batches(self.train_data, cfg.batch_size, cfg.seed, order_epoch,
                                           state.step_in_epoch, self.device,
                                           cfg.group_by_length):
                    lr = cfg.lr * linear_schedule(state.stage_step, total, warmup)
                    for group in optimizer.param_groups:
                        group["lr"] = lr
                    with torch.autocast(torch.device(self.device).type, dtype=torch.bfloat16,
                                        enabled=cfg.precision == "bf16"):
                        logits = model(**_inputs(batch)).float()
                    # Every exit's logits: the method picks the stage's exits itself.
                    loss = self.method.loss(list(logits), batch["labels"], stage,
                                            self.spec.is_regression)
                    if not torch.isfinite(loss):
                        raise EebenchError(f"the loss is {loss.item()} at step "
                                           f"{state.global_step + 1}", hint="lower the --lr")
                    loss.backward()
                    torch.nn.utils.clip_grad_norm_(trainable, cfg.max_grad_norm)
                    with ckpt.hold_interrupts():
                        optimizer.step()
                        optimizer.zero_grad(set_to_none=True)
                        state.step_in_epoch += 1
                        state.stage_step += 1
                        state.global_step += 1
                        self.schedule = {"kind": "linear_warmup_decay", "base_lr": cfg.lr,
                                         "warmup_steps": warmup, "total_steps": total,
                                         "step": state.stage_step}
                        self.rng = ckpt.rng_state(self.device)
                    loss_sum, n = loss_sum + loss.item(), n + 1
                    bar.update(task, advance=1, description=f"{stage.name} e{epoch + 1} "
                               f"loss {loss_sum / n:.4f}")
                    step = state.global_step
                    if self.cfg.eval_every and step % self.cfg.eval_every == 0:
                        self.evaluate(stage, loss_sum / n)
                    if self.cfg.save_every and step % self.cfg.save_every == 0:
                        self.save()
                    if self.on_step is not None:
                        self.on_step(step)
                with ckpt.hold_interrupts():
                    state.epoch, state.step_in_epoch = epoch + 1, 0
                if not (self.cfg.eval_every and state.global_step % self.cfg.eval_every == 0):
                    self.evaluate(stage, loss_sum / n if n else None)
                if epoch + 1 < cfg.epochs:
                    self.save()
