"""Finding transforms and predicates by the name a connector's config gives them
(``transforms.<alias>.type``, ``predicates.<alias>.type``).

A name resolves to an installed class by its full dotted path, its class name, or an alias it
declares in ``ALIASES`` (Kafka's class names, ``org.apache.kafka.connect.transforms.InsertField$Value``,
so configs copied from a Kafka Connect deployment work); then, with case ignored, when that leaves
one class. A dotted path that names no installed class is imported from the worker's
``plugin.path`` directories by the same rules as connectors (``plugins.import_class``).

Installed means built in, or published by a distribution as an entry point of the
``sluiceway.transforms`` or ``sluiceway.predicates`` group (:func:`installed`), as connectors are
in ``sluiceway.connectors``; those are listed by ListPlugins.
"""

from __future__ import annotations

import importlib.metadata
import logging
from collections.abc import Iterable, Sequence
from typing import Any, Final, cast

from sluiceway.connect.plugin_imports import PluginNotFoundError, class_name_of, import_class
from sluiceway.connect.transforms import (
    AnyTransformation,
    DataFrameTransformation,
    Predicate,
    RecordTransformation,
    Transformation,
)

__all__ = ["PREDICATES_GROUP", "TRANSFORMS_GROUP", "TransformPlugins", "installed"]

_log = logging.getLogger(__name__)

TRANSFORMS_GROUP: Final = "sluiceway.transforms"
PREDICATES_GROUP: Final = "sluiceway.predicates"
_TRANSFORM_BASES: Final = (Transformation, DataFrameTransformation, RecordTransformation)


def installed(group: str) -> list[type[Any]]:
    """The classes the entry points of ``group`` (TRANSFORMS_GROUP or PREDICATES_GROUP) name; one
    that does not load, or is not a transform (a predicate), is logged and skipped."""
    bases: tuple[type[Any], ...] = (Predicate,) if group == PREDICATES_GROUP else _TRANSFORM_BASES
    found: list[type[Any]] = []
    for entry_point in importlib.metadata.entry_points(group=group):
        try:
            loaded = entry_point.load()
        except Exception:
            _log.warning(
                "Skipping %s entry point %s: it could not be loaded", group, entry_point.name, exc_info=True
            )
            continue
        if not isinstance(loaded, type) or not issubclass(loaded, bases):
            _log.warning(
                "Skipping %s entry point %s: %r is not a subclass of the SDK's",
                group,
                entry_point.name,
                loaded,
            )
            continue
        found.append(loaded)
    return found


class _Kind:
    """The installed classes of one kind, by every name they answer to."""

    def __init__(self, label: str, base: tuple[type[Any], ...], classes: Iterable[type[Any]]) -> None:
        self.label = label
        self.base = base
        self.by_name: dict[str, type[Any]] = {}
        claims: dict[str, set[type[Any]]] = {}
        for cls in classes:
            for name in (class_name_of(cls), cls.__name__, *cls.ALIASES):
                claims.setdefault(name, set()).add(cls)
        # A name two classes claim names neither.
        self.by_name = {name: next(iter(found)) for name, found in claims.items() if len(found) == 1}
        self.folded: dict[str, set[type[Any]]] = {}
        for name, found in claims.items():
            self.folded.setdefault(name.casefold(), set()).update(found)
        self.classes = sorted({cls for found in claims.values() for cls in found}, key=class_name_of)

    def resolve(self, name: str, plugin_path: Sequence[str], packages: frozenset[str]) -> type[Any]:
        key = name.strip()
        if not key:
            raise PluginNotFoundError(name, f"the {self.label} class name must not be empty")
        found = self.by_name.get(key)
        if found is not None:
            return found
        folded = self.folded.get(key.casefold(), set())
        if len(folded) == 1:
            return next(iter(folded))
        if "." in key and "$" not in key:
            try:
                loaded = import_class(key, plugin_path=plugin_path, packages=packages)
            except Exception as e:  # a module that fails to import names no plugin
                raise PluginNotFoundError(name, f"{self.label} class {key} could not be loaded: {e}") from e
            if not isinstance(loaded, type) or not issubclass(loaded, self.base):
                bases = " or ".join(class_name_of(b) for b in self.base)
                raise PluginNotFoundError(name, f"{key} is not a subclass of {bases}")
            return loaded
        names = ", ".join(sorted(cls.__name__ for cls in self.classes))
        raise PluginNotFoundError(name, f"no {self.label} is named {key}; installed: {names}")


class TransformPlugins:
    """The transforms and predicates known to this process."""

    def __init__(
        self,
        transforms: Iterable[type[AnyTransformation]],
        predicates: Iterable[type[Predicate]],
        plugin_path: Sequence[str] = (),
    ) -> None:
        self._transforms = _Kind("transform", _TRANSFORM_BASES, transforms)
        self._predicates = _Kind("predicate", (Predicate,), predicates)
        self._plugin_path = tuple(plugin_path)
        self._packages = frozenset(
            cls.__module__.split(".")[0] for cls in (*self._transforms.classes, *self._predicates.classes)
        )

    def with_plugin_path(self, plugin_path: Sequence[str]) -> TransformPlugins:
        """The same plugins, with ``plugin_path`` as the plugin.path directories."""
        wanted = tuple(plugin_path)
        if wanted == self._plugin_path:
            return self
        return TransformPlugins(self._transforms.classes, self._predicates.classes, wanted)

    @property
    def plugin_path(self) -> tuple[str, ...]:
        return self._plugin_path

    def transforms(self) -> list[type[AnyTransformation]]:
        return list(self._transforms.classes)

    def predicates(self) -> list[type[Predicate]]:
        return list(self._predicates.classes)

    def transform(self, name: str) -> type[AnyTransformation]:
        """The transform class ``name`` gives; PluginNotFoundError saying why when none."""
        return cast(
            "type[AnyTransformation]", self._transforms.resolve(name, self._plugin_path, self._packages)
        )

    def predicate(self, name: str) -> type[Predicate]:
        """The predicate class ``name`` gives; PluginNotFoundError saying why when none."""
        return cast("type[Predicate]", self._predicates.resolve(name, self._plugin_path, self._packages))
