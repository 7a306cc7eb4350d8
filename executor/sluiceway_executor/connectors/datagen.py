"""DataGenSource: deterministic generated records, the ground truth for loss tests and benchmarks.

Task ``t`` emits ``seq`` 0, 1, 2… with no gaps; the source partition is ``{"task": t}`` and the offset
of a record is ``{"seq": n}``, so a restarted task continues after its committed offset.
The record formats live in :mod:`sluiceway_executor.datagen_records`. ``value.type`` picks one:
``string`` (the default) gives a JSON text value padded to ``record.size.bytes``
(``datagen_record``, re-exported here, builds one in Python, ``datagen_frame`` a range of them in
Spark SQL); ``struct`` gives a typed value, an order of the Kafka Connect struct ``ORDER_SCHEMA``
(``sluiceway.datagen.Order``, version 1) that is a function of the seq alone (``typed_value`` in
Python, ``typed_frame`` in Spark SQL), for converters that write schemas and sinks that keep
types. The key is ``"{task}-{seq}"`` in both.

The connector's task is :class:`DataGenBatchTask`, which generates each batch with Spark SQL
(``datagen_frame``); :class:`DataGenSourceTask` produces the same records one poll at
a time (Kafka Connect's record-level API), for plugin authors and tests.

Both send heartbeat records (KIP-910) when the connector's heartbeat interval is set: one per
heartbeat, :func:`heartbeat_record`, carrying the task's committed offset unchanged, so the offsets
stay where the data left them while the heartbeat topic shows that an idle task is alive. A task
that has committed nothing yet has no offset to carry and sends none.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Final, TypeGuard

import sluiceway
from sluiceway.connect import (
    AbstractConfig,
    BatchContext,
    ConfigDef,
    ConfigType,
    ConnectException,
    DataFrameSourceTask,
    Importance,
    NonEmptyString,
    OffsetStorageReader,
    Range,
    SourceBatch,
    SourceConnector,
    SourceRecord,
    SourceTask,
    Task,
    ValidString,
    Width,
)
from sluiceway.connect.batch_config import DEFAULT_BATCH_MAX_RECORDS
from sluiceway.connect.data import schema_to_json
from sluiceway_executor.connectors.base import BuiltInConnector
from sluiceway_executor.datagen_records import (
    ORDER_SCHEMA,
    datagen_frame,
    datagen_record,
    typed_frame,
    typed_value,
)

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

__all__ = [
    "DataGenBatchTask",
    "DataGenSourceConnector",
    "DataGenSourceTask",
    "datagen_record",
    "heartbeat_record",
    "resume_seq",
    "source_partition",
    "typed_value",
]

TOPIC_CONFIG: Final = "topic"
MAX_RECORDS_CONFIG: Final = "max.records"
RECORDS_PER_SEC_CONFIG: Final = "records.per.sec"
RECORD_SIZE_BYTES_CONFIG: Final = "record.size.bytes"
VALUE_TYPE_CONFIG: Final = "value.type"
TASK_ID_CONFIG: Final = "task.id"

STRING_VALUES: Final = "string"
STRUCT_VALUES: Final = "struct"
VALUE_TYPES: Final = (STRING_VALUES, STRUCT_VALUES)

TASK_FIELD: Final = "task"
SEQ_FIELD: Final = "seq"

STRING_SCHEMA: Final[Mapping[str, Any]] = {"type": "string", "optional": False}
# ORDER_SCHEMA as the schema part of a JsonConverter envelope, for the record-level task's records.
ORDER_JSON_SCHEMA: Final[Mapping[str, Any]] = schema_to_json(ORDER_SCHEMA)
HEARTBEAT_SCHEMA: Final[Mapping[str, Any]] = {
    "type": "struct",
    "name": "sluiceway.datagen.Heartbeat",
    "optional": False,
    "fields": [
        {"field": TASK_FIELD, "type": "int32", "optional": False},
        {"field": SEQ_FIELD, "type": "int64", "optional": False},
        {"field": "ts", "type": "int64", "optional": False},
    ],
}

# Records per poll when neither max.records nor records.per.sec limits a batch further.
DEFAULT_POLL_BATCH: Final = 10_000
# How long an idle poll (max.records reached, or waiting for the rate limiter) blocks at most.
IDLE_WAIT_S: Final = 1.0

_GROUP = "DataGen"


def config_def() -> ConfigDef:
    return (
        ConfigDef()
        .define(
            TOPIC_CONFIG,
            ConfigType.STRING,
            documentation="The topic to write the generated records to.",
            validator=NonEmptyString(),
            importance=Importance.HIGH,
            group=_GROUP,
            order_in_group=1,
            width=Width.LONG,
            display_name="Topic",
        )
        .define(
            MAX_RECORDS_CONFIG,
            ConfigType.LONG,
            -1,
            Range.at_least(-1),
            Importance.MEDIUM,
            "Records each task generates before it idles; -1 generates without end.",
            _GROUP,
            2,
            Width.SHORT,
            "Max records per task",
        )
        .define(
            RECORDS_PER_SEC_CONFIG,
            ConfigType.DOUBLE,
            0.0,
            Range.at_least(0),
            Importance.MEDIUM,
            "Records per second each task generates at most; 0 means as fast as possible.",
            _GROUP,
            3,
            Width.SHORT,
            "Records per second",
        )
        .define(
            RECORD_SIZE_BYTES_CONFIG,
            ConfigType.INT,
            100,
            Range.at_least(1),
            Importance.LOW,
            "Approximate size of each record value in bytes: the JSON value is padded up to this size "
            "(values are never shorter than their task, seq and ts fields need). Only for "
            "value.type=string.",
            _GROUP,
            4,
            Width.SHORT,
            "Record size (bytes)",
        )
        .define(
            VALUE_TYPE_CONFIG,
            ConfigType.STRING,
            STRING_VALUES,
            ValidString.in_(*VALUE_TYPES, case_insensitive=True),
            Importance.MEDIUM,
            "What each record's value is. string: JSON text {task, seq, ts, payload} (the "
            "converter sees a string). struct: an order, a Kafka Connect struct named "
            "sluiceway.datagen.Order (version 1) with fields id (int64, the seq), sku (string), "
            "quantity (int32), unit_price (Decimal, scale 2, precision 10), paid (boolean), "
            "weight_kg (float64), ordered_at (Timestamp), ship_date (Date), note (optional string, "
            "null for every fourth seq) and customer (struct of name and city); every field is a "
            "function of the seq, so the same seq gives the same order in every task and run. With "
            "a converter that writes schemas (JsonConverter with schemas.enable=true) the records "
            "carry that schema.",
            _GROUP,
            5,
            Width.SHORT,
            "Value type",
        )
    )


def typed_values(config: AbstractConfig) -> bool:
    """Whether a task of ``config`` generates typed (struct) values."""
    return (config.get_string(VALUE_TYPE_CONFIG) or STRING_VALUES).lower() == STRUCT_VALUES


def task_config_def() -> ConfigDef:
    return config_def().define(
        TASK_ID_CONFIG,
        ConfigType.INT,
        validator=Range.at_least(0),
        importance=Importance.LOW,
        documentation="The index of the task; set by the connector.",
        internal=True,
    )


def source_partition(task: int) -> dict[str, Any]:
    return {TASK_FIELD: task}


def _is_int(value: Any) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool)


def resume_seq(offset: Mapping[str, Any] | None) -> int:
    """The first sequence number to generate after the committed ``offset`` (0 when there is none)."""
    if offset is None:
        return 0
    seq = offset.get(SEQ_FIELD)
    if not _is_int(seq) or seq < 0:
        raise ConnectException(
            f"The committed offset {dict(offset)} has no valid '{SEQ_FIELD}' (a long >= 0)"
        )
    return int(seq) + 1


def heartbeat_record(
    task: int, offset: Mapping[str, Any] | None, topic: str, ts_ms: int
) -> SourceRecord | None:
    """Task ``task``'s heartbeat record: key ``"{task}-heartbeat"``, value ``{"task": t, "seq": n,
    "ts": ms}`` with ``n`` the last sequence number committed, source partition ``{"task": t}`` and
    ``offset`` itself as its offset, so committing it moves nothing. None without an ``offset``."""
    if offset is None:
        return None
    seq = resume_seq(offset) - 1
    return SourceRecord(
        source_partition=source_partition(task),
        source_offset={SEQ_FIELD: seq},
        # The executor sends heartbeat records to the heartbeat topic; this one is not used.
        topic=topic,
        key=f"{task}-heartbeat",
        value={TASK_FIELD: task, SEQ_FIELD: seq, "ts": ts_ms},
        timestamp_ms=ts_ms,
        key_schema=STRING_SCHEMA,
        value_schema=HEARTBEAT_SCHEMA,
    )


class DataGenSourceConnector(BuiltInConnector, SourceConnector):
    def config(self) -> ConfigDef:
        return config_def()

    def task_class(self) -> type[Task]:
        return DataGenBatchTask

    def task_configs(self, max_tasks: int) -> list[dict[str, str]]:
        return [{**self._props, TASK_ID_CONFIG: str(task)} for task in range(max_tasks)]

    def alter_offsets(
        self,
        connector_config: Mapping[str, str],
        offsets: Sequence[tuple[Mapping[str, Any], Mapping[str, Any] | None]],
    ) -> bool:
        for partition, offset in offsets:
            task = partition.get(TASK_FIELD)
            # Exactly {"task": t}: any other partition would never be read by a task.
            if not _is_int(task) or task < 0 or set(partition) != {TASK_FIELD}:
                raise ConnectException(
                    f"Source partitions of this connector are {{'{TASK_FIELD}': <task index>}}, "
                    f"not {dict(partition)}"
                )
            if offset is None:
                continue  # a reset: the task starts again from seq 0
            seq = offset.get(SEQ_FIELD)
            if not _is_int(seq) or seq < 0:
                raise ConnectException(
                    f"Offsets of this connector are {{'{SEQ_FIELD}': <last generated seq, >= 0>}}, "
                    f"not {dict(offset)}"
                )
        return True


class DataGenSourceTask(SourceTask):
    def __init__(
        self,
        *,
        clock: Callable[[], float] = time.monotonic,
        wall_clock: Callable[[], float] = time.time,
        poll_batch: int = DEFAULT_POLL_BATCH,
    ) -> None:
        self._clock = clock
        self._wall_clock = wall_clock
        self._poll_batch = poll_batch
        self._stopping = threading.Event()
        self._task = 0
        self._topic = ""
        self._max_records = -1
        self._rate = 0.0
        self._size = 100
        self._typed = False
        self._next_seq = 0
        self._tokens = 0.0
        self._refilled_at = 0.0

    def version(self) -> str:
        return sluiceway.__version__

    def start(self, props: Mapping[str, str]) -> None:
        config = AbstractConfig(task_config_def(), props)
        self._task = config.get_int(TASK_ID_CONFIG)
        self._topic = config.get_string(TOPIC_CONFIG) or ""
        self._max_records = config.get_long(MAX_RECORDS_CONFIG)
        self._rate = config.get_double(RECORDS_PER_SEC_CONFIG)
        self._size = config.get_int(RECORD_SIZE_BYTES_CONFIG)
        self._typed = typed_values(config)
        self._next_seq = resume_seq(self.context.offset_storage_reader().offset(source_partition(self._task)))
        # One token up front so the first record is not delayed; the bucket holds at most one
        # second of records, so a slow consumer of the task never causes a large burst later.
        self._tokens = 1.0
        self._refilled_at = self._clock()

    @property
    def next_seq(self) -> int:
        return self._next_seq

    def _allowance(self) -> int:
        """How many records the rate limit lets through now (waiting briefly for the first one)."""
        if self._rate <= 0:
            return self._poll_batch
        now = self._clock()
        capacity = max(self._rate, 1.0)
        self._tokens = min(capacity, self._tokens + (now - self._refilled_at) * self._rate)
        self._refilled_at = now
        if self._tokens < 1.0:
            self._stopping.wait(min((1.0 - self._tokens) / self._rate, IDLE_WAIT_S))
            now = self._clock()
            self._tokens = min(capacity, self._tokens + (now - self._refilled_at) * self._rate)
            self._refilled_at = now
        return math.floor(self._tokens)

    def poll(self) -> list[SourceRecord] | None:
        if self._stopping.is_set():
            return None
        count = self._poll_batch
        if self._max_records >= 0:
            count = min(count, self._max_records - self._next_seq)
            if count <= 0:
                # max.records reached: idle until stopped.
                self._stopping.wait(IDLE_WAIT_S)
                return None
        count = min(count, self._allowance())
        if count <= 0 or self._stopping.is_set():
            return None
        if self._rate > 0:
            self._tokens -= count
        ts_ms = int(self._wall_clock() * 1000)
        partition = source_partition(self._task)
        records: list[SourceRecord] = []
        for seq in range(self._next_seq, self._next_seq + count):
            value: Any
            if self._typed:
                key, value, value_schema = f"{self._task}-{seq}", typed_value(seq), ORDER_JSON_SCHEMA
            else:
                key, value = datagen_record(self._task, seq, ts_ms, self._size)
                value_schema = STRING_SCHEMA
            records.append(
                SourceRecord(
                    source_partition=partition,
                    source_offset={SEQ_FIELD: seq},
                    topic=self._topic,
                    key=key,
                    value=value,
                    timestamp_ms=ts_ms,
                    key_schema=STRING_SCHEMA,
                    value_schema=value_schema,
                )
            )
        self._next_seq += count
        return records

    def produce_heartbeat_records(self) -> list[SourceRecord]:
        """One heartbeat record for the last record generated (none before the first)."""
        last = {SEQ_FIELD: self._next_seq - 1} if self._next_seq > 0 else None
        record = heartbeat_record(self._task, last, self._topic, int(self._wall_clock() * 1000))
        return [] if record is None else [record]

    def stop(self) -> None:
        self._stopping.set()


# Records a slice of one batch holds at least before the batch is cut into more slices.
_RECORDS_PER_SPARK_PARTITION: Final = 50_000
_MAX_SPARK_PARTITIONS: Final = 8


class DataGenBatchTask(DataFrameSourceTask):
    """Generates each batch with Spark SQL (``datagen_frame``, or ``typed_frame`` with
    ``value.type=struct``: a ``value`` struct column whose fields carry their Connect schemas).

    A batch continues after the committed ``{"seq": n}`` of the task's partition (0 when there is
    none) and holds min(the batch's ``max_records`` from the executor (the connector's ``batch.*``
    bounds), what remains of ``max.records``, what ``records.per.sec`` allows since the last batch)
    records. It keeps no position of its own: a batch whose offsets were not committed is generated
    again, identically. The batch that reaches ``max.records``, and every one after it, says
    ``end_of_data``.
    """

    def __init__(
        self, *, clock: Callable[[], float] = time.monotonic, wall_clock: Callable[[], float] = time.time
    ) -> None:
        self._clock = clock
        self._wall_clock = wall_clock
        self._started = False
        self._task = 0
        self._topic = ""
        self._max_records = -1
        self._rate = 0.0
        self._size = 100
        self._typed = False
        self._tokens = 0.0
        self._refilled_at = 0.0

    def version(self) -> str:
        return sluiceway.__version__

    def start(self, props: Mapping[str, str]) -> None:
        config = AbstractConfig(task_config_def(), props)
        self._task = config.get_int(TASK_ID_CONFIG)
        self._topic = config.get_string(TOPIC_CONFIG) or ""
        self._max_records = config.get_long(MAX_RECORDS_CONFIG)
        self._rate = config.get_double(RECORDS_PER_SEC_CONFIG)
        self._size = config.get_int(RECORD_SIZE_BYTES_CONFIG)
        self._typed = typed_values(config)
        # As the record-level task: one record may go out at once, then the rate's allowance.
        self._tokens = 1.0
        self._refilled_at = self._clock()
        self._started = True

    @property
    def topic(self) -> str:
        return self._topic

    def next_count(self, next_seq: int, limit: int = DEFAULT_BATCH_MAX_RECORDS) -> int:
        """How many records the next batch starting at ``next_seq`` holds, at most ``limit`` (0:
        nothing to do now). Takes them from the rate limiter's allowance."""
        count = limit
        if self._max_records >= 0:
            count = min(count, self._max_records - next_seq)
        if count <= 0:
            return 0
        if self._rate > 0:
            now = self._clock()
            # The allowance holds at most one batch, so a long pause never causes a larger burst.
            capacity = max(float(limit), 1.0)
            self._tokens = min(capacity, self._tokens + (now - self._refilled_at) * self._rate)
            self._refilled_at = now
            count = min(count, math.floor(self._tokens))
            self._tokens -= max(count, 0)
        return max(count, 0)

    def read_batch(
        self, spark: SparkSession, offsets: OffsetStorageReader, context: BatchContext
    ) -> SourceBatch:
        if not self._started:
            raise ConnectException("DataGenBatchTask is not started")
        partition = source_partition(self._task)
        next_seq = resume_seq(offsets.offset(partition))
        limit = DEFAULT_BATCH_MAX_RECORDS if context.max_records is None else context.max_records
        count = self.next_count(next_seq, limit)
        # max.records reached with this batch (or before it): nothing more will come.
        done = 0 <= self._max_records <= next_seq + max(count, 0)
        if count <= 0:
            return SourceBatch(data=None, offsets=[], end_of_data=done)
        parts = max(1, min(_MAX_SPARK_PARTITIONS, count // _RECORDS_PER_SPARK_PARTITION))
        if self._typed:
            data = typed_frame(spark, self._task, next_seq, count, parts)
        else:
            ts_ms = int(self._wall_clock() * 1000)
            data = datagen_frame(spark, self._task, next_seq, count, self._size, ts_ms, parts)
        last = {SEQ_FIELD: next_seq + count - 1}
        return SourceBatch(data=data.select("key", "value"), offsets=[(partition, last)], end_of_data=done)

    def produce_heartbeat_records(
        self, offsets: OffsetStorageReader, context: BatchContext
    ) -> list[SourceRecord]:
        """One heartbeat record carrying the committed offset (none before the first commit)."""
        committed = offsets.offset(source_partition(self._task))
        record = heartbeat_record(self._task, committed, self._topic, int(self._wall_clock() * 1000))
        return [] if record is None else [record]

    def stop(self) -> None:
        """Each batch is its own Spark job; nothing stays open."""
