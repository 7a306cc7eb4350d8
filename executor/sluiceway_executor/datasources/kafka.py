"""Kafka record I/O inside Spark: a Python data source (short name `sluiceway-kafka`) whose reader
returns exactly the records of planned offset ranges and whose writer produces a DataFrame's rows
with an idempotent producer, failing the Spark job if any delivery fails.

    register(spark)
    df = (spark.read.format("sluiceway-kafka")
          .option("bootstrap.servers", servers)
          .option("ranges", json.dumps([r.to_json() for r in plan_ranges(...)]))
          .load())
    (df.select("key", "value").write.format("sluiceway-kafka").mode("append")
       .option("bootstrap.servers", servers).option("topic", "out").save())

Reader options: `bootstrap.servers`, `ranges` (JSON list of {"topic", "partition", "start", "end"}, end
exclusive; see sluiceway_executor.kafka_ranges), `consumer.config` (JSON object of librdkafka
settings), `read.timeout.ms` (default 60000: how long a split may make no progress before it fails),
`max.rows.per.split` (default 500000). Rows: `topic, partition, offset, timestamp, key, value, headers`
as Spark's own Kafka source lays them out (headers null when a record has none).

Writer options: `bootstrap.servers`, `topic` (used where the DataFrame has no `topic` column or it is
null), `producer.config` (JSON object). Input columns: `value` (binary or string; null = tombstone),
and optionally `key`, `topic`, `partition` (null = the partitioner chooses), `timestamp` (timestamp, or
long milliseconds) and `headers` (array<struct<key: string, value: binary or string>>). Other columns
are ignored, so a DataFrame read by this source can be written back as it is.
"""

from __future__ import annotations

import bisect
import itertools
import json
import logging
import threading
import time
import uuid
import weakref
from collections import Counter, OrderedDict
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, cast

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from confluent_kafka import TIMESTAMP_NOT_AVAILABLE, Consumer, KafkaError, Message, Producer
from confluent_kafka import TopicPartition as KafkaTopicPartition
from pyspark.sql import SparkSession
from pyspark.sql.datasource import (
    DataSource,
    DataSourceArrowWriter,
    DataSourceReader,
    DataSourceWriter,
    InputPartition,
    WriterCommitMessage,
)
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    ByteType,
    DataType,
    IntegerType,
    LongType,
    NullType,
    ShortType,
    StringType,
    StructField,
    StructType,
    TimestampNTZType,
    TimestampType,
)

from sluiceway_executor.kafka_ranges import PartitionRange

log = logging.getLogger(__name__)

SHORT_NAME = "sluiceway-kafka"

HEADER_STRUCT = StructType([StructField("key", StringType()), StructField("value", BinaryType())])
SCHEMA = StructType(
    [
        StructField("topic", StringType()),
        StructField("partition", IntegerType()),
        StructField("offset", LongType()),
        StructField("timestamp", TimestampType()),
        StructField("key", BinaryType()),
        StructField("value", BinaryType()),
        StructField("headers", ArrayType(HEADER_STRUCT)),
    ]
)
# Must equal what Spark derives from SCHEMA (it rejects batches whose Arrow schema differs).
_HEADERS_ARROW = pa.list_(pa.field("element", pa.struct([("key", pa.string()), ("value", pa.binary())])))
ARROW_SCHEMA = pa.schema(
    [
        ("topic", pa.string()),
        ("partition", pa.int32()),
        ("offset", pa.int64()),
        ("timestamp", pa.timestamp("us", tz="UTC")),
        ("key", pa.binary()),
        ("value", pa.binary()),
        ("headers", _HEADERS_ARROW),
    ]
)

# Rows per Arrow batch: large enough to amortise per-batch costs, small enough to bound memory.
MAX_BATCH_ROWS = 10_000
DEFAULT_READ_TIMEOUT_MS = 60_000
DEFAULT_MAX_ROWS_PER_SPLIT = 500_000
# How long one consume() call waits for a full batch before returning what it has.
_CONSUME_WAIT_SECONDS = 0.1

# Settings the reader and writer need for correctness; the user's config cannot change them.
_FORCED_CONSUMER_CONFIG: Mapping[str, str] = {
    "enable.auto.commit": "false",
    "enable.auto.offset.store": "false",
    # A planned start that no longer exists (records deleted) must fail the read, not skip records.
    "auto.offset.reset": "error",
    # Recognises the end of a partition, to stop at gaps (compaction, transaction markers) before `end`.
    "enable.partition.eof": "true",
    # The planned ends are read_committed ends, and aborted records must never reach a sink.
    "isolation.level": "read_committed",
}
_DEFAULT_CONSUMER_CONFIG: Mapping[str, str] = {
    # Brokers that do not wake a waiting fetch (Tansu) hold a fetch at the end this long; only reads
    # that end in a gap wait for such a fetch.
    "fetch.wait.max.ms": "100",
    # Bigger fetches: fewer round trips for the large, bounded reads a batch does.
    "max.partition.fetch.bytes": str(8 * 1024 * 1024),
    "fetch.max.bytes": str(64 * 1024 * 1024),
}
_FORCED_PRODUCER_CONFIG: Mapping[str, Any] = {
    # No duplicates or reordering from internal retries; acks=all so a delivered record is durable.
    "enable.idempotence": "true",
    "acks": "all",
    # Only failures are reported: success needs no Python callback per record. flush() returning 0
    # with no failure reported means every record was acknowledged.
    "delivery.report.only.error": True,
}
_DEFAULT_PRODUCER_CONFIG: Mapping[str, str] = {
    # The Java client's default partitioner, so keys land where Kafka Connect would put them.
    "partitioner": "murmur2_random",
    "linger.ms": "10",
    "batch.num.messages": "10000",
    "batch.size": str(1024 * 1024),
    "compression.type": "lz4",
    "queue.buffering.max.messages": "500000",
    # The Java producer's delivery.timeout.ms: after this a record counts as failed and the job fails.
    "message.timeout.ms": "120000",
}
# Poll for delivery reports after this many produce() calls.
_POLL_EVERY = 5_000
# Failures kept for the error message; all are counted.
_MAX_REPORTED_FAILURES = 5


class KafkaDataSourceError(RuntimeError):
    """A read or write could not be completed as planned (the Spark task, and so the job, fails)."""


# -- options ----------------------------------------------------------------------------------


def _required(options: Mapping[str, str], key: str) -> str:
    raw = options.get(key)
    if raw is None or not str(raw).strip():
        raise ValueError(f"{SHORT_NAME}: option '{key}' is required")
    return str(raw).strip()


def _int_option(options: Mapping[str, str], key: str, default: int, minimum: int) -> int:
    raw = options.get(key)
    if raw is None:
        return default
    try:
        value = int(str(raw).strip())
    except ValueError:
        raise ValueError(f"{SHORT_NAME}: option '{key}' must be an integer, got {raw!r}") from None
    if value < minimum:
        raise ValueError(f"{SHORT_NAME}: option '{key}' must be >= {minimum}, got {value}")
    return value


def _client_config(options: Mapping[str, str], key: str) -> dict[str, str]:
    raw = options.get(key)
    if raw is None or not str(raw).strip():
        return {}
    try:
        parsed = json.loads(str(raw))
    except json.JSONDecodeError as exc:
        raise ValueError(f"{SHORT_NAME}: option '{key}' must be a JSON object: {exc}") from None
    if not isinstance(parsed, dict):
        raise ValueError(f"{SHORT_NAME}: option '{key}' must be a JSON object, got {type(parsed).__name__}")
    config: dict[str, str] = {}
    for name, value in parsed.items():
        if isinstance(value, (dict, list)) or value is None:
            raise ValueError(
                f"{SHORT_NAME}: option '{key}': setting {name!r} must be a scalar, got {value!r}"
            )
        # librdkafka takes every setting as a string; JSON true must become "true", not "True".
        config[str(name)] = json.dumps(value) if isinstance(value, bool) else str(value)
    return config


def _parse_ranges(raw: str) -> list[PartitionRange]:
    try:
        parsed = json.loads(raw)
    except json.JSONDecodeError as exc:
        raise ValueError(f"{SHORT_NAME}: option 'ranges' must be a JSON list: {exc}") from None
    if not isinstance(parsed, list):
        raise ValueError(f"{SHORT_NAME}: option 'ranges' must be a JSON list, got {type(parsed).__name__}")
    ranges: list[PartitionRange] = []
    for item in parsed:
        if not isinstance(item, dict) or set(item) != {"topic", "partition", "start", "end"}:
            raise ValueError(
                f"{SHORT_NAME}: each range must be an object with exactly topic, partition, start and "
                f"end, got {item!r}"
            )
        topic, partition, start, end = item["topic"], item["partition"], item["start"], item["end"]
        ints = (partition, start, end)
        if not isinstance(topic, str) or not topic or not all(type(v) is int for v in ints):
            raise ValueError(f"{SHORT_NAME}: range {item!r}: topic must be a string, the others integers")
        if partition < 0 or start < 0 or end < start:
            raise ValueError(f"{SHORT_NAME}: range {item!r}: need partition >= 0 and 0 <= start <= end")
        ranges.append(PartitionRange(topic, partition, start, end))
    return ranges


@dataclass(frozen=True)
class ReaderOptions:
    bootstrap_servers: str
    ranges: list[PartitionRange]
    consumer_config: dict[str, str]
    read_timeout_ms: int
    max_rows_per_split: int

    @classmethod
    def parse(cls, options: Mapping[str, str]) -> ReaderOptions:
        return cls(
            bootstrap_servers=_required(options, "bootstrap.servers"),
            ranges=_parse_ranges(_required(options, "ranges")),
            consumer_config=_client_config(options, "consumer.config"),
            read_timeout_ms=_int_option(options, "read.timeout.ms", DEFAULT_READ_TIMEOUT_MS, 1),
            max_rows_per_split=_int_option(options, "max.rows.per.split", DEFAULT_MAX_ROWS_PER_SPLIT, 1),
        )

    def consumer_settings(self) -> dict[str, Any]:
        return {
            "bootstrap.servers": self.bootstrap_servers,
            "client.id": "sluiceway-kafka-reader",
            **_DEFAULT_CONSUMER_CONFIG,
            **self.consumer_config,
            # confluent-kafka insists on a group id even for assign(); the reader never joins or commits.
            "group.id": self.consumer_config.get("group.id") or f"sluiceway-reader-{uuid.uuid4().hex}",
            **_FORCED_CONSUMER_CONFIG,
            "logger": log,
        }


@dataclass(frozen=True)
class WriterOptions:
    bootstrap_servers: str
    topic: str | None
    producer_config: dict[str, str]

    @classmethod
    def parse(cls, options: Mapping[str, str]) -> WriterOptions:
        topic = str(options.get("topic") or "").strip()
        return cls(
            bootstrap_servers=_required(options, "bootstrap.servers"),
            topic=topic or None,
            producer_config=_client_config(options, "producer.config"),
        )

    def producer_settings(self) -> dict[str, Any]:
        return {
            "bootstrap.servers": self.bootstrap_servers,
            "client.id": "sluiceway-kafka-writer",
            **_DEFAULT_PRODUCER_CONFIG,
            **self.producer_config,
            **_FORCED_PRODUCER_CONFIG,
            "logger": log,
        }


# -- reader -----------------------------------------------------------------------------------


@dataclass
class KafkaSplit(InputPartition):
    """The records of one partition with start <= offset < end, read by one Spark task."""

    topic: str
    partition: int
    start: int
    end: int


def split_ranges(ranges: Sequence[PartitionRange], max_rows: int) -> list[KafkaSplit]:
    """Each range cut into consecutive chunks of at most `max_rows` offsets; empty ranges dropped."""
    splits: list[KafkaSplit] = []
    for r in ranges:
        for lo in range(r.start, r.end, max_rows):
            splits.append(KafkaSplit(r.topic, r.partition, lo, min(lo + max_rows, r.end)))
    return splits


def _headers_array(headers: list[Any]) -> pa.Array:
    if not any(headers):
        return pa.nulls(len(headers), _HEADERS_ARROW)
    # Header values may be bytes or None; Spark's Kafka source also gives null for "no headers".
    rows = [None if h is None else [{"key": k, "value": v} for k, v in h] for h in headers]
    return pa.array(rows, type=_HEADERS_ARROW)


# Unbound methods mapped over a list run at C speed, about twice as fast as comprehensions; this
# and the consume() call are where a read spends its time.
_offset, _key, _value, _headers = Message.offset, Message.key, Message.value, Message.headers
_timestamp, _error = Message.timestamp, Message.error


def records_to_batch(topic: str, partition: int, messages: Sequence[Message]) -> pa.RecordBatch:
    """Column-wise: one pass over the messages per field, then Arrow arrays from Python lists."""
    n = len(messages)
    # (type, milliseconds) pairs, flattened.
    stamps = np.fromiter(
        itertools.chain.from_iterable(map(_timestamp, messages)), dtype=np.int64, count=2 * n
    ).reshape(n, 2)
    micros = pa.array(
        stamps[:, 1] * 1000,
        type=pa.timestamp("us", tz="UTC"),
        mask=stamps[:, 0] == TIMESTAMP_NOT_AVAILABLE,
    )
    return pa.RecordBatch.from_arrays(
        [
            pa.repeat(pa.scalar(topic, pa.string()), n),
            pa.repeat(pa.scalar(partition, pa.int32()), n),
            pa.array(list(map(_offset, messages)), type=pa.int64()),
            micros,
            pa.array(list(map(_key, messages)), type=pa.binary()),
            pa.array(list(map(_value, messages)), type=pa.binary()),
            _headers_array(list(map(_headers, messages))),
        ],
        schema=ARROW_SCHEMA,
    )


class KafkaReader(DataSourceReader):
    def __init__(self, options: ReaderOptions) -> None:
        self.options = options

    def partitions(self) -> Sequence[InputPartition]:
        splits = split_ranges(self.options.ranges, self.options.max_rows_per_split)
        # Spark needs at least one partition; an empty one reads nothing.
        return splits or [KafkaSplit("", 0, 0, 0)]

    def read(self, partition: InputPartition) -> Iterator[Any]:
        assert isinstance(partition, KafkaSplit), partition
        if partition.end <= partition.start:
            return
        yield from read_split(self.options, partition)


def read_split(options: ReaderOptions, split: KafkaSplit) -> Iterator[pa.RecordBatch]:
    """Exactly the records of `split`, in offset order, as Arrow batches of at most MAX_BATCH_ROWS.

    The read is done when the next position reaches `end`: a record at or past `end - 1`, or an EOF
    event at or past `end` (the last offsets may be a gap: compacted records, transaction markers).
    An EOF below `end` means the planned records are not (yet) visible; after `read.timeout.ms`
    without progress the read fails instead of returning short."""
    where = f"{split.topic}[{split.partition}] offsets [{split.start}, {split.end})"
    timeout = options.read_timeout_ms / 1000
    consumer = Consumer(options.consumer_settings())
    try:
        # Metadata first: assigned before it, librdkafka waits a retry backoff before its first fetch.
        consumer.list_topics(timeout=timeout)
        consumer.assign([KafkaTopicPartition(split.topic, split.partition, split.start)])
        position = split.start
        eof_at: int | None = None
        deadline = time.monotonic() + timeout
        while position < split.end:
            messages = consumer.consume(
                num_messages=min(split.end - position, MAX_BATCH_ROWS), timeout=_CONSUME_WAIT_SECONDS
            )
            records: list[Message] = messages
            # KafkaError is always truthy (and cannot be compared with None).
            if any(map(_error, messages)):
                records = []
                for m in messages:
                    error = m.error()
                    if error is None:
                        records.append(m)
                    elif error.code() == KafkaError._PARTITION_EOF:
                        offset = m.offset()
                        eof_at = offset if offset is not None else eof_at
                    elif error.fatal() or not error.retriable():
                        raise KafkaDataSourceError(
                            f"{SHORT_NAME}: reading {where} failed at {position}: {error}"
                        )
                    else:
                        log.debug("reading %s: %s", where, error)
            if records:
                # Records always carry an offset; only grows within a partition.
                offsets = cast(list[int], list(map(_offset, records)))
                # Keep start <= offset < end.
                lo = bisect.bisect_left(offsets, position)
                hi = bisect.bisect_left(offsets, split.end)
                if hi > lo:
                    yield records_to_batch(split.topic, split.partition, records[lo:hi])
                position = max(position, offsets[-1] + 1)
                deadline = time.monotonic() + timeout
            if eof_at is not None and eof_at >= position:
                if eof_at >= split.end:
                    break
                if eof_at > position:
                    # A gap below a record not yet visible: progress all the same.
                    position = eof_at
                    deadline = time.monotonic() + timeout
            if position < split.end and time.monotonic() > deadline:
                state = f"the partition ends at {eof_at}" if eof_at is not None else "no records arrived"
                raise KafkaDataSourceError(
                    f"{SHORT_NAME}: reading {where}: stuck at offset {position} for {timeout:.1f}s "
                    f"({state}); the planned records are missing"
                )
    finally:
        consumer.close()


# -- writer -----------------------------------------------------------------------------------


_INT_TYPES = (ByteType, ShortType, IntegerType, LongType)


def _check_input_schema(schema: StructType, default_topic: str | None) -> None:
    fields = {f.name.lower(): f.dataType for f in schema.fields}

    def check(name: str, allowed: tuple[type[DataType], ...], what: str) -> None:
        data_type = fields.get(name)
        if data_type is not None and not isinstance(data_type, (*allowed, NullType)):
            raise ValueError(f"{SHORT_NAME}: column '{name}' must be {what}, got {data_type.simpleString()}")

    if "value" not in fields:
        raise ValueError(f"{SHORT_NAME}: the DataFrame needs a 'value' column (binary or string)")
    check("value", (BinaryType, StringType), "binary or string")
    check("key", (BinaryType, StringType), "binary or string")
    check("topic", (StringType,), "string")
    check("partition", _INT_TYPES, "an integer")
    check("timestamp", (TimestampType, TimestampNTZType, LongType), "a timestamp or long milliseconds")
    headers = fields.get("headers")
    if headers is not None and not isinstance(headers, NullType):
        element = headers.elementType if isinstance(headers, ArrayType) else None
        names = {f.name: f.dataType for f in element.fields} if isinstance(element, StructType) else {}
        if not (
            set(names) == {"key", "value"}
            and isinstance(names["key"], StringType)
            and isinstance(names["value"], (BinaryType, StringType, NullType))
        ):
            raise ValueError(
                f"{SHORT_NAME}: column 'headers' must be array<struct<key: string, value: binary>>, "
                f"got {headers.simpleString()}"
            )
    if not isinstance(fields.get("topic"), StringType) and default_topic is None:
        raise ValueError(f"{SHORT_NAME}: set option 'topic' or give the DataFrame a 'topic' column")


@dataclass
class KafkaWriteCommitMessage(WriterCommitMessage):
    """Records written by one Spark task, per topic."""

    counts: dict[str, int] = field(default_factory=dict)


@dataclass
class _Failures:
    count: int = 0
    first: list[str] = field(default_factory=list)
    fatal: str | None = None

    def add(self, what: str) -> None:
        self.count += 1
        if len(self.first) < _MAX_REPORTED_FAILURES:
            self.first.append(what)


def _column(batch: pa.RecordBatch, name: str) -> pa.Array | None:
    index = batch.schema.get_field_index(name)
    if index < 0:
        # Spark's names are case-insensitive; the Arrow batch keeps the DataFrame's spelling.
        for i, f in enumerate(batch.schema):
            if f.name.lower() == name:
                index = i
                break
    if index < 0 or pa.types.is_null(batch.schema.field(index).type):
        return None
    column: pa.Array = batch.column(index)
    return column


_MS_PER_UNIT = {"s": 1000, "ms": 1}
_UNITS_PER_MS = {"us": 1000, "ns": 1_000_000}


def _timestamps_ms(column: pa.Array) -> list[int]:
    """Milliseconds since the epoch (from a timestamp or a long column); 0 (librdkafka: now) where null."""
    raw = pc.fill_null(column.cast(pa.int64()), 0).to_numpy()
    if pa.types.is_timestamp(column.type):
        unit = column.type.unit
        raw = raw * _MS_PER_UNIT[unit] if unit in _MS_PER_UNIT else raw // _UNITS_PER_MS[unit]
    result: list[int] = np.maximum(raw, 0).tolist()
    return result


def _headers_lists(column: pa.Array) -> list[list[tuple[str, Any]] | None]:
    return [
        None if row is None else [(h["key"], h["value"]) for h in row if h is not None]
        for row in column.to_pylist()
    ]


class _PooledProducer:
    """An idempotent producer that a Python worker keeps between write tasks.

    A new idempotent producer may wait up to ~0.5 s for its producer id (librdkafka retries the
    request on a timer when the broker connection is not up yet), which every task of every batch
    would pay. A Python worker runs one task at a time and a write takes the producer out of the pool
    while it uses it; one that saw any failure is discarded, never pooled again."""

    def __init__(self, settings: Mapping[str, Any]) -> None:
        self.failures = _Failures()
        self.producer = Producer({**settings, "on_delivery": self._on_delivery, "error_cb": self._on_error})

    def _on_delivery(self, error: KafkaError | None, message: Message) -> None:
        if error is not None:
            self.failures.add(f"{message.topic()}[{message.partition()}]: {error}")

    def _on_error(self, error: KafkaError) -> None:
        # Fatal errors (e.g. of the idempotent producer) end the write; others are retried inside.
        if error.fatal():
            self.failures.fatal = str(error)
        else:
            log.debug("producer: %s", error)

    def discard(self) -> None:
        # Nothing more goes out once a write has failed; records in flight may still land
        # (at-least-once: the caller commits nothing and the batch is retried).
        self.producer.purge(in_queue=True, in_flight=True)
        self.producer.flush(0)
        self.producer.close()


_POOL_SIZE = 4
_pool: OrderedDict[tuple[tuple[str, str], ...], _PooledProducer] = OrderedDict()
_pool_lock = threading.Lock()


def _pool_key(settings: Mapping[str, Any]) -> tuple[tuple[str, str], ...]:
    return tuple(sorted((k, str(v)) for k, v in settings.items() if k != "logger"))


def _checkout(settings: Mapping[str, Any]) -> _PooledProducer:
    with _pool_lock:
        pooled = _pool.pop(_pool_key(settings), None)
    if pooled is None:
        pooled = _PooledProducer(settings)
    pooled.failures = _Failures()
    return pooled


def _checkin(settings: Mapping[str, Any], pooled: _PooledProducer) -> None:
    evicted: list[_PooledProducer] = []
    with _pool_lock:
        _pool[_pool_key(settings)] = pooled
        while len(_pool) > _POOL_SIZE:
            evicted.append(_pool.popitem(last=False)[1])
    for old in evicted:
        old.producer.close()


class KafkaWriter(DataSourceArrowWriter):
    def __init__(self, options: WriterOptions) -> None:
        self.options = options

    def write(self, iterator: Iterator[pa.RecordBatch]) -> KafkaWriteCommitMessage:
        settings = self.options.producer_settings()
        pooled = _checkout(settings)
        producer = pooled.producer
        counts: Counter[str] = Counter()
        try:
            for batch in iterator:
                self._produce_batch(producer, batch, counts, pooled.failures)
            # Every record is acknowledged or failed by then (librdkafka's own delivery timeout).
            timeout = int(settings["message.timeout.ms"]) / 1000 + 10
            left = producer.flush(timeout)
            if left > 0:
                pooled.failures.add(f"{left} record(s) still not acknowledged after {timeout:.0f}s")
            self._raise_if_failed(pooled.failures, counts)
        except BaseException:
            pooled.discard()
            raise
        _checkin(settings, pooled)
        return KafkaWriteCommitMessage(dict(counts))

    @staticmethod
    def _raise_if_failed(failures: _Failures, counts: Mapping[str, int]) -> None:
        if failures.fatal is not None:
            raise KafkaDataSourceError(f"{SHORT_NAME}: fatal producer error: {failures.fatal}")
        if failures.count:
            raise KafkaDataSourceError(
                f"{SHORT_NAME}: {failures.count} of {sum(counts.values())} record(s) were not delivered; "
                f"first failures: {'; '.join(failures.first)}"
            )

    def _produce_batch(
        self, producer: Producer, batch: pa.RecordBatch, counts: Counter[str], failures: _Failures
    ) -> None:
        n = batch.num_rows
        if n == 0:
            return
        value_col = _column(batch, "value")
        values: list[Any] = [None] * n if value_col is None else value_col.to_pylist()
        key_col = _column(batch, "key")
        keys: list[Any] | None = None if key_col is None else key_col.to_pylist()
        topic_col = _column(batch, "topic")
        default_topic = self.options.topic
        topics: list[str] | None = None
        if topic_col is not None:
            if default_topic is not None:
                topic_col = pc.fill_null(topic_col, default_topic)
            elif topic_col.null_count:
                raise KafkaDataSourceError(
                    f"{SHORT_NAME}: a row has a null topic and no option 'topic' is set"
                )
            topics = topic_col.to_pylist()
            for topic, count in zip(*_value_counts(topic_col), strict=True):
                counts[topic] += count
        else:
            assert default_topic is not None  # checked by the driver
            counts[default_topic] += n
        fixed_topic = default_topic or ""
        partition_col = _column(batch, "partition")
        partitions: list[int] | None = None
        if partition_col is not None:
            # -1: librdkafka's "unassigned", i.e. the partitioner chooses.
            partitions = pc.fill_null(partition_col.cast(pa.int32()), -1).to_pylist()
        timestamp_col = _column(batch, "timestamp")
        timestamps = None if timestamp_col is None else _timestamps_ms(timestamp_col)
        headers_col = _column(batch, "headers")
        headers = None if headers_col is None else _headers_lists(headers_col)

        produce, poll = producer.produce, producer.poll
        plain = topics is None and partitions is None and timestamps is None and headers is None
        for i in range(n):
            while True:
                try:
                    if plain:
                        # The common case, with the fewest arguments to pass.
                        produce(fixed_topic, values[i], None if keys is None else keys[i])
                    else:
                        produce(
                            fixed_topic if topics is None else topics[i],
                            values[i],
                            None if keys is None else keys[i],
                            partition=-1 if partitions is None else partitions[i],
                            timestamp=0 if timestamps is None else timestamps[i],
                            headers=None if headers is None else headers[i],
                        )
                    break
                except BufferError:
                    # The local queue is full: serve delivery reports until there is room.
                    poll(0.05)
                    if failures.count or failures.fatal:
                        self._raise_if_failed(failures, counts)
            if i % _POLL_EVERY == 0:
                poll(0)
        poll(0)
        if failures.count or failures.fatal:
            self._raise_if_failed(failures, counts)

    def commit(self, messages: list[WriterCommitMessage | None]) -> None:
        totals: Counter[str] = Counter()
        for message in messages:
            if isinstance(message, KafkaWriteCommitMessage):
                totals.update(message.counts)
        log.debug("%s: wrote %s", SHORT_NAME, dict(totals))

    def abort(self, messages: list[WriterCommitMessage | None]) -> None:
        log.warning("%s: write failed; records of tasks that succeeded may be in Kafka", SHORT_NAME)


def _value_counts(column: pa.Array) -> tuple[list[str], list[int]]:
    counted = pc.value_counts(column)
    return counted.field("values").to_pylist(), counted.field("counts").to_pylist()


# -- the data source --------------------------------------------------------------------------


class KafkaDataSource(DataSource):
    """Bounded reads of planned offset ranges and idempotent, all-or-failure writes."""

    @classmethod
    def name(cls) -> str:
        return SHORT_NAME

    def schema(self) -> StructType:
        return SCHEMA

    def reader(self, schema: StructType) -> DataSourceReader:
        return KafkaReader(ReaderOptions.parse(self.options))

    def writer(self, schema: StructType, overwrite: bool) -> DataSourceWriter:
        if overwrite:
            raise ValueError(f"{SHORT_NAME}: Kafka topics can only be appended to; use mode('append')")
        options = WriterOptions.parse(self.options)
        _check_input_schema(schema, options.topic)
        return KafkaWriter(options)


# Sessions that already have the data sources, so repeated calls cost no round trip.
_registered: weakref.WeakSet[SparkSession] = weakref.WeakSet()


def register(spark: SparkSession) -> None:
    """Registers `sluiceway-kafka` and `sluiceway-datagen` on this session (once per session)."""
    if spark in _registered:
        return
    from sluiceway_executor.datasources.datagen import DataGenDataSource

    spark.dataSource.register(KafkaDataSource)
    spark.dataSource.register(DataGenDataSource)
    _registered.add(spark)
