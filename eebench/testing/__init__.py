"""Conformance checks a method's or a rule's author runs (eebench.testing.conformance).

    from eebench.testing import assert_method, assert_rule, check_method
"""

from eebench.testing.conformance import (
    Conformance,
    assert_method,
    assert_rule,
    check_method,
    check_rule,
)
from eebench.testing.tiny import examples, tiny_backbone

__all__ = ["Conformance", "assert_method", "assert_rule", "check_method", "check_rule",
           "examples", "tiny_backbone"]
