"""The source pipeline: the source task reads a bounded batch inside Spark → converters → Kafka
(docs/ARCHITECTURE.md §3). The batch's source offsets are committed once the Kafka writer has had every record
acknowledged (idempotent producer, acks=all).

- A :class:`~sluiceway.connect.DataFrameSourceTask` returns the batch as a DataFrame plus the
  offsets it reaches; key and value go through the converters as Spark expressions.
- A record-level :class:`~sluiceway.connect.SourceTask` runs inside Spark through the
  ``sluiceway-source-task`` data source (``datasources/source_task.py``), which converts each record with the
  record-level converters. The read is made deterministic (``localCheckpoint``) before it is
  written, so the records written and the offsets computed from them (the last offset of each
  source partition, a small aggregation) come from the same poll.

Before a batch is written, the topics it writes to go through the task's `TopicCreator`
(KIP-158): when the connector uses topic creation, a topic the task meets for the first time is
created if missing, so no record reaches a topic that was not checked.

Heartbeat records (KIP-910, ``heartbeats.py``): when the task has a heartbeat hook of its own and
the connector's heartbeat interval has run out, the batch starts with the hook. A DataFrame-level
task's hook runs here; its records are converted one by one and written to the heartbeat topic
before ``read_batch``. A record-level task's hook runs inside Spark, in the same task instance that
then polls, and its records come out of the read first. Either way the heartbeat topic is created
when missing before anything is written to it, and the heartbeat records' offsets are committed
with the batch's (a later offset of the same source partition wins), so an idle task's batch
commits only them.

Offsets are kept in memory: the assignment's committed offsets, updated after each accepted commit.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import time
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any, Final

from sluiceway.common.offsets import OffsetPair
from sluiceway.connect import (
    BatchContext,
    ConnectException,
    DataFrameSourceTask,
    MemoryOffsetStorageReader,
    OffsetStorageReader,
    SourceTask,
    Task,
)
from sluiceway.connect.kafka_clients import kafka_client_config
from sluiceway_executor.heartbeats import (
    HeartbeatTimer,
    heartbeat_settings,
    heartbeat_topic_creator,
    overrides_heartbeat_hook,
)
from sluiceway_executor.pipelines.batch_sizing import BatchSizer
from sluiceway_executor.pipelines.error_handling import ErrorHandling, log_source_failures
from sluiceway_executor.pipelines.failure_isolation import (
    ROW_ID,
    is_data_error,
    isolated,
    united,
    with_row_ids,
)
from sluiceway_executor.pipelines.loading import worker_policy
from sluiceway_executor.pipelines.observed import Observed, Tally, counts_enabled
from sluiceway_executor.pipelines.pipeline import BatchOutcome, canonical, merge_offsets
from sluiceway_executor.pipelines.spec import TaskSpec, batch_limits
from sluiceway_executor.record_errors import ERROR_COLUMN, Stage, has_error_column, marked, with_error_column
from sluiceway_executor.topic_creation import TopicCreator

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, Row, SparkSession

__all__ = ["SourcePipeline", "last_offsets"]

log = logging.getLogger(__name__)

TOPIC_CONFIG: Final = "topic"
_FORMAT: Final = "sluiceway-kafka"
_KAFKA_COLUMNS: Final = ("topic", "partition", "timestamp", "headers")
_WRITTEN_COLUMNS: Final = (*_KAFKA_COLUMNS, "key", "value")


def topics_written(found: Iterable[object], default_topic: str) -> frozenset[str]:
    """The topics records go to, from their `topic` values: a null one goes to the connector's
    `topic` (the writer's `topic` option)."""
    return frozenset(str(t) if t is not None else default_topic for t in found) - {""}


def _only_topics(topics: frozenset[str], default_topic: str, task: str, checked: str = "topic") -> Column:
    """Column ``checked`` (the ``topic`` column itself by default), failing at a record whose topic
    is not one of ``topics``. A null topic is the connector's ``topic`` (the writer's default), so
    it passes when that is listed."""
    from pyspark.sql import functions as F  # noqa: N812 - Spark's usual alias

    topic = F.col("topic")
    listed = sorted(topics)
    allowed = topic.isin(*listed) if listed else F.lit(False)
    if default_topic and default_topic in topics:
        allowed = topic.isNull() | allowed
    shown = F.coalesce(topic, F.lit("(none)"))
    message = F.concat(
        F.lit(f"{task} said its batch writes to [{', '.join(listed)}] only; a record goes to "), shown
    )
    return F.when(allowed, F.col(checked)).otherwise(F.raise_error(message))


def _records_only(tally: Tally | None) -> Tally | None:
    """A source's read count: records, no bytes (what a task reads has no wire size yet)."""
    return None if tally is None else Tally(tally.records)


def last_offsets(summary: list[Row], default_topic: str = "") -> tuple[list[OffsetPair], frozenset[str], int]:
    """From rows (source_partition JSON, topic, last_offset JSON, last_seq, records): the offset
    of the last record of each source partition, the topics written (`default_topic` for rows
    without one) and the record count."""
    latest: dict[str, tuple[int, dict[str, Any], dict[str, Any]]] = {}
    records = 0
    for row in summary:
        partition = json.loads(row["source_partition"])
        offset = json.loads(row["last_offset"])
        seq = int(row["last_seq"])
        key = canonical(partition)
        if key not in latest or latest[key][0] < seq:
            latest[key] = (seq, partition, offset)
        records += int(row["records"])
    ordered = sorted(latest.values(), key=lambda item: item[0])
    topics = topics_written((row["topic"] for row in summary), default_topic)
    return [(partition, offset) for _, partition, offset in ordered], topics, records


class SourcePipeline:
    """Runs one source task (DataFrame-level, or record-level inside Spark) batch by batch."""

    def __init__(
        self, spark: SparkSession, spec: TaskSpec, worker_config: Mapping[str, str], task_class: type[Task]
    ) -> None:
        if not issubclass(task_class, DataFrameSourceTask | SourceTask):
            raise ConnectException(f"{task_class.__qualname__} is not a source task")
        self._spark = spark
        self.spec = spec
        self._worker_config = dict(worker_config)
        self._policy = worker_policy(worker_config)
        self._task_class = task_class
        self._task: DataFrameSourceTask | None = None
        # The committed source offsets, kept current from this task's accepted commits.
        self._offsets: dict[str, OffsetPair] = {}
        for partition, offset in spec.source_offsets:
            self._remember(partition, offset)
        self._topic = (
            spec.task_config.get(TOPIC_CONFIG) or spec.connector_config.get(TOPIC_CONFIG) or ""
        ).strip()
        self._sizer = BatchSizer(batch_limits(spec.connector_config))
        # The counts of the batch under way: what its task read, and each write to Kafka.
        self._read: Observed | None = None
        self._writes: list[Observed] = []
        # metrics.task.counts.enable=false: no counts in the plan (a record-level batch is counted
        # by its summary anyway, a DataFrame-level one goes uncounted).
        self._counting = counts_enabled(worker_config)
        producer_config = kafka_client_config(worker_config, "producer", spec.connector_config)
        self._bootstrap = producer_config.pop("bootstrap.servers")
        self._producer_config = producer_config
        name = f"task {spec.task_index} of {spec.connector}"
        self._topic_creator = TopicCreator(worker_config, spec.connector_config, task=name)
        from sluiceway_executor.transforms.chain import TransformChain

        self._chain = TransformChain(())  # the connector's, from start()
        self._errors = ErrorHandling.of(spec.connector_config)
        # KIP-910: a task that keeps the SDK's heartbeat hook is never asked; its timer stays off.
        self._heartbeat_topic = ""
        self._heartbeats = HeartbeatTimer(0)
        self._heartbeat_creator: TopicCreator | None = None
        if overrides_heartbeat_hook(task_class):
            settings = heartbeat_settings(worker_config, spec.connector_config)
            if settings.enabled:
                self._heartbeat_topic = settings.topic
                self._heartbeats = HeartbeatTimer(settings.interval_ms)
                self._heartbeat_creator = heartbeat_topic_creator(
                    worker_config, spec.connector_config, task=name
                )
                log.info(
                    "%s: heartbeat records every %d ms to topic %s",
                    name,
                    settings.interval_ms,
                    settings.topic,
                )

    def start(self) -> None:
        from sluiceway_executor.converters.registry import converter_for
        from sluiceway_executor.transforms.chain import connector_chain

        self._key_converter = converter_for(self.spec.connector_config, "key", self._worker_config)
        self._value_converter = converter_for(self.spec.connector_config, "value", self._worker_config)
        self._chain = connector_chain(self.spec.connector_config, self._policy.plugin_path)
        if issubclass(self._task_class, DataFrameSourceTask):
            task = self._task_class()
            task.start(self.spec.task_config)
            self._task = task

    # ------------------------------------------------------------------ batches

    def seconds_until_heartbeat(self) -> float | None:
        """When the task's next heartbeat is due (see ``SchedulesHeartbeats``)."""
        return self._heartbeats.seconds_left()

    def run_batch(self, batch_id: int) -> BatchOutcome:
        heartbeat = self._heartbeats.due()
        if heartbeat:
            # The next one is an interval from now, whatever this one brings.
            self._heartbeats.reset()
        began = time.monotonic()
        limit = self._sizer.next_limit()
        self._read, self._writes = None, []
        if self._task is not None:
            outcome = self._dataframe_batch(self._task, batch_id, heartbeat, limit)
        else:
            outcome = self._record_batch(heartbeat, limit)
        took = time.monotonic() - began
        if not outcome.empty:
            self._sizer.observe(limit, outcome.records, took)
        read = outcome.read if self._read is None else _records_only(self._read.tally())
        written = self._written()
        return dataclasses.replace(
            outcome, steps={"write": took}, read=read, written=outcome.written if written is None else written
        )

    def _written(self) -> Tally | None:
        """What the batch's writes to Kafka counted (heartbeat records too); None when one of them
        has no count."""
        tallies = [observed.tally() for observed in self._writes]
        if not tallies or any(tally is None for tally in tallies):
            return None
        counted = [tally for tally in tallies if tally is not None]
        sizes = [tally.bytes for tally in counted]
        size = None if any(b is None for b in sizes) else sum(b for b in sizes if b is not None)
        return Tally(sum(tally.records for tally in counted), size)

    def _dataframe_batch(
        self, task: DataFrameSourceTask, batch_id: int, heartbeat: bool, limit: int
    ) -> BatchOutcome:
        context = BatchContext(self.spec.connector, self.spec.task_index, batch_id, max_records=limit)
        committed = self.current_offsets()
        beat = BatchOutcome(records=0)
        if heartbeat:
            beat = self._dataframe_heartbeat(task, MemoryOffsetStorageReader(committed), context)
        # read_batch continues from the heartbeat's offsets: they are committed together.
        reader = MemoryOffsetStorageReader([*committed, *beat.offsets])
        batch = task.read_batch(self._spark, reader, context)
        offsets = merge_offsets(beat.offsets, batch.offsets)
        if batch.data is None:
            return BatchOutcome(records=0, offsets=offsets, topics=beat.topics, end_of_data=batch.end_of_data)
        data = batch.data
        if self._errors.tolerant or self._chain:
            self._read = Observed("read", enabled=self._counting)
            data = self._read.watch(data)
        skipped, pinned = 0, False
        write_topic = self._topic
        if self._errors.tolerant:
            out, skipped = self._tolerated(with_error_column(data))
            pinned, has_topic = True, "topic" in out.columns
        else:
            transformed = self._transformed(data)
            out = self._for_kafka(transformed)
            # Asked of what _for_kafka has analysed already: asking `out` would be one more
            # analysis, and of a JDBC read one more database connection, per batch.
            has_topic = "topic" in transformed.columns
        if not has_topic:  # no topic column before the chain, and none added by it
            topics = frozenset({self._topic})
        elif batch.topics is not None and not self._chain:
            topics = topics_written(batch.topics, self._topic)
            task_name = self._task_class.__qualname__
            if len(topics) == 1:
                # One topic: the writer is told it once, and each record's topic is checked but not
                # sent along (a string per record between Spark and the writer; 5% of a batch of a
                # JDBC table). For a literal topic Spark folds the check away.
                (write_topic,) = topics
                out = out.withColumn("value", _only_topics(batch.topics, self._topic, task_name, "value"))
                out = out.drop("topic")
            else:
                out = out.withColumn("topic", _only_topics(batch.topics, self._topic, task_name))
        else:
            # The topics written are needed (KIP-558), and the task's or a router's may be any:
            # read them from the very records written.
            out = out if pinned else out.localCheckpoint()
            found = [row[0] for row in out.select("topic").distinct().collect()]
            topics = topics_written(found, self._topic)
        self._write(out, topics, write_topic)
        if self._read is None:
            # Without transforms or tolerated errors every record read is written: the write's count
            # stands for the read too, which spares the batch a second observed node.
            self._read = self._writes[-1]
        return BatchOutcome(
            records=None,
            offsets=offsets,
            topics=topics | beat.topics,
            end_of_data=batch.end_of_data,
            skipped=skipped,
        )

    def _tolerated(self, data: DataFrame) -> tuple[DataFrame, int]:
        """errors.tolerance=all: ``data`` (with an error column, converted back to Connect columns
        for a record-level task) transformed and converted for Kafka, pinned, without the records
        that failed, and how many those were; each is logged when errors.log.enable says so. A
        source has no dead-letter queue (as in Kafka Connect): they are skipped. When a record's
        data fails the transforms' whole job (a Sql expression that raised), the records that fail
        alone are found by halves (``failure_isolation``)."""
        from pyspark.sql import functions as F  # noqa: N812 - Spark's usual alias

        def checked(part: DataFrame) -> DataFrame:
            return self._for_kafka(self._transformed(part))

        found: list[Any] = []
        try:
            pinned = checked(data).localCheckpoint()
        except Exception as e:
            if not is_data_error(e) or not self._chain:
                raise
            built, failures = isolated(with_row_ids(data), lambda part: checked(part.drop(ROW_ID)), e)
            stage, kind = Stage.TRANSFORMATION.value, self._chain.failing_class()
            found = [
                {"stage": stage, "class_name": kind, "exception": f.exception, "message": f.message}
                for f in failures
            ]
            if not built:
                return checked(data.limit(0)).drop(ERROR_COLUMN), len(found)
            pinned = united(built)
        errors = [
            row[0] for row in pinned.where(F.col(ERROR_COLUMN).isNotNull()).select(ERROR_COLUMN).collect()
        ]
        log_source_failures(self._errors, self.spec.name, [*errors, *found])
        return pinned.where(F.col(ERROR_COLUMN).isNull()).drop(ERROR_COLUMN), len(errors) + len(found)

    def _transformed(self, data: DataFrame) -> DataFrame:
        """The batch after the connector's transforms (the batch itself without any); records
        without a topic of their own get the connector's ``topic`` first, so that a router sees
        where they would go."""
        from pyspark.sql import functions as F  # noqa: N812 - Spark's usual alias

        if not self._chain:
            return data
        if "topic" not in data.columns and self._topic:
            data = data.withColumn("topic", F.lit(self._topic))
        return self._chain.apply(data, is_sink=False)

    def _dataframe_heartbeat(
        self, task: DataFrameSourceTask, offsets: OffsetStorageReader, context: BatchContext
    ) -> BatchOutcome:
        """Calls the task's heartbeat hook and writes what it returns to the heartbeat topic; the
        outcome holds the records' offsets (not yet committed) and the topic, or nothing."""
        records = task.produce_heartbeat_records(offsets, context)
        if not records:
            return BatchOutcome(records=0)
        from sluiceway_executor.datasources.source_task import SOURCE_SCHEMA, source_row

        topic = self._heartbeat_topic
        rows = [
            source_row(record, self._key_converter, self._value_converter, seq, topic)
            for seq, record in enumerate(records)
        ]
        self._ensure_heartbeat_topic()
        self._write(self._spark.createDataFrame(rows, SOURCE_SCHEMA).select(*_WRITTEN_COLUMNS), {topic})
        return BatchOutcome(
            records=len(records),
            offsets=merge_offsets((r.source_partition, r.source_offset) for r in records),
            topics=frozenset({topic}),
        )

    def _ensure_heartbeat_topic(self) -> None:
        if self._heartbeat_creator is not None:
            self._heartbeat_creator.ensure([self._heartbeat_topic])

    def _for_kafka(self, data: DataFrame) -> DataFrame:
        """The batch's records laid out for the Kafka writer: key and value converted."""
        from pyspark.sql import functions as F  # noqa: N812 - Spark's usual alias

        columns = set(data.columns)
        if "value" not in columns:
            raise ConnectException(
                f"the batch of {self._task_class.__qualname__} has no 'value' column "
                f"(it has {', '.join(data.columns)})"
            )
        if "topic" not in columns and not self._topic:
            raise ConnectException(
                "records have no topic: the batch has no 'topic' column and the connector no "
                f"'{TOPIC_CONFIG}'"
            )
        fields = {field.name: field for field in data.schema.fields}
        if has_error_column(data):
            for name, converter in (("key", self._key_converter), ("value", self._value_converter)):
                problem = (
                    converter.from_connect_problem(F.col(name), fields[name]) if name in columns else None
                )
                if problem is not None:
                    data = marked(data, problem, converter.stage, converter.class_name)
        selected = [name for name in (*_KAFKA_COLUMNS, ERROR_COLUMN) if name in columns]
        key = (
            self._key_converter.from_connect_field(F.col("key"), fields["key"])
            if "key" in columns
            else F.lit(None).cast("binary")
        )
        return data.select(
            *selected,
            key.alias("key"),
            self._value_converter.from_connect_field(F.col("value"), fields["value"]).alias("value"),
        )

    def _record_batch(self, heartbeat: bool, limit: int) -> BatchOutcome:
        from pyspark.sql import functions as F  # noqa: N812 - Spark's usual alias

        from sluiceway_executor.pipelines.record_tasks import read_source_task

        read = read_source_task(
            self._spark,
            self._task_class,
            self.spec,
            self._worker_config,
            self.current_offsets(),
            max_records=limit,
            heartbeat_topic=self._heartbeat_topic if heartbeat else "",
        )
        # Deterministic from here on: the write and the offsets see the same records.
        records = read.localCheckpoint()
        summary = (
            records.groupBy("source_partition", "topic")
            .agg(
                F.max_by("source_offset", "seq").alias("last_offset"),
                F.max("seq").alias("last_seq"),
                F.count(F.lit(1)).alias("records"),
                F.count_if(F.col("heartbeat")).alias("heartbeats"),
                F.sum(F.coalesce(F.length("key"), F.lit(0)) + F.coalesce(F.length("value"), F.lit(0))).alias(
                    "bytes"
                ),
            )
            .collect()
        )
        offsets, written, count = last_offsets(summary, self._topic)
        if count == 0:
            return BatchOutcome(records=0)
        total_bytes = sum(int(row["bytes"] or 0) for row in summary)
        self._sizer.observe_sizes(count, total_bytes)
        heartbeats = sum(int(row["heartbeats"]) for row in summary)
        if heartbeats:
            self._ensure_heartbeat_topic()
        skipped = 0
        # What the summary counted is what goes to Kafka unless transforms or errors change it:
        # the count to fall back on when the write itself is not counted.
        summed: Tally | None = None
        if self._chain or self._errors.tolerant:
            out, written, skipped = self._reconverted(records, written)
        else:
            out = records.select(*_WRITTEN_COLUMNS)
            summed = Tally(count, total_bytes)
        self._write(out, written)
        # Heartbeat records are not data: a batch of nothing else counts as empty for the runner.
        return BatchOutcome(
            records=count - heartbeats,
            offsets=offsets,
            topics=written,
            skipped=skipped,
            read=Tally(count - heartbeats),
            written=summed,
        )

    def _reconverted(
        self, records: DataFrame, written: frozenset[str]
    ) -> tuple[DataFrame, frozenset[str], int]:
        """A record-level task's batch (pinned; converted record by record inside Spark) through
        the connector's transforms: its key and value read back into Connect columns by the same
        converters (which lose nothing of what they wrote), transformed, and converted again; the
        records a transform or converter fails on left out under errors.tolerance=all. Heartbeat
        records pass unchanged. Returns what to write, the topics written and the records left out."""
        from pyspark.sql import functions as F  # noqa: N812 - Spark's usual alias

        from sluiceway_executor.converters.connect_spark_json import with_connect_schemas

        data = records.where(~F.col("heartbeat")).select(*_WRITTEN_COLUMNS)
        beats = records.where(F.col("heartbeat")).select(*_WRITTEN_COLUMNS)

        schemas = {}
        if self._errors.tolerant:
            data = with_error_column(data)
        for name, converter in (("key", self._key_converter), ("value", self._value_converter)):
            converter.forget_expected()  # the batch's own schemas, whatever came before
            convert = converter.checked_frame if self._errors.tolerant else converter.connect_frame
            data, schema = convert(data, name)
            if schema is not None:
                schemas[name] = schema
        data = with_connect_schemas(data, schemas) if schemas else data
        skipped = 0
        if self._errors.tolerant:
            out, skipped = self._tolerated(data)
        else:
            out = self._for_kafka(self._transformed(data)).localCheckpoint()
        # A router may have sent the records anywhere: the topics are those of the records written.
        found = [row[0] for row in out.select("topic").distinct().collect()]
        beat_topics = {self._heartbeat_topic} & written if self._heartbeat_topic else set()
        return out.unionByName(beats), topics_written(found, self._topic) | beat_topics, skipped

    def _write(self, out: DataFrame, topics: frozenset[str] | set[str], topic: str | None = None) -> None:
        """Writes the batch to Kafka once every topic it writes to (``topics``) has been checked
        and, when missing, created (KIP-158). A batch for an internal topic fails unwritten.
        ``topic`` is where records without a topic of their own go (the connector's ``topic`` when
        None)."""
        internal = sorted(t for t in topics if self._policy.is_internal_topic(t))
        if internal:
            raise ConnectException(
                f"records of this batch go to internal topics ({', '.join(internal)}), which connectors "
                "may not write to; nothing of the batch was written"
            )
        self._topic_creator.ensure(topics)
        observed = Observed("written", sized=True, enabled=self._counting)
        self._writes.append(observed)
        writer = (
            observed.watch(out)
            .write.format(_FORMAT)
            .mode("append")
            .option("bootstrap.servers", self._bootstrap)
            .option("producer.config", json.dumps(self._producer_config))
        )
        default_topic = self._topic if topic is None else topic
        if default_topic:
            writer = writer.option("topic", default_topic)
        writer.save()

    def _remember(self, partition: Mapping[str, Any], offset: Mapping[str, Any] | None) -> None:
        key = canonical(partition)
        if offset is None:
            self._offsets.pop(key, None)
        else:
            self._offsets[key] = (dict(partition), dict(offset))

    def current_offsets(self) -> list[OffsetPair]:
        """The committed offset of every source partition the task has one for."""
        return list(self._offsets.values())

    def committed(self, outcome: BatchOutcome) -> None:
        for partition, offset in outcome.offsets:
            self._remember(partition, offset)

    def stop(self) -> None:
        task, self._task = self._task, None
        if task is not None:
            task.stop()
        self._chain.close()
