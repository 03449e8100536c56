"""The conformance kit's runs of a token model: a method whose unit is "token" (SENTEE, TOKEE;
DeeBERT's or static's token model, `settings={"unit": "token"}`), as eebench.run.evaluate_tokens
runs it.

Each variant is trained on a tiny token task (CoNLL-2003's tags on the kit's sentences,
eebench.testing.tiny.token_examples), saved and reloaded; its FLOP table costs every exit; and
real dynamic inference (sentences leave the batch) decides as the one-pass simulation
(`simulate_tokens`) at every sweep value, at batch size 1 and 5: zero disagreements. A rule that
halts words on their own (TOKEE) is not replayed over one pass: its exact decisions (every layer
on all tokens, halted words' states copied upward) are checked against the live run (only live
tokens computed) instead.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from eebench.methods.base import JOINT
from eebench.methods.derived import default_sweep
from eebench.models.units import unit_of

BATCH_SIZES = (1, 5)


def check_token_runs(report: Any, method: Any, backbone: Path, root: Path,
                     rules: tuple[str, ...]) -> None:
    """Train, reload and sweep every variant of token model `method` (see the module
    docstring); `rules` are other token rules to sweep on its model too."""
    from eebench.data.batching import eval_batches
    from eebench.data.tokens import encode_words
    from eebench.measure.cost_table import build_cost_table
    from eebench.models.backbones import load_tokenizer
    from eebench.models.outputs import collect_token_logits
    from eebench.rules.catalog import ModelFacts, get_rule
    from eebench.tasks.catalog import get_task
    from eebench.testing.tiny import NUM_LAYERS, stirred, token_examples, trained

    enc = encode_words(token_examples("dev"), load_tokenizer(str(backbone)), 32)
    num_labels = len(get_task("conll2003").labels)
    for variant in method.variants(default_sweep(method, NUM_LAYERS, False, num_labels)):
        where = f"token task, variant {variant.name}"
        with report.check(f"{where}: trains, saves and reloads"):
            model = trained(variant.method, backbone, root, False, "conll2003",
                           token_examples("train"))
        if not report.ok:
            return
        out = collect_token_logits(model, enc, eval_batches(enc, 8, sort_by_length=True))
        facts = ModelFacts(False, model.num_labels, None, model.signal_names,
                           dict(model.method_settings), num_exits=model.num_exits)
        with report.check(f"{where}: the FLOP table costs every exit"):
            table = build_cost_table(model, max_len=int(out.lengths.max()))
            path = table.path[:, int(out.lengths.max())]
            assert (path > 0).all() and (path[1:] >= path[:-1]).all(), f"path FLOPs {path}"
        own = variant.method.rule
        sweeps = [(own or "its rule", _halts(own), variant.values,
                   lambda v, m=variant.method, f=facts: m.exit_rule(v, False, f))]
        for name in rules if variant.name == JOINT else ():
            kind = get_rule(name)
            with report.check(f"{where}: its model gives what rule {kind.name!r} needs"):
                assert unit_of(kind.unit).per_token, f"rule {kind.name!r} decides per {kind.unit}"
                kind.refuse_unless(facts.provides(), f"this {method.name} model")
            sweeps.append((kind.name, _halts(kind.name),
                           kind.default_sweep(NUM_LAYERS, False, num_labels),
                           lambda v, k=kind, f=facts: k.build(v, f)))
        _agree_tokens(report, where, model, enc, sweeps)
        _agree_tokens(report, f"{where}, stirred", stirred(model), enc, sweeps)


def _halts(rule: str) -> bool:
    from eebench.rules.catalog import get_rule

    return bool(rule) and getattr(get_rule(rule), "halts_tokens", False)


def _agree_tokens(report: Any, where: str, model: Any, enc: Any, sweeps: list) -> None:
    """Real dynamic inference decides as the simulation (a halting rule: as its exact run) at
    every sweep value; on a stirred model of several exits, some value mixes the exits."""
    from eebench.data.batching import eval_batches
    from eebench.models.outputs import collect_token_logits
    from eebench.models.units import TOKEN
    from eebench.rules.base import FixedRule
    from eebench.rules.engine import compare, dynamic_inference
    from eebench.rules.tokens import SentenceEntropyRule, simulate_tokens

    out = collect_token_logits(model, enc, eval_batches(enc, 8, sort_by_length=True))
    for rule_name, halts, values, make in sweeps:
        with report.check(f"{where}, {rule_name}: real dynamic inference (batch 1 and 5) "
                          f"decides as the simulation at {len(values)} sweep values"):
            exits = set()
            for v in values:
                rule = make(v)
                if isinstance(rule, FixedRule):  # one exit: every sentence's (evaluate_tokens)
                    rule = SentenceEntropyRule(0.0)
                sim = (_halting(model, rule, enc, 8, live=False).decisions if halts
                       else simulate_tokens(rule, out.logits, out.mask))
                exits.add(tuple(sim.exit_index.tolist()))
                for bs in BATCH_SIZES:
                    real = (_live_run(model, rule, enc, bs) if halts else
                            dynamic_inference(model, rule, eval_batches(enc, bs), len(enc),
                                              enc=enc))
                    got = compare(sim, real, unit=TOKEN)
                    assert got.disagreements == 0, (
                        f"value {v:g}, batch size {bs}: {got.disagreements} of {got.compared} "
                        f"sentences disagree ({got.near_threshold} near the threshold)")
            if where.endswith("stirred") and model.num_exits > 1:
                assert any(len(set(e)) > 1 for e in exits), \
                    "no sweep value exits the sentences at different exits"


def _halting(model: Any, rule: Any, enc: Any, batch_size: int, live: bool) -> Any:
    from eebench.data.batching import eval_batches
    from eebench.rules.token_halting import halting_inference

    def counting(batch: dict) -> Any:
        rows, width = batch["index"].tolist(), batch["input_ids"].shape[1]
        return enc.counting_mask(rows, width), enc.piece_owner(rows, width)

    return halting_inference(model, rule, eval_batches(enc, batch_size, sort_by_length=True),
                             len(enc), max(enc.lengths), counting, live=live)


def _live_run(model: Any, rule: Any, enc: Any, batch_size: int) -> Any:
    """A halting rule live (only live tokens computed), as a TokenRun."""
    from eebench.models.units import TokenRun

    dec = _halting(model, rule, enc, batch_size, live=True).decisions
    return TokenRun(dec.exit_index.numpy(),
                    [dec.prediction[i, :k].numpy() for i, k in enumerate(enc.lengths)])
