"""One small generic registry for tasks, backbones, methods, rules and report kinds.

A name is registered once (a duplicate is an error) and looked up with a did-you-mean error.
An entry is either the object itself or a lazy "module:object" reference, imported on first
lookup (as lm-evaluation-harness registers its models): getting a built-in method imports that
method's module alone. A module a lazy entry names may register its object with the same name
itself (a decorator at import time): that fills the entry in.

Plugins (other packages) arrive through an entry-point group, e.g. `eebench.methods`:

    [project.entry-points."eebench.methods"]
    palbert = "eebench_palbert:PALBERT"

The value names the object, in the module that defines it or in one that re-exports it; the
module may also register it with its decorator (`@register_method("palbert")`): the entry and
the registration are compared as objects, so both ways name the same thing. Plugins are loaded
when a name is not found among the built-in entries, or when the names are listed. A plugin
never breaks a listing or a command: one whose import fails (any exception, `sys.exit` too),
that names something other than what its group holds (a method group's entry that is not an
`EarlyExitMethod` subclass: the registry's `expects`), or that registers a name already taken, is
one warning line on stderr (`warning: plugin 'x' (eebench.methods): <reason>`, once per plugin),
its entry is skipped and every other entry keeps working. `builtin()` lists eebench's own names
(what its tests cover).
"""

from __future__ import annotations

import difflib
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from importlib import import_module
from importlib.metadata import EntryPoint, entry_points
from typing import Any, Generic, TypeVar

from eebench.errors import EebenchError, UsageError, one_line

T = TypeVar("T")

BUILTIN = "eebench"  # the source of eebench's own entries


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


@dataclass
class _PluginLoad:
    """A plugin being imported: registrations made meanwhile are its, and what goes wrong is
    collected for its one warning line instead of raised."""

    name: str
    group: str
    problems: list[str] = field(default_factory=list)

    @property
    def source(self) -> str:
        return f"plugin {self.name!r} ({self.group})"


_LOADING: list[_PluginLoad] = []  # the plugins being imported, innermost last
_WARNED: set[tuple[str, str]] = set()  # (group, entry-point name): each plugin warns once


def _warn(group: str, name: str, reason: str) -> None:
    if (group, name) in _WARNED:
        return
    _WARNED.add((group, name))
    print(f"warning: plugin {name!r} ({group}): {reason}", file=sys.stderr)


def _module_of(obj: Any) -> str:
    if isinstance(obj, Lazy):
        return obj.partition(":")[0]
    module = getattr(obj, "__module__", None)
    return module if isinstance(module, str) else type(obj).__module__


def _is_builtin_module(module: str) -> bool:
    return module == "eebench" or module.startswith("eebench.")


def _described(obj: Any) -> str:
    """What an object is, for a warning: "class builtins.dict", "function posix.getcwd",
    "a float"."""
    name = getattr(obj, "__qualname__", None)
    if isinstance(obj, type):
        return f"class {obj.__module__}.{obj.__qualname__}"
    if callable(obj) and isinstance(name, str):
        return f"function {getattr(obj, '__module__', None) or '?'}.{name}"
    return f"a {type(obj).__name__}"


class Registry(Generic[T]):
    """Entries of one kind. `expects`: what a plugin's entry must be, checked before it is
    registered (a subclass of it; `instances`: an instance of it), since a command would only
    meet a wrong object later, as a traceback far from the plugin that gave it."""

    def __init__(self, kind: str, entry_point_group: str | None = None,
                 expects: type | None = None, instances: bool = False):
        self.kind = kind
        self.entry_point_group = entry_point_group
        self.expects = expects
        self.instances = instances
        self._items: dict[str, T | Lazy] = {}
        self._aliases: dict[str, str] = {}
        self._sources: dict[str, str] = {}  # name -> BUILTIN or "plugin 'x' (group)"
        self._plugins_loaded = entry_point_group is None

    def register(self, name: str, *, aliases: tuple[str, ...] = ()) -> Callable[[T], T]:
        def decorator(obj: T) -> T:
            self.add(name, obj, aliases=aliases)
            return obj

        return decorator

    def add(self, name: str, obj: T | Lazy, *, aliases: tuple[str, ...] = (),
            source: str | None = None) -> None:
        """Register `obj` (or a lazy `Lazy("module:object")`) under `name` and `aliases`.

        A name taken twice is a ValueError, except while a plugin is being imported: then the
        first entry stays and the plugin gets one warning line."""
        key = name.lower()
        current = self._items.get(key)
        if isinstance(current, Lazy) and not isinstance(obj, Lazy) \
                and _module_of(obj) == _module_of(current):
            self._items[key] = obj  # the module of a lazy entry registering its own object
            return
        if current is obj:
            return  # the same object again (an entry point naming what its module registered)
        if _LOADING and not isinstance(obj, Lazy) and (wrong := self._wrong(key, obj)):
            if wrong not in _LOADING[-1].problems:  # its module and its entry point name it
                _LOADING[-1].problems.append(wrong)
            return
        for n in (key, *(a.lower() for a in aliases)):
            if n in self._items or n in self._aliases:
                if _LOADING:
                    _LOADING[-1].problems.append(
                        f"{self.kind} {n!r} is already registered "
                        f"({self._sources.get(self._aliases.get(n, n), BUILTIN)}); kept that one")
                    return
                raise ValueError(f"{self.kind} {n!r} is registered twice")
        self._items[key] = obj
        self._sources[key] = source or (_LOADING[-1].source if _LOADING else (
            BUILTIN if _is_builtin_module(_module_of(obj)) else _module_of(obj)))
        for a in aliases:
            self._aliases[a.lower()] = key

    def _wrong(self, name: str, obj: Any) -> str | None:
        """Why `obj` cannot be entry `name` (None if it can): not what this registry holds."""
        if self.expects is None:
            return None
        if self.instances:
            fits, what = isinstance(obj, self.expects), f"a {self.expects.__name__}"
        else:
            fits = isinstance(obj, type) and issubclass(obj, self.expects)
            what = f"a subclass of {self.expects.__name__}"
        return None if fits else (f"{self.kind} {name!r} is {_described(obj)}, not {what}; "
                                  "skipped")

    # -- plugins -------------------------------------------------------------------------------
    def _load_plugins(self) -> None:
        if self._plugins_loaded:
            return
        self._plugins_loaded = True
        group = self.entry_point_group or ""
        for ep in entry_points(group=group):
            load = _PluginLoad(ep.name, group)
            _LOADING.append(load)
            try:
                self._load_one(ep, load)
            # a broken plugin, even one that exits at import: one line, the rest keeps working
            except (Exception, SystemExit) as e:
                load.problems.insert(0, f"cannot load {ep.value}: {one_line(e, named=True)}")
            finally:
                _LOADING.pop()
            if load.problems:
                more = len(load.problems) - 1
                _warn(group, ep.name, load.problems[0] + (f" (and {more} more)" if more else ""))

    def _load_one(self, ep: EntryPoint, load: _PluginLoad) -> None:
        key = ep.name.lower()
        existing = self._items.get(key)
        if existing is not None and self._sources.get(key) == BUILTIN:
            load.problems.append(f"{self.kind} {key!r} is built into eebench; the plugin's "
                                 "entry is ignored")
            return
        obj = ep.load()  # its module may register `obj` itself, by its decorator
        current = self._items.get(key)
        if current is None:
            self.add(key, obj, source=load.source)
        elif current is not obj:
            load.problems.append(f"{self.kind} {key!r} is already registered "
                                 f"({self._sources.get(key, BUILTIN)}); kept that one")

    # -- lookups -------------------------------------------------------------------------------
    def canonical(self, name: str) -> str:
        key = name.lower()
        key = self._aliases.get(key, key)
        if key not in self._items:
            self._load_plugins()  # built-in names need no plugin
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
        """Every name, plugins' included (loading them: a broken one is a warning line)."""
        self._load_plugins()
        return list(self._items)

    def builtin(self) -> list[str]:
        """eebench's own names, without loading any plugin: what eebench's tests cover."""
        return [n for n in self._items if self._sources.get(n) == BUILTIN]

    def source(self, name: str) -> str:
        """Where an entry comes from: "eebench", or "plugin 'x' (group)"."""
        return self._sources.get(self.canonical(name), BUILTIN)

    def __iter__(self) -> Iterator[str]:
        return iter(self.names())

    def __contains__(self, name: str) -> bool:
        key = name.lower()
        if key not in self._items and key not in self._aliases:
            self._load_plugins()
        return key in self._items or key in self._aliases

    def items(self) -> list[tuple[str, T]]:
        """Every entry, lazy ones loaded."""
        return [(name, self.get(name)) for name in self.names()]
