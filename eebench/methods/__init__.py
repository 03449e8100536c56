"""Early-exit training schemes, one file each, registered lazily in eebench.methods.catalog.
What is derived from a method is eebench.methods.derived (`from eebench.methods import derived`).

What a method (built in or a plugin's) is written with, importable from here; `ExitHeads` (the
heads a method puts on the model) comes from eebench.models.multi_exit, which imports torch, so
it is loaded on first use: `import eebench.methods` stays light.
"""

from eebench.methods.base import (
    JOINT,
    METHODS,
    EarlyExitMethod,
    Variant,
    get_method,
    register_method,
)
from eebench.methods.protocols import (
    Calibrates,
    Decodes,
    DecodesGreedy,
    DecodesTeacherForced,
    Routes,
)
from eebench.methods.settings import MethodSettings
from eebench.methods.stages import Stage, backbone_then_heads, exit_loss

__all__ = ["JOINT", "METHODS", "Calibrates", "Decodes", "DecodesGreedy", "DecodesTeacherForced",
           "EarlyExitMethod", "ExitHead", "ExitHeads",
           "MethodSettings", "Routes", "Stage", "Variant", "backbone_then_heads", "exit_loss",
           "get_method", "register_method"]

_FROM_MODELS = {"ExitHead", "ExitHeads"}  # eebench.models.multi_exit (torch): loaded when used


def __getattr__(name):
    if name in _FROM_MODELS:
        from eebench.models import multi_exit

        return getattr(multi_exit, name)
    raise AttributeError(f"module 'eebench.methods' has no attribute {name!r}")
