"""Finding connector plugins, and resolving a ``connector.class`` value to one (the job of Kafka's
Plugins/PluginUtils).

Installed plugins are the classes a process names itself (the built-in connectors of
``sluiceway_executor.connectors``, which the server and the executor pass to ``discover``) and the
classes registered under the ``sluiceway.connectors`` entry-point group (the built-ins are there too,
for other tools; third-party plugins add their own).
``connector.class`` may give a plugin's full dotted class path, its class name, its class name
less a trailing ``Connector``, or one of the names the class declares in ``ALIASES``. When two
plugins would share such an alias, the alias resolves to neither (Kafka's rule). A name that
matches none of these exactly is tried once more with case ignored (``datagensource``): it
resolves when it then names exactly one plugin, and is refused with the candidates listed when it
names several. A name that still matches nothing is refused with a
suggestion of the nearest installed names and the list of the plugins' short names (``short_name``).
The config keeps the name as the user gave it; the control plane and the executors resolve it with
this same class, so they agree on the plugin.

Besides installed plugins, a dotted class path may name a class in a module or package that lives
in one of the worker's ``plugin.path`` directories. Nothing else is ever imported to resolve a
name: a module whose top-level name is not found in those directories is refused before any import,
and so is one whose name an imported module elsewhere already holds (``import_class``).
"""

from __future__ import annotations

import builtins
import copy
import difflib
import enum
import importlib
import importlib.machinery
import importlib.metadata
import importlib.util
import inspect
import logging
import os
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from sluiceway.common.limits import echo
from sluiceway.connect.connector import Connector, SinkConnector, SourceConnector
from sluiceway.connect.plugin_imports import (
    PluginNotFoundError,
    PluginSourceError,
    class_name_of,
    import_class,
    load_class,
)
from sluiceway.connect.transform_plugins import TransformPlugins

__all__ = [
    "DEFAULT_GROUP",
    "UNDEFINED_VERSION",
    "PluginDesc",
    "PluginNotFoundError",
    "PluginRegistry",
    "PluginSourceError",
    "PluginType",
    "class_name_of",
    "import_class",
    "load_class",
]

_log = logging.getLogger(__name__)

DEFAULT_GROUP = "sluiceway.connectors"
UNDEFINED_VERSION = "undefined"
_CONNECTOR_SUFFIX = "Connector"
_DOTTED = re.compile(r"[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)+")
# How many near names a "did you mean" offers, how alike (difflib's ratio) each must be, and how
# far below the best one's its ratio may be.
_SUGGESTIONS = 3
_SUGGESTION_CUTOFF = 0.6
_SUGGESTION_SPREAD = 0.1


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

    @property
    def short_name(self) -> str:
        """The shortest name that resolves to this plugin alone: its class name less ``Connector``
        (``DataGenSource``), else its class name, else (both shared with another plugin) its full
        class path."""
        return self.aliases[-1] if self.aliases else self.class_name


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


def _alike(typed: str, words: Iterable[str]) -> list[str]:
    """The ``words`` that difflib rates alike ``typed``, best first, leaving out those rated well
    below the best one (so that a sure match is not drowned in weak ones)."""
    scored: list[tuple[float, str]] = []
    for word in words:
        matcher = difflib.SequenceMatcher(None, typed, word)
        if matcher.real_quick_ratio() >= _SUGGESTION_CUTOFF and matcher.quick_ratio() >= _SUGGESTION_CUTOFF:
            ratio = matcher.ratio()
            if ratio >= _SUGGESTION_CUTOFF:
                scored.append((ratio, word))
    if not scored:
        return []
    scored.sort(key=lambda pair: (-pair[0], pair[1]))
    best = scored[0][0]
    return [word for ratio, word in scored if ratio >= best - _SUGGESTION_SPREAD]


def _pruned_name(simple: str) -> str:
    if simple.endswith(_CONNECTOR_SUFFIX) and len(simple) > len(_CONNECTOR_SUFFIX):
        return simple[: -len(_CONNECTOR_SUFFIX)]
    return simple


def _names_of(cls: type[Connector]) -> tuple[str, ...]:
    """The aliases ``cls`` claims: the ones it declares, then its class name with and without
    ``Connector`` (last, so that ``short_name`` stays the plain one)."""
    declared = tuple(a.strip() for a in getattr(cls, "ALIASES", ()) if isinstance(a, str) and a.strip())
    return (*declared, cls.__name__, _pruned_name(cls.__name__))


class PluginRegistry:
    """The connector plugins known to this process, looked up by class path or alias; immutable."""

    def __init__(
        self,
        classes: Iterable[type[Connector]],
        plugin_path: Sequence[str] = (),
        transforms: TransformPlugins | None = None,
    ) -> None:
        # Directories whose modules a dotted class path not registered here may name.
        self._plugin_path = tuple(plugin_path)
        self._transforms = (transforms or TransformPlugins((), ())).with_plugin_path(self._plugin_path)
        unique: dict[str, type[Connector]] = {}
        for cls in classes:
            unique.setdefault(class_name_of(cls), cls)

        claims: dict[str, set[str]] = {}
        for class_name, cls in unique.items():
            for alias in _names_of(cls):
                claims.setdefault(alias, set()).add(class_name)
        self._aliases = {alias: next(iter(names)) for alias, names in claims.items() if len(names) == 1}
        self._ambiguous = {alias: sorted(names) for alias, names in claims.items() if len(names) > 1}
        for alias, names in self._ambiguous.items():
            _log.debug("Ignoring ambiguous alias %r: it names %s", alias, names)

        self._by_class: dict[str, PluginDesc] = {}
        for class_name, cls in unique.items():
            plugin_type = _plugin_type(cls)
            assert plugin_type is not None  # checked by the constructors' callers
            aliases = tuple(dict.fromkeys(a for a in _names_of(cls) if self._aliases.get(a) == class_name))
            self._by_class[class_name] = PluginDesc(
                class_name=class_name,
                type=plugin_type,
                version=_version_of(cls),
                aliases=aliases,
                cls=cls,
            )

        # Every name a plugin answers to, with case folded, and the plugins it names that way.
        self._folded: dict[str, set[str]] = {}
        for alias, claimants in claims.items():
            self._folded.setdefault(alias.casefold(), set()).update(claimants)
        for class_name in unique:
            self._folded.setdefault(class_name.casefold(), set()).add(class_name)

    @classmethod
    def discover(
        cls,
        group: str = DEFAULT_GROUP,
        *,
        plugin_path: Sequence[str] = (),
        built_in: Iterable[type[Connector]] = (),
        transforms: TransformPlugins | None = None,
    ) -> PluginRegistry:
        """The ``built_in`` classes (the caller's own plugins, named by module), and the plugins
        registered as entry points of ``group``; a broken entry point is logged and skipped. A
        class named both ways is one plugin. ``plugin_path``: the worker's plugin.path directories
        (see the module doc). ``transforms``: the transforms and predicates configs may name."""
        classes: list[type[Connector]] = []
        for candidate in built_in:
            problem = _check_connector_class(candidate)
            if problem is not None:
                raise TypeError(problem)
            classes.append(candidate)
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
        for directory in plugin_path:
            if not os.path.isdir(directory):
                _log.warning(
                    "plugin.path directory %s does not exist: no plugin is loaded from it", directory
                )
        return cls(classes, plugin_path, transforms)

    @classmethod
    def of(cls, *classes: type[Connector], plugin_path: Sequence[str] = ()) -> PluginRegistry:
        """A registry of exactly these classes (tests, plugins not installed as distributions)."""
        for candidate in classes:
            problem = _check_connector_class(candidate)
            if problem is not None:
                raise TypeError(problem)
        return cls(classes, plugin_path)

    @property
    def plugin_path(self) -> tuple[str, ...]:
        return self._plugin_path

    def with_plugin_path(self, plugin_path: Sequence[str]) -> PluginRegistry:
        """The same plugins, with ``plugin_path`` as the plugin.path directories (no plugin code runs)."""
        wanted = tuple(plugin_path)
        if wanted == self._plugin_path:
            return self
        other = copy.copy(self)
        other._plugin_path = wanted
        other._transforms = self._transforms.with_plugin_path(wanted)
        return other

    @property
    def transforms(self) -> TransformPlugins:
        """The transforms and predicates a connector's config may name."""
        return self._transforms

    def installed_packages(self) -> frozenset[str]:
        """The top-level packages of the registered plugins: where their task classes may come from."""
        return frozenset(desc.cls.__module__.split(".")[0] for desc in self._by_class.values())

    def connectors(self) -> list[PluginDesc]:
        return [self._by_class[name] for name in sorted(self._by_class)]

    def short_names(self) -> list[str]:
        """Each installed plugin's ``short_name``, sorted: what error messages list."""
        return sorted(desc.short_name for desc in self._by_class.values())

    def resolve(self, name: str) -> PluginDesc:
        """The plugin named by a full dotted class path, a simple class name, or a pruned simple
        name; matched exactly first, then with case ignored (see the module doc)."""
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
        # A registered plugin whose name differs only in case wins over a plugin.path class.
        folded = self._folded.get(key.casefold())
        if folded is not None:
            if len(folded) == 1:
                return self._by_class[next(iter(folded))]
            raise PluginNotFoundError(
                name,
                f"{echo(key)} names more than one connector plugin when case is ignored: "
                f"{', '.join(sorted(folded))}; give the name in its exact case, or the full class name",
            )
        if _DOTTED.fullmatch(key):
            return self._import(name, key)
        raise self._not_found(name, key, f"{echo(key)} is not an installed connector plugin")

    def _did_you_mean(self, key: str) -> str:
        """The hint "did you mean X?", X being the short names of the plugins whose names look most
        like ``key`` (by its last dotted part, the class name); "" when none is close."""
        typed = key.casefold().rsplit(".", 1)[-1]
        if not typed or len(typed) > 200:
            return ""  # no plugin's name is that long, and comparing costs its length squared
        words: dict[str, set[str]] = {}
        for folded, names in self._folded.items():
            words.setdefault(folded.rsplit(".", 1)[-1], set()).update(names)
        # Names the user began to type come first, then those difflib finds alike.
        begun = sorted(w for w in words if len(typed) >= 3 and w.startswith(typed))
        alike = _alike(typed, words)
        near: list[str] = []
        for word in [*begun, *alike]:
            for class_name in sorted(words[word]):
                short = self._by_class[class_name].short_name
                if short not in near:
                    near.append(short)
        near = near[:_SUGGESTIONS]
        if not near:
            return ""
        listed = near[0] if len(near) == 1 else f"{', '.join(near[:-1])} or {near[-1]}"
        return f"did you mean {listed}?"

    def _not_found(self, name: str, key: str, head: str) -> PluginNotFoundError:
        """``head`` (why ``key`` names no plugin), then the nearest names and the installed ones."""
        installed = f"Installed: {', '.join(self.short_names()) or 'none'}"
        hint = self._did_you_mean(key)
        return PluginNotFoundError(name, f"{head}; {hint} {installed}" if hint else f"{head}. {installed}")

    def _import(self, name: str, dotted: str) -> PluginDesc:
        """A connector class that is not registered, by its dotted path in a plugin.path module."""
        try:
            obj = import_class(dotted, plugin_path=self._plugin_path)
        except PluginSourceError as e:
            raise self._not_found(
                name, dotted, f"{dotted} is neither an installed connector plugin nor in plugin.path: {e}"
            ) from e
        except Exception as e:
            raise self._not_found(
                name, dotted, f"{dotted} is not a connector plugin (importing it failed: {e})"
            ) from e
        problem = _check_connector_class(obj) if obj is not None else "no such class"
        if problem is not None or not isinstance(obj, type):
            raise self._not_found(name, dotted, f"{dotted} is not a connector plugin ({problem})")
        registered = self._by_class.get(class_name_of(obj))
        if registered is not None:
            return registered
        plugin_type = _plugin_type(obj)
        assert plugin_type is not None
        return PluginDesc(
            class_name=class_name_of(obj), type=plugin_type, version=_version_of(obj), aliases=(), cls=obj
        )
