"""One shape for every ablation axis: a name -> factory table with "did you mean", listing and user entries.

Protocols, retrievers, rewards, reward presets and advantage estimators are each a :class:`Registry`. A run picks
entries by string (``protocol: r1_searcher``, ``rewards: [f1, preset:r1_searcher_stage2]``), so an ablation is a
change of parameters, never of code.

Users add their own entries two ways:

- in a notebook cell or script: ``REWARDS.register("brevity", my_reward)`` (or as a decorator);
- by import path in a params file: ``rewards: [my_package.rewards:brevity]`` or ``[path/to/file.py:brevity]``.
  The object is imported on first use (and cached, not listed among the registered names), so the runner's
  checks, which run in a process of their own before the notebook starts, resolve it too. A name registered only in a notebook cell exists
  only in that notebook's kernel: give the runner an import path.
"""

from __future__ import annotations

import difflib
import importlib
import importlib.util
import sys
from collections.abc import Callable, Collection, Iterator
from pathlib import Path
from typing import Any, Generic, TypeVar

T = TypeVar("T")

__all__ = ["Registry", "UnknownNameError", "import_object", "is_import_path", "live_registry", "name_problem",
           "resolve_name", "unknown_name_message"]

# kind -> the Registry of that kind built in this process (the first one: a registry a user builds later under a kind
# the library already has does not stand in for the library's). The schema (searchrl.config) checks a name against
# the live registry of its kind when that registry's module has been imported, so an entry a notebook cell registered
# passes, and against its own plain list of built-in names when it has not, so that checking a params file imports
# none of the registries' modules.
_LIVE: dict[str, Registry] = {}


class UnknownNameError(ValueError):
    """A name that no registry entry (and no importable object) answers to."""


def is_import_path(name: str) -> bool:
    """Whether ``name`` points at an object to import (``pkg.mod:attr`` or ``file.py:attr``) rather than an entry."""
    return ":" in name and not name.startswith(":") and not name.endswith(":")


def import_object(path: str) -> Any:
    """The object named by ``module.path:attribute`` or ``path/to/file.py:attribute``.

    Raises :class:`UnknownNameError` saying which part failed (module not found, no such attribute).
    """
    module_part, _, attr = path.rpartition(":")
    if module_part.endswith(".py"):
        file = Path(module_part).expanduser()
        if not file.is_file():
            raise UnknownNameError(f"{path!r}: no Python file {file} (relative paths start at {Path.cwd()})")
        # Register the module under a stable name so that pickling objects defined there (for DataLoader workers,
        # multiprocess evaluation) can find it again.
        mod_name = "searchrl_user_" + "".join(ch if ch.isalnum() else "_" for ch in str(file.resolve()))
        module = sys.modules.get(mod_name)
        if module is None:
            spec = importlib.util.spec_from_file_location(mod_name, file)
            module = importlib.util.module_from_spec(spec)
            sys.modules[mod_name] = module
            try:
                spec.loader.exec_module(module)
            except BaseException:
                del sys.modules[mod_name]
                raise
    else:
        try:
            module = importlib.import_module(module_part)
        except ModuleNotFoundError as err:
            raise UnknownNameError(f"{path!r}: cannot import module {module_part!r} ({err})") from None
    obj = module
    for part in attr.split("."):
        if not hasattr(obj, part):
            raise UnknownNameError(f"{path!r}: module {module_part!r} has no attribute {attr!r}")
        obj = getattr(obj, part)
    return obj


def live_registry(kind: str) -> Registry | None:
    """The registry of `kind` ("reward", "protocol", ...) built in this process, or None when none has been."""
    return _LIVE.get(kind)


def unknown_name_message(kind: str, name: Any, known: list[str], normalize: Callable[[str], str]) -> str:
    """What an unknown name of `kind` is told: the nearest of the `known` (sorted) names, all of them, and the
    import path form."""
    close = difflib.get_close_matches(normalize(str(name)), known, n=1, cutoff=0.5)
    hint = f" (did you mean {close[0]!r}?)" if close else ""
    return (f"unknown {kind} {name!r}{hint}; known: {', '.join(known)}; or give an import path "
            f"'package.module:object' / 'file.py:object'")


def resolve_name(kind: str, name: Any, known: Collection[str], normalize: Callable[[str], str],
                 imported: dict[str, Any] | None = None) -> str:
    """The key `name` resolves to among the `known` keys of `kind`, or its import path (imported here, and kept in
    `imported` when given, which also spares a second import). Raises TypeError for a name that is no string and
    :class:`UnknownNameError` for one that resolves to nothing."""
    if not isinstance(name, str):
        raise TypeError(f"a {kind} name must be a string, got {type(name).__name__}")
    key = normalize(name)
    if key in known:
        return key
    path = name.strip()
    if is_import_path(path):
        if imported is None:
            import_object(path)
        elif path not in imported:
            imported[path] = import_object(path)
        return path
    raise UnknownNameError(unknown_name_message(kind, name, sorted(known), normalize))


def name_problem(key: Callable[[str], str], name: Any) -> str | None:
    """What is wrong with `name` for the lookup `key` (``Registry.key`` or one like it), or None when it resolves:
    the message of an unknown name or a wrong type, or what importing a user's module raised."""
    try:
        key(name)
    except (UnknownNameError, TypeError) as err:
        return str(err)
    except Exception as err:  # noqa: BLE001  (the user's module raised while importing: report, do not crash)
        return f"{name!r}: importing it failed: {type(err).__name__}: {err}"
    return None


class Registry(Generic[T]):
    """Named entries of one kind (``kind`` names it in messages: "reward", "protocol", ...).

    Each entry is whatever that axis builds from (a class, a factory function, a preset list) plus a one-line
    description for :meth:`describe`. ``normalize`` maps the spellings people write to the registered key
    ("Search-R1" -> "search_r1").
    """

    def __init__(self, kind: str, *, normalize: Callable[[str], str] | None = None) -> None:
        self.kind = kind
        self._normalize = normalize or (lambda name: name.strip())
        self._entries: dict[str, T] = {}
        self._docs: dict[str, str] = {}
        self._imported: dict[str, T] = {}  # objects named by import path, resolved on first use
        _LIVE.setdefault(kind, self)

    # ---- adding ---------------------------------------------------------------------------------------------

    def register(self, name: str, entry: T | None = None, *, doc: str = "", replace: bool = False):
        """Add ``entry`` under ``name``; without ``entry``, return a decorator that registers what it decorates.

        Registering a taken name raises unless ``replace`` (so two ablation arms cannot silently share one name).
        """
        if entry is None:
            def decorator(obj: T) -> T:
                self.register(name, obj, doc=doc, replace=replace)
                return obj

            return decorator
        key = self._normalize(name)
        if not key:
            raise ValueError(f"a {self.kind} needs a non-empty name")
        if key in self._entries and not replace and self._entries[key] is not entry:
            raise ValueError(f"a {self.kind} named {key!r} is already registered; pass replace=True to override it")
        self._entries[key] = entry
        self._docs[key] = doc or _first_line(getattr(entry, "__doc__", None))
        return entry

    # ---- looking up -----------------------------------------------------------------------------------------

    def key(self, name: str) -> str:
        """The registered key ``name`` resolves to (importing an import path on first use)."""
        # Kept apart from the registered entries: listing shows what was registered, not every path used.
        return resolve_name(self.kind, name, self._entries, self._normalize, self._imported)

    def get(self, name: str) -> T:
        """The entry for ``name``; unknown names raise :class:`UnknownNameError` with the nearest known one."""
        key = self.key(name)
        return self._entries[key] if key in self._entries else self._imported[key]

    def problem(self, name: str) -> str | None:
        """What is wrong with ``name`` (for validation before a run starts), or None when it resolves."""
        return name_problem(self.key, name)

    # ---- reading --------------------------------------------------------------------------------------------

    def names(self) -> list[str]:
        """Registered names, sorted."""
        return sorted(self._entries)

    def doc(self, name: str) -> str:
        key = self.key(name)
        return self._docs.get(key) or _first_line(getattr(self._imported.get(key), "__doc__", None))

    def describe(self) -> str:
        """One line per entry: name and description (what ``RunConfig.describe()`` lists)."""
        width = max((len(n) for n in self._entries), default=0)
        return "\n".join(f"  {n.ljust(width)}  {self._docs[n]}".rstrip() for n in self.names())

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and self._normalize(name) in self._entries

    def __iter__(self) -> Iterator[str]:
        return iter(self.names())

    def __len__(self) -> int:
        return len(self._entries)

    def __getitem__(self, name: str) -> T:
        return self.get(name)

    def items(self) -> list[tuple[str, T]]:
        return [(n, self._entries[n]) for n in self.names()]

    def values(self) -> list[T]:
        return [self._entries[n] for n in self.names()]

    def __repr__(self) -> str:
        return f"Registry({self.kind!r}: {', '.join(self.names())})"


def _first_line(doc: str | None) -> str:
    return (doc or "").strip().split("\n", 1)[0].strip()
