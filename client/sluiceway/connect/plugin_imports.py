"""Importing a plugin class by its dotted path, under the rules that keep a connector config from
importing arbitrary code: only installed plugin packages and modules in the worker's
``plugin.path`` directories (the module doc of ``plugins`` says more). Shared by connector plugins
(``plugins``) and transforms (``transform_plugins``).
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import sys
from collections.abc import Collection, Sequence
from types import ModuleType

from sluiceway.connect.connector import ConnectException

__all__ = [
    "PluginNotFoundError",
    "PluginSourceError",
    "class_name_of",
    "import_class",
    "load_class",
]


class PluginNotFoundError(LookupError):
    """No plugin, or more than one, answers to ``name``; the message says which."""

    def __init__(self, name: str, message: str) -> None:
        super().__init__(message)
        self.name = name


class PluginSourceError(ImportError):
    """A module was asked for that neither belongs to an allowed installed package nor lives in a
    ``plugin.path`` directory; nothing was imported."""


def class_name_of(cls: type) -> str:
    return f"{cls.__module__}.{cls.__qualname__}"


def _file_inside(module: ModuleType, directories: Sequence[str]) -> bool:
    origin = getattr(module, "__file__", None)
    if not isinstance(origin, str):
        return False
    real = os.path.realpath(origin)
    return any(real.startswith(directory.rstrip(os.sep) + os.sep) for directory in directories)


def _same_file(a: str | None, b: str | None) -> bool:
    return a is not None and b is not None and os.path.realpath(a) == os.path.realpath(b)


def _admit_from_plugin_path(top: str, plugin_path: Sequence[str]) -> list[str] | None:
    """The real plugin.path directories when the top-level module ``top`` may be imported from
    them, having made them importable; None when ``top`` is not found in them. Raises
    PluginSourceError when a module of that name from elsewhere would be imported instead."""
    directories = [os.path.realpath(d) for d in plugin_path if os.path.isdir(d)]
    if not directories:
        return None
    spec = importlib.machinery.PathFinder.find_spec(top, directories)
    if spec is None:
        return None
    if spec.origin is None or spec.loader is None:
        raise PluginSourceError(f"{top} in plugin.path is a namespace package; give it an __init__.py")
    loaded = sys.modules.get(top)
    if loaded is not None:
        if not _file_inside(loaded, directories):
            raise PluginSourceError(f"a module named {top} from outside plugin.path is already loaded")
        return directories
    for directory in directories:
        if directory not in sys.path:
            sys.path.append(directory)
    # With the directories at the end of sys.path, the same name elsewhere would win: find out
    # which file an import would run before running any.
    chosen = importlib.util.find_spec(top)
    if chosen is None or not _same_file(chosen.origin, spec.origin):
        raise PluginSourceError(f"{top} is also the name of a module outside plugin.path")
    return directories


def import_class(dotted: str, *, plugin_path: Sequence[str] = (), packages: Collection[str] = ()) -> object:
    """The object at the dotted path (``package.module.Class``, nested classes allowed), or None
    when the module exists but has no such attribute.

    Only two sources are imported from: a module whose top-level name is found in the
    ``plugin_path`` directories (checked first, and it must be loaded from there), and the
    installed top-level ``packages``. Anything else raises PluginSourceError before any import.
    Other import failures propagate (ModuleNotFoundError when no module of the path exists)."""
    parts = dotted.strip().split(".")
    top = parts[0]
    try:
        directories = _admit_from_plugin_path(top, plugin_path)
    except PluginSourceError:
        if top not in packages:
            raise
        directories = None  # an installed package of that name: imported as usual
    if directories is None and top not in packages:
        if not plugin_path:
            raise PluginSourceError("no plugin.path is set")
        raise PluginSourceError(f"no module {top} in {', '.join(plugin_path)}")
    for split in range(len(parts) - 1, 0, -1):
        module_name = ".".join(parts[:split])
        try:
            module = importlib.import_module(module_name)
        except ModuleNotFoundError as e:
            # Only "this module does not exist" means: try a shorter module path.
            if e.name is not None and (module_name == e.name or module_name.startswith(e.name + ".")):
                continue
            raise
        if directories is not None and not (
            _file_inside(module, directories) and _file_inside(sys.modules[top], directories)
        ):
            raise PluginSourceError(f"{module_name} was not loaded from plugin.path")
        obj: object = module
        for attr in parts[split:]:
            obj = getattr(obj, attr, None)
            if obj is None:
                return None
        return obj
    raise ModuleNotFoundError(f"no module found for {dotted!r}", name=parts[0])


def load_class(dotted: str, *, packages: Collection[str] = (), plugin_path: Sequence[str] = ()) -> type:
    """The class at a dotted path (``package.module.Class``, nested classes allowed), from one of
    the installed top-level ``packages`` or a module in the ``plugin_path`` directories; a path
    elsewhere raises ImportError (PluginSourceError) without importing anything."""
    obj = import_class(dotted, plugin_path=plugin_path, packages=packages)
    if obj is None:
        raise AttributeError(f"{dotted} does not exist")
    if not isinstance(obj, type):
        raise ConnectException(f"{dotted} is not a class")
    return obj
