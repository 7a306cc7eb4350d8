"""JdbcSink: appends each record's struct value as a row of the table named by
``table.name.format``, through Spark's JDBC writer (PostgreSQL driver by default).

Spark is imported only inside the task's batch method, so the control plane can load this plugin
without it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, ClassVar, Final

import sluiceway
from sluiceway.connect import (
    AbstractConfig,
    BatchContext,
    ConfigDef,
    ConfigType,
    ConnectException,
    DataFrameSinkTask,
    Importance,
    NonEmptyString,
    SinkConnector,
    Task,
    TopicPartition,
    ValidString,
    Width,
)
from sluiceway_executor.connectors.base import BuiltInConnector
from sluiceway_executor.connectors.jdbc_common import IDENTIFIER, connection_config_def, jdbc_options

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

__all__ = ["JdbcSinkConnector", "JdbcSinkTask", "sink_config_def", "sink_table_name"]

TABLE_NAME_FORMAT_CONFIG: Final = "table.name.format"
INSERT_MODE_CONFIG: Final = "insert.mode"

INSERT_MODE_INSERT: Final = "insert"
TOPIC_PLACEHOLDER: Final = "${topic}"

_SINK_GROUP = "Sink"


def sink_config_def() -> ConfigDef:
    sink = (
        ConfigDef()
        .define(
            TABLE_NAME_FORMAT_CONFIG,
            ConfigType.STRING,
            TOPIC_PLACEHOLDER,
            NonEmptyString(),
            Importance.MEDIUM,
            "The table to write to; '${topic}' is replaced by the record's topic. A name that is not a "
            "plain SQL identifier is quoted.",
            _SINK_GROUP,
            1,
            Width.LONG,
            "Table name format",
        )
        .define(
            INSERT_MODE_CONFIG,
            ConfigType.STRING,
            INSERT_MODE_INSERT,
            ValidString.in_(INSERT_MODE_INSERT),
            Importance.HIGH,
            "How rows are written. 'insert': each record becomes a new row.",
            _SINK_GROUP,
            2,
            Width.MEDIUM,
            "Insert mode",
        )
    )
    return connection_config_def().merge(sink)


def sink_table_name(table_name_format: str, topic: str) -> str:
    """The table for ``topic``: a plain (possibly schema-qualified) identifier is used as is, any
    other name (e.g. with '-' from a topic name) is quoted as one identifier."""
    name = table_name_format.replace(TOPIC_PLACEHOLDER, topic)
    if IDENTIFIER.fullmatch(name):
        return name
    return '"' + name.replace('"', '""') + '"'


class JdbcSinkConnector(BuiltInConnector, SinkConnector):
    # Kafka's JDBC sink, and this connector's class before the JDBC module was split.
    ALIASES: ClassVar[tuple[str, ...]] = (
        "io.confluent.connect.jdbc.JdbcSinkConnector",
        "sluiceway_executor.connectors.jdbc.JdbcSinkConnector",
    )

    def config(self) -> ConfigDef:
        return sink_config_def()

    def task_class(self) -> type[Task]:
        return JdbcSinkTask

    def alter_offsets(
        self, connector_config: Mapping[str, str], offsets: Mapping[TopicPartition, int | None]
    ) -> bool:
        # Offsets live only in the consumer group; the table needs no change.
        return True


class JdbcSinkTask(DataFrameSinkTask):
    def __init__(self) -> None:
        self._config: AbstractConfig | None = None
        self._table_name_format = TOPIC_PLACEHOLDER

    def version(self) -> str:
        return sluiceway.__version__

    def start(self, props: Mapping[str, str]) -> None:
        config = AbstractConfig(sink_config_def(), props)
        self._config = config
        self._table_name_format = config.get_string(TABLE_NAME_FORMAT_CONFIG) or TOPIC_PLACEHOLDER

    def _write(self, rows: DataFrame, table: str) -> None:
        assert self._config is not None
        rows.write.format("jdbc").options(**jdbc_options(self._config)).option("dbtable", table).mode(
            "append"
        ).save()

    def write_batch(self, batch: DataFrame, context: BatchContext) -> None:
        from pyspark.sql import functions as F  # noqa: N812 - Spark's usual alias
        from pyspark.sql.types import StructType

        if self._config is None:
            raise ConnectException("JdbcSinkTask is not started")
        if "value" not in batch.columns or not isinstance(batch.schema["value"].dataType, StructType):
            raise ConnectException(
                "JdbcSink needs structured record values: a struct 'value' column (e.g. from a converter "
                "with schemas)"
            )
        if TOPIC_PLACEHOLDER not in self._table_name_format:
            self._write(batch.select("value.*"), sink_table_name(self._table_name_format, ""))
            return
        topics = sorted(row[0] for row in batch.select("topic").distinct().collect())
        for topic in topics:
            rows = batch.filter(F.col("topic") == topic).select("value.*")
            self._write(rows, sink_table_name(self._table_name_format, topic))

    def stop(self) -> None:
        """Each batch is its own Spark job; nothing stays open."""
