"""One small generic registry for tasks, backbones and methods.

A name is registered once (a duplicate is an error), looked up with a did-you-mean error, and
third-party entries arrive through an entry-point group loaded on first lookup.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable, Iterator
from importlib.metadata import entry_points
from typing import Generic, TypeVar

from eebench.errors import UsageError

T = TypeVar("T")


class Registry(Generic[T]):
    def __init__(self, kind: str, entry_point_group: str | None = None):
        self.kind = kind
        self.entry_point_group = entry_point_group
        self._items: dict[str, T] = {}
        self._aliases: dict[str, str] = {}
        self._plugins_loaded = entry_point_group is None

    def register(self, name: str, *, aliases: tuple[str, ...] = ()) -> Callable[[T], T]:
        def decorator(obj: T) -> T:
            self.add(name, obj, aliases=aliases)
            return obj

        return decorator

    def add(self, name: str, obj: T, *, aliases: tuple[str, ...] = ()) -> None:
        key = name.lower()
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
                ep.load()  # importing the module registers it through the decorator

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
        return self._items[self.canonical(name)]

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
        self._load_plugins()
        return list(self._items.items())
