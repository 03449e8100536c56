"""PALBERT as an eebench plugin: the method (`palbert`) and its exit rule (`q-exit`).

Kept free of torch, as eebench's own method modules are: `eebench methods` imports the modules
the entry points name, and lists without torch. The heads (torch) are imported when a model is
built.
"""

from eebench_palbert.method import PALBERT
from eebench_palbert.rule import QExit

__all__ = ["PALBERT", "QExit"]
