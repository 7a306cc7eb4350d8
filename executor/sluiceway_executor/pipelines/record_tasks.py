"""Record-level tasks (Kafka Connect's ``SourceTask`` / ``SinkTask``) run inside Spark, the
executor's side.

- Sources: :func:`read_source_task` reads the next batch of a task through the
  ``sluiceway-source-task`` data source (``sluiceway_executor/datasources/source_task.py``, which
  polls the task on a Spark worker).
- Sinks: :func:`run_sink_task` feeds a batch read from Kafka to one task instance inside Spark
  (``mapInArrow`` over the batch coalesced to one partition, so one instance sees the records of
  each partition in offset order, as Kafka Connect's single-threaded task does): ``start``,
  ``open``, ``put`` per Arrow batch, ``pre_commit`` (which flushes), ``close``, ``stop``. Each
  record's key and value are what the converters' ``to_connect_value`` reads from its bytes.
  A connector with transforms or errors.tolerance=all instead runs its task behind
  :class:`RecordSinkTaskAdapter`, a DataFrameSinkTask: the pipeline converts and transforms the
  batch in Spark (marking and leaving out the records that fail) as for any DataFrame-level sink,
  and the adapter feeds what is left to the task the same way, a typed key or value read from its
  column by its Connect schema, a text or bytes one by the converter as before.

This module imports Spark; it is loaded on the executor and in Spark's Python workers.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
from pyspark.sql import DataFrame, SparkSession

from sluiceway.common.offsets import OffsetPair
from sluiceway.connect import (
    BatchContext,
    ConnectException,
    DataFrameSinkTask,
    SinkRecord,
    SinkTask,
    SinkTaskContext,
    Task,
    TopicPartition,
)
from sluiceway.connect.data.schema import Schema
from sluiceway.connect.worker_policy import WorkerPolicy
from sluiceway_executor.datasources.source_task import (
    DEFAULT_POLL_WINDOW_MS,
    SOURCE_TASK_FORMAT,
    SourceTaskOptions,
    class_path,
    converter_settings,
    load_chosen_class,
)
from sluiceway_executor.pipelines.spec import TaskSpec

__all__ = ["RecordSinkTaskAdapter", "SinkTaskWriter", "read_source_task", "run_sink_task"]

log = logging.getLogger(__name__)


def read_source_task(
    spark: SparkSession,
    task_class: type[Task],
    spec: TaskSpec,
    worker_config: Mapping[str, str],
    offsets: list[OffsetPair],
    *,
    max_records: int,
    poll_window_ms: int = DEFAULT_POLL_WINDOW_MS,
    heartbeat_topic: str = "",
) -> DataFrame:
    """The next batch of a record-level source task as a DataFrame (SOURCE_SCHEMA). Evaluating it
    polls the task, so evaluate it once (``localCheckpoint``). With a ``heartbeat_topic`` the batch
    starts with the task's heartbeat records, sent to that topic."""
    options = SourceTaskOptions(
        task_class=class_path(task_class),
        task_config=dict(spec.task_config),
        offsets=offsets,
        max_records=max_records,
        poll_window_ms=poll_window_ms,
        connector_converters=converter_settings(spec.connector_config),
        worker_converters=converter_settings(worker_config),
        heartbeat_topic=heartbeat_topic,
        plugin_path=WorkerPolicy.from_worker_config(worker_config).plugin_path,
    )
    return spark.read.format(SOURCE_TASK_FORMAT).options(**options.to_options()).load()


# ---------------------------------------------------------------------------------- sinks


class _SparkSinkTaskContext(SinkTaskContext):
    """What a record-level sink task running inside Spark can ask of the framework: its config and
    its partitions. Rewinds, pauses and commit requests are not supported there (logged)."""

    def __init__(self, config: Mapping[str, str]) -> None:
        self._config = config
        self.partitions: set[TopicPartition] = set()

    def config(self) -> Mapping[str, str]:
        return self._config

    def offset(self, offsets: Mapping[TopicPartition, int]) -> None:
        log.warning("a sink task asked to rewind %s; not supported inside Spark, ignored", dict(offsets))

    def timeout(self, timeout_ms: int) -> None:
        log.debug("sink task retry timeout %d ms ignored", timeout_ms)

    def assignment(self) -> set[TopicPartition]:
        return set(self.partitions)

    def pause(self, *partitions: TopicPartition) -> None:
        log.debug("pause of %s ignored", partitions)

    def resume(self, *partitions: TopicPartition) -> None:
        log.debug("resume of %s ignored", partitions)

    def request_commit(self) -> None:
        """Every batch ends with a commit anyway."""


@dataclass(frozen=True)
class SinkTaskWriter:
    """The ``mapInArrow`` function that feeds a batch to one record-level sink task instance."""

    task_class: str
    task_config: dict[str, str]
    connector_converters: dict[str, str]
    worker_converters: dict[str, str]
    plugin_path: tuple[str, ...] = ()
    # Converted batches (RecordSinkTaskAdapter): the Connect schemas of a typed key and value, by
    # which their columns are read; a text or bytes column is read by the converter.
    converted: bool = False
    key_schema: Schema | None = None
    value_schema: Schema | None = None

    def __call__(self, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        from sluiceway_executor.converters.registry import converter_for

        cls = load_chosen_class(self.task_class, self.plugin_path)
        if not issubclass(cls, SinkTask):
            raise ConnectException(f"{self.task_class} is not a SinkTask")
        key_converter = converter_for(self.connector_converters, "key", self.worker_converters)
        value_converter = converter_for(self.connector_converters, "value", self.worker_converters)
        task = cls()
        context = _SparkSinkTaskContext(self.task_config)
        task.initialize(context)
        task.start(self.task_config)
        positions: dict[TopicPartition, int] = {}
        count = 0
        try:
            for batch in batches:
                if batch.num_rows == 0:
                    continue
                records = self._records(batch, key_converter, value_converter)
                new = sorted({r.topic_partition for r in records} - context.partitions)
                if new:
                    context.partitions.update(new)
                    task.open(new)
                task.put(records)
                for record in records:
                    positions[record.topic_partition] = record.kafka_offset + 1
                count += len(records)
            task.pre_commit(positions)
            if context.partitions:
                task.close(sorted(context.partitions))
        finally:
            task.stop()
        yield pa.RecordBatch.from_pydict({"records": [count]}, schema=pa.schema([("records", pa.int64())]))

    def _records(self, batch: pa.RecordBatch, key_converter: Any, value_converter: Any) -> list[SinkRecord]:
        from sluiceway.connect.data.spark import from_spark_value

        columns = {
            name: batch.column(i).to_pylist(maps_as_pydicts="strict")
            for i, name in enumerate(batch.schema.names)
        }
        stamps = batch.column(batch.schema.get_field_index("timestamp")).cast(pa.int64()).to_pylist()

        def read(converter: Any, schema: Schema | None, value: Any, part: str) -> Any:
            if schema is not None:
                return from_spark_value(schema, value, part)
            if self.converted and isinstance(value, str):  # the converter's text, as bytes again
                value = value.encode()
            return converter.to_connect_value(value)

        records = []
        for i in range(batch.num_rows):
            headers = columns["headers"][i]
            micros = stamps[i]
            records.append(
                SinkRecord(
                    topic=columns["topic"][i],
                    kafka_partition=columns["partition"][i],
                    kafka_offset=columns["offset"][i],
                    key=read(key_converter, self.key_schema, columns["key"][i], "key"),
                    value=read(value_converter, self.value_schema, columns["value"][i], "value"),
                    timestamp_ms=None if micros is None else micros // 1000,
                    headers=[] if headers is None else [(h["key"], h["value"]) for h in headers],
                )
            )
        return records


def _writer(
    task_class: type[Task], spec: TaskSpec, worker_config: Mapping[str, str], **converted: Any
) -> SinkTaskWriter:
    return SinkTaskWriter(
        task_class=class_path(task_class),
        task_config=dict(spec.task_config),
        connector_converters=converter_settings(spec.connector_config),
        worker_converters=converter_settings(worker_config),
        plugin_path=WorkerPolicy.from_worker_config(worker_config).plugin_path,
        **converted,
    )


def _fed(frame: DataFrame, writer: SinkTaskWriter) -> int:
    rows = frame.coalesce(1).mapInArrow(writer, "records long").collect()
    return sum(int(row["records"]) for row in rows)


def run_sink_task(
    raw: DataFrame, task_class: type[Task], spec: TaskSpec, worker_config: Mapping[str, str]
) -> int:
    """Feeds the raw Kafka records of a batch to the record-level sink task inside Spark; returns
    once the task flushed them (the records it handled)."""
    return _fed(raw, _writer(task_class, spec, worker_config))


class RecordSinkTaskAdapter(DataFrameSinkTask):
    """A record-level sink task as a DataFrameSinkTask, for connectors with transforms or
    errors.tolerance=all: each converted, transformed batch is fed to an instance of the task
    inside Spark (see the module doc)."""

    def __init__(self, task_class: type[Task], spec: TaskSpec, worker_config: Mapping[str, str]) -> None:
        if not issubclass(task_class, SinkTask):
            raise ConnectException(f"{task_class.__qualname__} is not a SinkTask")
        self._task_class = task_class
        self._spec = spec
        self._worker_config = dict(worker_config)

    def version(self) -> str:
        return self._task_class().version()

    def start(self, props: Mapping[str, str]) -> None:
        """The task itself starts inside Spark, once per batch."""

    def write_batch(self, batch: DataFrame, context: BatchContext) -> None:
        from sluiceway_executor.transforms.chain import record_columns

        # The schemas the converters and transforms gave the key and value, as the chain reads them.
        records = record_columns(batch)
        writer = _writer(
            self._task_class,
            self._spec,
            self._worker_config,
            converted=True,
            key_schema=records.key_schema,
            value_schema=records.value_schema,
        )
        _fed(batch.select("topic", "partition", "offset", "timestamp", "key", "value", "headers"), writer)

    def stop(self) -> None:
        """Each batch's instance stopped with its batch."""
