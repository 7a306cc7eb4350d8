"""KIP-158's topic creation keys of a source connector: `topic.creation.groups` and, for the
`default` group and each listed group, `topic.creation.{group}.*`. Sluiceway validates them and
creates no topics yet."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from sluiceway.connect.config import (
    NO_DEFAULT,
    ConfigDef,
    ConfigException,
    ConfigType,
    Importance,
    Lambda,
    ListOf,
    Nullable,
    RegexValidator,
    Validator,
    Width,
    parse_type,
)

__all__ = [
    "DEFAULT_TOPIC_CREATION_GROUP",
    "PARTITIONS_VALIDATOR",
    "REPLICATION_FACTOR_VALIDATOR",
    "TOPIC_CREATION_GROUP",
    "TOPIC_CREATION_GROUPS_CONFIG",
    "TOPIC_CREATION_PREFIX",
    "topic_creation_config_def",
    "uses_topic_creation",
]

TOPIC_CREATION_GROUP: Final = "Topic Creation"
TOPIC_CREATION_PREFIX: Final = "topic.creation."
TOPIC_CREATION_GROUPS_CONFIG: Final = "topic.creation.groups"
DEFAULT_TOPIC_CREATION_GROUP: Final = "default"

# Keys of a topic creation group (KIP-158): topic.creation.{group}.{key}.
INCLUDE_REGEX_CONFIG: Final = "include"
EXCLUDE_REGEX_CONFIG: Final = "exclude"
REPLICATION_FACTOR_CONFIG: Final = "replication.factor"
PARTITIONS_CONFIG: Final = "partitions"


def _check_replication_factor(name: str, value: Any) -> None:
    if value != -1 and value < 1:
        raise ConfigException(
            name,
            value,
            "expected -1 (the broker's default) or a count of 1 or more, no higher than the number of "
            "brokers",
        )


def _check_partitions(name: str, value: Any) -> None:
    if value != -1 and value < 1:
        raise ConfigException(name, value, "expected -1 (the broker's default) or a count of 1 or more")


REPLICATION_FACTOR_VALIDATOR: Final = Lambda(
    _check_replication_factor, "-1 (broker default), or 1 up to the number of brokers"
)
PARTITIONS_VALIDATOR: Final = Lambda(_check_partitions, "-1 (broker default), or 1 and up")


_INCLUDE_DOC = (
    "Regular expressions, comma-separated: topics of this source connector whose name matches one "
    "would be created with this group's settings. Not acted on yet: Sluiceway creates no topics for "
    "source connectors."
)
_EXCLUDE_DOC = (
    "Regular expressions, comma-separated: a topic whose name matches one is left out of this group "
    "even when an include pattern matches it too. Not acted on yet: Sluiceway creates no topics for "
    "source connectors."
)
_REPLICATION_FACTOR_DOC = (
    "Replication factor of the topics this group would create: -1 for the broker's default, else "
    "from 1 up to the number of brokers. Required for the default group; another group that leaves "
    "it unset takes the default group's. Not acted on yet: Sluiceway creates no topics for source "
    "connectors."
)
_PARTITIONS_DOC = (
    "Partition count of the topics this group would create: -1 for the broker's default, else 1 or "
    "more. Required for the default group; another group that leaves it unset takes the default "
    "group's. Not acted on yet: Sluiceway creates no topics for source connectors."
)


def uses_topic_creation(props: Mapping[str, str]) -> bool:
    """Whether a source config sets any ``topic.creation.*`` key (KIP-158's opt-in); only then are
    the topic creation keys validated."""
    return any(key.startswith(TOPIC_CREATION_PREFIX) for key in props)


def _parsed_or_none(name: str, props: Mapping[str, str], type_: ConfigType, check: Validator | None) -> Any:
    """The valid parsed value of ``name``, or None when it is unset or invalid (reported elsewhere)."""
    raw = props.get(name)
    if raw is None:
        return None
    try:
        value = parse_type(name, raw, type_)
        if check is not None:
            check(name, value)
    except ConfigException:
        return None
    return value


def topic_creation_config_def(props: Mapping[str, str]) -> ConfigDef:
    """KIP-158 keys of the default group and of each group listed in ``topic.creation.groups``.

    The default group must set its replication factor and partitions. Another group may leave them
    unset and take the default group's, so here they are optional with the default group's valid
    values as their defaults.
    """
    prefix = f"{TOPIC_CREATION_PREFIX}{DEFAULT_TOPIC_CREATION_GROUP}."
    default_group = f"{TOPIC_CREATION_GROUP}: {DEFAULT_TOPIC_CREATION_GROUP}"
    definition = (
        ConfigDef()
        .define(
            prefix + REPLICATION_FACTOR_CONFIG,
            ConfigType.SHORT,
            NO_DEFAULT,
            REPLICATION_FACTOR_VALIDATOR,
            Importance.LOW,
            _REPLICATION_FACTOR_DOC,
            default_group,
            1,
            Width.LONG,
            f"Replication Factor for Topics in {DEFAULT_TOPIC_CREATION_GROUP}",
        )
        .define(
            prefix + PARTITIONS_CONFIG,
            ConfigType.INT,
            NO_DEFAULT,
            PARTITIONS_VALIDATOR,
            Importance.LOW,
            _PARTITIONS_DOC,
            default_group,
            2,
            Width.LONG,
            f"Partition Count for Topics in {DEFAULT_TOPIC_CREATION_GROUP}",
        )
    )
    # Other groups inherit the default group's values, when those are valid.
    default_rf = _parsed_or_none(
        prefix + REPLICATION_FACTOR_CONFIG, props, ConfigType.SHORT, REPLICATION_FACTOR_VALIDATOR
    )
    default_partitions = _parsed_or_none(
        prefix + PARTITIONS_CONFIG, props, ConfigType.INT, PARTITIONS_VALIDATOR
    )
    groups = _parsed_or_none(TOPIC_CREATION_GROUPS_CONFIG, props, ConfigType.LIST, None) or []
    for group in dict.fromkeys(groups):
        if not group or group == DEFAULT_TOPIC_CREATION_GROUP:
            # 'default' is always a group (as in Kafka); listing it adds nothing.
            continue
        group_prefix = f"{TOPIC_CREATION_PREFIX}{group}."
        display_group = f"{TOPIC_CREATION_GROUP}: {group}"
        definition = (
            definition.define(
                group_prefix + INCLUDE_REGEX_CONFIG,
                ConfigType.LIST,
                [],
                ListOf(RegexValidator()),
                Importance.LOW,
                _INCLUDE_DOC,
                display_group,
                1,
                Width.LONG,
                f"Inclusion Topic Pattern for {group}",
            )
            .define(
                group_prefix + EXCLUDE_REGEX_CONFIG,
                ConfigType.LIST,
                [],
                ListOf(RegexValidator()),
                Importance.LOW,
                _EXCLUDE_DOC,
                display_group,
                2,
                Width.LONG,
                f"Exclusion Topic Pattern for {group}",
            )
            .define(
                group_prefix + REPLICATION_FACTOR_CONFIG,
                ConfigType.SHORT,
                default_rf,
                Nullable(REPLICATION_FACTOR_VALIDATOR),
                Importance.LOW,
                _REPLICATION_FACTOR_DOC,
                display_group,
                3,
                Width.LONG,
                f"Replication Factor for Topics in {group}",
            )
            .define(
                group_prefix + PARTITIONS_CONFIG,
                ConfigType.INT,
                default_partitions,
                Nullable(PARTITIONS_VALIDATOR),
                Importance.LOW,
                _PARTITIONS_DOC,
                display_group,
                4,
                Width.LONG,
                f"Partition Count for Topics in {group}",
            )
        )
    return definition
