"""Evaluate one trained token model (sequence labelling) for a run: eebench.run.evaluate's
counterpart where the task's unit is "token" (CoNLL-2003, WNUT-17).

One full pass keeps every exit's logits for every token ([E, N, T, C]); each sweep value of the
run's token rule (eebench.rules.token_catalog) is replayed over them (`simulate_tokens`): where
each sentence exits, and each word's tag from its first piece there. A point's metrics are
entity-level (seqeval) over every word, a cut word predicted `O`; its FLOPs are each sentence's
path to its exit at its real length (a sentence-level decision: the whole sentence runs to
there). Real dynamic inference (`dynamic_token_inference`: sentences leave the batch) is timed
and checked against the simulation on the timing subset, as for texts.

What the run directory keeps, per point: `exit_layer` [P, N] per sentence and `prediction`
[P, W] a tag id per word, the split's words in order (`words` [N] says how many each sentence
has; `labels` [W] the gold tags; `counted` [W] 1 where a word has a piece inside
max_seq_length); per variant, under its logits key, each exit's tag at those words' first pieces
(int8 [E, K], K the counted words: the argmax of the full pass's logits).

A rule that halts words on their own (TOKEE, `halts_tokens`) is not replayed over the pass: a
halted word's state is copied upward, so the logits above depend on the decisions below. Each of
its sweep values runs the model over the split with the copies (eebench.rules.token_halting,
every layer on all tokens: the exact decisions), and its FLOPs are per token: each layer's live
pieces (eebench.measure.token_flops). Real dynamic inference computes the live tokens only and
drops finished sentences; it is timed and checked against those decisions. Each point also keeps
`token_exit_layer` [P, W]: the layer where each word's tag was decided (0 for a word with no
piece).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from eebench.methods.base import Variant, get_method
from eebench.models.exits import exit_paths
from eebench.rules.catalog import ModelFacts, get_rule
from eebench.run.artifacts import OperatingPoint, RunConfig
from eebench.run.evaluate import (
    FullPass,
    Measured,
    _advance,
    _progress_task,
    _timing_subset,
    rule_for,
    timed_inference,
)
from eebench.tasks.spec import TaskSpec


def token_pass(cfg: RunConfig, spec: TaskSpec, ckpt_dirs: list[Path], eval_ex, opts
               ) -> FullPass:
    """Load a variant's model and run it once over the split's sentences (see FullPass; `out`
    is a TokenOutputs, `enc` an EncodedWords)."""
    from eebench.data.batching import eval_batches
    from eebench.data.tokens import encode_words
    from eebench.measure.cost_table import build_cost_table
    from eebench.measure.params import params_per_exit
    from eebench.models.outputs import collect_token_logits
    from eebench.rules.tokens import SentenceEntropyRule
    from eebench.train.checkpoint import load_trained

    method = get_method(cfg.method, **cfg.method_settings)
    loaded = [load_trained(d) for d in ckpt_dirs]
    model = method.combine([m for m, _, _ in loaded])
    enc = encode_words(eval_ex, loaded[0][1], cfg.max_seq_length)
    task = _progress_task(opts, f"{cfg.method} {cfg.task}: full pass", len(enc))
    out = collect_token_logits(model, enc, eval_batches(enc, opts.eval_batch_size,
                                                        sort_by_length=True),
                               progress=lambda k: _advance(opts, task, k))
    table = build_cost_table(model, max_len=int(out.lengths.max()),
                             convention=cfg.flops_convention)
    subset = _timing_subset(len(enc), cfg.timing.samples, seed=0)
    baseline = _real_tokens(model, SentenceEntropyRule(0.0), enc, subset, cfg,
                            full=True)[0] if cfg.timing.full_once else []
    facts = ModelFacts(False, model.num_labels, None, model.signal_names,
                       dict(model.method_settings), num_exits=model.num_exits)
    return FullPass(model, enc, out, table, params_per_exit(model), subset, baseline, facts)


def _halts(cfg: RunConfig, method) -> bool:
    """Whether the run's rule (its own, or the one it names) halts words on their own. Asked of
    each run of a pass: the method's own rule and the rules swept on its model differ."""
    name = cfg.rule or method.rule
    return bool(name) and getattr(get_rule(name), "halts_tokens", False)


def _live_costs(fp: FullPass, convention: str):
    """The per-token layer costs of the pass's model, counted once per pass."""
    if fp.live_costs is None:
        from eebench.measure.token_flops import build_live_costs, check_full

        fp.live_costs = build_live_costs(fp.model, convention)
        check_full(fp.live_costs, fp.table)
    return fp.live_costs


def _counting(enc):
    def counting(batch: dict):
        rows, width = batch["index"].tolist(), batch["input_ids"].shape[1]
        return enc.counting_mask(rows, width), enc.piece_owner(rows, width)

    return counting


def _halting_decisions(model, rule, enc, batch_size: int):
    """A halting rule's exact decisions over the split (states copied, every layer whole)."""
    from eebench.data.batching import eval_batches
    from eebench.rules.token_halting import halting_inference

    return halting_inference(model, rule, eval_batches(enc, batch_size, sort_by_length=True),
                             len(enc), max(enc.lengths), _counting(enc), live=False)


def _real_halting(model, rule, enc, subset: np.ndarray, cfg: RunConfig):
    """A halting rule live (only live tokens computed) on the subset, timed; as TokenRuns."""
    from eebench.rules.token_engine import TokenRun
    from eebench.rules.token_halting import halting_batch, halting_inference

    counting = _counting(enc)

    def warm(batch: dict) -> None:
        halting_batch(model, rule, batch, *counting(batch), live=True)

    def infer(batches, timer):
        run = halting_inference(model, rule, batches, len(enc), max(enc.lengths), counting,
                                live=True, timer=timer)
        dec = run.decisions
        return TokenRun(dec.exit_index.numpy(), [dec.prediction[i, :k].numpy()
                                                 for i, k in enumerate(enc.lengths)])

    return timed_inference(model, enc, subset, cfg.timing, False, warm, infer,
                           _beside(model, enc, cfg))


def _beside(model, enc, cfg: RunConfig):
    """With `timing.baseline` "paired": the full model on one batch, timed beside each point."""
    if not cfg.timing.full_beside:
        return None
    from eebench.rules.token_engine import dynamic_token_batch
    from eebench.rules.tokens import SentenceEntropyRule

    no_exit = SentenceEntropyRule(0.0)

    def beside(batch: dict) -> None:
        dynamic_token_batch(model, no_exit, batch, enc.counting_mask(
            batch["index"].tolist(), batch["input_ids"].shape[1]), full=True)

    return beside


def _real_tokens(model, rule, enc, subset: np.ndarray, cfg: RunConfig, full: bool):
    from eebench.rules.token_engine import dynamic_token_batch, dynamic_token_inference

    def warm(batch: dict) -> None:
        dynamic_token_batch(model, rule, batch, enc.counting_mask(
            batch["index"].tolist(), batch["input_ids"].shape[1]), full=full)

    def infer(batches, timer):
        return dynamic_token_inference(model, rule, batches, enc.lengths, enc.word_ids, full,
                                       timer=timer)

    return timed_inference(model, enc, subset, cfg.timing, full, warm, infer,
                           None if full else _beside(model, enc, cfg))


def _word_exits(enc, token_exit: np.ndarray, exit_layer_of: np.ndarray) -> np.ndarray:
    """int16 [W]: the layer where each word's tag was decided (its first piece's exit), 0 for a
    word with no piece."""
    from eebench.data.tokens import first_pieces

    out = []
    for i, (ids, n) in enumerate(zip(enc.word_ids, enc.words, strict=True)):
        row = np.zeros(n, dtype=np.int16)
        for w, k in first_pieces(ids).items():
            row[w] = exit_layer_of[token_exit[i, k]]
        out.append(row)
    return np.concatenate(out)


def _counted(word_ids, n_words: int) -> np.ndarray:
    from eebench.data.tokens import first_pieces

    out = np.zeros(n_words, dtype=np.int8)
    out[list(first_pieces(word_ids))] = 1
    return out


def sweep_tokens(cfg: RunConfig, variant: Variant, spec: TaskSpec, fp: FullPass,
                 full_layers: int, opts) -> Measured:
    """Every sweep value of the run's token rule over one full pass: simulated decisions, their
    entity F1 and FLOPs, each checked against (and timed with) real dynamic inference."""
    from eebench.rules.base import FixedRule
    from eebench.rules.token_engine import compare_tokens
    from eebench.rules.tokens import SentenceEntropyRule, simulate_tokens
    from eebench.tasks.seqlabel import token_metrics

    model, out, enc, table, params = fp.model, fp.out, fp.enc, fp.table, fp.params
    named, make_rule = rule_for(cfg, variant, fp.facts)
    halts = _halts(cfg, variant.method)
    values = variant.values if cfg.rule is None else tuple(cfg.sweep)
    sweep_task = _progress_task(opts, f"{cfg.label} {cfg.task}: sweep, check, time", len(values))
    exit_layer_of = np.asarray(model.exit_layers)
    points, exit_layers, preds, word_exits = [], [], [], []
    for value in values:
        rule = make_rule(value)
        # checked at every point, timed at those `[timing] points` picks (every one by default)
        timed = cfg.model_copy(update={"timing": cfg.timing.at(value, cfg.sweep)})
        if isinstance(rule, FixedRule):  # a method without a rule: one exit, every sentence's
            if model.num_exits != 1:
                raise ValueError(f"{cfg.method}: no token rule for a model of "
                                 f"{model.num_exits} exits")
            rule = SentenceEntropyRule(0.0)  # never asked: a single exit is the last
        if halts:  # words halt on their own: run with the copies, FLOPs per token
            halting = _halting_decisions(model, rule, enc, opts.eval_batch_size)
            dec = halting.decisions
            flops = _live_costs(fp, cfg.flops_convention).sentence_flops(
                table, dec.exit_index.numpy(), out.lengths, halting.live_pieces)
            timings, real = _real_halting(model, rule, enc, fp.subset, timed)
        else:  # a decision per sentence, replayed over the one pass
            dec = simulate_tokens(rule, out.logits, out.mask)
            flops = table.per_sample_flops(dec.exit_index.numpy(), out.lengths)
            timings, real = _real_tokens(model, rule, enc, fp.subset, timed, full=False)
        layers = exit_layer_of[dec.exit_index.numpy()]
        tags = enc.predictions_per_word(dec.prediction.numpy())
        metrics = token_metrics(spec, tags, enc.tags) if enc.tags is not None else {}
        word_exits.append(_word_exits(enc, dec.token_exit.numpy(), exit_layer_of))
        checks = [compare_tokens(dec, r, fp.subset) for r in real]
        agreement = max(checks, key=lambda c: c.disagreements)
        avg = float(layers.mean())
        points.append(OperatingPoint(
            method=cfg.label, variant=variant.name, task=cfg.task, split=cfg.split, seed=cfg.seed,
            sweep=named(value), n_samples=len(layers), num_layers=full_layers, metrics=metrics,
            main_metric=spec.main_metric, main=metrics.get(spec.main_metric), avg_exit_layer=avg,
            exit_histogram=np.bincount(layers, minlength=full_layers + 1)[1:].tolist(),
            flops_convention=cfg.flops_convention, mean_flops=float(flops.mean()),
            mean_mflops=float(flops.mean()) / 1e6, speedup=full_layers / avg,
            layer_saving=1 - avg / full_layers, params_total=params.total,
            params_mean_used=float(params.mean_used(dec.exit_index.numpy())),
            timings=timings + fp.baseline if timed.timing.enabled else [],
            disagreements=agreement.disagreements,
            disagreements_near_threshold=agreement.near_threshold,
        ))
        exit_layers.append(layers.astype(np.int16))
        preds.append(np.concatenate([np.asarray(t, dtype=np.int16) for t in tags]))
        _advance(opts, sweep_task, 1)
    arrays = {"exit_layer": np.stack(exit_layers), "prediction": np.stack(preds).astype(np.int8),
              "token_exit_layer": np.stack(word_exits).astype(np.int8),
              "lengths": out.lengths.astype(np.int32),
              "words": np.asarray(enc.words, dtype=np.int32),
              # which words have a piece (and so a row in the stored logits): [W]
              "counted": np.concatenate([_counted(w, n) for w, n in
                                         zip(enc.word_ids, enc.words, strict=True)])}
    if enc.tags is not None:
        arrays["labels"] = np.concatenate([np.asarray(t, dtype=np.int16) for t in enc.tags])
    structure = {"exit_layers": list(model.exit_layers),
                 "hidden_size": int(model.config.hidden_size), "pooling": model.pooling,
                 "exit_paths": [[{"layers": r.layers, "heads": list(r.heads)} for r in path]
                                for path in exit_paths(model)],
                 "temperatures": None, "settings": dict(fp.facts.settings)}
    # each exit's tag at the counted words, int8 [E, K] (logits [E, K, C] would make a committed
    # CoNLL run directory 5 MB)
    tags_per_exit = out.logits[:, out.mask].argmax(-1).numpy().astype(np.int8)
    return Measured(points, arrays, tags_per_exit, structure)
