"""One small generic registry for tasks, backbones and methods.

A name is registered once (a duplicate is an error) and looked up with a did-you-mean error.
An entry is either the object itself or a lazy "module:object" reference, imported on first
lookup (as lm-evaluation-harness registers its models): listing names costs no import, and
getting one method imports that method's module alone. Third-party entries arrive through an
entry-point group, as lazy references too; a module a lazy entry names may register its object
with the same name itself (a decorator at import time): that fills the entry in.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable, Iterator
from importlib import import_module
from importlib.metadata import entry_points
from typing import Any, Generic, TypeVar

from eebench.errors import EebenchError, UsageError

T = TypeVar("T")


class Lazy(str):
    """A "module:object" reference, imported when the entry is first looked up."""

    def load(self) -> Any:
        module, _, attr = self.partition(":")
        try:
            obj: Any = import_module(module)
            for part in attr.split(".") if attr else ():
                obj = getattr(obj, part)
        except (ImportError, AttributeError) as e:
            raise EebenchError(f"cannot load {self}: {e}",
                               hint="is the plugin package installed?") from None
        return obj


def _reference(obj: Any) -> str:
    return f"{getattr(obj, '__module__', '')}:{getattr(obj, '__qualname__', '')}"


class Registry(Generic[T]):
    def __init__(self, kind: str, entry_point_group: str | None = None):
        self.kind = kind
        self.entry_point_group = entry_point_group
        self._items: dict[str, T | Lazy] = {}
        self._aliases: dict[str, str] = {}
        self._plugins_loaded = entry_point_group is None

    def register(self, name: str, *, aliases: tuple[str, ...] = ()) -> Callable[[T], T]:
        def decorator(obj: T) -> T:
            self.add(name, obj, aliases=aliases)
            return obj

        return decorator

    def add(self, name: str, obj: T | Lazy, *, aliases: tuple[str, ...] = ()) -> None:
        """Register `obj` (or a lazy `Lazy("module:object")`) under `name` and `aliases`."""
        key = name.lower()
        current = self._items.get(key)
        if isinstance(current, Lazy) and current == _reference(obj):
            self._items[key] = obj  # the module of a lazy entry registering its own object
            return
        for n in (key, *(a.lower() for a in aliases)):
            if n in self._items or n in self._aliases:
                raise ValueError(f"{self.kind} {n!r} is registered twice")
        self._items[key] = obj
        for a in aliases:
            self._aliases[a.lower()] = key

    def _load_plugins(self) -> None:
        if self._plugins_loaded:
            return
        self._plugins_loaded = True
        for ep in entry_points(group=self.entry_point_group):
            if ep.name.lower() not in self._items:
                self._items[ep.name.lower()] = Lazy(ep.value)

    def canonical(self, name: str) -> str:
        self._load_plugins()
        key = name.lower()
        key = self._aliases.get(key, key)
        if key not in self._items:
            choices = list(self._items) + list(self._aliases)
            close = difflib.get_close_matches(key, choices, n=1, cutoff=0.5)
            hint = f"did you mean {close[0]!r}?" if close else f"choose from: {', '.join(self)}"
            raise UsageError(f"unknown {self.kind} {name!r}", hint=hint)
        return key

    def get(self, name: str) -> T:
        key = self.canonical(name)
        entry = self._items[key]
        if isinstance(entry, Lazy):
            obj = entry.load()
            if isinstance(self._items[key], Lazy):  # the module did not register it itself
                self._items[key] = obj
            entry = self._items[key]
        return entry  # type: ignore[return-value]

    def names(self) -> list[str]:
        self._load_plugins()
        return list(self._items)

    def __iter__(self) -> Iterator[str]:
        return iter(self.names())

    def __contains__(self, name: str) -> bool:
        self._load_plugins()
        key = name.lower()
        return key in self._items or key in self._aliases

    def items(self) -> list[tuple[str, T]]:
        """Every entry, lazy ones loaded."""
        return [(name, self.get(name)) for name in self.names()]
