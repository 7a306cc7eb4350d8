"""JdbcSource: copies database tables, or the result of one query, into Kafka through Spark's JDBC
reader (PostgreSQL driver by default).

``mode`` says how new rows are found: ``bulk`` copies everything at each poll; ``incrementing``
copies the rows whose incrementing column is above the last value copied; ``timestamp`` the rows
whose timestamp is newer than the last one copied; ``timestamp+incrementing`` the rows whose
(timestamp, incrementing value) pair comes after the last pair copied, so updated rows (whose
timestamp moved) are copied again. The SQL and the offsets are in ``jdbc_source_queries``.

Every table of ``table.whitelist`` (or the one ``query``) is a source partition: ``{"table": name}``
(``{"query": "query"}`` for a query), and its offset holds the keys of its mode (see
``jdbc_source_queries``). ``tasks.max`` splits the tables between tasks. A task's batch copies one
table: the one whose turn came first. A table that had nothing new, or whose bulk copy was just
made, waits ``poll.interval.ms`` before it is asked again; a batch with no table due is empty, and
the executor pauses before the next one.

With heartbeats on (KIP-910, ``heartbeat.interval.ms``), a task sends one heartbeat record per
table with a committed offset, carrying that offset again: so an idle table's offset is written
anew at every heartbeat and the heartbeat topic shows how far the copy has come. The offset never
moves past what has been copied. A table with nothing copied yet, and bulk mode, send none.

Spark is imported only inside the task's batch method, so the control plane can load this plugin
without it.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, ClassVar, Final

import sluiceway
from sluiceway.connect import (
    AbstractConfig,
    BatchContext,
    ConfigDef,
    ConfigException,
    ConfigValue,
    ConnectException,
    DataFrameSourceTask,
    OffsetStorageReader,
    SourceBatch,
    SourceConnector,
    SourceRecord,
    Task,
)
from sluiceway_executor.connectors.base import BuiltInConnector
from sluiceway_executor.connectors.jdbc_common import POSTGRESQL_SESSION_INIT, add_problems, jdbc_options
from sluiceway_executor.connectors.jdbc_source_config import (
    BATCH_MAX_ROWS_CONFIG,
    INCREMENTING_COLUMN_NAME_CONFIG,
    MODE_CONFIG,
    POLL_INTERVAL_MS_CONFIG,
    QUERY_CONFIG,
    TABLE_WHITELIST_CONFIG,
    TIMESTAMP_COLUMN_NAME_CONFIG,
    TIMESTAMP_DELAY_INTERVAL_MS_CONFIG,
    TOPIC_PREFIX_CONFIG,
    config_problems,
    source_config_def,
    source_tables,
)
from sluiceway_executor.connectors.jdbc_source_queries import (
    MODE_BULK,
    QUERY_FIELD,
    QUERY_PARTITION,
    TABLE_FIELD,
    Position,
    SourceQueries,
    offset_fields,
)

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

__all__ = ["HEARTBEAT_SCHEMA_NAME", "JdbcSourceConnector", "JdbcSourceTask", "row_records"]

HEARTBEAT_SCHEMA_NAME: Final = "sluiceway.jdbc.Heartbeat"

# Rows the PostgreSQL driver fetches per round trip. Without a fetch size it holds the whole result
# of a batch in Spark's memory before the first row is written; with one (and Spark's PostgreSQL
# dialect turning autocommit off, which the driver needs for it) rows stream through a cursor.
_POSTGRESQL_FETCH_ROWS: Final = 10_000


def row_records(rows: DataFrame, topic: str, table: str | None) -> DataFrame:
    """The records of the rows read: no key, the row's columns as a struct value whose Connect
    schema is the table's (named after the table, as Kafka's JDBC source names it; a query's has
    no name), the topic. The one place that decides how a row becomes a record."""
    from pyspark.sql import functions as F  # noqa: N812 - Spark's usual alias

    from sluiceway.connect.data.spark import METADATA_KEY

    # `*` expands to every column in order, named as in the row, without asking Spark (and the
    # database) for the rows' schema first.
    value = F.struct(F.col("*"))
    metadata = {METADATA_KEY: {"name": table}} if table else {}
    return rows.select(
        F.lit(None).cast("string").alias("key"),
        value.alias("value", metadata=metadata),
        F.lit(topic).alias("topic"),
    )


def _heartbeat_schema(partition_key: str, offset_keys: Sequence[str]) -> dict[str, Any]:
    fields = [{"field": partition_key, "type": "string", "optional": False}]
    fields += [{"field": key, "type": "int64", "optional": False} for key in offset_keys]
    return {"type": "struct", "name": HEARTBEAT_SCHEMA_NAME, "optional": False, "fields": fields}


def _check_config(config: AbstractConfig) -> None:
    problems = config_problems(config.values())
    if problems:
        name, message = problems[0]
        raise ConfigException(name, config.get(name), message)


class JdbcSourceConnector(BuiltInConnector, SourceConnector):
    # Kafka's JDBC source, and this connector's class before the JDBC module was split.
    ALIASES: ClassVar[tuple[str, ...]] = (
        "io.confluent.connect.jdbc.JdbcSourceConnector",
        "sluiceway_executor.connectors.jdbc.JdbcSourceConnector",
    )

    def config(self) -> ConfigDef:
        return source_config_def()

    def validate(self, props: Mapping[str, str]) -> list[ConfigValue]:
        return add_problems(super().validate(props), config_problems)

    def _on_start(self, config: AbstractConfig) -> None:
        _check_config(config)

    def task_class(self) -> type[Task]:
        return JdbcSourceTask

    def task_configs(self, max_tasks: int) -> list[dict[str, str]]:
        """One task for a query or the old single ``table``; else up to ``max_tasks`` tasks, each
        with its own run of the whitelist's tables."""
        if not self._props.get(TABLE_WHITELIST_CONFIG):
            return [dict(self._props)]
        whitelist = source_tables(AbstractConfig(source_config_def(), self._props))
        count = max(1, min(max_tasks, len(whitelist)))
        size, extra = divmod(len(whitelist), count)
        configs: list[dict[str, str]] = []
        start = 0
        for index in range(count):
            end = start + size + (1 if index < extra else 0)
            configs.append({**self._props, TABLE_WHITELIST_CONFIG: ",".join(whitelist[start:end])})
            start = end
        return configs

    def alter_offsets(
        self,
        connector_config: Mapping[str, str],
        offsets: Sequence[tuple[Mapping[str, Any], Mapping[str, Any] | None]],
    ) -> bool:
        mode = AbstractConfig(source_config_def(), connector_config).get_string(MODE_CONFIG) or ""
        keys = offset_fields(mode)
        for partition, offset in offsets:
            is_table = set(partition) == {TABLE_FIELD} and isinstance(partition[TABLE_FIELD], str)
            if not is_table and dict(partition) != QUERY_PARTITION:
                raise ConnectException(
                    f"Source partitions of this connector are {{'{TABLE_FIELD}': <table>}} or "
                    f"{{'{QUERY_FIELD}': '{QUERY_FIELD}'}}"
                )
            if offset is None:
                continue
            if not keys:
                raise ConnectException(f"In {MODE_BULK} mode this connector keeps no offsets; give null")
            try:
                position = Position.from_offset(mode, offset)
            except ValueError as e:
                raise ConnectException(f"Bad offset {dict(offset)}: {e}") from e
            if position is None:
                shape = ", ".join(f"'{key}': <integer>" for key in keys)
                raise ConnectException(f"Offsets of this connector in {mode} mode are null or {{{shape}}}")
        return True


class _Partition:
    """One table (or the query) of a task: its partition, topic, SQL and when it is next due."""

    def __init__(self, partition: Mapping[str, str], topic: str, queries: SourceQueries) -> None:
        self.partition = dict(partition)
        # The table's name names its records' schema; a query's records have none.
        self.table: str | None = partition.get(TABLE_FIELD)
        self.topic = topic
        self.queries = queries
        self.due = 0.0


class JdbcSourceTask(DataFrameSourceTask):
    def __init__(self) -> None:
        self._config: AbstractConfig | None = None
        self._mode = ""
        self._partitions: list[_Partition] = []
        self._poll_interval = 5.0

    def version(self) -> str:
        return sluiceway.__version__

    def start(self, props: Mapping[str, str]) -> None:
        config = AbstractConfig(source_config_def(), props)
        _check_config(config)
        mode = config.get_string(MODE_CONFIG) or ""
        prefix = config.get_string(TOPIC_PREFIX_CONFIG) or ""
        common: dict[str, Any] = {
            "mode": mode,
            "incrementing_column": config.get_string(INCREMENTING_COLUMN_NAME_CONFIG),
            "timestamp_columns": tuple(config.get_list(TIMESTAMP_COLUMN_NAME_CONFIG)),
            "delay_ms": config.get_long(TIMESTAMP_DELAY_INTERVAL_MS_CONFIG),
            "max_rows": config.get_int(BATCH_MAX_ROWS_CONFIG),
        }
        query = config.get_string(QUERY_CONFIG)
        if query:
            partitions = [
                _Partition(QUERY_PARTITION, prefix, SourceQueries(source=query, is_query=True, **common))
            ]
        else:
            partitions = [
                _Partition({TABLE_FIELD: table}, prefix + table, SourceQueries(source=table, **common))
                for table in source_tables(config)
            ]
        self._config = config
        self._mode = mode
        self._partitions = partitions
        self._poll_interval = config.get_int(POLL_INTERVAL_MS_CONFIG) / 1000

    def _committed(self, partition: _Partition, offsets: OffsetStorageReader) -> Position | None:
        offset = offsets.offset(partition.partition)
        try:
            return Position.from_offset(self._mode, offset)
        except ValueError as e:
            raise ConnectException(f"The committed offset {offset} of {partition.partition}: {e}") from e

    def _read(self, spark: SparkSession, query: str) -> DataFrame:
        assert self._config is not None
        options = jdbc_options(self._config)
        if "driver" in options and options["driver"].startswith("org.postgresql."):
            options["sessionInitStatement"] = POSTGRESQL_SESSION_INIT
            options["fetchsize"] = str(_POSTGRESQL_FETCH_ROWS)
        return spark.read.format("jdbc").options(**options).option("query", query).load()

    def _poll(
        self, spark: SparkSession, partition: _Partition, offsets: OffsetStorageReader, limit: int | None
    ) -> SourceBatch:
        """The partition's next rows (at most ``limit``, the executor's batch limit, and
        ``batch.max.rows``), or a batch without data when nothing is new."""
        queries = partition.queries
        if self._mode == MODE_BULK:
            rows = self._read(spark, queries.bulk_query())
            return SourceBatch(
                data=row_records(rows, partition.topic, partition.table), topics=frozenset({partition.topic})
            )
        after = self._committed(partition, offsets)
        bound = self._read(spark, queries.bounds_query(after, limit)).collect()
        if not bound:
            return SourceBatch(data=None, offsets=[])
        try:
            upto = queries.bound_from_row(bound[0].asDict())
        except ValueError as e:
            raise ConnectException(
                f"{partition.partition}: the incrementing column must hold integers and the timestamp "
                f"columns timestamps ({e})"
            ) from e
        rows = self._read(spark, queries.batch_query(after, upto))
        return SourceBatch(
            data=row_records(rows, partition.topic, partition.table),
            offsets=[(partition.partition, upto.to_offset())],
            topics=frozenset({partition.topic}),
        )

    def read_batch(
        self, spark: SparkSession, offsets: OffsetStorageReader, context: BatchContext
    ) -> SourceBatch:
        if self._config is None:
            raise ConnectException("JdbcSourceTask is not started")
        now = time.monotonic()
        # The table waiting longest goes first; the others keep their turn for the next batches.
        for partition in sorted((p for p in self._partitions if p.due <= now), key=lambda p: p.due):
            batch = self._poll(spark, partition, offsets, context.max_records)
            if batch.data is None or self._mode == MODE_BULK:
                partition.due = time.monotonic() + self._poll_interval
            else:
                partition.due = time.monotonic()
            if batch.data is not None:
                return batch
        return SourceBatch(data=None, offsets=[])

    def produce_heartbeat_records(
        self, offsets: OffsetStorageReader, context: BatchContext
    ) -> list[SourceRecord]:
        """One record per partition with a committed offset, carrying it again (see the module
        doc). Asks nothing of the database."""
        if self._config is None:
            raise ConnectException("JdbcSourceTask is not started")
        records: list[SourceRecord] = []
        keys = offset_fields(self._mode)
        for partition in self._partitions:
            position = self._committed(partition, offsets) if keys else None
            if position is None:
                continue
            offset = position.to_offset()
            ((partition_key, name),) = partition.partition.items()
            records.append(
                SourceRecord(
                    source_partition=dict(partition.partition),
                    source_offset=offset,
                    # The executor sends it to the heartbeat topic whatever this says.
                    topic=partition.topic,
                    key=name,
                    value={**partition.partition, **offset},
                    value_schema=_heartbeat_schema(partition_key, list(offset)),
                )
            )
        return records

    def stop(self) -> None:
        """Each batch is its own Spark job; nothing stays open."""
