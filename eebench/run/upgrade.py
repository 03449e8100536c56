"""The one function that reads what earlier versions wrote: a run's points and summary in
today's schemas (eebench.run.artifacts.read_run calls it on every run it reads)."""

from __future__ import annotations

from eebench.methods.base import JOINT
from eebench.run.artifacts import POINTS_SCHEMA_VERSION, SUMMARY_SCHEMA_VERSION, RunConfig

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
    """
    several = config.method == "static"
    out = []
    for p in points:
        if p.get("schema_version", 1) < 2:
            name = f"k{int(p['sweep_value'])}" if several else JOINT
            p = {**p, "schema_version": POINTS_SCHEMA_VERSION, "variant": name}
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
        summary = {**summary, "schema_version": SUMMARY_SCHEMA_VERSION}
        if config.rule is not None or config.method in RULES_BEFORE_SCHEMA_3:
            rule = config.rule or RULES_BEFORE_SCHEMA_3[config.method]
            summary["rule"] = {"name": rule, "comparison": COMPARISONS_BEFORE_SCHEMA_3.get(rule)}
    return out, summary
