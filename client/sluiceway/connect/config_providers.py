"""Config providers in the style of Kafka's (KIP-297, KIP-421): a connector config value may hold
``${provider:path:key}`` references that are replaced where the config is used, so that what is
stored (the config topic) and what reads show keep the reference and never the secret.

Two providers are built in and enabled by the worker key ``config.providers`` (a comma list):

- ``env`` (Kafka's EnvVarConfigProvider): ``${env:NAME}`` is the environment variable NAME of the
  process that uses the config. ``config.providers.env.param.allowlist.pattern`` (a regular
  expression the whole name must match, default ``.*``) limits which variables may be read.
- ``file`` (Kafka's FileConfigProvider): ``${file:/path/to/file.properties:key}`` is the value of
  ``key`` in that properties file. ``config.providers.file.param.allowed.paths`` (a comma list of
  absolute directories, empty: anywhere) limits which files may be read.

The control plane resolves a connector's config before its plugin code sees it (validation, the
connector's start and task_configs, alter_offsets, deleted); an executor resolves a task's configs
just before building its pipeline, against its own environment and files. No provider ever reports
a change, so nothing calls for a reload. A reference that cannot be resolved is reported by key,
with messages that never hold a resolved value.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

from sluiceway.common.properties import PropertiesSyntaxError, parse_properties
from sluiceway.common.secrets import redact_url_credentials
from sluiceway.connect.config import ConfigValue
from sluiceway.connect.validation import ConfigInfo, ConfigInfos

__all__ = [
    "CONFIG_PROVIDERS_CONFIG",
    "ENV_ALLOWLIST_PATTERN_CONFIG",
    "FILE_ALLOWED_PATHS_CONFIG",
    "REFERENCE_PATTERN",
    "SUPPORTED_PROVIDERS",
    "ConfigProviders",
    "ConfigProvidersError",
    "ConfigReferenceError",
    "Reference",
    "Resolution",
    "check_config_providers",
    "has_references",
    "hide_resolved",
    "references",
    "reverse_transform",
    "with_raw_values",
]

CONFIG_PROVIDERS_CONFIG: Final = "config.providers"
ENV_ALLOWLIST_PATTERN_CONFIG: Final = "config.providers.env.param.allowlist.pattern"
FILE_ALLOWED_PATHS_CONFIG: Final = "config.providers.file.param.allowed.paths"
SUPPORTED_PROVIDERS: Final = ("env", "file")

# Kafka's ConfigTransformer.DEFAULT_PATTERN: ${provider:path:key}, the path optional.
REFERENCE_PATTERN: Final = re.compile(r"\$\{([^}]*?):(([^}]*?):)?([^}]*?)\}")

_PROVIDER_KEY: Final = re.compile(r"config\.providers\.([^.]+)\.class")
_SUPPORTED_TEXT: Final = " and ".join(SUPPORTED_PROVIDERS)
# A resolved value shorter than this is not looked for in messages of other keys: "1" would turn
# every "1" of every message into a reference.
_SCRUB_MIN_LENGTH: Final = 4


class ConfigProvidersError(ValueError):
    """A worker's config.providers keys are wrong; ``key`` names the key."""

    def __init__(self, key: str, message: str) -> None:
        super().__init__(f"{key}: {message}")
        self.key = key
        self.message = message


class ConfigReferenceError(Exception):
    """References of a config that could not be resolved: ``problems`` maps each key to what went
    wrong. The messages name providers, variables, files and keys, never a value."""

    def __init__(self, problems: Mapping[str, Sequence[str]]) -> None:
        self.problems = {key: list(messages) for key, messages in problems.items()}
        summary = "; ".join(f"{key}: {message}" for key, messages in problems.items() for message in messages)
        super().__init__(f"unresolved config references: {summary}")


@dataclass(frozen=True)
class Reference:
    """One ``${provider:path:key}`` found in a value (``text`` is the whole reference)."""

    text: str
    provider: str
    path: str
    key: str


def references(value: str) -> list[Reference]:
    """The references in ``value``, in order."""
    return [_reference(m) for m in REFERENCE_PATTERN.finditer(value)]


def has_references(value: str | None) -> bool:
    return value is not None and REFERENCE_PATTERN.search(value) is not None


def _reference(match: re.Match[str]) -> Reference:
    return Reference(match.group(0), match.group(1), match.group(3) or "", match.group(4))


def _names(raw: str) -> list[str]:
    return [name.strip() for name in raw.split(",") if name.strip()]


def check_config_providers(props: Mapping[str, str], error: Callable[[str, str], Exception]) -> None:
    """Raises ``error(key, message)`` when the worker's config.providers keys are wrong: a provider
    Sluiceway does not have, a ``config.providers.NAME.class`` key (no provider class is ever
    loaded), an allowlist pattern that does not compile, an allowed path that is not absolute."""
    try:
        ConfigProviders.from_worker_config(props)
    except ConfigProvidersError as exc:
        raise error(exc.key, exc.message) from None


class _UnresolvedError(Exception):
    pass


@dataclass(frozen=True)
class Resolution:
    """What resolving a config gave: ``config`` with every reference that resolved replaced (a key
    whose references did not all resolve keeps its raw value), ``problems`` by key, and
    ``substituted``: each value a reference was replaced by, with the reference's text."""

    config: dict[str, str]
    problems: dict[str, list[str]] = field(default_factory=dict)
    substituted: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class ConfigProviders:
    """The providers a worker enabled, with their parameters.

    Immutable; ``resolve`` reads the environment and files at each call, so a changed variable or
    file is seen by the next use of a config (the config is never reloaded on its own).
    """

    enabled: frozenset[str] = frozenset()
    env_allowlist: re.Pattern[str] = re.compile(".*", re.DOTALL)
    file_allowed_paths: tuple[Path, ...] = ()
    # The environment ${env:...} reads (None: this process's, at each resolution).
    environ: Mapping[str, str] | None = None

    @classmethod
    def from_worker_config(
        cls, props: Mapping[str, str], environ: Mapping[str, str] | None = None
    ) -> ConfigProviders:
        """The providers of a worker config; ConfigProvidersError naming the key when it is wrong."""
        enabled = _names(props.get(CONFIG_PROVIDERS_CONFIG, ""))
        for name in enabled:
            if name not in SUPPORTED_PROVIDERS:
                raise ConfigProvidersError(
                    CONFIG_PROVIDERS_CONFIG,
                    f"unknown config provider {name!r}; Sluiceway's providers are {_SUPPORTED_TEXT}",
                )
        for key in props:
            match = _PROVIDER_KEY.fullmatch(key)
            if match is not None:
                raise ConfigProvidersError(
                    key,
                    "Sluiceway loads no config provider classes; its providers "
                    f"{_SUPPORTED_TEXT} are built in and enabled by naming them in {CONFIG_PROVIDERS_CONFIG}",
                )
        pattern_text = props.get(ENV_ALLOWLIST_PATTERN_CONFIG, "").strip() or ".*"
        try:
            pattern = re.compile(pattern_text, re.DOTALL)
        except re.error as exc:
            raise ConfigProvidersError(
                ENV_ALLOWLIST_PATTERN_CONFIG, f"not a valid regular expression: {exc}"
            ) from None
        allowed: list[Path] = []
        for entry in _names(props.get(FILE_ALLOWED_PATHS_CONFIG, "")):
            path = Path(entry)
            if not path.is_absolute():
                raise ConfigProvidersError(FILE_ALLOWED_PATHS_CONFIG, f"{entry!r} is not an absolute path")
            allowed.append(Path(os.path.realpath(path)))
        return cls(frozenset(enabled), pattern, tuple(allowed), environ)

    # ------------------------------------------------------------------ resolving

    def resolve(self, config: Mapping[str, str]) -> dict[str, str]:
        """``config`` with every reference replaced; ConfigReferenceError if one cannot be."""
        resolution = self.try_resolve(config)
        if resolution.problems:
            raise ConfigReferenceError(resolution.problems)
        return resolution.config

    def try_resolve(self, config: Mapping[str, str]) -> Resolution:
        """Resolves what can be resolved and reports the rest by key (see ``Resolution``)."""
        files: dict[str, dict[str, str] | str] = {}
        resolved: dict[str, str] = {}
        problems: dict[str, list[str]] = {}
        substituted: dict[str, str] = {}
        for key, value in config.items():
            if not isinstance(value, str) or not has_references(value):
                resolved[key] = value
                continue
            value_resolved, messages = self._resolve_value(value, files, substituted)
            if messages:
                problems[key] = messages
                resolved[key] = value
            else:
                resolved[key] = value_resolved
        return Resolution(resolved, problems, substituted)

    def _resolve_value(
        self, value: str, files: dict[str, dict[str, str] | str], substituted: dict[str, str]
    ) -> tuple[str, list[str]]:
        """The value with each reference replaced (one at a time, left to right: a resolved value is
        never searched for references), and what did not resolve."""
        parts: list[str] = []
        messages: list[str] = []
        end = 0
        for match in REFERENCE_PATTERN.finditer(value):
            reference = _reference(match)
            parts.append(value[end : match.start()])
            end = match.end()
            try:
                found = self._lookup(reference, files)
            except _UnresolvedError as exc:
                if str(exc) not in messages:
                    messages.append(str(exc))
                parts.append(reference.text)
                continue
            substituted.setdefault(found, reference.text)
            parts.append(found)
        parts.append(value[end:])
        return "".join(parts), messages

    def _lookup(self, reference: Reference, files: dict[str, dict[str, str] | str]) -> str:
        provider = reference.provider
        if provider not in self.enabled:
            shown = ", ".join(sorted(self.enabled)) or "none"
            if provider in SUPPORTED_PROVIDERS:
                raise _UnresolvedError(
                    f"{reference.text} uses config provider {provider!r}, which this worker does not "
                    f"enable (add it to {CONFIG_PROVIDERS_CONFIG}; enabled: {shown})"
                )
            raise _UnresolvedError(
                f"{reference.text} names config provider {provider!r}, which Sluiceway does not have "
                f"(its providers are {_SUPPORTED_TEXT}; enabled on this worker: {shown})"
            )
        if provider == "env":
            return self._env(reference)
        return self._file(reference, files)

    def _env(self, reference: Reference) -> str:
        if reference.path:
            raise _UnresolvedError(f"{reference.text}: the env provider takes no path; write ${{env:NAME}}")
        name = reference.key
        if self.env_allowlist.fullmatch(name) is None:
            raise _UnresolvedError(
                f"{reference.text}: environment variable {name!r} is not allowed by "
                f"{ENV_ALLOWLIST_PATTERN_CONFIG}"
            )
        environ = os.environ if self.environ is None else self.environ
        value = environ.get(name)
        if value is None:
            raise _UnresolvedError(f"{reference.text}: environment variable {name!r} is not set")
        return value

    def _file(self, reference: Reference, files: dict[str, dict[str, str] | str]) -> str:
        if not reference.path:
            raise _UnresolvedError(
                f"{reference.text}: the file provider needs a path; write ${{file:PATH:KEY}}"
            )
        entries = files.get(reference.path)
        if entries is None:
            entries = files[reference.path] = self._read(reference.path)
        if isinstance(entries, str):
            raise _UnresolvedError(f"{reference.text}: {entries}")
        if reference.key not in entries:
            raise _UnresolvedError(f"{reference.text}: file {reference.path} has no key {reference.key!r}")
        return entries[reference.key]

    def _read(self, path_text: str) -> dict[str, str] | str:
        """The file's properties, or what went wrong (a message naming the file, never its text)."""
        path = Path(path_text)
        if self.file_allowed_paths:
            if not path.is_absolute():
                return f"file {path_text} is not an absolute path, as {FILE_ALLOWED_PATHS_CONFIG} requires"
            real = Path(os.path.realpath(path))
            if not any(real.is_relative_to(allowed) for allowed in self.file_allowed_paths):
                return f"file {path_text} is outside the directories of {FILE_ALLOWED_PATHS_CONFIG}"
        try:
            text = path.read_text(encoding="utf-8")
        except OSError as exc:
            return f"cannot read file {path_text}: {exc.strerror or type(exc).__name__}"
        except UnicodeDecodeError:
            return f"file {path_text} is not UTF-8 text"
        try:
            return parse_properties(text)
        except PropertiesSyntaxError as exc:
            return f"file {path_text} is not a valid properties file ({exc})"


def reverse_transform(
    raw: Mapping[str, str], task_configs: Sequence[Mapping[str, str]]
) -> list[dict[str, str]]:
    """Task configs as they are stored (Kafka's reverseTransform): a task config key whose value in the
    raw connector config holds a reference gets that raw value back, so the config topic keeps the
    reference rather than what the connector copied from the resolved config."""
    restored = {key: value for key, value in raw.items() if has_references(value)}
    return [{key: restored.get(key, value) for key, value in task.items()} for task in task_configs]


def _scrub(message: str, replacements: Sequence[tuple[str, str]]) -> str:
    for secret, reference in replacements:
        message = message.replace(secret, reference)
    return redact_url_credentials(message)


def _replacements(substituted: Mapping[str, str]) -> list[tuple[str, str]]:
    """Longest first, so that a value containing another is replaced whole."""
    pairs = [(value, text) for value, text in substituted.items() if len(value) >= _SCRUB_MIN_LENGTH]
    return sorted(pairs, key=lambda pair: -len(pair[0]))


def hide_resolved(text: str, substituted: Mapping[str, str]) -> str:
    """``text`` (a failure's message or trace) with every value a reference was replaced by
    (``Resolution.substituted``) turned back into the reference, and credentials in URLs redacted:
    what plugin code echoes of its resolved config does not reach a status or a log."""
    return _scrub(text, _replacements(substituted))


def with_raw_values(infos: ConfigInfos, raw: Mapping[str, str], resolution: Resolution) -> ConfigInfos:
    """What validating a resolved config found, as an answer about the raw one: the values of keys
    that hold references are the raw values, no message holds a resolved value, every reference
    that did not resolve is an error on its key, and a ``connector.class`` that is a reference is
    refused (the plugin is named in the config itself)."""
    problems = {key: list(messages) for key, messages in resolution.problems.items()}
    if has_references(raw.get("connector.class")):
        problems.setdefault("connector.class", []).append(
            "connector.class must name the plugin itself, not a config provider reference"
        )
    referenced = {key for key, value in raw.items() if has_references(value)}
    # Resolved values, whole (a value with text around its reference) or substituted, back to their
    # references in every message; a short one only in its own key's messages (see _SCRUB_MIN_LENGTH).
    whole = {
        resolution.config[key]: raw[key]
        for key in referenced
        if key in resolution.config and resolution.config[key] != raw[key]
    }
    replacements = _replacements({**resolution.substituted, **whole})
    configs: list[ConfigInfo] = []
    seen: set[str] = set()
    for info in infos.configs:
        name = info.value.name
        seen.add(name)
        value = info.value
        local = replacements
        if name in referenced:
            value.value = raw[name]
            own = resolution.config.get(name, "")
            if own and own != raw[name]:
                local = [(own, raw[name]), *replacements]
        if name in problems:
            # What validation said of an unresolved reference's raw text is noise: only the problems.
            value.errors = list(problems[name])
        else:
            value.errors = [_scrub(message, local) for message in value.errors]
        configs.append(ConfigInfo(info.definition, value))
    for name, messages in problems.items():
        if name not in seen:
            configs.append(ConfigInfo(None, ConfigValue(name, raw.get(name), errors=list(messages))))
    return ConfigInfos(
        plugin_class_name=infos.plugin_class_name,
        error_count=sum(len(info.value.errors) for info in configs),
        groups=list(infos.groups),
        configs=configs,
    )
