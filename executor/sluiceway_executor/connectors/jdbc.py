"""JdbcSource / JdbcSink through Spark's JDBC reader and writer (PostgreSQL driver by default).

The source copies new rows of one table in ``incrementing`` mode: each batch reads the rows whose
incrementing column is above the committed offset, up to ``batch.max.rows`` rows. Its source
partition is ``{"table": table}`` and its offset ``{"incrementing": last value}``. The record value is
a struct of the row's columns. The sink appends each record's struct value as a row of the table
named by ``table.name.format``.

With heartbeats on (KIP-910, ``heartbeat.interval.ms``), the source sends one heartbeat record per
heartbeat that carries its committed offset again: source partition ``{"table": table}``, offset
``{"incrementing": last value copied}``, value ``{"table": table, "incrementing": value}``. So an
idle table's offset is written anew at every heartbeat and the heartbeat topic shows how far the
copy has come. The offset never moves past what has been copied: in incrementing mode every row
above it is still to be copied, unlike a change log in which a heartbeat may skip changes the
connector does not follow. A table with nothing copied yet has no offset to send.

Spark is imported only inside the tasks' batch methods, so the control plane can load these plugins
without it.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Final, TypeGuard

import sluiceway
from sluiceway.connect import (
    AbstractConfig,
    BatchContext,
    ConfigDef,
    ConfigException,
    ConfigType,
    ConfigValue,
    ConnectException,
    DataFrameSinkTask,
    DataFrameSourceTask,
    Importance,
    Lambda,
    NonEmptyString,
    Nullable,
    OffsetStorageReader,
    Range,
    SinkConnector,
    SourceBatch,
    SourceConnector,
    SourceRecord,
    Task,
    TopicPartition,
    ValidString,
    Width,
)
from sluiceway_executor.connectors.base import BuiltInConnector

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

__all__ = [
    "JdbcSinkConnector",
    "JdbcSinkTask",
    "JdbcSourceConnector",
    "JdbcSourceTask",
    "batch_query",
    "bounds_query",
    "sink_table_name",
]

CONNECTION_URL_CONFIG: Final = "connection.url"
CONNECTION_USER_CONFIG: Final = "connection.user"
CONNECTION_PASSWORD_CONFIG: Final = "connection.password"
TABLE_CONFIG: Final = "table"
MODE_CONFIG: Final = "mode"
INCREMENTING_COLUMN_NAME_CONFIG: Final = "incrementing.column.name"
TOPIC_PREFIX_CONFIG: Final = "topic.prefix"
BATCH_MAX_ROWS_CONFIG: Final = "batch.max.rows"
TABLE_NAME_FORMAT_CONFIG: Final = "table.name.format"
INSERT_MODE_CONFIG: Final = "insert.mode"

MODE_INCREMENTING: Final = "incrementing"
INSERT_MODE_INSERT: Final = "insert"
TOPIC_PLACEHOLDER: Final = "${topic}"

TABLE_FIELD: Final = "table"
INCREMENTING_FIELD: Final = "incrementing"

HEARTBEAT_SCHEMA: Final[Mapping[str, Any]] = {
    "type": "struct",
    "name": "sluiceway.jdbc.Heartbeat",
    "optional": False,
    "fields": [
        {"field": TABLE_FIELD, "type": "string", "optional": False},
        {"field": INCREMENTING_FIELD, "type": "int64", "optional": False},
    ],
}

POSTGRESQL_DRIVER: Final = "org.postgresql.Driver"

_CONNECTION_GROUP = "Database"
_SOURCE_GROUP = "Source"
_SINK_GROUP = "Sink"

# An SQL identifier, optionally schema-qualified; a part in double quotes keeps its case and may
# hold any character. Only such names are put into SQL text, so configs cannot inject SQL.
_IDENTIFIER_PART = r'(?:[A-Za-z_][A-Za-z0-9_$]*|"(?:[^"]|"")+")'
_IDENTIFIER = re.compile(rf"{_IDENTIFIER_PART}(?:\.{_IDENTIFIER_PART})*")


def _check_jdbc_url(name: str, value: Any) -> None:
    if not isinstance(value, str) or not value.startswith("jdbc:"):
        raise ConfigException(name, value, "A JDBC URL must start with 'jdbc:'")


def _check_identifier(name: str, value: Any) -> None:
    if not isinstance(value, str) or not _IDENTIFIER.fullmatch(value):
        raise ConfigException(
            name, value, "Not an SQL identifier (letters, digits, _ and $, or a double-quoted name)"
        )


_IDENTIFIER_VALIDATOR: Final = Lambda(
    _check_identifier, "SQL identifier, optionally schema-qualified; double-quote a part to keep its case"
)


def _connection_config_def() -> ConfigDef:
    return (
        ConfigDef()
        .define(
            CONNECTION_URL_CONFIG,
            ConfigType.STRING,
            validator=Lambda(_check_jdbc_url, "JDBC URL (jdbc:...)"),
            importance=Importance.HIGH,
            documentation=(
                "Database that Spark's JDBC reader and writer connect to, e.g. "
                "jdbc:postgresql://localhost:5432/db. The database's driver JAR must be on Spark's "
                "classpath; for jdbc:postgresql: URLs the connector names the driver class itself."
            ),
            group=_CONNECTION_GROUP,
            order_in_group=1,
            width=Width.LONG,
            display_name="JDBC URL",
        )
        .define(
            CONNECTION_USER_CONFIG,
            ConfigType.STRING,
            None,
            None,
            Importance.HIGH,
            "Database user Spark logs in as; leave it unset when the URL includes the user.",
            _CONNECTION_GROUP,
            2,
            Width.MEDIUM,
            "JDBC User",
        )
        .define(
            CONNECTION_PASSWORD_CONFIG,
            ConfigType.PASSWORD,
            None,
            None,
            Importance.HIGH,
            "Password of connection.user; API answers show it masked.",
            _CONNECTION_GROUP,
            3,
            Width.MEDIUM,
            "JDBC Password",
        )
    )


def source_config_def() -> ConfigDef:
    source = (
        ConfigDef()
        .define(
            TABLE_CONFIG,
            ConfigType.STRING,
            validator=_IDENTIFIER_VALIDATOR,
            importance=Importance.HIGH,
            documentation="The table to copy rows from.",
            group=_SOURCE_GROUP,
            order_in_group=1,
            width=Width.LONG,
            display_name="Table",
        )
        .define(
            MODE_CONFIG,
            ConfigType.STRING,
            MODE_INCREMENTING,
            ValidString.in_(MODE_INCREMENTING),
            Importance.HIGH,
            "How new rows are found. 'incrementing': rows whose incrementing column is larger than the "
            "largest value copied so far (rows are expected to be inserted with growing values and not "
            "updated).",
            _SOURCE_GROUP,
            2,
            Width.MEDIUM,
            "Table loading mode",
            dependents=(INCREMENTING_COLUMN_NAME_CONFIG,),
        )
        .define(
            INCREMENTING_COLUMN_NAME_CONFIG,
            ConfigType.STRING,
            None,
            Nullable(_IDENTIFIER_VALIDATOR),
            Importance.MEDIUM,
            "Integer column whose value grows with every inserted row: each batch copies the rows above "
            "the committed value. Required in 'incrementing' mode.",
            _SOURCE_GROUP,
            3,
            Width.MEDIUM,
            "Incrementing column name",
        )
        .define(
            TOPIC_PREFIX_CONFIG,
            ConfigType.STRING,
            "",
            None,
            Importance.HIGH,
            "The rows go to the Kafka topic named by this prefix followed by the table name.",
            _SOURCE_GROUP,
            4,
            Width.MEDIUM,
            "Topic prefix",
        )
        .define(
            BATCH_MAX_ROWS_CONFIG,
            ConfigType.INT,
            100000,
            Range.at_least(1),
            Importance.LOW,
            "Most rows one batch (one Spark job) copies.",
            _SOURCE_GROUP,
            5,
            Width.SHORT,
            "Max rows per batch",
        )
    )
    return _connection_config_def().merge(source)


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
    return _connection_config_def().merge(sink)


_MISSING_INCREMENTING_COLUMN = (
    f"{INCREMENTING_COLUMN_NAME_CONFIG} is required when {MODE_CONFIG} is '{MODE_INCREMENTING}'"
)


def _jdbc_options(config: AbstractConfig) -> dict[str, str]:
    url = config.get_string(CONNECTION_URL_CONFIG) or ""
    options = {"url": url}
    user = config.get_string(CONNECTION_USER_CONFIG)
    if user:
        options["user"] = user
    password = config.get_password(CONNECTION_PASSWORD_CONFIG)
    if password is not None:
        options["password"] = password.value
    # Other databases' drivers are found by Spark from the URL when their JAR is on its classpath.
    if url.startswith("jdbc:postgresql:"):
        options["driver"] = POSTGRESQL_DRIVER
    return options


def bounds_query(table: str, column: str, after: int | None, max_rows: int) -> str:
    """SQL for the largest incrementing value among the next ``max_rows`` rows after ``after``."""
    where = f" WHERE {column} > {int(after)}" if after is not None else ""
    return (
        f"SELECT MAX({column}) AS max_value FROM "
        f"(SELECT {column} FROM {table}{where} ORDER BY {column} LIMIT {int(max_rows)}) AS next_rows"
    )


def batch_query(table: str, column: str, after: int | None, upto: int) -> str:
    """SQL for the rows in (``after``, ``upto``]: a fixed range, so a retried batch reads the same rows."""
    lower = f"{column} > {int(after)} AND " if after is not None else ""
    return f"SELECT * FROM {table} WHERE {lower}{column} <= {int(upto)}"


def sink_table_name(table_name_format: str, topic: str) -> str:
    """The table for ``topic``: a plain (possibly schema-qualified) identifier is used as is, any
    other name (e.g. with '-' from a topic name) is quoted as one identifier."""
    name = table_name_format.replace(TOPIC_PLACEHOLDER, topic)
    if _IDENTIFIER.fullmatch(name):
        return name
    return '"' + name.replace('"', '""') + '"'


def _is_int(value: Any) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool)


class JdbcSourceConnector(BuiltInConnector, SourceConnector):
    def config(self) -> ConfigDef:
        return source_config_def()

    def validate(self, props: Mapping[str, str]) -> list[ConfigValue]:
        values = super().validate(props)
        by_name = {value.name: value for value in values}
        mode = by_name[MODE_CONFIG]
        column = by_name[INCREMENTING_COLUMN_NAME_CONFIG]
        if not mode.errors and mode.value == MODE_INCREMENTING and not column.errors and not column.value:
            column.add_error(_MISSING_INCREMENTING_COLUMN)
        return values

    def _on_start(self, config: AbstractConfig) -> None:
        if config.get_string(MODE_CONFIG) == MODE_INCREMENTING and not config.get_string(
            INCREMENTING_COLUMN_NAME_CONFIG
        ):
            raise ConfigException(INCREMENTING_COLUMN_NAME_CONFIG, None, _MISSING_INCREMENTING_COLUMN)

    def task_class(self) -> type[Task]:
        return JdbcSourceTask

    def task_configs(self, max_tasks: int) -> list[dict[str, str]]:
        # One task per table, and the connector copies a single table.
        return [dict(self._props)]

    def alter_offsets(
        self,
        connector_config: Mapping[str, str],
        offsets: Sequence[tuple[Mapping[str, Any], Mapping[str, Any] | None]],
    ) -> bool:
        for partition, offset in offsets:
            if not isinstance(partition.get(TABLE_FIELD), str):
                raise ConnectException(
                    f"Source partitions of this connector are {{'{TABLE_FIELD}': <table>}}"
                )
            if offset is not None and not _is_int(offset.get(INCREMENTING_FIELD)):
                raise ConnectException(
                    f"Offsets of this connector are null or {{'{INCREMENTING_FIELD}': <last copied value>}}"
                )
        return True


class JdbcSourceTask(DataFrameSourceTask):
    def __init__(self) -> None:
        self._config: AbstractConfig | None = None
        self._table = ""
        self._column = ""
        self._topic = ""
        self._max_rows = 100000

    def version(self) -> str:
        return sluiceway.__version__

    def start(self, props: Mapping[str, str]) -> None:
        config = AbstractConfig(source_config_def(), props)
        column = config.get_string(INCREMENTING_COLUMN_NAME_CONFIG)
        if not column:
            raise ConfigException(INCREMENTING_COLUMN_NAME_CONFIG, None, _MISSING_INCREMENTING_COLUMN)
        self._config = config
        self._table = config.get_string(TABLE_CONFIG) or ""
        self._column = column
        self._topic = (config.get_string(TOPIC_PREFIX_CONFIG) or "") + self._table
        self._max_rows = config.get_int(BATCH_MAX_ROWS_CONFIG)

    def _committed(self, offsets: OffsetStorageReader) -> int | None:
        offset = offsets.offset({TABLE_FIELD: self._table})
        if offset is None:
            return None
        value = offset.get(INCREMENTING_FIELD)
        if not _is_int(value):
            raise ConnectException(f"The committed offset {offset} has no integer '{INCREMENTING_FIELD}'")
        return int(value)

    def _read(self, spark: SparkSession, query: str) -> DataFrame:
        assert self._config is not None
        return spark.read.format("jdbc").options(**_jdbc_options(self._config)).option("query", query).load()

    def read_batch(
        self, spark: SparkSession, offsets: OffsetStorageReader, context: BatchContext
    ) -> SourceBatch:
        from pyspark.sql import functions as F  # noqa: N812 - Spark's usual alias

        if self._config is None:
            raise ConnectException("JdbcSourceTask is not started")
        after = self._committed(offsets)
        rows = self._read(spark, bounds_query(self._table, self._column, after, self._max_rows)).collect()
        largest = rows[0][0] if rows else None
        if largest is None:
            return SourceBatch(data=None, offsets=[])
        try:
            upto = int(largest)
        except (TypeError, ValueError) as e:
            raise ConnectException(
                f"{INCREMENTING_COLUMN_NAME_CONFIG} {self._column} is not an integer column"
            ) from e
        rows_df = self._read(spark, batch_query(self._table, self._column, after, upto))
        value = F.struct(*[F.col(f"`{name.replace('`', '``')}`") for name in rows_df.columns])
        data = rows_df.select(
            F.lit(None).cast("string").alias("key"), value.alias("value"), F.lit(self._topic).alias("topic")
        )
        return SourceBatch(data=data, offsets=[({TABLE_FIELD: self._table}, {INCREMENTING_FIELD: upto})])

    def produce_heartbeat_records(
        self, offsets: OffsetStorageReader, context: BatchContext
    ) -> list[SourceRecord]:
        """One record carrying the committed offset again (see the module doc); none before the
        first commit. Asks nothing of the database."""
        if self._config is None:
            raise ConnectException("JdbcSourceTask is not started")
        copied = self._committed(offsets)
        if copied is None:
            return []
        return [
            SourceRecord(
                source_partition={TABLE_FIELD: self._table},
                source_offset={INCREMENTING_FIELD: copied},
                # The executor sends it to the heartbeat topic whatever this says.
                topic=self._topic,
                key=self._table,
                value={TABLE_FIELD: self._table, INCREMENTING_FIELD: copied},
                value_schema=HEARTBEAT_SCHEMA,
            )
        ]

    def stop(self) -> None:
        """Each batch is its own Spark job; nothing stays open."""


class JdbcSinkConnector(BuiltInConnector, SinkConnector):
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
        rows.write.format("jdbc").options(**_jdbc_options(self._config)).option("dbtable", table).mode(
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
