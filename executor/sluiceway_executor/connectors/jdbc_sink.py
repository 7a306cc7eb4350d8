"""JdbcSink: writes records with struct values into database tables (PostgreSQL), one row per
record, in the manner of Kafka's JDBC sink connector: ``insert.mode`` insert, upsert or update,
``pk.mode`` none, kafka, record_key or record_value, deletes on tombstones, ``auto.create`` and
``auto.evolve``. The keys are in ``jdbc_sink_config``, the columns a batch writes in
``jdbc_sink_columns``, the SQL in ``jdbc_sink_sql``.

A batch goes to the table ``table.name.format`` names for each topic in it (tables are made or
given columns first, as the keys allow). Spark's JDBC writer appends the batch to the target's
staging table (unlogged, one per target, connector and task, see ``jdbc_sink_sql``), then one
script, in one transaction, moves it into the target and empties the staging table: an INSERT ...
SELECT for ``insert``; for ``upsert`` an INSERT ... ON CONFLICT DO UPDATE of the last record of
each key (by topic, partition and offset); for ``update`` an UPDATE ... FROM of the same; with
``delete.enabled`` a key whose last record is a tombstone has its row deleted in the same
transaction.

So a batch reaches the target whole or not at all, whichever mode: a batch that failed half-way
(Spark's writer commits each of its partitions on its own) left rows in the staging table only,
which is made anew before the next batch. An ``upsert`` or ``update`` batch applied twice leaves
the table as applying it once does, which makes the sink exactly-once per key when a batch is
written again after a crash; ``insert`` is at-least-once (a batch written again after a crash
between its script and the commit of its offsets adds its rows again).

The database is reached only by Spark (an executor may have no route to it): DDL, the scripts and
the reads of table metadata run through Spark's JDBC source (``jdbc_statements``). A table's
columns are read once and kept, and read again after the sink changed the table or a batch failed;
DDL runs in the same Spark job as that read, under a lock on the table's name (``table_lock_sql``),
so tasks that find a table missing at the same moment do not fail on each other's CREATE TABLE.

Spark is imported only inside the task's batch method, so the control plane can load this plugin
without it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, ClassVar

import sluiceway
from sluiceway.connect import (
    AbstractConfig,
    BatchContext,
    ConfigDef,
    ConfigValue,
    ConnectException,
    DataFrameSinkTask,
    SinkConnector,
    Task,
    TopicPartition,
)
from sluiceway.connect.data.schema import TIMESTAMP_NAME
from sluiceway_executor.connectors.base import BuiltInConnector
from sluiceway_executor.connectors.jdbc_common import add_problems, jdbc_options
from sluiceway_executor.connectors.jdbc_sink_columns import (
    SinkColumn,
    TableColumns,
    columns_to_add,
    plan_columns,
)
from sluiceway_executor.connectors.jdbc_sink_config import (
    INSERT_MODE_INSERT,
    INSERT_MODE_UPSERT,
    PK_MODE_RECORD_KEY,
    TOPIC_PLACEHOLDER,
    SinkSettings,
    check_sink_config,
    config_problems,
    sink_config_def,
)
from sluiceway_executor.connectors.jdbc_sink_sql import (
    add_columns_sql,
    create_table_sql,
    insert_script,
    keeps_positions,
    sink_table_name,
    staging_column,
    staging_ddl,
    staging_table_name,
    table_columns_query,
    table_lock_sql,
    update_script,
    upsert_script,
)
from sluiceway_executor.connectors.jdbc_statements import database_error, read_rows, run_script
from sluiceway_executor.transforms.filtering import kept_rows

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession

__all__ = ["JdbcSinkConnector", "JdbcSinkTask", "sink_config_def", "sink_table_name"]


class JdbcSinkConnector(BuiltInConnector, SinkConnector):
    # Kafka's JDBC sink, and this connector's class before the JDBC module was split.
    ALIASES: ClassVar[tuple[str, ...]] = (
        "io.confluent.connect.jdbc.JdbcSinkConnector",
        "sluiceway_executor.connectors.jdbc.JdbcSinkConnector",
    )

    def config(self) -> ConfigDef:
        return sink_config_def()

    def validate(self, props: Mapping[str, str]) -> list[ConfigValue]:
        return add_problems(super().validate(props), config_problems)

    def _on_start(self, config: AbstractConfig) -> None:
        check_sink_config(config)

    def task_class(self) -> type[Task]:
        return JdbcSinkTask

    def alter_offsets(
        self, connector_config: Mapping[str, str], offsets: Mapping[TopicPartition, int | None]
    ) -> bool:
        # Offsets live only in the consumer group; the table needs no change.
        return True


class JdbcSinkTask(DataFrameSinkTask):
    def __init__(self) -> None:
        self._settings: SinkSettings | None = None
        self._options: dict[str, str] = {}
        # What each target table had when last read (or after the sink changed it).
        self._tables: dict[str, TableColumns] = {}
        # The DDL each staging table was last made with in this run of the task.
        self._staging: dict[str, tuple[str, ...]] = {}

    def version(self) -> str:
        return sluiceway.__version__

    def start(self, props: Mapping[str, str]) -> None:
        config = AbstractConfig(sink_config_def(), props)
        self._settings = SinkSettings.from_config(config)
        self._options = jdbc_options(config)
        self._tables.clear()
        self._staging.clear()

    def stop(self) -> None:
        """Each batch is its own Spark job; nothing stays open. Staging tables stay (empty)."""

    # -- the batch --

    def write_batch(self, batch: DataFrame, context: BatchContext) -> None:
        from pyspark.sql.types import StructType

        from sluiceway.connect.data.spark import from_spark_field

        settings = self._settings
        if settings is None:
            raise ConnectException("JdbcSinkTask is not started")
        if "value" not in batch.columns or not isinstance(batch.schema["value"].dataType, StructType):
            raise ConnectException(
                "JdbcSink needs structured record values: a struct 'value' column (from a converter "
                "with schemas, e.g. JsonConverter with schemas.enable=true)"
            )
        key_schema = None
        if settings.pk_mode == PK_MODE_RECORD_KEY:
            if "key" not in batch.columns:
                raise ConnectException(f"pk.mode '{PK_MODE_RECORD_KEY}' needs a 'key' column in the batch")
            key_schema = from_spark_field(batch.schema["key"])
        columns = plan_columns(settings, key_schema, from_spark_field(batch.schema["value"]))
        spark = batch.sparkSession
        for table, rows in self._by_table(batch, context, settings):
            staging = staging_table_name(table, context.connector, context.task_id)
            try:
                self._ensure_table(spark, settings, table, columns, staging)
                self._staged(spark, settings, table, staging, rows, columns)
            except Exception:
                # The table may have changed under us, or the staging table hold a failed batch:
                # look again before the next batch.
                self._tables.pop(table, None)
                self._staging.clear()
                raise

    def _by_table(
        self, batch: DataFrame, context: BatchContext, settings: SinkSettings
    ) -> list[tuple[str, DataFrame]]:
        from pyspark.sql import functions as F  # noqa: N812 - Spark's usual alias

        name_format = settings.table_name_format
        if TOPIC_PLACEHOLDER not in name_format:
            return [(sink_table_name(name_format, ""), batch)]
        # A router among the connector's transforms may have changed the topics read: then the
        # records' own topics name the tables.
        read = [] if context.topics_renamed else sorted({r.topic for r in context.ranges})
        topics = read or sorted(row[0] for row in batch.select("topic").distinct().collect())
        tables: dict[str, list[str]] = {}
        for topic in topics:
            tables.setdefault(sink_table_name(name_format, topic), []).append(topic)
        if len(tables) == 1:
            return [(next(iter(tables)), batch)]
        return [(table, batch.filter(F.col("topic").isin(names))) for table, names in tables.items()]

    @staticmethod
    def _source(column: SinkColumn) -> Column:
        from pyspark.sql import functions as F  # noqa: N812 - Spark's usual alias

        head, *rest = column.source
        expression = F.col(head)
        for name in rest:
            expression = expression.getField(name)
        if column.logical == TIMESTAMP_NAME:
            # An exact instant, whatever the JVM's or the session's time zone.
            expression = F.unix_micros(expression)
        return expression

    def _records(self, rows: DataFrame, settings: SinkSettings, columns: Sequence[SinkColumn]) -> DataFrame:
        """The rows to write, named as the staging table's columns, with the record's position and
        tombstone flag when the script needs them."""
        from pyspark.sql import functions as F  # noqa: N812 - Spark's usual alias

        values = [self._source(c).alias(staging_column(i)) for i, c in enumerate(columns)]
        meta = (
            [
                F.col("topic").alias("sl_topic"),
                F.col("partition").cast("int").alias("sl_partition"),
                F.col("offset").cast("long").alias("sl_offset"),
                F.col("value").isNull().alias("sl_tombstone"),
            ]
            if keeps_positions(settings.insert_mode, settings.delete_enabled)
            else []
        )
        if settings.delete_enabled:
            return rows.select(*meta, *values)
        # Tombstones are skipped: tested on the converted value without Spark parsing it twice.
        return kept_rows(rows, F.col("value").isNotNull(), [*meta, *values])

    def _append(self, rows: DataFrame, table: str, settings: SinkSettings) -> None:
        options = {**self._options, "batchsize": str(settings.batch_size)}
        if options["url"].startswith("jdbc:postgresql:"):
            # The driver sends a round trip's rows as one multi-row INSERT.
            options.setdefault("reWriteBatchedInserts", "true")
        try:
            rows.write.format("jdbc").options(**options).option("dbtable", table).mode("append").save()
        except Exception as e:
            raise database_error(f"Writing rows to {table}", e) from e

    def _staged(
        self,
        spark: SparkSession,
        settings: SinkSettings,
        table: str,
        staging: str,
        rows: DataFrame,
        columns: Sequence[SinkColumn],
    ) -> None:
        self._append(self._records(rows, settings, columns), staging, settings)
        script = {INSERT_MODE_INSERT: insert_script, INSERT_MODE_UPSERT: upsert_script}.get(
            settings.insert_mode, update_script
        )(table, staging, columns, settings.db_timezone, settings.delete_enabled)
        run_script(spark, self._options, script, f"Applying the batch ({settings.insert_mode}) to {table}")

    # -- table metadata and DDL --

    def _describe(
        self, spark: SparkSession, table: str, before: Sequence[str] = (), action: str = ""
    ) -> TableColumns:
        """Reads ``table``'s columns and keeps them, after running the statements ``before`` (DDL)
        in the same Spark job."""
        rows = read_rows(
            spark,
            self._options,
            table_columns_query(table),
            action or f"Reading the columns of {table}",
            before,
        )
        exists = bool(rows) and bool(rows[0]["table_exists"])
        names = frozenset(str(row["column_name"]) for row in rows if row["column_name"] is not None)
        described = TableColumns(exists, names)
        self._tables[table] = described
        return described

    def _ensure_table(
        self,
        spark: SparkSession,
        settings: SinkSettings,
        table: str,
        columns: Sequence[SinkColumn],
        staging: str,
    ) -> None:
        """Makes sure ``table`` exists with a column for each of ``columns``, creating or altering
        it as auto.create and auto.evolve allow (a ConnectException when they do not), and that the
        ``staging`` table is made for these columns. The staging DDL runs in the same Spark job as
        the target's DDL and the read of its columns when there is one: a task's first batch makes
        both tables and reads the target in one job."""
        ddl = tuple(
            staging_ddl(staging, columns, keeps_positions(settings.insert_mode, settings.delete_enabled))
        )
        # Made anew at a task's first batch and after a failed one: whatever was left there goes.
        pending = ddl if self._staging.get(staging) != ddl else ()
        known = self._tables.get(table)
        if known is not None and known.exists:
            described, fresh = known, False
        else:
            before = (
                [*pending, table_lock_sql(table), create_table_sql(table, columns)]
                if settings.auto_create
                else []
            )
            described, fresh = self._describe(spark, table, before, f"Creating table {table}"), True
            if before:
                self._staging[staging], pending = ddl, ()
            if not described.exists:
                wanted = ", ".join(column.name for column in columns)
                raise ConnectException(
                    f"Table {table} does not exist and auto.create is off: create it with the columns "
                    f"{wanted}, or set auto.create=true"
                )
        try:
            missing = columns_to_add(table, described, columns, settings.auto_evolve)
        except ConnectException:
            if fresh:
                raise
            # Perhaps someone added the columns since the table was read: read it again.
            missing = columns_to_add(table, self._describe(spark, table), columns, settings.auto_evolve)
        if missing:
            before = [*pending, table_lock_sql(table), add_columns_sql(table, missing)]
            self._describe(spark, table, before, f"Adding columns to {table}")
            self._staging[staging], pending = ddl, ()
        if pending:
            run_script(spark, self._options, pending, f"Creating staging table {staging}")
            self._staging[staging] = ddl
