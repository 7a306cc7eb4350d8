"""The keys every sink connector has beyond the common ones: the topics it reads, the declared
schemas of plain JSON keys and values, and the dead letter queue's (refused until it exists)."""

from __future__ import annotations

from typing import Any, Final

from sluiceway.connect.config import (
    ConfigDef,
    ConfigException,
    ConfigType,
    Importance,
    Lambda,
    RegexValidator,
    Width,
)
from sluiceway.connect.connector import ConnectException
from sluiceway.connect.data.json_format import schema_from_json
from sluiceway.connect.data.json_text import loads
from sluiceway.connect.framework_config import (
    COMMON_GROUP,
    DLQ_CONTEXT_HEADERS_ENABLE_CONFIG,
    DLQ_TOPIC_NAME_CONFIG,
    DLQ_TOPIC_REPLICATION_FACTOR_CONFIG,
    ERROR_GROUP,
    TOPICS_CONFIG,
    TOPICS_REGEX_CONFIG,
    common_config_def,
)
from sluiceway.connect.topic_creation_config import REPLICATION_FACTOR_VALIDATOR

__all__ = ["KEY_SCHEMA_CONFIG", "VALUE_SCHEMA_CONFIG", "sink_config_def"]

KEY_SCHEMA_CONFIG: Final = "key.schema"
VALUE_SCHEMA_CONFIG: Final = "value.schema"

_TOPICS_DOC = "The topics this sink connector reads, comma-separated. Set this or topics.regex, not both."
_TOPICS_REGEX_DOC = (
    "A Python regular expression; this sink connector reads every topic whose whole name it "
    "matches. Set this or topics, not both."
)
_DLQ_TOPIC_NAME_DOC = (
    "Dead-letter queue: with errors.tolerance=all, the topic each record the sink's converters or "
    "transforms failed on is written to, unchanged (key, value, headers, timestamp), in the same "
    "transaction as the batch's offsets. Created at the task's start when missing. Empty (the "
    "default): failed records are only skipped. It may not be a topic the connector reads."
)
_DLQ_REPLICATION_FACTOR_DOC = (
    "Replication factor of the dead-letter topic when the task creates it (one partition; -1: the "
    "broker's default)."
)
_DLQ_CONTEXT_HEADERS_DOC = (
    "When true, each dead-letter record also carries headers saying where it came from and why it "
    "failed: __connect.errors.topic, .partition, .offset, .connector.name, .task.id, .stage, "
    ".class.name, .exception.class.name and .exception.message."
)

_SCHEMA_DOC = (
    "The schema of the record {role}s this sink reads, for a JsonConverter with "
    'schemas.enable=false: a Kafka Connect schema as JSON (what an envelope\'s "schema" holds) or '
    "a Spark DDL type such as 'id BIGINT, name STRING, amount DECIMAL(10,2)'. The sink then gets "
    "typed columns instead of JSON text. Empty (the default): plain JSON {role}s stay text."
)


def _check_declared_schema(name: str, value: Any) -> None:
    text = str(value or "").strip()
    if not text.startswith("{"):
        return  # Spark DDL is checked by Spark when the task starts.
    try:
        schema_from_json(loads(text))
    except (ValueError, ConnectException) as exc:
        raise ConfigException(name, value, f"Not a Kafka Connect schema: {exc}") from None


def sink_config_def() -> ConfigDef:
    """The keys of a sink connector: the common ones and Kafka's SinkConnectorConfig."""
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
            KEY_SCHEMA_CONFIG,
            ConfigType.STRING,
            "",
            Lambda(_check_declared_schema, "Kafka Connect schema JSON or Spark DDL"),
            Importance.LOW,
            _SCHEMA_DOC.format(role="key"),
            COMMON_GROUP,
            5,
            Width.LONG,
            "Key schema",
        )
        .define(
            VALUE_SCHEMA_CONFIG,
            ConfigType.STRING,
            "",
            Lambda(_check_declared_schema, "Kafka Connect schema JSON or Spark DDL"),
            Importance.LOW,
            _SCHEMA_DOC.format(role="value"),
            COMMON_GROUP,
            5,
            Width.LONG,
            "Value schema",
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
            REPLICATION_FACTOR_VALIDATOR,
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
