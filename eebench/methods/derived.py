"""What is derived from a method, computed here and nowhere else: functions of a method (an
instance; a class where it says so), never members of EarlyExitMethod.

    its rule's sweep     sweep_param, sweep_type, sweep_values, default_sweep, rule_settings
    its rule's test      comparison (its own), rule_comparison (the one a run records)
    what it provides     provides (declared), provided (for a task: + "classes" on classification)
    what it can do       supports_regression, units, methods_for, check_task, check_unit,
                         check_regression
    its token model      token_rule, sequence_tasks, with_unit, unit_rule
    the optional hooks   shares_pooler, calibration_fraction (Calibrates), route (Routes)
    a decoder's methods  eebench.methods.decoder_derived (decodings, decoder_tasks, ...)
    in words             trains, describe

A method changes what is derived by declaring it (a class attribute, a method or a property of
that name: `sweep_param = "speed"`, `token_rule = "mean-entropy"`, `provides = frozenset(...)`,
`supports_regression = True`, `def default_sweep(...)`, `def sweep_values(...)`); `_own` reads
what it declares and the functions below give the default otherwise, so methods written against
the earlier, wider EarlyExitMethod keep working.
"""

from __future__ import annotations

import warnings
from functools import partial
from typing import Any

from eebench.errors import UsageError
from eebench.methods.catalog import METHODS
from eebench.methods.declared import own as _own
from eebench.methods.decoder_derived import (
    decoder_tasks,
    decodes_batches,
    decodings,
    encoder_tasks,
    refuse_across,
)
from eebench.methods.protocols import Calibrates, Routes
from eebench.models.units import GENERATED, SEQUENCE, unit_of
from eebench.rules.catalog import RuleKind, get_rule


# -- its rule's sweep ------------------------------------------------------------------------------
def rule_kind(m: Any) -> RuleKind:
    return get_rule(m.rule)


def sweep_param(m: Any) -> str:
    """Its own name for its sweep (static's "layers", FastBERT's "speed"), else its rule's."""
    return _own(m, "sweep_param") or (rule_kind(m).sweep_param if m.rule else "")


def sweep_type(m: Any) -> type:
    return _own(m, "sweep_type", float)  # a method without a rule: its sweep values' type


def sweep_values(m: Any, value: float) -> dict[str, int | float]:
    """A sweep value as a point records it: its rule's named values (RuleKind.values), one under
    its own `sweep_param` ({"speed": 0.3}; static's {"layers": 3})."""
    if (own := _own(m, "sweep_values")) is not None:
        return own(value)
    if not m.rule:
        return {sweep_param(m): sweep_type(m)(value)}
    values = rule_kind(m).values(value)
    return {sweep_param(m): next(iter(values.values()))} if len(values) == 1 else values


def default_sweep(m: Any, num_layers: int, is_regression: bool, num_labels: int = 2
                  ) -> list[float]:
    """The sweep values tried when the user gives none: its rule's (entropy grids depend on C);
    each depth k = 1..L for a method without a rule (one model per k)."""
    if (own := _own(m, "default_sweep")) is not None:
        return own(num_layers, is_regression, num_labels)
    check_regression(m, is_regression)
    if not m.rule:
        return [float(k) for k in range(1, num_layers + 1)]
    return rule_kind(m).default_sweep(num_layers, is_regression, num_labels)


def rule_settings(m: Any) -> dict[str, Any]:
    """What it sets of its rule's `Settings`: its settings of those names (PABEE's tau)."""
    fields = rule_kind(m).Settings.model_fields if m.rule else {}
    return {k: v for k, v in m.config.model_dump().items() if k in fields}


def comparison(m: Any) -> str | None:
    """How its authors' code meets the threshold ("<", "<=", ">=", ">"), where it differs from
    the rule's own; None: the rule's."""
    return _own(m, "comparison")


def rule_comparison(m: Any) -> str | None:
    """How its rule's quantity meets the threshold: its own `comparison`, else the rule's."""
    return (comparison(m) or rule_kind(m).comparison) if m.rule else None


# -- what it provides, what it can do --------------------------------------------------------------
def provides(m: Any) -> frozenset[str]:
    """What its models give a rule besides logits: "temperatures", "exit-score", a signal."""
    return frozenset(_own(m, "provides", frozenset()))


def provided(m: Any, is_regression: bool) -> set[str]:
    """What a trained model of it gives an exit rule on such a task (NEEDS)."""
    return set(provides(m)) | (set() if is_regression else {"classes"})


def supports_regression(m: Any) -> bool:
    """Not where its rule needs classes; a method without a rule can. A method may say so."""
    own = _own(m, "supports_regression")
    return own if isinstance(own, bool) else (rule_kind(m).supports_regression if m.rule
                                              else True)


def check_regression(m: Any, is_regression: bool, what: str = "") -> None:
    if is_regression and not supports_regression(m):
        raise UsageError(f"method {m.name!r} cannot do regression{what} (its {m.rule} rule "
                         "needs classes)", hint="use pabee or static for regression tasks such "
                                                "as STS-B")


def check_task(m: Any, task: Any) -> None:
    """Refuse a task it cannot do: a unit it has no model for or that its settings do not say,
    a regression where its rule needs classes."""
    check_unit(m, task)
    check_regression(m, getattr(task, "is_regression", False),
                     f" task {getattr(task, 'name', '?')!r}")


# -- its token model (eebench.methods.units) -------------------------------------------------------
def token_rule(m: Any) -> str | None:
    """Its rule on a token task; None: it does no token task (unless it has no rule)."""
    return _own(m, "token_rule")


def sequence_tasks(m: Any) -> bool:
    return _own(m, "sequence_tasks", True)  # False: it labels tokens only (SENTEE, TOKEE)


def units(m: Any) -> tuple[str, ...]:
    """The task units it can do (a class or an instance): "sequence", "token" (encoder
    tasks, unless it declares `encoder_tasks = False`), "generated" (a decoder method)."""
    cls = m if isinstance(m, type) else type(m)  # an instance's `rule` is its unit's
    generated = (GENERATED.name,) if decodings(cls) else ()
    if not encoder_tasks(cls):
        return generated
    token = token_rule(cls) is not None or not cls.rule
    return (("sequence",) if sequence_tasks(cls) else ()) + (("token",) if token else ()) + \
        generated


def methods_for(unit: str) -> list[str]:
    """The registered methods that can do tasks of `unit`."""
    return [n for n in METHODS.names() if unit in units(METHODS.get(n))]


def with_unit(cls: type, settings: dict[str, Any]) -> dict[str, Any]:
    """Its settings, the unit "token" by default where it labels tokens only."""
    return settings if sequence_tasks(cls) else {"unit": "token", **settings}


def unit_rule(m: Any) -> str:
    """Its rule for its `unit`: `token_rule` on a token model; refused where it has none."""
    if unit_of(m.config.unit).per_token and m.rule:
        if token_rule(m) is None:
            raise UsageError(f"method {m.name!r} has no token model (its {m.rule} rule decides "
                             "per text)", hint=f"token methods: {', '.join(methods_for('token'))}")
        return token_rule(m)
    if unit_of(m.config.unit) is SEQUENCE and not sequence_tasks(m):
        raise UsageError(f"method {m.name!r} labels tokens only (unit 'token')",
                         hint=f"methods for texts: {', '.join(methods_for('sequence'))}")
    return m.rule


def check_unit(m: Any, task: Any) -> None:
    """Refuse a task of a unit it has no model for, or that its settings do not say; a decoder
    task (`eebench decode` runs those) and a decoder method on an encoder task, saying so."""
    name, unit = getattr(task, "name", "?"), unit_of(getattr(task, "unit", None)).name
    refuse_across(m, name, unit)
    if unit not in units(m):
        raise UsageError(f"task {name!r} {unit_of(unit).does}; method {m.name!r} does not",
                         hint=f"methods for such tasks: {', '.join(methods_for(unit))}")
    if m.config.unit != unit:  # the runner sets it from the task; a caller's slip
        raise UsageError(f"method {m.name!r} is set up for unit {m.config.unit!r}; task "
                         f"{name!r} needs unit {unit!r}",
                         hint=f"set unit={unit!r} (eebench run does so from the task)")


# -- the optional hooks ----------------------------------------------------------------------------
def shares_pooler(m: Any) -> bool:
    """One pooler for every exit (PABEE's), or each exit its own copy (the default)."""
    own = _own(m, "shares_pooler", False)
    return bool(own() if callable(own) else own)


def calibration_fraction(m: Any) -> float:
    """The share of the training split held out for `calibrate` (0: it does not calibrate)."""
    return float(m.calibration_fraction()) if isinstance(m, Calibrates) else 0.0


def route(m: Any, stage: Any, num_exits: int) -> Any:
    """How the hidden states reach heads and layers while `stage` trains; None: unchanged."""
    return m.route(stage, num_exits) if isinstance(m, Routes) else None


# -- in words --------------------------------------------------------------------------------------
def trains(m: Any) -> str:
    return _own(m, "trains", "one model")  # what its `variants` train, in words


def describe(m: Any) -> dict[str, Any]:
    """Its row of `eebench methods --json`."""
    return {"name": m.name, "paper": m.paper, "description": m.description,
            "rule": m.rule or None, "comparison": rule_comparison(m),
            "provides": sorted(provides(m)), "sweep_param": sweep_param(m),
            "supports_regression": supports_regression(m), "trains": trains(m),
            "units": list(units(m)), "token_rule": token_rule(m),
            "decoder_tasks": decoder_tasks(m),
            "decodes_batches": decodes_batches(m) if decodings(m) else None,
            # every setting, with defaults; the unit is the task's (`units` above)
            "settings": m.config.model_dump(mode="json", exclude={"unit"})}


def former(m: Any, name: str) -> Any:
    """A member EarlyExitMethod had before its contract narrowed, where `m`'s class declares none
    (EarlyExitMethod.__getattr__): code written against it keeps working, warned."""
    if name not in FORMER and name not in FORMER_VALUES:
        raise AttributeError(f"{type(m).__name__!r} object has no attribute {name!r}")
    warnings.warn(f"method.{name} is now eebench.methods.derived.{name}(method)",
                  DeprecationWarning, stacklevel=3)
    return FORMER_VALUES[name](m) if name in FORMER_VALUES else partial(FORMER[name], m)


FORMER = {"check_task": check_task, "check_regression": check_regression,
          "check_unit": check_unit, "provided": provided, "rule_comparison": rule_comparison,
          "rule_kind": rule_kind, "rule_settings": rule_settings, "describe": describe,
          "units": units, "default_sweep": default_sweep, "sweep_values": sweep_values,
          "methods_for": lambda m, unit: methods_for(unit), "with_unit": lambda m, settings:
          with_unit(type(m), settings), "describe_units": lambda m: {
              "units": list(units(m)), "token_rule": token_rule(m)}}
FORMER_VALUES = {"sweep_param": sweep_param, "sweep_type": sweep_type, "comparison": comparison,
                 "provides": provides, "supports_regression": supports_regression,
                 "token_rule": token_rule, "sequence_tasks": sequence_tasks, "trains": trains}
