"""Finding connector plugins, and resolving a ``connector.class`` value to one (the job of Kafka's
Plugins/PluginUtils).

Installed plugins are the classes registered under the ``sluiceway.connectors`` entry-point group.
``connector.class`` may give a plugin's full dotted class path, its class name, or its class name
less a trailing ``Connector``. When two plugins would share such an alias, the alias resolves to
neither (Kafka's rule).
"""

from __future__ import annotations

import builtins
import enum
import importlib
import importlib.metadata
import inspect
import logging
import re
from collections.abc import Iterable
from dataclasses import dataclass, field

from sluiceway.connect.connector import Connector, SinkConnector, SourceConnector

__all__ = [
    "DEFAULT_GROUP",
    "UNDEFINED_VERSION",
    "PluginDesc",
    "PluginNotFoundError",
    "PluginRegistry",
    "PluginType",
    "class_name_of",
]

_log = logging.getLogger(__name__)

DEFAULT_GROUP = "sluiceway.connectors"
UNDEFINED_VERSION = "undefined"
_CONNECTOR_SUFFIX = "Connector"
_DOTTED = re.compile(r"[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)+")


class PluginType(enum.Enum):
    SOURCE = "source"
    SINK = "sink"


@dataclass(frozen=True)
class PluginDesc:
    """An installed connector plugin."""

    class_name: str
    type: PluginType
    version: str
    aliases: tuple[str, ...]
    # builtins.type: the field `type` above shadows the builtin inside this class body.
    cls: builtins.type[Connector] = field(repr=False)

    def new_instance(self) -> Connector:
        return self.cls()


class PluginNotFoundError(LookupError):
    """No plugin, or more than one, answers to ``name``; the message says which."""

    def __init__(self, name: str, message: str) -> None:
        super().__init__(message)
        self.name = name


def class_name_of(cls: type) -> str:
    return f"{cls.__module__}.{cls.__qualname__}"


def _plugin_type(cls: type[Connector]) -> PluginType | None:
    if issubclass(cls, SourceConnector):
        return PluginType.SOURCE
    if issubclass(cls, SinkConnector):
        return PluginType.SINK
    return None


def _check_connector_class(obj: object) -> str | None:
    """Why ``obj`` cannot be a connector plugin, or None when it can."""
    if not inspect.isclass(obj):
        return f"{obj!r} is not a class"
    if not issubclass(obj, Connector):
        return f"{class_name_of(obj)} is not a subclass of {class_name_of(Connector)}"
    if _plugin_type(obj) is None:
        return f"{class_name_of(obj)} is neither a SourceConnector nor a SinkConnector"
    if inspect.isabstract(obj):
        return f"{class_name_of(obj)} is abstract"
    return None


def _version_of(cls: type[Connector]) -> str:
    # The version comes from an instance; a plugin that fails to give one shows "undefined" (as in Kafka).
    try:
        return str(cls().version())
    except Exception:
        _log.warning("Could not get the version of connector plugin %s", class_name_of(cls), exc_info=True)
        return UNDEFINED_VERSION


def _pruned_name(simple: str) -> str:
    if simple.endswith(_CONNECTOR_SUFFIX) and len(simple) > len(_CONNECTOR_SUFFIX):
        return simple[: -len(_CONNECTOR_SUFFIX)]
    return simple


class PluginRegistry:
    """The connector plugins known to this process, looked up by class path or alias; immutable."""

    def __init__(self, classes: Iterable[type[Connector]]) -> None:
        unique: dict[str, type[Connector]] = {}
        for cls in classes:
            unique.setdefault(class_name_of(cls), cls)

        claims: dict[str, set[str]] = {}
        for class_name, cls in unique.items():
            for alias in (cls.__name__, _pruned_name(cls.__name__)):
                claims.setdefault(alias, set()).add(class_name)
        self._aliases = {alias: next(iter(names)) for alias, names in claims.items() if len(names) == 1}
        self._ambiguous = {alias: sorted(names) for alias, names in claims.items() if len(names) > 1}
        for alias, names in self._ambiguous.items():
            _log.debug("Ignoring ambiguous alias %r: it names %s", alias, names)

        self._by_class: dict[str, PluginDesc] = {}
        for class_name, cls in unique.items():
            plugin_type = _plugin_type(cls)
            assert plugin_type is not None  # checked by the constructors' callers
            aliases = tuple(
                dict.fromkeys(
                    a
                    for a in (cls.__name__, _pruned_name(cls.__name__))
                    if self._aliases.get(a) == class_name
                )
            )
            self._by_class[class_name] = PluginDesc(
                class_name=class_name,
                type=plugin_type,
                version=_version_of(cls),
                aliases=aliases,
                cls=cls,
            )

    @classmethod
    def discover(cls, group: str = DEFAULT_GROUP) -> PluginRegistry:
        """Plugins registered as entry points of ``group``; a broken entry point is logged and skipped."""
        classes: list[type[Connector]] = []
        for entry_point in importlib.metadata.entry_points(group=group):
            try:
                loaded = entry_point.load()
            except Exception:
                _log.warning(
                    "Skipping connector plugin entry point %s = %s: it could not be loaded",
                    entry_point.name,
                    entry_point.value,
                    exc_info=True,
                )
                continue
            problem = _check_connector_class(loaded)
            if problem is not None:
                _log.warning("Skipping connector plugin entry point %s: %s", entry_point.name, problem)
                continue
            classes.append(loaded)
        return cls(classes)

    @classmethod
    def of(cls, *classes: type[Connector]) -> PluginRegistry:
        """A registry of exactly these classes (tests, plugins not installed as distributions)."""
        for candidate in classes:
            problem = _check_connector_class(candidate)
            if problem is not None:
                raise TypeError(problem)
        return cls(classes)

    def connectors(self) -> list[PluginDesc]:
        return [self._by_class[name] for name in sorted(self._by_class)]

    def resolve(self, name: str) -> PluginDesc:
        """The plugin named by a full dotted class path, a simple class name, or a pruned simple name."""
        key = name.strip()
        if not key:
            raise PluginNotFoundError(name, "The connector class name must not be empty")
        found = self._by_class.get(key)
        if found is not None:
            return found
        alias_of = self._aliases.get(key)
        if alias_of is not None:
            return self._by_class[alias_of]
        candidates = self._ambiguous.get(key)
        if candidates is not None:
            raise PluginNotFoundError(
                name,
                f"Connector class alias '{key}' is ambiguous: it could be any of {', '.join(candidates)}; "
                "use the full class name",
            )
        if _DOTTED.fullmatch(key):
            return self._import(name, key)
        raise self._not_found(name, key)

    def _not_found(self, name: str, key: str, detail: str = "") -> PluginNotFoundError:
        available = ", ".join(sorted(self._by_class)) or "none"
        return PluginNotFoundError(
            name,
            f"No connector plugin is named {key}{detail}. Installed connector plugins: {available}",
        )

    def _import(self, name: str, dotted: str) -> PluginDesc:
        """Imports a connector class that is not registered, by its dotted path."""
        parts = dotted.split(".")
        obj: object = None
        for split in range(len(parts) - 1, 0, -1):
            module_name = ".".join(parts[:split])
            try:
                obj = importlib.import_module(module_name)
            except ModuleNotFoundError as e:
                # Only "this module does not exist" means: try a shorter module path.
                if e.name is not None and (module_name == e.name or module_name.startswith(e.name + ".")):
                    continue
                raise self._not_found(name, dotted, f" (importing {module_name} failed: {e})") from e
            except Exception as e:
                raise self._not_found(name, dotted, f" (importing {module_name} failed: {e})") from e
            for attr in parts[split:]:
                obj = getattr(obj, attr, None)
                if obj is None:
                    break
            break
        problem = _check_connector_class(obj) if obj is not None else "no such class"
        if problem is not None or not isinstance(obj, type):
            raise self._not_found(name, dotted, f" ({problem})")
        registered = self._by_class.get(class_name_of(obj))
        if registered is not None:
            return registered
        plugin_type = _plugin_type(obj)
        assert plugin_type is not None
        return PluginDesc(
            class_name=class_name_of(obj), type=plugin_type, version=_version_of(obj), aliases=(), cls=obj
        )
