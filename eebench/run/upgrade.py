"""The one function that reads what earlier versions wrote: a run's points and summary in
today's schemas (eebench.run.artifacts.read_run calls it on every run it reads)."""

from __future__ import annotations

import math
from typing import Any

from eebench.methods.base import JOINT
from eebench.run.records import POINTS_SCHEMA_VERSION, SUMMARY_SCHEMA_VERSION, RunConfig

# What summaries before schema 3 did not record: the rule each built-in method's points were
# decided by, and how each built-in rule met its threshold (the rules' code then; runs record
# it since, from the rule's own `comparison` where it declares one). A run of any other method
# (a plugin's) keeps `rule` unknown.
RULES_BEFORE_SCHEMA_3 = {
    "static": None, "deebert": "entropy", "pabee": "patience", "maxprob": "calibrated-maxprob",
    "fastbert": "normalized-entropy", "berxit": "learned", "pcee": "confident-patience",
    "elasticbert": "entropy", "sweet": "maxprob", "cascade": "maxprob"}
COMPARISONS_BEFORE_SCHEMA_3 = {
    "entropy": "<", "normalized-entropy": "<", "maxprob": ">=", "calibrated-maxprob": ">=",
    "patience": ">=", "confident-patience": "<", "learned": "<"}
# Points before schema 3 wrote their sweep value as one number, `sweep_value`, named by
# `sweep_param`: these parameters were whole numbers, and PCEE's pair was written as
# patience + threshold (2.3: patience 2, threshold 0.3), its names joined by "+".
WHOLE_BEFORE_POINTS_3 = ("patience", "layers")
# The regression threshold patience read from its method's settings before summary schema 4
# (PABEE's; 0.1 for a method without one), now the rule's own setting.
PATIENCE_TAU_BEFORE_SCHEMA_4 = 0.1


def named_values(param: str, value: float) -> dict[str, Any]:
    """A sweep value written before points schema 3, as its named values."""
    if param == "patience+threshold":
        patience = math.floor(value)
        return {"patience": patience, "threshold": round(value - patience, 6)}
    return {param: int(value) if param in WHOLE_BEFORE_POINTS_3 else float(value)}


def exit_paths(exit_layers: list[int], chained: bool) -> list[list[dict[str, Any]]]:
    """What a sample exiting at each exit ran, for summaries before schema 4: one model's
    layers up to the exit and its heads so far; or, `chained` (a cascade), every model up to
    the answering one, each run whole to its one head."""
    if chained:
        whole = [{"layers": k, "heads": [k]} for k in exit_layers]
        return [whole[: j + 1] for j in range(len(exit_layers))]
    return [[{"layers": k, "heads": exit_layers[: j + 1]}] for j, k in enumerate(exit_layers)]


def upgrade(config: RunConfig, points: list[dict], summary: dict | None
            ) -> tuple[list[dict], dict | None]:
    """Points and summary of a run written by an earlier version, in today's schemas.

    Points and summaries of schema 1 predate variants. Then only the built-in `static` method
    trained more than one model, one per k = its sweep value, with one exit after layer k and its
    logits under `exit_logits_k<k>`; every other method trained one model with an exit after
    each of its layers. The hidden size was not recorded.

    Summaries of schema 2 do not record their rule: a built-in method's is its rule then
    (RULES_BEFORE_SCHEMA_3, or the run's `rule`), with the comparison that rule tested then;
    nor what the rule read of the model (temperatures: not recorded, left None).

    Points before schema 3 wrote their sweep value as one number (`named_values`); summaries
    before schema 4 wrote each variant's sweep values so, and a `chained` flag for a cascade
    where each exit now records what a sample exiting there ran (`exit_paths`); patience read
    its regression threshold from the method's settings, now the rule's own, recorded.
    """
    several = config.method == "static"
    out = []
    for p in points:
        if p.get("schema_version", 1) < 2:
            name = f"k{int(p['sweep_value'])}" if several else JOINT
            p = {**p, "schema_version": 2, "variant": name}
        if p.get("schema_version", 1) < 3 and "sweep_value" in p:
            p = {**{k: v for k, v in p.items() if k not in ("sweep_param", "sweep_value")},
                 "schema_version": POINTS_SCHEMA_VERSION,
                 "sweep": named_values(str(p.get("sweep_param")), p["sweep_value"])}
        out.append(p)
    if summary is not None and summary.get("schema_version", 1) < 2:
        depth = int(points[0]["num_layers"]) if points else 0
        values = config.sweep
        names = [f"k{int(k)}" for k in values] if several else [JOINT]
        checkpoints = list(summary.pop("checkpoints", None) or [])
        summary = {**summary, "schema_version": 2, "variants": [
            {"name": name, "sweep_values": [k] if several else values,
             "exit_layers": [int(k)] if several else list(range(1, depth + 1)),
             "hidden_size": None, "pooling": config.pooling,
             "logits_key": f"exit_logits_{name}" if several else "exit_logits",
             "checkpoint": checkpoints[i] if i < len(checkpoints) else None}
            for i, (name, k) in enumerate(zip(names, values if several else [None]))]}
    if summary is not None and summary.get("schema_version", 1) < 3:
        summary = {**summary, "schema_version": 3}
        if config.rule is not None or config.method in RULES_BEFORE_SCHEMA_3:
            rule = config.rule or RULES_BEFORE_SCHEMA_3[config.method]
            summary["rule"] = {"name": rule, "comparison": COMPARISONS_BEFORE_SCHEMA_3.get(rule)}
    if summary is not None and summary.get("schema_version", 1) < 4:
        summary = _summary_4(config, points, summary)
    return out, summary


def _summary_4(config: RunConfig, points: list[dict], summary: dict) -> dict:
    """A summary of schema 3 in schema 4: named sweep values, exit paths, the rule's settings."""
    params = {p.get("variant"): str(p.get("sweep_param")) for p in points}
    variants = []
    for v in summary.get("variants", []):
        v = dict(v)
        param = params.get(v.get("name")) or _sweep_param(config)
        v["sweep_values"] = [named_values(param, x) for x in v.get("sweep_values", [])]
        v["exit_paths"] = exit_paths(list(v.get("exit_layers", [])), bool(v.pop("chained", False)))
        variants.append(v)
    summary = {**{k: v for k, v in summary.items() if k != "finished"},  # always true: dropped
               "schema_version": SUMMARY_SCHEMA_VERSION, "variants": variants}
    rule = summary.get("rule")
    if rule is not None and rule.get("name") == "patience":  # its tau, as it read it then
        tau = config.method_settings.get("regression_threshold", PATIENCE_TAU_BEFORE_SCHEMA_4)
        summary["rule"] = {**rule, "settings": {"regression_threshold": float(tau)}}
    return summary


def _sweep_param(config: RunConfig) -> str:
    """What a run's sweep values are named, where no point of it says: its rule's or method's."""
    from eebench.errors import EebenchError
    from eebench.methods.base import get_method
    from eebench.methods.derived import sweep_param
    from eebench.rules.catalog import get_rule

    try:
        return get_rule(config.rule).sweep_param if config.rule else \
            sweep_param(get_method(config.method))
    except EebenchError:  # a plugin's run, the plugin not installed
        return "threshold"
