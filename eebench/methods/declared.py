"""What a method declares itself, read without the base class's help: the one reader of a
method's optional attributes and hooks (eebench.methods.derived, .decoder_derived)."""

from __future__ import annotations

import inspect
from typing import Any

_NONE = object()


def own(m: Any, name: str, default: Any = None) -> Any:
    """What method `m` declares of `name` itself, bound to it (a class: plain values only)."""
    value = inspect.getattr_static(m, name, _NONE)  # never EarlyExitMethod.__getattr__
    if value is _NONE or isinstance(value, type) or not hasattr(value, "__get__"):
        return default if value is _NONE else value
    return default if isinstance(m, type) else value.__get__(m, type(m))
