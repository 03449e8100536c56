"""Fine-tuning: every stage of a method in order, resumable, bit-for-bit reproducible on CPU.

A method says what trains when (`method.stages()`: DeeBERT trains the backbone and last exit,
then the other exits on a frozen backbone; PABEE and static train everything at once) and what
the loss over exits is. This file does the rest the same way for every method: AdamW without
weight decay on biases and LayerNorm, linear warm-up and decay per stage, gradient clipping,
periodic dev evaluation of every exit, and checkpoints.

Resuming: the checkpoint directory is named by a hash of everything that determines the result.
The batch order is a function of (seed, stage, epoch) (eebench.data.batching), the learning rate a
function of the step, and the checkpoint holds weights, optimizer, RNG state and counters, so
rerunning an interrupted command continues and ends with the same weights as an uninterrupted run.
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from eebench.errors import EebenchError, UsageError
from eebench.methods import derived
from eebench.train import checkpoint, distributed
from eebench.train.config import TrainConfig
from eebench.train.naming import NamedCheckpoint, claimed, lock_file, name_checkpoint

if TYPE_CHECKING:
    import torch

    from eebench.methods import EarlyExitMethod, Stage
    from eebench.tasks.spec import TaskSpec

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
    from eebench.data.batching import eval_batches
    from eebench.models.units import unit_of

    was_training = model.training
    unit = unit_of(spec.unit)  # a label per text, or a tag per word scored on entities
    out = unit.collect(model, data, eval_batches(data, batch_size, sort_by_length=True))
    model.train(was_training)
    preds = unit.read(out.logits, spec.is_regression)  # [E, N], or [E, N, T]
    gold = unit.gold(data)
    return [unit.score(spec, unit.answers(data, preds[j]), gold) for j in range(len(preds))]


def _inputs(batch: dict) -> dict:
    return {k: batch[k] for k in ("input_ids", "attention_mask", "token_type_ids") if k in batch}


def train(method: EarlyExitMethod, task_spec: TaskSpec, backbone: str, train_examples: Any,
          dev_examples: Any | None, cfg: TrainConfig, out_dir: Path, console: Any = None,
          overwrite: bool = False, on_step: Callable[[int], None] | None = None,
          pooling: str | None = None, wait: bool = True) -> Path | None:
    """Fine-tune `method` on `task_spec`; returns the checkpoint directory
    `<out_dir>/<model>/<method>/<task>/<config-hash>/`. A finished checkpoint returns at once; an
    unfinished one is resumed. `on_step(global_step)` runs after every optimizer step. `pooling`
    ("cls", "mean"; None: the backbone's own) is how the exit heads pool the tokens. One process
    trains a checkpoint at a time (`naming.claimed`): another one's training is waited for,
    or with `wait` off left to it, and None returned."""
    named = name_checkpoint(method, task_spec, backbone, train_examples, cfg, out_dir, pooling)
    # Several processes (eebench.train.distributed): the main one alone writes and prints.
    procs = distributed.join(named.cfg.batch_size, named.cfg.device)
    if procs.size > 1:  # one job: its main process's lock, the others wait at its barrier
        return _train_claimed(named, method, task_spec, backbone, dev_examples, console,
                              overwrite, on_step, procs)
    with claimed(named.path, wait) as ours:
        if not ours:
            return None
        path = _train_claimed(named, method, task_spec, backbone, dev_examples, console,
                              overwrite, on_step, procs)
        lock_file(path).unlink(missing_ok=True)  # finished: nothing left to hold
        return path


def _train_claimed(named: NamedCheckpoint, method: EarlyExitMethod, task_spec: TaskSpec,
                   backbone: str, dev_examples: Any | None, console: Any, overwrite: bool,
                   on_step: Callable[[int], None] | None, procs: distributed.Processes) -> Path:
    cfg, pooling, train_examples, held_out = named.cfg, named.pooling, named.train, named.held_out
    config, key, path = named.config, named.key, named.path
    console = console if procs.is_main else None
    if procs.is_main:
        if overwrite:
            checkpoint.remove(path)
        checkpoint.recover(path)
    procs.barrier()
    state = checkpoint.read_state(path)
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
                       state or checkpoint.TrainState(config_hash=key, config=config), console,
                       on_step, pooling, held_out, procs)
    trainer.run()
    return path


class _Trainer:
    """One training run: the loop over stages, epochs and steps, with checkpoints."""

    def __init__(self, method, spec, backbone, train_examples, dev_examples, cfg, path, state,
                 console, on_step, pooling, held_out=None, procs=distributed.ONE):
        import torch

        from eebench.data.tokens import encode_for
        from eebench.models.backbones import load_tokenizer
        from eebench.models.build import build_model

        self.method, self.spec, self.cfg, self.path, self.state = method, spec, cfg, path, state
        self.console, self.on_step, self.procs = console, on_step, procs
        self.device = procs.device or cfg.device or ("cuda" if torch.cuda.is_available() else "cpu")
        torch.manual_seed(cfg.seed)  # head initialisation
        self.model = build_model(backbone, method, spec.num_labels, pooling=pooling)
        if cfg.max_seq_length > self.model.max_tokens:  # as a run's grid checks it first
            raise UsageError(f"--max-seq-length {cfg.max_seq_length} exceeds the model's "
                             f"{self.model.max_tokens} positions")
        self.tokenizer = load_tokenizer(backbone)
        if state.global_step > 0 or state.stage > 0:
            self._check_model_config()
            checkpoint.load_weights(self.model, path)
            checkpoint.set_rng_state(checkpoint.load_rng(path), self.device)
        elif spec.is_regression and cfg.regression_bias_init == "label_mean":
            mean = float(sum(train_examples.labels) / len(train_examples.labels))
            with torch.no_grad():
                for head in self.model.heads:  # heads of plug-in methods may differ
                    bias = getattr(getattr(head, "classifier", None), "bias", None)
                    if bias is not None:
                        bias.fill_(mean)
        self.model.to(self.device)
        procs.broadcast(self.model)
        self.train_data = encode_for(spec, train_examples, self.tokenizer, cfg.max_seq_length)
        self.held_out = None if held_out is None else encode_for(
            spec, held_out, self.tokenizer, cfg.max_seq_length)
        self.dev_data = None
        if dev_examples is not None and dev_examples.labels is not None and len(dev_examples):
            self.dev_data = encode_for(spec, dev_examples, self.tokenizer, cfg.max_seq_length)
        self.optimizer, self.schedule = None, None
        self.rng = checkpoint.rng_state(self.device)  # the RNG state at the last finished step
        self.saved_step = state.global_step
        self.clock = time.perf_counter()  # training time since the last save

    def _check_model_config(self) -> None:
        stored = checkpoint.read_model_config(self.path)
        built = json.loads(json.dumps(self.model.model_config(), default=str))
        stored.pop("source", None), built.pop("source", None)  # ./x and /abs/x are one model
        if stored != built:
            raise EebenchError(f"checkpoint {self.path} holds a different model structure",
                               hint="rerun with --overwrite")

    def log(self, msg: str) -> None:
        if self.console is not None:
            self.console.print(msg)

    def save(self, wait: bool = True) -> None:
        """Write a checkpoint (the main process); with `wait`, the others wait for it."""
        if self.procs.is_main:
            now = time.perf_counter()
            self.state.train_seconds += now - self.clock  # unrounded: many short saves add up
            self.clock = now
            with checkpoint.hold_interrupts():
                checkpoint.save_checkpoint(self.path, self.model, self.tokenizer, self.state,
                                     None if self.state.finished else self.optimizer,
                                     None if self.state.finished else self.schedule, self.rng)
        self.saved_step = self.state.global_step
        if wait:
            self.procs.barrier()

    def evaluate(self, stage: Stage, loss: float | None) -> None:
        """Dev evaluation of every exit (the main process; the others wait for it)."""
        if self.procs.is_main:
            self._evaluate(stage, loss)
        self.procs.barrier()

    def _evaluate(self, stage: Stage, loss: float | None) -> None:
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
        # An exit no stage has trained yet (DeeBERT's off-ramps while its backbone trains) shows
        # as "-": its untrained head scores at random and is no result.
        stages = self.method.stages()
        trained = {j for s in stages[:self.state.stage + 1] for j in s.exit_indices(len(metrics))}
        shown = " ".join(f"{m.get(main, float('nan')):.1f}" if j in trained else "-"
                         for j, m in enumerate(metrics))
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
                if index + 1 == len(stages) and self.held_out is not None:
                    self.calibrate()  # saved with the last stage's checkpoint
                with checkpoint.hold_interrupts():
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
                self.save(wait=False)
            raise
        finally:
            torch.use_deterministic_algorithms(deterministic, warn_only=warn_only)
            for p in self.model.parameters():
                p.requires_grad_(True)
        self.model.eval()

    def calibrate(self) -> None:
        """Fit what the method's rule needs on the held-out slice (maxprob: temperatures)."""
        from eebench.data.batching import eval_batches
        from eebench.models.outputs import collect_exit_logits

        out = collect_exit_logits(self.model, eval_batches(self.held_out, self.cfg.eval_batch_size,
                                                           sort_by_length=True))
        self.method.calibrate(self.model, out)
        self.log(f"calibrated on {len(self.held_out)} held-out training examples")

    def run_stage(self, stage: Stage) -> None:
        import torch
        from rich.progress import Progress

        from eebench.data.batching import steps_per_epoch, train_batches

        model, state = self.model, self.state
        trainable = list({id(p): p for p in stage.trainable(model)}.values())
        chosen = {id(p) for p in trainable}
        for p in model.parameters():
            p.requires_grad_(id(p) in chosen)
        backbone = {id(p) for p in model.backbone_parameters()}
        cfg = self.cfg.for_stage(stage.name, heads_only=not chosen & backbone, stage_lr=stage.lr)
        per_epoch = steps_per_epoch(len(self.train_data), cfg.batch_size)
        total = per_epoch * cfg.epochs
        warmup = math.ceil(total * cfg.warmup_ratio)
        # The fused kernel updates all tensors in one pass: 4x faster than the per-tensor loop on
        # a CPU, where AdamW over MiniLM's 12M-entry embedding matrix otherwise costs 0.2 s a step.
        fused = torch.device(self.device).type in ("cpu", "cuda")
        optimizer = torch.optim.AdamW(optimizer_groups(model, trainable, cfg.weight_decay),
                                      lr=cfg.lr, eps=cfg.adam_eps, fused=fused or None)
        if state.stage_step > 0:
            checkpoint.load_optimizer(optimizer, self.path)
        self.optimizer = optimizer
        exits = stage.exit_indices(model.num_exits)
        route = derived.route(self.method, stage, model.num_exits)
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
                                           cfg.group_by_length, self.procs.part):
                    self.procs.seed_step(cfg.seed, state.global_step)
                    lr = cfg.lr * linear_schedule(state.stage_step, total, warmup)
                    for group in optimizer.param_groups:
                        group["lr"] = lr
                    with torch.autocast(torch.device(self.device).type, dtype=torch.bfloat16,
                                        enabled=cfg.precision == "bf16"):
                        logits = model(**_inputs(batch), route=route).float()
                    # Every exit's logits: the method picks the stage's exits itself.
                    loss = self.method.loss(list(logits), batch["labels"], stage,
                                            self.spec.is_regression, step=state.step_in_epoch)
                    # With several processes: this one's part, and the global batch's loss.
                    part = self.procs.weigh(loss, batch)
                    loss = self.procs.total(part)
                    # A non-finite loss or gradient would write NaN weights: stop, and leave the
                    # checkpoint at its last good step, unfinished.
                    if not torch.isfinite(loss):
                        raise EebenchError(f"training diverged: the loss is {loss.item()} at step "
                                           f"{state.global_step + 1}", hint="lower the --lr")
                    part.backward()
                    self.procs.sum_gradients(trainable)
                    norm = torch.nn.utils.clip_grad_norm_(trainable, cfg.max_grad_norm)
                    if not torch.isfinite(norm):
                        raise EebenchError(f"training diverged: the gradient norm is {norm.item()} "
                                           f"at step {state.global_step + 1}",
                                           hint="lower the --lr")
                    with checkpoint.hold_interrupts():
                        optimizer.step()
                        optimizer.zero_grad(set_to_none=True)
                        state.step_in_epoch += 1
                        state.stage_step += 1
                        state.global_step += 1
                        self.schedule = {"kind": "linear_warmup_decay", "base_lr": cfg.lr,
                                         "warmup_steps": warmup, "total_steps": total,
                                         "step": state.stage_step}
                        self.rng = checkpoint.rng_state(self.device)
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
                with checkpoint.hold_interrupts():
                    state.epoch, state.step_in_epoch = epoch + 1, 0
                if not (self.cfg.eval_every and state.global_step % self.cfg.eval_every == 0):
                    self.evaluate(stage, loss_sum / n if n else None)
                if epoch + 1 < cfg.epochs:
                    self.save()
