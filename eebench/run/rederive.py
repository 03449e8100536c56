"""Every stored decision of a run, rebuilt from its run directory alone.

A point's decisions (each sample's exit layer and prediction: rows of `exit_layer` and
`prediction` in predictions.safetensors) are a function of what the directory stores: the exit
logits and signals of the point's variant (`<logits key>`, `<logits key>.<signal>`), the rule
(summary.json's `rule`: its name and comparison) built at the point's sweep value (points.jsonl)
for the model as its variant record describes it (temperatures, settings). `rederive` rebuilds
each point's rule from those files, replays it over the stored outputs
(eebench.rules.engine.simulate) and compares every sample with what was stored.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from eebench.errors import DataError
from eebench.run.artifacts import (
    PREDICTIONS_FILE,
    SUMMARY_FILE,
    RuleRecord,
    RunFiles,
    VariantRecord,
    read_run,
)

if TYPE_CHECKING:
    from eebench.rules.base import ExitRule
    from eebench.rules.catalog import ModelFacts

REGRESSION_ATOL = 1e-6  # a regression prediction is the stored float32 output, copied


@dataclass
class Rederived:
    """What `rederive` found: the points it rebuilt, and one line per point that differs."""

    run_dir: Path
    points: int = 0
    samples: int = 0
    mismatches: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.mismatches


def facts_for(run: RunFiles, variant: VariantRecord, arrays: dict[str, np.ndarray]
              ) -> ModelFacts:
    """What the variant's model gave its rule, from the run's files: whether the task is a
    regression (recorded; a model with one output where it is not), its classes (the logits'
    width), its temperatures and settings (the variant's record; the run's method settings where
    a run did not record them) and its signals (the stored `<logits key>.<signal>` arrays)."""
    from eebench.rules.catalog import ModelFacts

    rule = _rule_record(run)
    logits = _array(run, arrays, variant.logits_key)
    width = int(logits.shape[-1])
    regression = rule.is_regression if rule.is_regression is not None else width == 1
    settings = variant.settings if variant.settings is not None else run.config.method_settings
    return ModelFacts(regression, width, variant.temperatures, tuple(_signals(arrays, variant)),
                      dict(settings), rule_settings=dict(rule.settings or {}))


def rule_at(run: RunFiles, value: float, facts: ModelFacts) -> ExitRule:
    """The run's rule at one sweep value, rebuilt; one line where the run lacks what it read."""
    from eebench.rules.base import FixedRule
    from eebench.rules.catalog import get_rule

    record = _rule_record(run)
    if record.name is None:  # single-exit models: every sample exits at its model's exit
        return FixedRule(exit=True)
    kind = get_rule(record.name)
    from eebench.rules.base import COMPARISONS

    if record.comparison is not None:  # as the run tested it (a method's own, or the rule's)
        if record.comparison not in COMPARISONS:
            raise DataError(f"{run.path}: its rule {record.name!r} records an unknown comparison "
                            f"{record.comparison!r}")
        facts = replace(facts, comparison=record.comparison)
    if "temperatures" in kind.needs and facts.temperatures is None:
        raise DataError(f"{run.path}: its rule {record.name!r} read temperatures that the run "
                        "does not record")
    lacking = kind.missing(facts.provides())
    if lacking:
        raise DataError(f"{run.path}: its rule {record.name!r} read {lacking[0]!r}, which the "
                        "run does not store")
    return kind.build(value, facts)


def rederive(run: Path | RunFiles) -> Rederived:
    """Rebuild every stored decision of a finished run (a directory, or its files as read) from
    its files and compare: a point whose exit layers or predictions differ is one line in
    `mismatches`. A run that lacks what its rule read (a maxprob run's temperatures, before runs
    recorded them) is a DataError."""
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # small tensors, step by step: threads only wait for each other
    try:
        return _rederive(run if isinstance(run, RunFiles) else read_run(Path(run)))
    finally:
        torch.set_num_threads(threads)


def _rederive(run: RunFiles) -> Rederived:
    import torch
    from safetensors.numpy import load_file

    from eebench.rules.engine import simulate

    if run.summary is None:
        raise DataError(f"{run.path}: not a finished run (no {SUMMARY_FILE})")
    from eebench.models.units import unit_of

    if not unit_of(run.config.method_settings.get("unit")).stores_logits:
        raise DataError(f"{run.path}: a token run stores each exit's tags, not the uncertainties "
                        "its rule read: its decisions are not re-derived from its files",
                        hint="its scores are: seqeval on the stored tags (tests/test_token_run.py)")
    arrays = load_file(str(run.path / PREDICTIONS_FILE))
    stored_exit, stored_pred = _array(run, arrays, "exit_layer"), _array(run, arrays, "prediction")
    if len(stored_exit) != len(run.points):
        raise DataError(f"{run.path}: {len(stored_exit)} rows of decisions for "
                        f"{len(run.points)} points")
    out = Rederived(run.path)
    prepared: dict[str, tuple] = {}
    for row, point in enumerate(run.points):
        if point.variant not in prepared:
            variant = run.summary.variant(point.variant)
            facts = facts_for(run, variant, arrays)
            logits = torch.from_numpy(_array(run, arrays, variant.logits_key).copy())
            signals = {s: torch.from_numpy(_array(run, arrays, f"{variant.logits_key}.{s}").copy())
                       for s in facts.signals}
            prepared[point.variant] = (variant, facts, logits, signals)
        variant, facts, logits, signals = prepared[point.variant]
        dec = simulate(rule_at(run, point.sweep_value, facts), logits, facts.is_regression,
                       signals)
        layers = np.asarray(variant.exit_layers)[dec.exit_index]
        if facts.is_regression:
            same_pred = np.isclose(dec.prediction, stored_pred[row], rtol=0, atol=REGRESSION_ATOL)
        else:
            same_pred = dec.prediction == stored_pred[row]
        bad = ~((layers == stored_exit[row]) & same_pred)
        if bad.any():
            first = int(np.flatnonzero(bad)[0])
            out.mismatches.append(
                f"{run.path} point {row + 1} ({point.sweep_param}={point.sweep_value:g}): "
                f"{int(bad.sum())} of {len(bad)} samples decided otherwise (first: sample "
                f"{first}, stored exit {int(stored_exit[row][first])} prediction "
                f"{stored_pred[row][first]}, rebuilt {int(layers[first])} "
                f"{dec.prediction[first]})")
        out.points += 1
        out.samples += len(bad)
    return out


def _rule_record(run: RunFiles) -> RuleRecord:
    if run.summary is None or run.summary.rule is None:
        raise DataError(f"{run.path}: its summary does not record the rule its points were "
                        "decided by")
    return run.summary.rule


def _signals(arrays: dict[str, np.ndarray], variant: VariantRecord) -> list[str]:
    prefix = f"{variant.logits_key}."
    return sorted(k[len(prefix):] for k in arrays if k.startswith(prefix))


def _array(run: RunFiles, arrays: dict[str, np.ndarray], key: str) -> np.ndarray:
    if key not in arrays:
        raise DataError(f"{run.path / PREDICTIONS_FILE}: no array {key!r}")
    return arrays[key]
