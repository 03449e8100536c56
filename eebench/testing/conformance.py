"""Conformance checks for a method or an exit rule, eebench's own or a plugin's.

    from eebench.testing import assert_method, assert_rule

    def test_palbert_conforms(tmp_path):
        assert_method("palbert", workdir=tmp_path)          # AssertionError listing problems

    def test_q_exit_conforms(tmp_path):
        assert_rule("q-exit", method="palbert", workdir=tmp_path)

`check_method` builds a tiny random backbone (3 layers, hidden 32, a word-level tokenizer of the
sentences below: no download, no data directory), trains the method a few steps on a handful of
rows with eebench's own training loop, reloads the checkpoint as a run does, and checks what a
run relies on: its description (eebench.methods.derived.describe) and settings are JSON and
round-trip, the stages and the parameters they train, the heads and their exit layers, the shape
of every exit's outputs for the method's unit (a label per text, or a tag per token:
`forward_shape`), the default sweep (every value served by a variant and accepted by the rule),
that the model gives what the method says it `provides`, the FLOP table, and that real dynamic
inference, at batch size 1 and batched, decides exactly as the one-pass simulation for every
sweep value: zero disagreements. A token model (SENTEE, TOKEE; any method's with
`settings={"unit": "token"}`) runs on a tiny token task instead (eebench.testing.tokens).
A decoder method (eebench.methods.protocols.Decodes: self-spec, CALM, EE-Tuning; static's
decoder truncations too) is checked in one decoder run per decoder task it does, of it alone,
on a tiny random Llama (eebench.testing.decoders); a decoder method only has no encoder model,
so what an encoder model is checked for is `skipped`, with the reason. `check_rule` checks a
rule's description, needs and sweep, then sweeps it on a method's model the same way. Both
return a
`Conformance` report; `assert_method` / `assert_rule` raise AssertionError when it has problems.
`python -m eebench.testing palbert [--rule q-exit]` prints the report (eebench.testing.__main__).
"""

from __future__ import annotations

import json
import math
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from eebench.errors import one_line
from eebench.methods.decoder_derived import decoder_tasks, decodings, encoder_tasks
from eebench.methods.derived import default_sweep, describe, provided, supports_regression
from eebench.models.units import unit_of
from eebench.testing.tiny import NUM_LAYERS, examples, stirred, tiny_backbone, trained


@dataclass
class Conformance:
    """What was checked on a method or a rule, and what was wrong."""

    name: str
    kind: str  # "method" or "rule"
    passed: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)  # what does not apply, and why

    @property
    def ok(self) -> bool:
        return not self.problems

    def __str__(self) -> str:
        head = f"{self.kind} {self.name!r}: {len(self.passed)} checks passed, " \
               f"{len(self.problems)} problem(s)"
        return "\n".join([head, *(f"  problem: {p}" for p in self.problems),
                          *(f"  ok: {p}" for p in self.passed),
                          *(f"  skipped: {p}" for p in self.skipped)])

    @contextmanager
    def check(self, what: str) -> Iterator[None]:
        """Record `what` as passed, or the exception (or failed assertion) as a problem."""
        try:
            yield
        except Exception as e:
            self.problems.append(f"{what}: {one_line(e, limit=300, named=True)}")
        else:
            self.passed.append(what)


def check_method(name: str, settings: dict[str, Any] | None = None, *, rules: tuple[str, ...] = (),
                 regression: bool | None = None, workdir: Path | None = None,
                 runs: bool = True) -> Conformance:
    """Check method `name` (with `settings`) end to end on a tiny model (see the module
    docstring); `rules` are other rules to sweep on its model too. `regression`: also on a
    regression task (None: where the method supports it). `runs=False`: its description and
    its models' structure only (nothing trains). Never raises for a problem found."""
    with _one_thread():
        return _check_method(name, settings, rules, regression, workdir, runs)


@contextmanager
def _one_thread() -> Iterator[None]:
    """Tiny models run fastest on one thread (and leave a shared machine's other cores be)."""
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(threads)


def _check_method(name: str, settings: dict[str, Any] | None, rules: tuple[str, ...],
                  regression: bool | None, workdir: Path | None, runs: bool) -> Conformance:
    from eebench.methods.base import get_method

    report = Conformance(name, "method")
    with report.check("get_method builds it with these settings"):
        method = get_method(name, **(settings or {}))
    if not report.ok:
        return report
    _check_description(report, method, name)
    if not encoder_tasks(method):  # a decoder method only: no encoder model to build
        report.skipped.append("its encoder models' structure and runs: a decoder method only "
                              "(eebench decode)")
        if runs and report.ok:
            _check_decoder_runs(report, method, workdir)
        elif not runs:
            report.skipped.append("its decoder runs (runs=False)")
        return report
    tasks = [False] + ([True] if (supports_regression(method) if regression is None
                                  else regression) else [])
    with tempfile.TemporaryDirectory(prefix="eebench-conformance-") as tmp:
        root = Path(workdir or tmp)
        if runs and decodings(method):  # static: the decoder LLM's truncations too
            from eebench.testing.decoders import check_decoder_runs

            check_decoder_runs(report, method, root)
        backbone = tiny_backbone(root / "backbone")
        _check_structure(report, method, backbone)
        if not runs:
            return report
        if unit_of(method.unit).per_token:  # a tag per word: a token task's runs
            from eebench.testing.tokens import check_token_runs

            if report.ok:
                check_token_runs(report, method, backbone, root, rules)
            return report
        for is_regression in tasks:
            if report.ok:
                _check_runs(report, method, backbone, root, is_regression, rules)
    return report


def _check_decoder_runs(report: Conformance, method: Any, workdir: Path | None) -> None:
    from eebench.testing.decoders import check_decoder_runs

    with tempfile.TemporaryDirectory(prefix="eebench-conformance-") as tmp:
        check_decoder_runs(report, method, Path(workdir or tmp))


def check_rule(name: str, method: str | None = None, *, workdir: Path | None = None,
               settings: dict[str, Any] | None = None) -> Conformance:
    """Check exit rule `name`: its description, needs and sweep, then its sweep on the model of
    `method` (None: the first registered method whose models give what the rule needs)."""
    from eebench.methods.base import METHODS, get_method
    from eebench.rules.catalog import get_rule

    report = Conformance(name, "rule")
    with report.check("get_rule builds it"):
        kind = get_rule(name)
    if not report.ok:
        return report
    with report.check("describe() is JSON and names every need in words"):
        row = json.loads(json.dumps(kind.describe()))
        assert row["name"] == kind.name, f"describe() names {row['name']!r}"
        for need in kind.needs:
            assert kind.describe_need(need), f"need {need!r} has no description"
    with report.check("its default sweep is finite, accepted by check() and builds rules"):
        from eebench.rules.base import ExitRule
        from eebench.rules.catalog import ModelFacts

        for is_regression in [False] + ([True] if kind.supports_regression else []):
            values = kind.default_sweep(NUM_LAYERS, is_regression, 2)
            assert values and all(math.isfinite(v) for v in values), f"sweep {values}"
            facts = ModelFacts(is_regression, 1 if is_regression else 2,
                               [1.0] * NUM_LAYERS, ())
            for v in values:
                kind.check(v)
                assert isinstance(kind.build(v, facts), ExitRule), "build() is not an ExitRule"
    if method is None:
        method = next((m for m in METHODS.names() if encoder_tasks(METHODS.get(m))
                       and not kind.missing(provided(get_method(m), False))), None)
        if method is None:
            report.problems.append(f"no registered method gives what it needs ({kind.needs})")
            return report
    sub = check_method(method, settings, rules=(kind.name,), regression=False, workdir=workdir)
    report.passed += [f"on {method}: {p}" for p in sub.passed]
    report.problems += [f"on {method}: {p}" for p in sub.problems]
    return report


def assert_method(name: str, settings: dict[str, Any] | None = None, **kwargs: Any) -> None:
    """`check_method`, raising AssertionError with the report when it found a problem."""
    report = check_method(name, settings, **kwargs)
    assert report.ok, str(report)


def assert_rule(name: str, method: str | None = None, **kwargs: Any) -> None:
    """`check_rule`, raising AssertionError with the report when it found a problem."""
    report = check_rule(name, method, **kwargs)
    assert report.ok, str(report)


# -- the checks ------------------------------------------------------------------------------------
def _check_description(report: Conformance, method: Any, name: str) -> None:
    from eebench.methods.base import get_method
    from eebench.rules.catalog import get_rule

    with report.check("describe() is JSON with every field"):
        row = json.loads(json.dumps(describe(method)))
        wanted = {"name", "paper", "description", "rule", "provides", "sweep_param",
                  "supports_regression", "trains", "settings"}
        assert wanted <= set(row), f"describe() lacks {sorted(wanted - set(row))}"
        assert row["name"] == method.name, f"describe() names {row['name']!r}"
    with report.check("settings are JSON and rebuild the same method"):
        recorded = json.loads(json.dumps(method.settings))
        assert get_method(name, **recorded).settings == method.settings
    if decodings(method):
        with report.check("it does a decoder task"):
            assert decoder_tasks(method), f"decodings {decodings(method)} of no decoder task"
    if not encoder_tasks(method):
        return
    if method.rule:
        with report.check(f"its rule {method.rule!r} is registered and served by its models"):
            kind = get_rule(method.rule)
            for is_regression in [False] + ([True] if supports_regression(method) else []):
                lacking = kind.missing(provided(method, is_regression))
                assert not lacking, f"its models lack {lacking} (regression: {is_regression})"
    with report.check("its default sweep is finite and each value is served by one variant"):
        sweep = default_sweep(method, NUM_LAYERS, False, 2)
        assert sweep and all(math.isfinite(v) for v in sweep), f"sweep {sweep}"
        served = [v for variant in method.variants(sweep) for v in variant.values]
        assert sorted(served) == sorted(float(v) for v in sweep), f"variants serve {served}"
        for variant in method.variants(sweep):
            for v in variant.values:
                variant.method.exit_rule(v, False)


def _check_structure(report: Conformance, method: Any, backbone: Path) -> None:
    import torch

    from eebench.methods import Stage
    from eebench.models.build import build_model
    from eebench.models.multi_exit import reads_previous

    for variant in method.variants(default_sweep(method, NUM_LAYERS, False, 2))[:1]:
        m = variant.method
        for part in m.models(NUM_LAYERS):
            with report.check(f"{part.name}: heads, exit layers and stages"):
                model = build_model(str(backbone), part, 2)
                assert model.exit_layers, "no exit"
                assert all(s.isidentifier() for s in model.signal_names), model.signal_names
                stages = part.stages()
                assert stages and all(isinstance(s, Stage) for s in stages), "stages()"
                assert len({s.name for s in stages}) == len(stages), "two stages share a name"
                own = {id(p) for p in model.parameters()}
                for s in stages:
                    params = s.trainable(model)
                    assert params and all(id(p) in own for p in params), \
                        f"stage {s.name!r} trains nothing, or parameters not in the model"
                    s.exit_indices(model.num_exits)
                ids = torch.tensor([[2, 5, 6, 3]])
                out = model(ids, torch.ones_like(ids))
                assert model.unit == part.unit, f"heads of unit {model.unit}, not {part.unit}"
                wanted = forward_shape(part.unit, model.num_exits, *ids.shape,
                                       2 + len(model.signal_names))
                assert out.shape == wanted, f"forward gives {tuple(out.shape)}, not {wanted}"
                if model.stateful:
                    head = next(h for h in model.heads if reads_previous(h))
                    got = head(model.embed(ids, torch.ones_like(ids))[0], None, None)
                    assert isinstance(got, tuple) and len(got) == 2, \
                        "a head that reads the previous exit's state returns (outputs, state)"


def forward_shape(unit: str, num_exits: int, batch: int, tokens: int, width: int
                  ) -> tuple[int, ...]:
    """What `forward` gives for a batch of `batch` x `tokens` ids on a model whose exits
    classify `unit`: every exit's outputs (logits, then signals), per text or per token."""
    return (num_exits, batch, *((tokens,) if unit_of(unit).per_token else ()), width)


def _check_runs(report: Conformance, method: Any, backbone: Path, root: Path,
                is_regression: bool, rules: tuple[str, ...]) -> None:
    from eebench.data.batching import encode, eval_batches
    from eebench.measure.cost_table import build_cost_table
    from eebench.models.backbones import load_tokenizer
    from eebench.models.outputs import collect_exit_logits
    from eebench.rules.catalog import ModelFacts, get_rule

    task = "regression" if is_regression else "classification"
    enc = encode(examples("dev", is_regression), load_tokenizer(str(backbone)), 32,
                 is_regression)
    for variant in method.variants(default_sweep(method, NUM_LAYERS, is_regression, 2)):
        where = f"{task}, variant {variant.name}"
        with report.check(f"{where}: trains, saves and reloads"):
            model = trained(variant.method, backbone, root, is_regression)
        if not report.ok:
            return
        out = collect_exit_logits(model, eval_batches(enc, 8, sort_by_length=True))
        facts = ModelFacts(is_regression, model.num_labels, model.temperatures(),
                           tuple(getattr(model, "signal_names", ())),
                           dict(getattr(model, "method_settings", {})))
        with report.check(f"{where}: the model gives what the method provides"):
            lacking = provided(variant.method, is_regression) - facts.provides()
            assert not lacking, f"it lacks {sorted(lacking)}"
        with report.check(f"{where}: the FLOP table costs every exit"):
            table = build_cost_table(model, max_len=int(out.lengths.max()))
            path = table.path[:, int(out.lengths.max())]
            assert (path > 0).all() and (path[1:] >= path[:-1]).all(), f"path FLOPs {path}"
        sweeps = [(variant.method.rule or "its rule", variant.values,
                   lambda v, m=variant.method, f=facts: m.exit_rule(v, is_regression, f))]
        for name in rules if variant.name == "all" else ():
            kind = get_rule(name)
            if is_regression and not kind.supports_regression:
                continue
            with report.check(f"{where}: its model gives what rule {kind.name!r} needs"):
                kind.refuse_unless(facts.provides(), f"this {method.name} model")
            sweeps.append((kind.name, kind.default_sweep(NUM_LAYERS, is_regression, 2),
                           lambda v, k=kind, f=facts: k.build(v, f)))
        _agree(report, where, model, enc, sweeps, is_regression)
        _agree(report, f"{where}, stirred", stirred(model), enc, sweeps, is_regression)


def _agree(report: Conformance, where: str, model: Any, enc: Any, sweeps: list,
           is_regression: bool) -> None:
    """Real dynamic inference (batch size 1 and batched) decides exactly as the simulation at
    every sweep value; on a stirred classifier of several exits, some value mixes the exits."""
    from eebench.data.batching import eval_batches
    from eebench.models.outputs import collect_exit_logits
    from eebench.rules.engine import compare, dynamic_inference, simulate

    out = collect_exit_logits(model, eval_batches(enc, 8, sort_by_length=True))
    for rule_name, values, make in sweeps:
        with report.check(f"{where}, {rule_name}: real dynamic inference (batch 1 and 5) "
                          f"decides as the simulation at {len(values)} sweep values"):
            exits = set()
            for v in values:
                rule = make(v)
                sim = simulate(rule, out.logits, is_regression, out.signals)
                exits.add(tuple(sim.exit_index))
                for bs in (1, 5):
                    real = dynamic_inference(model, rule, eval_batches(enc, bs), len(enc),
                                             is_regression)
                    got = compare(sim, real, None, is_regression)
                    assert got.disagreements == 0, (
                        f"value {v:g}, batch size {bs}: {got.disagreements} of {got.compared} "
                        f"samples disagree ({got.near_threshold} near the threshold)")
            if where.endswith("stirred") and out.logits.shape[0] > 1 and not is_regression:
                assert any(len(set(e)) > 1 for e in exits), \
                    "no sweep value exits the samples at different exits"


def main(argv: list[str] | None = None) -> int:
    """`python -m eebench.testing METHOD [--rule RULE ...]`: print the report; exit 1 on a
    problem."""
    import argparse

    parser = argparse.ArgumentParser(prog="python -m eebench.testing",
                                     description="Conformance checks for a method (and rules).")
    parser.add_argument("method")
    parser.add_argument("--rule", action="append", default=[], help="a rule to check on it")
    args = parser.parse_args(argv)
    reports = [check_rule(r, args.method) for r in args.rule] or [check_method(args.method)]
    for r in reports:
        print(r)
    return 0 if all(r.ok for r in reports) else 1

