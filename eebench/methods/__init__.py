"""Early-exit methods, one file each; importing this package registers the built-in ones."""

from eebench.methods import deebert, pabee, static  # noqa: F401  (register the methods)
from eebench.methods.base import METHODS, EarlyExitMethod, get_method, register_method

__all__ = ["METHODS", "EarlyExitMethod", "get_method", "register_method"]
