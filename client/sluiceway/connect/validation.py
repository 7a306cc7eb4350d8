"""Checking a whole connector config, with the rules of Kafka's
``AbstractHerder.validateConnectorConfig``, returning plain data.

Sluiceway's own keys (the common ones, then the source or sink ones) are checked first, then the
plugin's ``validate`` runs. An empty value of a key that stands for the worker's
(``WORKER_FALLBACK_KEYS``: heartbeat.*, task.restart.*) is checked as if unset: it means the
worker's value. Every problem is attached to the key it concerns and nothing is raised
for a bad config; if the plugin's ``config`` or ``validate`` itself raises, that becomes an error on
``connector.class``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, Final

from sluiceway.common.secrets import looks_secret
from sluiceway.connect.config import ConfigDef, ConfigKey, ConfigType, ConfigValue, java_trim
from sluiceway.connect.framework_config import (
    CONFIG_RELOAD_ACTION_CONFIG,
    CONNECTOR_CLASS_CONFIG,
    DLQ_TOPIC_NAME_CONFIG,
    EXACTLY_ONCE_REQUESTED,
    EXACTLY_ONCE_REQUIRED,
    EXACTLY_ONCE_SUPPORT_CONFIG,
    HEADER_CONVERTER_CLASS_CONFIG,
    HEARTBEAT_RECORDS_TOPIC_CONFIG,
    OFFSETS_TOPIC_CONFIG,
    TOPICS_CONFIG,
    TOPICS_REGEX_CONFIG,
    TRANSACTION_BOUNDARY_CONFIG,
    TRANSACTION_BOUNDARY_INTERVAL_CONFIG,
    TRANSFORMS_CONFIG,
    common_config_def,
    source_config_def,
    topic_creation_config_def,
    uses_topic_creation,
)
from sluiceway.connect.plugins import (
    PluginDesc,
    PluginNotFoundError,
    PluginRegistry,
    PluginType,
)
from sluiceway.connect.sink_framework_config import sink_config_def
from sluiceway.connect.topic_creation_config import unread_topic_creation_keys
from sluiceway.connect.transform_config import chain_problems
from sluiceway.connect.worker_fallbacks import WORKER_FALLBACK_KEYS
from sluiceway.connect.worker_policy import WorkerPolicy, path_errors

__all__ = [
    "NOT_SUPPORTED_YET",
    "SINK_TOPICS_BOTH_MESSAGE",
    "SINK_TOPICS_MISSING_MESSAGE",
    "ConfigInfo",
    "ConfigInfos",
    "connector_config_def",
    "framework_config_def",
    "password_keys",
    "secret_keys",
    "validate_connector_config",
]

_NO_TRANSACTIONS: Final = "Sluiceway writes source records without transactions"
_NO_RELOAD: Final = "Sluiceway's config providers never report a change, so nothing calls for a reload"

# Keys Sluiceway accepts with Kafka Connect's names, types and defaults but whose feature it does not
# have yet, each with what is missing. validate_connector_config refuses a value other than the key's
# default (the default of its definition in framework_config), so that no setting silently does nothing.
NOT_SUPPORTED_YET: Final[Mapping[str, str]] = MappingProxyType(
    {
        HEADER_CONVERTER_CLASS_CONFIG: "Sluiceway applies no header converter",
        CONFIG_RELOAD_ACTION_CONFIG: _NO_RELOAD,
        TRANSACTION_BOUNDARY_CONFIG: _NO_TRANSACTIONS,
        TRANSACTION_BOUNDARY_INTERVAL_CONFIG: _NO_TRANSACTIONS,
    }
)


NULL_VALUE_MESSAGE: Final = "a config value may not be null"
SINK_TOPICS_MISSING_MESSAGE: Final = (
    f"a sink connector needs {TOPICS_CONFIG} or {TOPICS_REGEX_CONFIG}: the comma-separated names of "
    "the topics it reads, or a Python regular expression that their whole names match; neither is set"
)
SINK_TOPICS_BOTH_MESSAGE: Final = (
    f"{TOPICS_CONFIG} and {TOPICS_REGEX_CONFIG} are both set; a sink connector reads either the listed "
    "topics or those the expression matches, so keep one of them"
)


@dataclass(frozen=True)
class ConfigInfo:
    """A key's definition (None when the value names no defined key) and its validated value."""

    definition: ConfigKey | None
    value: ConfigValue


@dataclass(frozen=True)
class ConfigInfos:
    """What checking a connector config found, key by key (Kafka's ConfigInfos)."""

    plugin_class_name: str
    error_count: int
    groups: list[str]
    configs: list[ConfigInfo]

    def errors(self) -> dict[str, list[str]]:
        """Field → error messages, for fields that have errors."""
        found: dict[str, list[str]] = {}
        for info in self.configs:
            if info.value.errors:
                found.setdefault(info.value.name, []).extend(info.value.errors)
        return found


def framework_config_def(plugin_type: PluginType) -> ConfigDef:
    return source_config_def() if plugin_type is PluginType.SOURCE else sink_config_def()


def connector_config_def(desc: PluginDesc) -> ConfigDef:
    """The framework's keys for the plugin's type, then the plugin's own (a plugin key that repeats a
    framework key is shown once, with the framework's definition)."""
    return framework_config_def(desc.type).merge(desc.new_instance().config())


def _merge_value(into: ConfigValue, other: ConfigValue) -> None:
    if into.value is None:
        into.value = other.value
    for message in other.errors:
        if message not in into.errors:
            into.add_error(message)
    if other.recommended_values:
        into.recommended_values = list(other.recommended_values)
    into.visible = into.visible and other.visible


def _add_error(values: dict[str, ConfigValue], name: str, raw: Any, message: str) -> None:
    value = values.get(name)
    if value is None:
        value = values[name] = ConfigValue(name, raw)
    if message not in value.errors:
        value.add_error(message)


def _is_blank(value: str | None) -> bool:
    return value is None or not value.strip()


def _without_empty_fallbacks(props: Mapping[str, str]) -> dict[str, str]:
    """``props`` less the empty values of WORKER_FALLBACK_KEYS, which mean "the worker's value" and
    so are checked as unset (an empty heartbeat topic or restart pause is no value of its own)."""
    return {k: v for k, v in props.items() if k not in WORKER_FALLBACK_KEYS or java_trim(v)}


def _refuse_not_supported(definition: ConfigDef, values: dict[str, ConfigValue]) -> None:
    """A key whose feature Sluiceway lacks (``NOT_SUPPORTED_YET``) may only keep its default."""
    for name, missing in NOT_SUPPORTED_YET.items():
        key = definition.keys().get(name)
        value = values.get(name)
        if key is None or value is None or value.errors:
            continue
        given, default = value.value, key.default
        if isinstance(given, str) and isinstance(default, str):
            # Case-insensitive keys (transaction.boundary) accept the default in any case.
            given, default = given.lower(), default.lower()
        if given == default:
            continue
        shown = key.default_as_string()
        keep = "unset" if shown is None else "empty" if shown == "" else f"at {shown}"
        value.add_error(f"not supported yet: {missing}; leave {name} {keep}")


def _validate_sink(props: Mapping[str, str], values: dict[str, ConfigValue]) -> None:
    """Sink rules (Kafka's SinkConnectorConfig.validate): topics or topics.regex, exactly one of them.
    Kafka attaches the error to both keys; here it is one error, on topics, so that a validation
    table shows it once and the count of errors is that of the problems. A sink may not read its own
    dead-letter topic either: the record it failed on would come back to it for ever."""
    topics_raw = props.get(TOPICS_CONFIG)
    regex_raw = props.get(TOPICS_REGEX_CONFIG)
    has_topics = not _is_blank(topics_raw)
    has_regex = not _is_blank(regex_raw)

    if has_topics and has_regex:
        _add_error(values, TOPICS_CONFIG, topics_raw, SINK_TOPICS_BOTH_MESSAGE)
    if not has_topics and not has_regex:
        _add_error(values, TOPICS_CONFIG, topics_raw, SINK_TOPICS_MISSING_MESSAGE)
    dlq = java_trim(props.get(DLQ_TOPIC_NAME_CONFIG) or "")
    if not dlq:
        return
    listed = [java_trim(t) for t in (topics_raw or "").split(",")]
    matched = False
    if has_regex and not has_topics:
        try:
            matched = re.fullmatch(java_trim(regex_raw or ""), dlq) is not None
        except re.error:
            matched = False  # the regex's own error is reported on topics.regex
    if dlq in listed or matched:
        where = TOPICS_CONFIG if dlq in listed else TOPICS_REGEX_CONFIG
        _add_error(
            values,
            DLQ_TOPIC_NAME_CONFIG,
            props.get(DLQ_TOPIC_NAME_CONFIG),
            f"the dead-letter topic {dlq} is one this connector reads ({where}); a sink may not read the "
            "records it failed on again. Name another topic",
        )


def _name_installed(registry: PluginRegistry, values: dict[str, ConfigValue]) -> None:
    """Ends the errors of an unset or empty connector.class with the plugins it could name."""
    value = values.get(CONNECTOR_CLASS_CONFIG)
    if value is None:
        return
    installed = ", ".join(registry.short_names()) or "none"
    value.errors = [f"{error.rstrip('.')}. Installed: {installed}" for error in value.errors]


def _validate_source(values: dict[str, ConfigValue]) -> None:
    support = values.get(EXACTLY_ONCE_SUPPORT_CONFIG)
    if (
        support is not None
        and not support.errors
        and isinstance(support.value, str)
        and support.value.lower() == EXACTLY_ONCE_REQUIRED
    ):
        # Source pipelines deliver at least once (idempotent producer, offsets committed after the
        # data), so "required" cannot be met; Kafka refuses it the same way on a worker without
        # exactly-once source support.
        support.add_error(
            "Sluiceway delivers source records at least once and cannot promise exactly-once delivery; "
            f"set {EXACTLY_ONCE_SUPPORT_CONFIG} to {EXACTLY_ONCE_REQUESTED}"
        )


def _apply_policy(
    policy: WorkerPolicy,
    props: Mapping[str, str],
    plugin_type: PluginType | None,
    values: dict[str, ConfigValue],
) -> None:
    """The worker's rules (WorkerPolicy) that need no plugin: no internal topic as a sink's topic,
    the connector's offsets topic or its heartbeat topic, no topics.regex that matches one, and
    only the client overrides connector.client.config.override.policy allows."""
    topic_keys = [OFFSETS_TOPIC_CONFIG, HEARTBEAT_RECORDS_TOPIC_CONFIG]
    if plugin_type is not PluginType.SOURCE:
        topic_keys.append(TOPICS_CONFIG)
    for key in topic_keys:
        raw = props.get(key)
        for topic in (raw or "").split(",") if key == TOPICS_CONFIG else [raw or ""]:
            problem = policy.internal_topic_problem(topic) if topic.strip() else None
            if problem is not None:
                _add_error(values, key, raw, problem)
    regex_raw = props.get(TOPICS_REGEX_CONFIG)
    if plugin_type is not PluginType.SOURCE and not _is_blank(regex_raw):
        assert regex_raw is not None
        try:
            matched = policy.internal_topics_matching(re.compile(regex_raw.strip()))
        except re.error:
            matched = []  # the key's own validation reports the bad pattern
        if matched:
            _add_error(
                values,
                TOPICS_REGEX_CONFIG,
                regex_raw,
                f"the pattern matches internal topics ({', '.join(matched)}), which connectors may not read",
            )
    for key, raw_value in props.items():
        problem = policy.override_problem(key)
        if problem is not None:
            _add_error(values, key, raw_value, problem)


def _describe_failure(desc: PluginDesc, what: str, error: BaseException) -> str:
    detail = str(error).strip()
    return f"{desc.class_name}.{what}() failed: {type(error).__name__}" + (f": {detail}" if detail else "")


def validate_connector_config(
    registry: PluginRegistry,
    config: Mapping[str, str],
    plugin: str | None = None,
    *,
    policy: WorkerPolicy | None = None,
) -> ConfigInfos:
    """Validates ``config`` for the plugin named by ``plugin`` or else by its ``connector.class``.

    ``policy`` is the worker's (default: that of a worker that sets none of its keys). With its
    ``topic_creation`` on, a source connector's ``topic.creation.*`` keys are validated too
    (KIP-158); on any worker, a source connector's ``topic.creation*`` keys that no group reads are
    refused (``unread_topic_creation_keys``). The policy's rules on internal topics, client
    overrides and local paths (keys the plugin defines with a ``path_kind``) add errors on the keys
    they refuse.
    """
    policy = policy or WorkerPolicy()
    raw: Mapping[str, str | None] = config
    props = {k: v for k, v in raw.items() if v is not None}
    null_keys = [k for k, v in raw.items() if v is None]
    requested = plugin.strip() if plugin is not None and plugin.strip() else None
    included = props.get(CONNECTOR_CLASS_CONFIG)
    if requested is not None and _is_blank(included):
        # Validating against a named plugin: the config need not repeat it.
        props[CONNECTOR_CLASS_CONFIG] = requested
    target = requested if requested is not None else included

    desc: PluginDesc | None = None
    resolve_error: str | None = None
    if not _is_blank(target):
        assert target is not None
        try:
            desc = registry.resolve(target)
        except PluginNotFoundError as e:
            resolve_error = str(e)
    plugin_class_name = desc.class_name if desc is not None else (target or "").strip()

    if desc is None:
        # Without a plugin only the keys common to every connector can be checked.
        definition = common_config_def()
        values = {v.name: v for v in definition.validate(_without_empty_fallbacks(props))}
        _refuse_not_supported(definition, values)
        _apply_policy(policy, props, None, values)
        if resolve_error is not None:
            _add_error(values, CONNECTOR_CLASS_CONFIG, target, resolve_error)
        elif _is_blank(target):
            _name_installed(registry, values)
        _check_chain(registry, props, values)
        return _result(plugin_class_name, definition, values, null_keys)

    definition = framework_config_def(desc.type)
    if desc.type is PluginType.SOURCE and policy.topic_creation and uses_topic_creation(props):
        definition = definition.merge(topic_creation_config_def(props))
    values = {v.name: v for v in definition.validate(_without_empty_fallbacks(props))}
    _refuse_not_supported(definition, values)
    if desc.type is PluginType.SOURCE:
        # KIP-158's keys are a source connector's; on a sink every topic.creation* key is an
        # unknown key like any other (as in Kafka), so nothing there suggests a topic is created.
        for key, problem in unread_topic_creation_keys(props).items():
            _add_error(values, key, props[key], problem)

    if requested is not None and not _is_blank(included):
        assert included is not None
        try:
            same = registry.resolve(included).class_name == desc.class_name
        except PluginNotFoundError:
            same = False
        if not same:
            _add_error(
                values,
                CONNECTOR_CLASS_CONFIG,
                included,
                f"the config names plugin {included.strip()}, but the request is for {requested}",
            )

    if desc.type is PluginType.SINK:
        _validate_sink(props, values)
    else:
        _validate_source(values)
    _apply_policy(policy, props, desc.type, values)

    connector = None
    try:
        connector = desc.new_instance()
        definition = definition.merge(connector.config())
    except Exception as e:
        _add_error(
            values,
            CONNECTOR_CLASS_CONFIG,
            props.get(CONNECTOR_CLASS_CONFIG),
            _describe_failure(desc, "config", e),
        )
    if connector is not None:
        try:
            plugin_values = connector.validate(props)
        except Exception as e:
            _add_error(
                values,
                CONNECTOR_CLASS_CONFIG,
                props.get(CONNECTOR_CLASS_CONFIG),
                _describe_failure(desc, "validate", e),
            )
        else:
            for value in plugin_values:
                existing = values.get(value.name)
                if existing is None:
                    values[value.name] = value
                else:
                    _merge_value(existing, value)
    for key, problem in path_errors(definition, (props,), policy).items():
        _add_error(values, key, props.get(key), problem)
    _check_chain(registry, props, values)
    return _result(plugin_class_name, definition, values, null_keys)


def _check_chain(registry: PluginRegistry, props: Mapping[str, str], values: dict[str, ConfigValue]) -> None:
    """Errors on the keys of the transform chain (``transform_config``)."""
    for problem in chain_problems(props, registry.transforms):
        name = problem.name or TRANSFORMS_CONFIG
        _add_error(values, name, props.get(name), problem.detail)


def _result(
    plugin_class_name: str, definition: ConfigDef, values: dict[str, ConfigValue], null_keys: list[str]
) -> ConfigInfos:
    for null_key in null_keys:
        _add_error(values, null_key, None, NULL_VALUE_MESSAGE)
    configs: list[ConfigInfo] = []
    for name, key in definition.keys().items():
        value = values.pop(name, None)
        configs.append(ConfigInfo(key, value if value is not None else ConfigValue(name)))
    # Values of keys outside the definition (e.g. a null given for an unknown key) come last.
    configs.extend(ConfigInfo(None, value) for value in values.values())
    return ConfigInfos(
        plugin_class_name=plugin_class_name,
        error_count=sum(len(info.value.errors) for info in configs),
        groups=definition.groups(),
        configs=configs,
    )


def password_keys(registry: PluginRegistry, config: Mapping[str, str], plugin: str | None = None) -> set[str]:
    """Keys of ``config`` whose values are secrets (see ``secret_keys``), with the definition of the
    plugin named by ``plugin`` or the config's ``connector.class``. Instantiates the plugin: the
    control plane calls ``secret_keys`` with a cached definition instead."""
    target = plugin if plugin is not None and plugin.strip() else config.get(CONNECTOR_CLASS_CONFIG)
    definition: ConfigDef | None = None
    if target is not None and target.strip():
        try:
            definition = connector_config_def(registry.resolve(target))
        except Exception:
            definition = None
    return secret_keys(config, definition)


def secret_keys(config: Mapping[str, str], definition: ConfigDef | None) -> set[str]:
    """Keys whose values are secrets: those typed PASSWORD in the plugin's combined ``definition``
    (the common keys' definition when the plugin is unknown) and every key of ``config`` that
    ``looks_secret`` (a Kafka client password behind a client override prefix, a plugin's
    ``*.password`` not typed PASSWORD, ...). The API layer masks these."""
    secret = {key for key in config if looks_secret(key)}
    if definition is None:
        definition = common_config_def()
    secret.update(name for name, key in definition.keys().items() if key.type is ConfigType.PASSWORD)
    return secret
