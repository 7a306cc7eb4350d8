"""The connector keys Sluiceway defines for every plugin: Kafka Connect's key names, types, defaults
and valid values (ConnectorConfig, SourceConnectorConfig, SinkConnectorConfig, TopicCreationConfig),
documented for what they do here. Keys whose feature Sluiceway lacks are listed in
``validation.NOT_SUPPORTED_YET``: a value other than their default is refused."""

from __future__ import annotations

from typing import Any, Final

from sluiceway.connect.batch_config import batch_config_def
from sluiceway.connect.config import (
    NO_DEFAULT,
    Composite,
    ConfigDef,
    ConfigException,
    ConfigType,
    Importance,
    Lambda,
    NonEmptyString,
    NonEmptyStringWithoutControlChars,
    NonNull,
    Nullable,
    Range,
    UniqueItems,
    ValidString,
    Width,
)
from sluiceway.connect.restart_config import restart_config_def
from sluiceway.connect.topic_creation_config import (
    GROUPS_DOC,
    GROUPS_VALIDATOR,
    TOPIC_CREATION_GROUP,
    TOPIC_CREATION_GROUPS_CONFIG,
    TOPIC_CREATION_PREFIX,
    topic_creation_config_def,
    uses_topic_creation,
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
    "source_config_def",
    "topic_creation_config_def",
    "uses_topic_creation",
]

COMMON_GROUP: Final = "Common"
TRANSFORMS_GROUP: Final = "Transforms"
PREDICATES_GROUP: Final = "Predicates"
ERROR_GROUP: Final = "Error Handling"
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


EXACTLY_ONCE_REQUESTED: Final = "requested"
EXACTLY_ONCE_REQUIRED: Final = "required"


def _check_connector_name(name: str, value: Any) -> None:
    # The API addresses a connector as connectors/{name}; a '/' in the name would make that ambiguous.
    if isinstance(value, str) and "/" in value:
        raise ConfigException(name, value, "'/' is not allowed in a connector name")


_NAME_VALIDATOR: Final = Composite.of(
    NonEmptyStringWithoutControlChars(), Lambda(_check_connector_name, "without '/'")
)

_NAME_DOC = (
    "The connector's name. It must be unique in the control-plane cluster (one group.id); the API "
    "addresses the connector as connectors/{name}."
)
_CONNECTOR_CLASS_DOC = (
    "The connector plugin to run, a subclass of sluiceway.connect.SourceConnector or SinkConnector. "
    "Give its full Python class path or one of its aliases, the class name with or without a trailing "
    "'Connector', in any case: sluiceway_executor.connectors.datagen.DataGenSourceConnector, "
    "DataGenSourceConnector, DataGenSource and datagensource all name the same plugin."
)
_TASKS_MAX_DOC = (
    "Upper limit on the tasks this connector may split its work into. The control plane spreads the "
    "tasks over the attached executors; each runs as its own series of Spark jobs."
)
_KEY_CONVERTER_DOC = (
    "How record keys are turned into Kafka bytes and back, inside the executors' Spark jobs: "
    "JsonConverter, StringConverter or ByteArrayConverter (full Kafka class name or short alias), "
    "set up with key.converter.* keys. Unset: the worker's key.converter applies (StringConverter by "
    "default)."
)
_VALUE_CONVERTER_DOC = (
    "How record values are turned into Kafka bytes and back, inside the executors' Spark jobs: "
    "JsonConverter, StringConverter or ByteArrayConverter (full Kafka class name or short alias), "
    "set up with value.converter.* keys. Unset: the worker's value.converter applies (JsonConverter "
    "without the schema envelope by default)."
)
_HEADER_CONVERTER_DOC = (
    "Converter for record header values. Not supported yet: Sluiceway applies no header converter, so "
    "setting this is refused until it does."
)
_TRANSFORMS_DOC = (
    "Aliases of single message transforms, applied in this order to every record inside the batch's "
    "Spark job: on a source after the task and before the converters, on a sink after the converters "
    "and before the task. Each is set up under transforms.<alias>.: type (a built-in such as "
    "InsertField$Value, Kafka's class name for it, or a plugin's class path), predicate and negate, and "
    "the transform's own keys."
)
_PREDICATES_DOC = (
    "Aliases of predicates, the conditions a transform's transforms.<alias>.predicate names to apply "
    "only to the records that meet them. Each is set up under predicates.<alias>.: type "
    "(TopicNameMatches, HasHeaderKey, RecordIsTombstone, Kafka's class names, or a plugin's class "
    "path) and the predicate's own keys."
)
_CONFIG_RELOAD_ACTION_DOC = (
    "What to do when a value that came from an external config provider changes: 'restart' restarts "
    "the connector with the new values, 'none' leaves it running as it is. Not supported yet: "
    "Sluiceway's config providers (env, file) never report a change, so nothing calls for a reload "
    "and 'none' is refused."
)
_ERRORS_RETRY_TIMEOUT_DOC = (
    "For how many milliseconds a record-level transform plugin that raised RetriableException on a "
    "record is called again before the record counts as failed (then errors.tolerance decides); 0 "
    "means no second try, -1 no limit. Built-in transforms and converters run as Spark expressions, "
    "which fail the same way every time, so only such plugins are retried; Kafka outages are retried "
    "by the executor without limit whatever this says."
)
_ERRORS_RETRY_MAX_DELAY_DOC = (
    "The longest wait, in milliseconds, between two of those calls: waits start at 300 ms and double "
    "up to this."
)
_ERRORS_TOLERANCE_DOC = (
    "What a record a converter or transform cannot handle does to the task: 'none' (the default) "
    "fails the task, naming the stage (and, on a sink, the record's topic, partition and offset); "
    "'all' skips the record and carries on, a sink writing it to errors.deadletterqueue.topic.name "
    "when set."
)
_ERRORS_LOG_ENABLE_DOC = (
    "When true, every record errors.tolerance=all skips is logged at ERROR with the stage, the class "
    "and the reason."
)
_ERRORS_LOG_INCLUDE_MESSAGES_DOC = (
    "With errors.log.enable, also log where each skipped record was read: its topic, partition, "
    "offset and timestamp. Its key, value and headers are never logged."
)


def common_config_def() -> ConfigDef:
    """The keys of every connector, source or sink (Kafka's ConnectorConfig), our automatic restart
    keys (restart_config.py) and our batch bounds (batch_config.py)."""
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
            Composite.of(NonNull(), UniqueItems("each alias at most once")),
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
            Composite.of(NonNull(), UniqueItems("each alias at most once")),
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
            Range.at_least(-1),
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
            Range.at_least(1),
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
    ).merge(restart_config_def().merge(batch_config_def()))


_EXACTLY_ONCE_SUPPORT_DOC = (
    "Whether this source connector must deliver exactly once. 'requested' (the default) accepts "
    "whatever guarantee it can give; 'required' would have its exactly-once support checked before "
    "it is created. Sluiceway's source pipelines deliver at least once, so 'required' is refused."
)
_TRANSACTION_BOUNDARY_DOC = (
    "Where exactly-once source delivery would start and commit Kafka transactions: 'poll' after each "
    "batch a task returns, 'interval' every transaction.boundary.interval.ms, 'connector' where the "
    "connector marks boundaries (if it can). Not supported yet: Sluiceway writes source records "
    "without transactions, so a value other than the default, 'poll', is refused until it uses them."
)
_TRANSACTION_BOUNDARY_INTERVAL_DOC = (
    "With transaction.boundary=interval, the time in milliseconds between transaction commits. "
    "Not supported yet: Sluiceway writes source records without transactions, so setting this is "
    "refused until it uses them."
)
_OFFSETS_TOPIC_DOC = (
    "An offsets topic for this source connector alone: its tasks commit offsets there instead of to "
    "the worker's offset.storage.topic, and when both hold an offset for a source partition this "
    "topic's wins. The control plane creates it on the worker's Kafka cluster when missing, "
    "like the worker's offsets topic. Unset: only the worker's topic is used."
)
_HEARTBEAT_INTERVAL_DOC = (
    "How often, in milliseconds, each task of this connector is asked for heartbeat records (KIP-910): "
    "records a task can send when it has no data, to move its source offsets; they go to "
    "heartbeat.records.topic and their offsets are committed. The ask comes before a batch once the "
    "interval has passed since the last one. 0 turns heartbeats off for this connector; unset or "
    "empty takes the worker's heartbeat.interval.ms (default 0, off). Only tasks that implement "
    "produce_heartbeat_records are asked. Best set in minutes or hours."
)
_HEARTBEAT_TOPIC_DOC = (
    "The topic this connector's heartbeat records go to (KIP-910); unset or empty takes the worker's "
    "heartbeat.records.topic (default connect-heartbeats). A task creates it, when missing, before "
    "its first heartbeat record, on the cluster its producer writes to, with the broker's default "
    "partitions and replication factor; an existing topic is used as it is."
)


def source_config_def() -> ConfigDef:
    """The keys of a source connector: the common ones, Kafka's SourceConnectorConfig and KIP-910's
    heartbeat keys."""
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
            GROUPS_VALIDATOR,
            Importance.LOW,
            GROUPS_DOC,
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
