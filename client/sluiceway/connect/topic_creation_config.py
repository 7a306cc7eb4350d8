"""KIP-158 topic creation for source connectors: the `topic.creation.*` keys and what they mean at
run time.

A source connector opts in by setting any `topic.creation.*` key; the opt-in has an effect only
while the worker's `topic.creation.enable` is true (the default). The connector's topics are then
sorted into groups: those named in `topic.creation.groups`, tried in that order, and `default`,
which takes every topic no listed group takes. A listed group takes a topic whose whole name
matches one of its `include` patterns and none of its `exclude` patterns. Before a task first
writes to a topic, the executor checks that the topic exists and, when it does not, creates it
with its group's partition count and replication factor, handing every other
`topic.creation.{group}.{key}` to the broker as a topic-level setting
(`executor/sluiceway_executor/topic_creation.py`). A topic that already exists is never changed.

`topic_creation_config_def` validates these keys; `topic_creation_groups` and `group_for_topic`
are the model the executors run with. `unread_topic_creation_keys` finds the `topic.creation*` keys
no group reads, among them those of the rule syntax an early draft of KIP-158 had (a
`topic.creation` list of rules, each with a `regex`): Kafka ignores such keys, validation refuses
them.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Final

from sluiceway.connect.config import (
    NO_DEFAULT,
    Composite,
    ConfigDef,
    ConfigException,
    ConfigType,
    Importance,
    Lambda,
    ListOf,
    NonNull,
    Nullable,
    RegexValidator,
    Validator,
    Width,
    parse_type,
)

__all__ = [
    "DEFAULT_TOPIC_CREATION_GROUP",
    "GROUPS_DOC",
    "GROUPS_VALIDATOR",
    "PARTITIONS_VALIDATOR",
    "REPLICATION_FACTOR_VALIDATOR",
    "TOPIC_CREATION_ENABLE_CONFIG",
    "TOPIC_CREATION_GROUP",
    "TOPIC_CREATION_GROUPS_CONFIG",
    "TOPIC_CREATION_PREFIX",
    "TopicCreationGroup",
    "group_for_topic",
    "topic_creation_config_def",
    "topic_creation_groups",
    "unread_topic_creation_keys",
    "uses_topic_creation",
]

TOPIC_CREATION_GROUP: Final = "Topic Creation"
TOPIC_CREATION_PREFIX: Final = "topic.creation."
TOPIC_CREATION_GROUPS_CONFIG: Final = "topic.creation.groups"
# The worker's switch (default true): false turns KIP-158 off for every connector of the worker.
TOPIC_CREATION_ENABLE_CONFIG: Final = "topic.creation.enable"
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
    "Regular expressions (Python syntax), comma-separated. A topic this source connector writes to "
    "belongs to this group when its whole name matches one of them and no exclude pattern; a group "
    "without include patterns takes no topic. Groups are tried in the order of "
    "topic.creation.groups and the first that takes a topic decides how it is created."
)
_EXCLUDE_DOC = (
    "Regular expressions (Python syntax), comma-separated. A topic whose whole name matches one of "
    "them stays out of this group even when an include pattern takes it, and goes on to the next "
    "listed group, or in the end to the default group."
)
_REPLICATION_FACTOR_DOC = (
    "Replication factor the executor gives a topic of this group when it creates it: -1 for the "
    "broker's default, else from 1 up to the number of brokers. Required for the default group; "
    "another group that leaves it unset takes the default group's. Existing topics are left as they "
    "are."
)
_PARTITIONS_DOC = (
    "Partition count the executor gives a topic of this group when it creates it: -1 for the "
    "broker's default, else 1 or more. Required for the default group; another group that leaves it "
    "unset takes the default group's. Existing topics are left as they are."
)
GROUPS_DOC: Final = (
    "Names of topic creation groups besides 'default', in the order they are tried: each one is set "
    "up under topic.creation.<group>.* and takes the topics its include patterns match. A topic "
    "that no listed group takes belongs to the default group. Naming 'default' here adds nothing; "
    "naming a group twice is an error. Only read when the connector sets topic.creation.* keys and "
    "the worker's topic.creation.enable is true."
)


def _check_unique_groups(name: str, value: Any) -> None:
    repeated = [group for group, count in Counter(value).items() if count > 1]
    if repeated:
        names = ", ".join(repeated)
        raise ConfigException(name, value, f"each group may be listed once; listed again: {names}")


GROUPS_VALIDATOR: Final = Composite.of(
    NonNull(), Lambda(_check_unique_groups, "group names, each listed at most once")
)


def uses_topic_creation(props: Mapping[str, str]) -> bool:
    """Whether a source config sets any ``topic.creation.*`` key (KIP-158's opt-in); only then are
    the topic creation keys validated and, on a worker with ``topic.creation.enable``, acted on."""
    return any(key.startswith(TOPIC_CREATION_PREFIX) for key in props)


# The rule syntax of an early draft of KIP-158, dropped before Kafka shipped it: `topic.creation`
# listed rule names and `topic.creation.{rule}.regex` chose a rule's topics.
DRAFT_RULES_CONFIG: Final = "topic.creation"
DRAFT_REGEX_CONFIG: Final = "regex"

_DRAFT_RULES_PROBLEM: Final = (
    "this is the rule list of a draft of KIP-158, which Kafka never shipped and nothing reads; list "
    f"groups in {TOPIC_CREATION_GROUPS_CONFIG} and give each one include patterns "
    "(topic.creation.<group>.include)"
)
_ENABLE_PROBLEM: Final = (
    f"{TOPIC_CREATION_ENABLE_CONFIG} is a worker setting and does nothing in a connector config; a "
    "source connector uses topic creation by setting topic.creation.default.replication.factor and "
    "topic.creation.default.partitions"
)


def _owning_group(rest: str, groups: Sequence[str]) -> tuple[str, str] | None:
    """The group (the longest name, as group names may hold dots) and setting that
    ``topic.creation.{rest}`` belongs to, or None when it belongs to none of ``groups``."""
    owners = [g for g in groups if rest.startswith(f"{g}.") and len(rest) > len(g) + 1]
    if not owners:
        return None
    group = max(owners, key=len)
    return group, rest[len(group) + 1 :]


def unread_topic_creation_keys(props: Mapping[str, str]) -> dict[str, str]:
    """Key → why it is refused, for each ``topic.creation*`` key of a source config that no topic
    creation group reads: ``topic.creation`` itself and ``topic.creation.{rule}.regex`` (the draft's
    rule syntax), ``topic.creation.enable`` (a worker key), ``topic.creation.{group}.{setting}`` for
    a group that is neither ``default`` nor listed in ``topic.creation.groups``, and
    ``topic.creation.{word}`` without a setting. Kafka ignores all of these; a connector that sets
    them expects topics to be created in a way nothing will do, so validation refuses them (whatever
    the worker's ``topic.creation.enable``, since they are wrong on every worker)."""
    raw_groups = props.get(TOPIC_CREATION_GROUPS_CONFIG)
    listed = parse_type(TOPIC_CREATION_GROUPS_CONFIG, raw_groups, ConfigType.LIST) if raw_groups else []
    groups = [DEFAULT_TOPIC_CREATION_GROUP, *(g for g in listed if g)]
    problems: dict[str, str] = {}
    for key in props:
        if key == DRAFT_RULES_CONFIG:
            problems[key] = _DRAFT_RULES_PROBLEM
            continue
        if not key.startswith(TOPIC_CREATION_PREFIX) or key == TOPIC_CREATION_GROUPS_CONFIG:
            continue
        if key == TOPIC_CREATION_ENABLE_CONFIG:
            problems[key] = _ENABLE_PROBLEM
            continue
        rest = key[len(TOPIC_CREATION_PREFIX) :]
        owner = _owning_group(rest, groups)
        if owner is None:
            rule, dot, setting = rest.partition(".")
            if not dot or not setting:
                problems[key] = (
                    f"not a topic creation key: expected {TOPIC_CREATION_GROUPS_CONFIG} or "
                    "topic.creation.<group>.<setting>"
                )
            elif setting == DRAFT_REGEX_CONFIG:
                problems[key] = (
                    f"a rule regex of a draft of KIP-158, which Kafka never shipped and nothing reads; "
                    f"list {rule!r} in {TOPIC_CREATION_GROUPS_CONFIG} and give it include patterns "
                    f"(topic.creation.{rule}.include)"
                )
            else:
                problems[key] = (
                    f"group {rule!r} is not listed in {TOPIC_CREATION_GROUPS_CONFIG}, so nothing reads "
                    f"this key; list the group there, or set topic.creation.default.* instead"
                )
        elif owner[1] == DRAFT_REGEX_CONFIG:
            problems[key] = (
                f"a rule regex of a draft of KIP-158, which Kafka never shipped and nothing reads; a "
                f"group takes its topics by topic.creation.{owner[0]}.include and .exclude patterns"
            )
    return problems


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


# The keys of a group that shape the group itself; every other topic.creation.{group}.{key} is a
# topic-level setting for the topics the group creates.
_GROUP_KEYS: Final = frozenset(
    {INCLUDE_REGEX_CONFIG, EXCLUDE_REGEX_CONFIG, REPLICATION_FACTOR_CONFIG, PARTITIONS_CONFIG}
)


@dataclass(frozen=True)
class TopicCreationGroup:
    """How the topics of one group are created: ``partitions`` and ``replication_factor`` (-1: the
    broker decides) and the topic-level ``configs`` handed to the broker with them.

    ``include`` and ``exclude`` are the group's patterns. The default group has none: it is the
    fallback and takes every topic (``matches`` is always true for it), so any include or exclude
    set for it is ignored.
    """

    name: str
    include: tuple[str, ...]
    exclude: tuple[str, ...]
    partitions: int
    replication_factor: int
    configs: Mapping[str, str] = field(default_factory=dict)
    _included: tuple[re.Pattern[str], ...] = field(init=False, repr=False, compare=False, default=())
    _excluded: tuple[re.Pattern[str], ...] = field(init=False, repr=False, compare=False, default=())

    def __post_init__(self) -> None:
        object.__setattr__(self, "configs", MappingProxyType(dict(self.configs)))
        # Each pattern on its own: a name matches a list when it matches one of its patterns whole
        # (Java's Matcher.matches() on the patterns joined with '|', without the flags or group
        # numbers of one pattern reaching into the next).
        object.__setattr__(self, "_included", tuple(re.compile(p) for p in self.include))
        object.__setattr__(self, "_excluded", tuple(re.compile(p) for p in self.exclude))

    @property
    def is_default(self) -> bool:
        return self.name == DEFAULT_TOPIC_CREATION_GROUP

    def matches(self, topic: str) -> bool:
        """Whether this group takes ``topic``: the default group takes any; another group one whose
        whole name matches an include pattern and no exclude pattern."""
        if self.is_default:
            return True
        if not any(p.fullmatch(topic) for p in self._included):
            return False
        return not any(p.fullmatch(topic) for p in self._excluded)

    def describe(self) -> str:
        """The settings a topic of this group is created with, for messages and logs."""
        shown = [f"partitions={self.partitions}", f"replication.factor={self.replication_factor}"]
        shown += [f"{key}={value}" for key, value in sorted(self.configs.items())]
        return ", ".join(shown)


def topic_creation_groups(props: Mapping[str, str]) -> tuple[TopicCreationGroup, ...]:
    """The topic creation groups of a source connector's config, in the order they are tried: those
    of ``topic.creation.groups`` as listed (a listed ``default`` skipped), then the default group.

    Raises ConfigException when the keys do not validate; the control plane refuses such a config
    when it is created, so an executor only meets this with a config written some other way.
    """
    raw_groups = props.get(TOPIC_CREATION_GROUPS_CONFIG)
    listed: list[str] = []
    if raw_groups is not None:
        listed = parse_type(TOPIC_CREATION_GROUPS_CONFIG, raw_groups, ConfigType.LIST)
        GROUPS_VALIDATOR(TOPIC_CREATION_GROUPS_CONFIG, listed)
    values = topic_creation_config_def(props).parse(props)
    names = [*dict.fromkeys(n for n in listed if n and n != DEFAULT_TOPIC_CREATION_GROUP)]
    names.append(DEFAULT_TOPIC_CREATION_GROUP)
    groups: list[TopicCreationGroup] = []
    for name in names:
        prefix = f"{TOPIC_CREATION_PREFIX}{name}."
        patterns = name != DEFAULT_TOPIC_CREATION_GROUP
        groups.append(
            TopicCreationGroup(
                name=name,
                include=tuple(values[prefix + INCLUDE_REGEX_CONFIG]) if patterns else (),
                exclude=tuple(values[prefix + EXCLUDE_REGEX_CONFIG]) if patterns else (),
                partitions=int(values[prefix + PARTITIONS_CONFIG]),
                replication_factor=int(values[prefix + REPLICATION_FACTOR_CONFIG]),
                configs=_topic_configs(props, name, names),
            )
        )
    return tuple(groups)


def _topic_configs(props: Mapping[str, str], group: str, groups: Sequence[str]) -> dict[str, str]:
    """The topic-level settings of ``group``: its ``topic.creation.{group}.{key}`` keys other than
    the group's own. Keys under a longer group name that starts the same way (``a.b`` beside ``a``)
    belong to that group, not to this one."""
    prefix = f"{TOPIC_CREATION_PREFIX}{group}."
    others = tuple(
        f"{TOPIC_CREATION_PREFIX}{other}."
        for other in groups
        if other != group and other.startswith(f"{group}.")
    )
    return {
        key[len(prefix) :]: value.strip()
        for key, value in props.items()
        if key.startswith(prefix)
        and not key.startswith(others)
        and key[len(prefix) :]
        and key[len(prefix) :] not in _GROUP_KEYS
    }


def group_for_topic(groups: Sequence[TopicCreationGroup], topic: str) -> TopicCreationGroup:
    """The group that decides how ``topic`` is created: the first of ``groups`` (as returned by
    ``topic_creation_groups``, the default group last) that takes it."""
    for group in groups:
        if group.matches(topic):
            return group
    raise ConfigException(None, message=f"no topic creation group takes topic {topic!r}")
