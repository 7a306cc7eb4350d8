"""The framework's own connector keys, with Kafka Connect's names, defaults and documentation
(ConnectorConfig, SourceConnectorConfig, SinkConnectorConfig, TopicCreationConfig)."""

from __future__ import annotations

from collections.abc import Mapping
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
    NonEmptyString,
    NonEmptyStringWithoutControlChars,
    NonNull,
    Nullable,
    Range,
    RegexValidator,
    UniqueItems,
    Validator,
    ValidString,
    Width,
    parse_type,
)

__all__ = [
    "CONNECTOR_CLASS_CONFIG",
    "DLQ_TOPIC_NAME_CONFIG",
    "HEARTBEAT_INTERVAL_MS_CONFIG",
    "HEARTBEAT_RECORDS_TOPIC_CONFIG",
    "NAME_CONFIG",
    "TASKS_MAX_CONFIG",
    "TOPICS_CONFIG",
    "TOPICS_REGEX_CONFIG",
    "TOPIC_CREATION_GROUPS_CONFIG",
    "TOPIC_CREATION_PREFIX",
    "common_config_def",
    "sink_config_def",
    "source_config_def",
    "topic_creation_config_def",
    "uses_topic_creation",
]

COMMON_GROUP: Final = "Common"
TRANSFORMS_GROUP: Final = "Transforms"
PREDICATES_GROUP: Final = "Predicates"
ERROR_GROUP: Final = "Error Handling"
TOPIC_CREATION_GROUP: Final = "Topic Creation"
EXACTLY_ONCE_SUPPORT_GROUP: Final = "Exactly Once Support"
OFFSETS_TOPIC_GROUP: Final = "offsets.topic"
HEARTBEAT_GROUP: Final = "Heartbeats"

NAME_CONFIG: Final = "name"
CONNECTOR_CLASS_CONFIG: Final = "connector.class"
TASKS_MAX_CONFIG: Final = "tasks.max"
KEY_CONVERTER_CLASS_CONFIG: Final = "key.converter"
VALUE_CONVERTER_CLASS_CONFIG: Final = "value.converter"
HEADER_CONVERTER_CLASS_CONFIG: Final = "header.converter"
TRANSFORMS_CONFIG: Final = "transforms"
PREDICATES_CONFIG: Final = "predicates"
CONFIG_RELOAD_ACTION_CONFIG: Final = "config.action.reload"
ERRORS_RETRY_TIMEOUT_CONFIG: Final = "errors.retry.timeout"
ERRORS_RETRY_MAX_DELAY_CONFIG: Final = "errors.retry.delay.max.ms"
ERRORS_TOLERANCE_CONFIG: Final = "errors.tolerance"
ERRORS_LOG_ENABLE_CONFIG: Final = "errors.log.enable"
ERRORS_LOG_INCLUDE_MESSAGES_CONFIG: Final = "errors.log.include.messages"

TOPIC_CREATION_PREFIX: Final = "topic.creation."
TOPIC_CREATION_GROUPS_CONFIG: Final = "topic.creation.groups"
DEFAULT_TOPIC_CREATION_GROUP: Final = "default"
EXACTLY_ONCE_SUPPORT_CONFIG: Final = "exactly.once.support"
TRANSACTION_BOUNDARY_CONFIG: Final = "transaction.boundary"
TRANSACTION_BOUNDARY_INTERVAL_CONFIG: Final = "transaction.boundary.interval.ms"
OFFSETS_TOPIC_CONFIG: Final = "offsets.storage.topic"
HEARTBEAT_INTERVAL_MS_CONFIG: Final = "heartbeat.interval.ms"
HEARTBEAT_RECORDS_TOPIC_CONFIG: Final = "heartbeat.records.topic"

TOPICS_CONFIG: Final = "topics"
TOPICS_REGEX_CONFIG: Final = "topics.regex"
DLQ_TOPIC_NAME_CONFIG: Final = "errors.deadletterqueue.topic.name"
DLQ_TOPIC_REPLICATION_FACTOR_CONFIG: Final = "errors.deadletterqueue.topic.replication.factor"
DLQ_CONTEXT_HEADERS_ENABLE_CONFIG: Final = "errors.deadletterqueue.context.headers.enable"

# Keys of a topic creation group (KIP-158): topic.creation.{group}.{key}.
INCLUDE_REGEX_CONFIG: Final = "include"
EXCLUDE_REGEX_CONFIG: Final = "exclude"
REPLICATION_FACTOR_CONFIG: Final = "replication.factor"
PARTITIONS_CONFIG: Final = "partitions"

EXACTLY_ONCE_REQUESTED: Final = "requested"
EXACTLY_ONCE_REQUIRED: Final = "required"


def _check_connector_name(name: str, value: Any) -> None:
    # Kafka's REST layer refuses '/' in names: it would break resource paths (connectors/{name}).
    if isinstance(value, str) and "/" in value:
        raise ConfigException(name, value, "Connector name may not contain '/'")


_NAME_VALIDATOR: Final = Composite.of(
    NonEmptyStringWithoutControlChars(), Lambda(_check_connector_name, "without '/'")
)

_NAME_DOC = "Globally unique name to use for this connector."
_CONNECTOR_CLASS_DOC = (
    "Name or alias of the class for this connector. Must be a subclass of "
    "sluiceway.connect.SourceConnector or sluiceway.connect.SinkConnector. If the connector is "
    "sluiceway_executor.connectors.filestream.FileStreamSinkConnector, you can either specify this full "
    'name, or use "FileStreamSink" or "FileStreamSinkConnector" to make the configuration a bit shorter'
)
_TASKS_MAX_DOC = "Maximum number of tasks to use for this connector."
_KEY_CONVERTER_DOC = (
    "Converter class used to convert between Kafka Connect format and the serialized form that is "
    "written to Kafka. This controls the format of the keys in messages written to or read from Kafka, "
    "and since this is independent of connectors it allows any connector to work with any serialization "
    "format. When unset, the worker's converter is used."
)
_VALUE_CONVERTER_DOC = (
    "Converter class used to convert between Kafka Connect format and the serialized form that is "
    "written to Kafka. This controls the format of the values in messages written to or read from "
    "Kafka, and since this is independent of connectors it allows any connector to work with any "
    "serialization format. When unset, the worker's converter is used."
)
_HEADER_CONVERTER_DOC = (
    "HeaderConverter class used to convert between Kafka Connect format and the serialized form that "
    "is written to Kafka. This controls the format of the header values in messages written to or read "
    "from Kafka. When unset, the worker's header converter is used."
)
_TRANSFORMS_DOC = "Aliases for the transformations to be applied to records."
_PREDICATES_DOC = "Aliases for the predicates used by transformations."
_CONFIG_RELOAD_ACTION_DOC = (
    "The action that Connect should take on the connector when changes in external configuration "
    "providers result in a change in the connector's configuration properties. A value of 'none' "
    "indicates that Connect will do nothing. A value of 'restart' indicates that Connect should "
    "restart/reload the connector with the updated configuration properties."
)
_ERRORS_RETRY_TIMEOUT_DOC = (
    "The maximum duration in milliseconds that a failed operation will be reattempted. The default is "
    "0, which means no retries will be attempted. Use -1 for infinite retries."
)
_ERRORS_RETRY_MAX_DELAY_DOC = (
    "The maximum duration in milliseconds between consecutive retry attempts. Jitter will be added to "
    "the delay once this limit is reached to prevent thundering herd issues."
)
_ERRORS_TOLERANCE_DOC = (
    "Behavior for tolerating errors during connector operation. 'none' is the default value and "
    "signals that any error will result in an immediate connector task failure; 'all' changes the "
    "behavior to skip over problematic records."
)
_ERRORS_LOG_ENABLE_DOC = (
    "If true, write each error and the details of the failed operation and problematic record to the "
    "Connect application log. This is 'false' by default, so that only errors that are not tolerated "
    "are reported."
)
_ERRORS_LOG_INCLUDE_MESSAGES_DOC = (
    "Whether to include in the log the Connect record that resulted in a failure. For sink records, the "
    "topic, partition, offset, and timestamp will be logged. For source records, the key and value (and "
    "their schemas), all headers, and the timestamp, Kafka topic, Kafka partition, source partition, and "
    "source offset will be logged. This is 'false' by default, which will prevent record keys, values, "
    "and headers from being written to log files."
)


def common_config_def() -> ConfigDef:
    """Keys every connector has (Kafka's ConnectorConfig)."""
    order = 0
    error_order = 0

    def nxt() -> int:
        nonlocal order
        order += 1
        return order

    def nxt_error() -> int:
        nonlocal error_order
        error_order += 1
        return error_order

    return (
        ConfigDef()
        .define(
            NAME_CONFIG,
            ConfigType.STRING,
            NO_DEFAULT,
            _NAME_VALIDATOR,
            Importance.HIGH,
            _NAME_DOC,
            COMMON_GROUP,
            nxt(),
            Width.MEDIUM,
            "Connector name",
        )
        .define(
            CONNECTOR_CLASS_CONFIG,
            ConfigType.STRING,
            NO_DEFAULT,
            NonEmptyString(),
            Importance.HIGH,
            _CONNECTOR_CLASS_DOC,
            COMMON_GROUP,
            nxt(),
            Width.LONG,
            "Connector class",
        )
        .define(
            TASKS_MAX_CONFIG,
            ConfigType.INT,
            1,
            Range.at_least(1),
            Importance.HIGH,
            _TASKS_MAX_DOC,
            COMMON_GROUP,
            nxt(),
            Width.SHORT,
            "Tasks max",
        )
        .define(
            KEY_CONVERTER_CLASS_CONFIG,
            ConfigType.CLASS,
            None,
            None,
            Importance.LOW,
            _KEY_CONVERTER_DOC,
            COMMON_GROUP,
            nxt(),
            Width.SHORT,
            "Key converter class",
        )
        .define(
            VALUE_CONVERTER_CLASS_CONFIG,
            ConfigType.CLASS,
            None,
            None,
            Importance.LOW,
            _VALUE_CONVERTER_DOC,
            COMMON_GROUP,
            nxt(),
            Width.SHORT,
            "Value converter class",
        )
        .define(
            HEADER_CONVERTER_CLASS_CONFIG,
            ConfigType.CLASS,
            None,
            None,
            Importance.LOW,
            _HEADER_CONVERTER_DOC,
            COMMON_GROUP,
            nxt(),
            Width.SHORT,
            "Header converter class",
        )
        .define(
            TRANSFORMS_CONFIG,
            ConfigType.LIST,
            [],
            Composite.of(NonNull(), UniqueItems("unique transformation aliases")),
            Importance.LOW,
            _TRANSFORMS_DOC,
            TRANSFORMS_GROUP,
            nxt(),
            Width.LONG,
            "Transforms",
        )
        .define(
            PREDICATES_CONFIG,
            ConfigType.LIST,
            [],
            Composite.of(NonNull(), UniqueItems("unique predicate aliases")),
            Importance.LOW,
            _PREDICATES_DOC,
            PREDICATES_GROUP,
            nxt(),
            Width.LONG,
            "Predicates",
        )
        .define(
            CONFIG_RELOAD_ACTION_CONFIG,
            ConfigType.STRING,
            "restart",
            ValidString.in_("none", "restart"),
            Importance.LOW,
            _CONFIG_RELOAD_ACTION_DOC,
            COMMON_GROUP,
            nxt(),
            Width.MEDIUM,
            "Reload Action",
        )
        .define(
            ERRORS_RETRY_TIMEOUT_CONFIG,
            ConfigType.LONG,
            0,
            None,
            Importance.MEDIUM,
            _ERRORS_RETRY_TIMEOUT_DOC,
            ERROR_GROUP,
            nxt_error(),
            Width.MEDIUM,
            "Retry Timeout for Errors",
        )
        .define(
            ERRORS_RETRY_MAX_DELAY_CONFIG,
            ConfigType.LONG,
            60000,
            None,
            Importance.MEDIUM,
            _ERRORS_RETRY_MAX_DELAY_DOC,
            ERROR_GROUP,
            nxt_error(),
            Width.MEDIUM,
            "Maximum Delay Between Retries for Errors",
        )
        .define(
            ERRORS_TOLERANCE_CONFIG,
            ConfigType.STRING,
            "none",
            ValidString.in_("none", "all"),
            Importance.MEDIUM,
            _ERRORS_TOLERANCE_DOC,
            ERROR_GROUP,
            nxt_error(),
            Width.SHORT,
            "Error Tolerance",
        )
        .define(
            ERRORS_LOG_ENABLE_CONFIG,
            ConfigType.BOOLEAN,
            False,
            None,
            Importance.MEDIUM,
            _ERRORS_LOG_ENABLE_DOC,
            ERROR_GROUP,
            nxt_error(),
            Width.SHORT,
            "Log Errors",
        )
        .define(
            ERRORS_LOG_INCLUDE_MESSAGES_CONFIG,
            ConfigType.BOOLEAN,
            False,
            None,
            Importance.MEDIUM,
            _ERRORS_LOG_INCLUDE_MESSAGES_DOC,
            ERROR_GROUP,
            nxt_error(),
            Width.SHORT,
            "Log Error Details",
        )
    )


_TOPIC_CREATION_GROUPS_DOC = "Groups of configurations for topics created by source connectors"
_EXACTLY_ONCE_SUPPORT_DOC = (
    'Permitted values are requested, required. If set to "required", forces a preflight check for the '
    "connector to ensure that it can provide exactly-once semantics with the given configuration. Some "
    "connectors may be capable of providing exactly-once semantics but not signal to Connect that they "
    "support this; in that case, documentation for the connector should be consulted carefully before "
    'creating it, and the value for this property should be set to "requested". Sluiceway delivers '
    'source records at least once, so "required" is refused.'
)
_TRANSACTION_BOUNDARY_DOC = (
    "Permitted values are: poll, interval, connector. If set to 'poll', a new producer transaction will "
    "be started and committed for every batch of records that each task from this connector provides to "
    "Connect. If set to 'connector', relies on connector-defined transaction boundaries; note that not "
    "all connectors are capable of defining their own transaction boundaries, and in that case, attempts "
    "to instantiate a connector with this value will fail. Finally, if set to 'interval', commits "
    "transactions only after a user-defined time interval has passed. Only used with exactly-once "
    "source support."
)
_TRANSACTION_BOUNDARY_INTERVAL_DOC = (
    "If 'transaction.boundary' is set to 'interval', determines the interval for producer transaction "
    "commits by connector tasks. If unset, defaults to the value of the worker-level "
    "'offset.flush.interval.ms' property. It has no effect if a different transaction.boundary is "
    "specified."
)
_OFFSETS_TOPIC_DOC = (
    "The name of a separate offsets topic to use for this connector. If empty or not specified, the "
    "worker's global offsets topic name will be used. If specified, the offsets topic will be created "
    "if it does not already exist on the Kafka cluster targeted by this connector."
)
_HEARTBEAT_INTERVAL_DOC = (
    "The interval in milliseconds after which heartbeat records are produced for this connector's tasks "
    "(KIP-910). 0 disables heartbeats. When unset, the worker's heartbeat.interval.ms applies. When set, "
    "it should be in the order of minutes to hours to avoid a lot of records being sent."
)
_HEARTBEAT_TOPIC_DOC = (
    "The topic heartbeat records of this connector are sent to (KIP-910). When unset, the worker's "
    "heartbeat.records.topic is used. The topic is created if it does not exist."
)


def source_config_def() -> ConfigDef:
    """Keys of every source connector (Kafka's SourceConnectorConfig, plus KIP-910's heartbeat keys)."""
    order = 0

    def nxt() -> int:
        nonlocal order
        order += 1
        return order

    source = (
        ConfigDef()
        .define(
            TOPIC_CREATION_GROUPS_CONFIG,
            ConfigType.LIST,
            [],
            Composite.of(NonNull(), UniqueItems("unique topic creation groups")),
            Importance.LOW,
            _TOPIC_CREATION_GROUPS_DOC,
            TOPIC_CREATION_GROUP,
            nxt(),
            Width.LONG,
            "Topic Creation Groups",
        )
        .define(
            EXACTLY_ONCE_SUPPORT_CONFIG,
            ConfigType.STRING,
            EXACTLY_ONCE_REQUESTED,
            ValidString.in_(EXACTLY_ONCE_REQUESTED, EXACTLY_ONCE_REQUIRED, case_insensitive=True),
            Importance.MEDIUM,
            _EXACTLY_ONCE_SUPPORT_DOC,
            EXACTLY_ONCE_SUPPORT_GROUP,
            nxt(),
            Width.SHORT,
            "Exactly once support",
        )
        .define(
            TRANSACTION_BOUNDARY_CONFIG,
            ConfigType.STRING,
            "poll",
            ValidString.in_("poll", "interval", "connector", case_insensitive=True),
            Importance.MEDIUM,
            _TRANSACTION_BOUNDARY_DOC,
            EXACTLY_ONCE_SUPPORT_GROUP,
            nxt(),
            Width.SHORT,
            "Transaction Boundary",
        )
        .define(
            TRANSACTION_BOUNDARY_INTERVAL_CONFIG,
            ConfigType.LONG,
            None,
            Nullable(Range.at_least(0)),
            Importance.LOW,
            _TRANSACTION_BOUNDARY_INTERVAL_DOC,
            EXACTLY_ONCE_SUPPORT_GROUP,
            nxt(),
            Width.SHORT,
            "Transaction boundary interval",
        )
        .define(
            OFFSETS_TOPIC_CONFIG,
            ConfigType.STRING,
            None,
            NonEmptyString(),
            Importance.LOW,
            _OFFSETS_TOPIC_DOC,
            OFFSETS_TOPIC_GROUP,
            1,
            Width.LONG,
            "Offsets topic",
        )
        .define(
            HEARTBEAT_INTERVAL_MS_CONFIG,
            ConfigType.LONG,
            None,
            Nullable(Range.at_least(0)),
            Importance.LOW,
            _HEARTBEAT_INTERVAL_DOC,
            HEARTBEAT_GROUP,
            1,
            Width.SHORT,
            "Heartbeat interval",
        )
        .define(
            HEARTBEAT_RECORDS_TOPIC_CONFIG,
            ConfigType.STRING,
            None,
            NonEmptyString(),
            Importance.LOW,
            _HEARTBEAT_TOPIC_DOC,
            HEARTBEAT_GROUP,
            2,
            Width.LONG,
            "Heartbeat records topic",
        )
    )
    return common_config_def().merge(source)


_TOPICS_DOC = "List of topics to consume, separated by commas"
_TOPICS_REGEX_DOC = (
    "Regular expression giving topics to consume. Under the hood, the regex is compiled to a Python "
    "re pattern and must match the whole topic name. Only one of topics or topics.regex should be "
    "specified."
)
_DLQ_TOPIC_NAME_DOC = (
    "The name of the topic to be used as the dead letter queue (DLQ) for messages that result in an "
    "error when processed by this sink connector, or its transformations or converters. The topic name "
    "is blank by default, which means that no messages are to be recorded in the DLQ."
)
_DLQ_REPLICATION_FACTOR_DOC = (
    "Replication factor used to create the dead letter queue topic when it doesn't already exist."
)
_DLQ_CONTEXT_HEADERS_DOC = (
    "If true, add headers containing error context to the messages written to the dead letter queue. "
    "To avoid clashing with headers from the original record, all error context header keys will start "
    "with __connect.errors."
)


def _check_replication_factor(name: str, value: Any) -> None:
    if value != -1 and value < 1:
        raise ConfigException(
            name,
            value,
            "Replication factor must be positive and not larger than the number of brokers in the Kafka "
            "cluster, or -1 to use the broker's default",
        )


def _check_partitions(name: str, value: Any) -> None:
    if value != -1 and value < 1:
        raise ConfigException(
            name, value, "Number of partitions must be positive, or -1 to use the broker's default"
        )


_REPLICATION_FACTOR_VALIDATOR: Final = Lambda(
    _check_replication_factor,
    "Positive number not larger than the number of brokers in the Kafka cluster, or -1 to use the "
    "broker's default",
)
_PARTITIONS_VALIDATOR: Final = Lambda(_check_partitions, "Positive number, or -1 to use the broker's default")


def sink_config_def() -> ConfigDef:
    """Keys of every sink connector (Kafka's SinkConnectorConfig)."""
    sink = (
        ConfigDef()
        .define(
            TOPICS_CONFIG,
            ConfigType.LIST,
            "",
            None,
            Importance.HIGH,
            _TOPICS_DOC,
            COMMON_GROUP,
            4,
            Width.LONG,
            "Topics",
        )
        .define(
            TOPICS_REGEX_CONFIG,
            ConfigType.STRING,
            "",
            RegexValidator(),
            Importance.HIGH,
            _TOPICS_REGEX_DOC,
            COMMON_GROUP,
            4,
            Width.LONG,
            "Topics regex",
        )
        .define(
            DLQ_TOPIC_NAME_CONFIG,
            ConfigType.STRING,
            "",
            None,
            Importance.MEDIUM,
            _DLQ_TOPIC_NAME_DOC,
            ERROR_GROUP,
            6,
            Width.MEDIUM,
            "Dead Letter Queue Topic Name",
        )
        .define(
            DLQ_TOPIC_REPLICATION_FACTOR_CONFIG,
            ConfigType.SHORT,
            3,
            _REPLICATION_FACTOR_VALIDATOR,
            Importance.MEDIUM,
            _DLQ_REPLICATION_FACTOR_DOC,
            ERROR_GROUP,
            7,
            Width.MEDIUM,
            "Dead Letter Queue Topic Replication Factor",
        )
        .define(
            DLQ_CONTEXT_HEADERS_ENABLE_CONFIG,
            ConfigType.BOOLEAN,
            False,
            None,
            Importance.MEDIUM,
            _DLQ_CONTEXT_HEADERS_DOC,
            ERROR_GROUP,
            8,
            Width.MEDIUM,
            "Enable Error Context Headers",
        )
    )
    return common_config_def().merge(sink)


_INCLUDE_DOC = (
    "A list of regular expression literals used to match the topic names used by the source connector. "
    "This list is used to include topics that should be created using the topic settings defined by this "
    "group."
)
_EXCLUDE_DOC = (
    "A list of regular expression literals used to match the topic names used by the source connector. "
    "This list is used to exclude topics from being created with the topic settings defined by this "
    "group. Note that exclusion rules have precedent and override any inclusion rules for the topics."
)
_REPLICATION_FACTOR_DOC = (
    "The replication factor for new topics created for this connector using this group. This value may "
    "be -1 to use the broker's default replication factor, or may be a positive number not larger than "
    "the number of brokers in the Kafka cluster. For the default group this configuration is required. "
    "For any other group defined in topic.creation.groups this config is optional and if it's missing it "
    "gets the value of the default group"
)
_PARTITIONS_DOC = (
    "The number of partitions new topics created for this connector. This value may be -1 to use the "
    "broker's default number of partitions, or a positive number representing the desired number of "
    "partitions. For the default group this configuration is required. For any other group defined in "
    "topic.creation.groups this config is optional and if it's missing it gets the value of the default "
    "group"
)


def uses_topic_creation(props: Mapping[str, str]) -> bool:
    """KIP-158: a source connector opts in to topic creation by setting any ``topic.creation.*`` key."""
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

    The default group's replication factor and partitions are required; another group's inherit them
    when unset (so they are optional here, and the runtime fills them from the default group).
    """
    prefix = f"{TOPIC_CREATION_PREFIX}{DEFAULT_TOPIC_CREATION_GROUP}."
    default_group = f"{TOPIC_CREATION_GROUP}: {DEFAULT_TOPIC_CREATION_GROUP}"
    definition = (
        ConfigDef()
        .define(
            prefix + REPLICATION_FACTOR_CONFIG,
            ConfigType.SHORT,
            NO_DEFAULT,
            _REPLICATION_FACTOR_VALIDATOR,
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
            _PARTITIONS_VALIDATOR,
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
        prefix + REPLICATION_FACTOR_CONFIG, props, ConfigType.SHORT, _REPLICATION_FACTOR_VALIDATOR
    )
    default_partitions = _parsed_or_none(
        prefix + PARTITIONS_CONFIG, props, ConfigType.INT, _PARTITIONS_VALIDATOR
    )
    groups = _parsed_or_none(TOPIC_CREATION_GROUPS_CONFIG, props, ConfigType.LIST, None) or []
    for group in dict.fromkeys(groups):
        if not group or group == DEFAULT_TOPIC_CREATION_GROUP:
            # As Kafka: the default group always exists and need not be listed.
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
                Nullable(_REPLICATION_FACTOR_VALIDATOR),
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
                Nullable(_PARTITIONS_VALIDATOR),
                Importance.LOW,
                _PARTITIONS_DOC,
                display_group,
                4,
                Width.LONG,
                f"Partition Count for Topics in {group}",
            )
        )
    return definition
