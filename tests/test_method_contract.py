"""The method contract: what EarlyExitMethod holds (at most 15 public members, listed in its
module's docstring), what is derived from a method (eebench.methods.derived, which honours what a
method written against the earlier, wider contract declares), and the optional protocols."""

from __future__ import annotations

import warnings

import pytest

from eebench.errors import UsageError
from eebench.methods import EarlyExitMethod, MethodSettings, base, derived, get_method
from eebench.methods.protocols import Calibrates, Routes

CONTRACT = {"name", "paper", "description", "Settings", "settings", "unit", "head_layers",
            "build_heads", "stages", "loss", "rule", "exit_rule", "variants", "models",
            "combine"}


def public(cls: type) -> set[str]:
    return {n for n in dir(cls) if not n.startswith("_")}


def test_the_base_class_has_at_most_15_public_members():
    members = public(EarlyExitMethod)
    assert len(members) <= 15, sorted(members)
    assert members == CONTRACT
    for name in members:  # each in the contract the base module's docstring lists
        assert name in base.__doc__, name


def test_a_method_that_declares_nothing_gets_the_defaults():
    class Bare(EarlyExitMethod):
        name, rule = "bare-test", "entropy"

    m = Bare()
    assert derived.sweep_param(m) == "threshold" and not derived.supports_regression(m)
    assert derived.provided(m, False) == {"classes"} and derived.provides(m) == frozenset()
    assert derived.units(Bare) == ("sequence",) and derived.token_rule(m) is None
    assert derived.rule_comparison(m) == "<" and derived.comparison(m) is None
    assert derived.trains(m) == "one model" and not derived.shares_pooler(m)
    assert derived.calibration_fraction(m) == 0.0 and derived.route(m, None, 3) is None
    assert derived.sweep_values(m, 0.25) == {"threshold": 0.25}
    assert [s.name for s in m.stages()] == ["joint"]
    with pytest.raises(UsageError, match="cannot do regression"):
        derived.check_regression(m, True)
    assert derived.describe(m)["settings"] == {}


def test_what_a_method_of_the_earlier_contract_declares_is_honoured():
    """Class attributes, methods and properties of the names the base class had."""

    class Earlier(EarlyExitMethod):
        name, rule = "earlier-test", "entropy"
        token_rule = "mean-entropy"
        sweep_param, sweep_type = "speed", float
        supports_regression = True  # a plain class attribute where the base had a property
        shares_pooler = True  # a class attribute where the base had a method
        provides = frozenset({"exit-score"})
        comparison = "<="
        trains = "one model, twice"
        joint_stage = "together"

        class Settings(MethodSettings):
            scale: float = 2.0

        def sweep_values(self, value):
            return {"speed": value * self.config.scale}

        def default_sweep(self, num_layers, is_regression, num_labels=2):
            return [0.5]

        def calibration_fraction(self):
            return 0.2

        def calibrate(self, model, outputs):
            pass

    m = Earlier()
    assert derived.sweep_param(m) == "speed" and derived.supports_regression(m)
    assert derived.shares_pooler(m) and derived.provided(m, True) == {"exit-score"}
    assert derived.rule_comparison(m) == "<=" and derived.trains(m) == "one model, twice"
    assert derived.sweep_values(m, 0.25) == {"speed": 0.5}
    assert derived.default_sweep(m, 6, True) == [0.5]
    assert derived.units(Earlier) == ("sequence", "token")
    assert isinstance(m, Calibrates) and derived.calibration_fraction(m) == 0.2
    assert [s.name for s in m.stages()] == ["together"]
    token = Earlier(unit="token")
    assert token.rule == "mean-entropy" and derived.sweep_param(token) == "speed"
    assert m.exit_rule(0.3, False).comparison == "<="


def test_the_earlier_members_still_answer_on_an_instance_with_a_warning():
    m = get_method("pabee")
    with pytest.warns(DeprecationWarning, match=r"method\.check_regression is now eebench"):
        m.check_regression(True)  # pabee can: no error
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        assert m.sweep_param == "patience" and m.supports_regression
        assert m.provided(False) == {"classes"} and m.units() == ("sequence",)
        assert m.describe() == derived.describe(m)
        token = [n for n in m.methods_for("token") if n in base.METHODS.builtin()]
        assert token == ["static", "deebert", "sentee", "tokee"]
        assert m.with_unit({}) == {} and m.describe_units()["units"] == ["sequence"]
    with pytest.raises(AttributeError, match="no attribute 'calibrate'"):
        m.calibrate  # noqa: B018 - an optional protocol's member is never made up
    assert not isinstance(m, Calibrates) and not isinstance(m, Routes)


def test_the_optional_protocols_are_the_methods_that_implement_them():
    calibrates = [n for n in base.METHODS.builtin() if isinstance(get_method(n), Calibrates)]
    routes = [n for n in base.METHODS.builtin() if isinstance(get_method(n), Routes)]
    assert calibrates == ["maxprob"]
    assert routes == ["elasticbert", "sweet"]
    assert derived.calibration_fraction(get_method("maxprob")) == 0.1
    assert derived.route(get_method("elasticbert", gradient_equilibrium=False), None, 3) is None
