"""The ``sluiceway-source-task`` data source: one bounded batch of a record-level source task
(Kafka Connect's ``SourceTask``), polled inside Spark.

It instantiates the task class on a Spark worker with the task's current offsets (serialised in an
option), starts it, calls ``poll()`` until it returns nothing, the batch limit is reached or the
poll window closes (then ``stop()`` makes a waiting poll return), and yields one row per record:
topic, partition, timestamp, headers, key and value converted to Kafka bytes by the record-level
converters, and the record's source partition and offset as JSON with its position in the poll
order (``seq``). When the executor says a heartbeat is due (option ``heartbeat.topic``), the task's
``produce_heartbeat_records()`` is called after ``start()`` and before the first ``poll()``; its
records come first, routed to that topic and flagged in the ``heartbeat`` column (KIP-910).

Also what a record-level task inside Spark, source or sink, is found by: its class's dotted path
(``class_path``, ``load_chosen_class``) and the converter keys of its configs
(``converter_settings``). The executor side, which starts a batch, is
``sluiceway_executor/pipelines/record_tasks.py``. This module imports Spark; it is loaded on the
executor and in Spark's Python workers.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator, Mapping, MutableMapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    BooleanType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
)

from sluiceway.common.offsets import OffsetPair
from sluiceway.connect import (
    ConnectException,
    MemoryOffsetStorageReader,
    SimpleSourceTaskContext,
    SourceRecord,
    SourceTask,
    Task,
)
from sluiceway.connect.plugin_imports import class_name_of
from sluiceway.connect.plugins import load_class

if TYPE_CHECKING:
    from sluiceway_executor.converters.base import Converter

__all__ = [
    "DEFAULT_POLL_WINDOW_MS",
    "SOURCE_SCHEMA",
    "SOURCE_TASK_FORMAT",
    "SourceTaskDataSource",
    "SourceTaskOptions",
    "class_path",
    "converter_settings",
    "load_chosen_class",
    "poll_source_task",
    "source_row",
]

SOURCE_TASK_FORMAT: Final = "sluiceway-source-task"
# How long one source batch keeps polling at most; a poll still waiting then is ended by stop().
DEFAULT_POLL_WINDOW_MS: Final = 1000

_HEADER = StructType([StructField("key", StringType()), StructField("value", BinaryType())])
SOURCE_SCHEMA: Final = StructType(
    [
        StructField("topic", StringType()),
        StructField("partition", IntegerType()),
        # Milliseconds since the epoch; null lets the producer stamp the record.
        StructField("timestamp", LongType()),
        StructField("headers", ArrayType(_HEADER)),
        StructField("key", BinaryType()),
        StructField("value", BinaryType()),
        StructField("source_partition", StringType()),
        StructField("source_offset", StringType()),
        StructField("seq", LongType()),
        # KIP-910: a heartbeat record, sent to the heartbeat topic.
        StructField("heartbeat", BooleanType()),
    ]
)


def class_path(cls: type) -> str:
    return class_name_of(cls)


def load_chosen_class(dotted: str, plugin_path: Sequence[str]) -> type:
    """Inside Spark: the task class the executor chose (and checked against its installed plugins
    and plugin.path); a module in the plugin.path directories is imported from them."""
    return load_class(dotted, packages=(dotted.split(".", maxsplit=1)[0],), plugin_path=plugin_path)


def converter_settings(config: Mapping[str, str]) -> dict[str, str]:
    """Only the converter keys of a config: nothing else (no secrets) travels to Spark."""
    return {k: v for k, v in config.items() if k.startswith(("key.converter", "value.converter"))}


def _json_option(options: Mapping[str, str], key: str, default: Any) -> Any:
    raw = options.get(key)
    if raw is None or not str(raw).strip():
        return default
    try:
        return json.loads(str(raw))
    except json.JSONDecodeError as exc:
        raise ValueError(f"{SOURCE_TASK_FORMAT}: option '{key}' is not JSON: {exc}") from None


@dataclass(frozen=True)
class SourceTaskOptions:
    """What one read of ``sluiceway-source-task`` runs."""

    task_class: str
    task_config: dict[str, str]
    offsets: list[OffsetPair]
    max_records: int
    poll_window_ms: int
    connector_converters: dict[str, str]
    worker_converters: dict[str, str]
    # Where this batch's heartbeat records go; empty: no heartbeat in this batch.
    heartbeat_topic: str = ""
    # The worker's plugin.path, where the task class's module may live.
    plugin_path: tuple[str, ...] = ()

    def to_options(self) -> dict[str, str]:
        return {
            "task.class": self.task_class,
            "task.config": json.dumps(self.task_config),
            "offsets": json.dumps([[p, o] for p, o in self.offsets]),
            "max.records": str(self.max_records),
            "poll.window.ms": str(self.poll_window_ms),
            "connector.converters": json.dumps(self.connector_converters),
            "worker.converters": json.dumps(self.worker_converters),
            "heartbeat.topic": self.heartbeat_topic,
            "plugin.path": json.dumps(list(self.plugin_path)),
        }

    @classmethod
    def parse(cls, options: Mapping[str, str]) -> SourceTaskOptions:
        task_class = str(options.get("task.class") or "").strip()
        if not task_class:
            raise ValueError(f"{SOURCE_TASK_FORMAT}: option 'task.class' is required")
        offsets = _json_option(options, "offsets", [])
        if not isinstance(offsets, list) or not all(
            isinstance(item, list) and len(item) == 2 and isinstance(item[0], dict) for item in offsets
        ):
            raise ValueError(f"{SOURCE_TASK_FORMAT}: option 'offsets' must be a list of [partition, offset]")
        return cls(
            task_class=task_class,
            task_config={str(k): str(v) for k, v in _json_option(options, "task.config", {}).items()},
            offsets=[(dict(p), None if o is None else dict(o)) for p, o in offsets],
            max_records=max(1, int(str(options.get("max.records") or 10_000))),
            poll_window_ms=max(0, int(str(options.get("poll.window.ms") or DEFAULT_POLL_WINDOW_MS))),
            connector_converters=dict(_json_option(options, "connector.converters", {})),
            worker_converters=dict(_json_option(options, "worker.converters", {})),
            heartbeat_topic=str(options.get("heartbeat.topic") or "").strip(),
            plugin_path=tuple(str(d) for d in _json_option(options, "plugin.path", [])),
        )


def _headers(record: SourceRecord) -> list[tuple[str, bytes | None]] | None:
    if not record.headers:
        return None
    result: list[tuple[str, bytes | None]] = []
    for key, value in record.headers:
        result.append((key, value.encode("utf-8") if isinstance(value, str) else value))
    return result


def _canonical(value: Mapping[str, Any]) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"))


def source_row(
    record: SourceRecord,
    key_converter: Converter,
    value_converter: Converter,
    seq: int,
    heartbeat_topic: str = "",
) -> tuple[Any, ...]:
    """One record as a row of SOURCE_SCHEMA, key and value converted to Kafka bytes. With a
    ``heartbeat_topic`` it is a heartbeat record: it goes to that topic, to the partition the
    producer picks (the record's own topic and partition are not the heartbeat topic's)."""
    return (
        heartbeat_topic or record.topic,
        None if heartbeat_topic else record.kafka_partition,
        record.timestamp_ms,
        _headers(record),
        key_converter.from_connect_value(record.key, record.key_schema),
        value_converter.from_connect_value(record.value, record.value_schema),
        _canonical(record.source_partition),
        _canonical(record.source_offset),
        seq,
        bool(heartbeat_topic),
    )


class _StopOnce:
    def __init__(self, task: Task) -> None:
        self._task = task
        self._lock = threading.Lock()
        self._stopped = False

    def __call__(self) -> None:
        with self._lock:
            if self._stopped:
                return
            self._stopped = True
        self._task.stop()


def poll_source_task(options: SourceTaskOptions) -> Iterator[tuple[Any, ...]]:
    """The rows of one batch of a record-level source task (see the module doc)."""
    from sluiceway_executor.converters.registry import converter_for

    cls = load_chosen_class(options.task_class, options.plugin_path)
    if not issubclass(cls, SourceTask):
        raise ConnectException(f"{options.task_class} is not a SourceTask")
    key_converter = converter_for(options.connector_converters, "key", options.worker_converters)
    value_converter = converter_for(options.connector_converters, "value", options.worker_converters)
    task = cls()
    task.initialize(SimpleSourceTaskContext(options.task_config, MemoryOffsetStorageReader(options.offsets)))
    task.start(options.task_config)
    stop = _StopOnce(task)
    timer = threading.Timer(options.poll_window_ms / 1000, stop)
    timer.daemon = True
    timer.start()
    deadline = time.monotonic() + options.poll_window_ms / 1000
    # Heartbeat records come first (the task is asked before it polls) and do not count against
    # max_records; ``seq`` runs on through them, so a polled record's offset wins over a heartbeat's.
    seq = 0
    produced = 0
    try:
        if options.heartbeat_topic:
            for record in task.produce_heartbeat_records():
                yield source_row(record, key_converter, value_converter, seq, options.heartbeat_topic)
                seq += 1
        while produced < options.max_records and time.monotonic() < deadline:
            records = task.poll()
            if not records:
                break
            for record in records[: options.max_records - produced]:
                yield source_row(record, key_converter, value_converter, seq)
                seq += 1
                produced += 1
    finally:
        timer.cancel()
        stop()


class _SourceTaskReader(DataSourceReader):
    def __init__(self, options: SourceTaskOptions) -> None:
        self.options = options

    def partitions(self) -> Sequence[InputPartition]:
        # One task instance per batch: its records and offsets are one ordered stream.
        return [InputPartition(0)]

    def read(self, partition: InputPartition) -> Iterator[tuple[Any, ...]]:
        yield from poll_source_task(self.options)


class SourceTaskDataSource(DataSource):
    """One bounded batch of a record-level source task, polled inside Spark."""

    def __init__(self, options: MutableMapping[str, str]) -> None:
        super().__init__(options)
        self.parsed = SourceTaskOptions.parse(options)

    @classmethod
    def name(cls) -> str:
        return SOURCE_TASK_FORMAT

    def schema(self) -> StructType:
        return SOURCE_SCHEMA

    def reader(self, schema: StructType) -> DataSourceReader:
        return _SourceTaskReader(self.parsed)
