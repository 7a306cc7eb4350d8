"""The `sluiceway-kafka` writer: every Spark task produces its rows with an idempotent producer
(`acks=all`) that the Python worker keeps between tasks, flushes, and fails if any record was not
acknowledged (see `sluiceway_executor.datasources.kafka`)."""

from __future__ import annotations

import logging
import threading
from collections import Counter, OrderedDict
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from confluent_kafka import KafkaError, Message, Producer
from pyspark.sql.datasource import DataSourceArrowWriter, WriterCommitMessage
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
    StructType,
    TimestampNTZType,
    TimestampType,
)

from sluiceway_executor.datasources.kafka_common import SHORT_NAME, KafkaDataSourceError, WriterOptions

log = logging.getLogger(__name__)

# Poll for delivery reports after this many produce() calls.
_POLL_EVERY = 5_000
# Failures kept for the error message; all are counted.
_MAX_REPORTED_FAILURES = 5

_INT_TYPES = (ByteType, ShortType, IntegerType, LongType)


def _check_input_schema(schema: StructType, default_topic: str | None) -> None:
    """Fails the write on the driver when the DataFrame's columns cannot be produced."""
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
        # A key column of nulls only (a source without keys) is no key at all: the fast path below.
        keys: list[Any] | None = None if key_col is None or key_col.null_count == n else key_col.to_pylist()
        topic_col = _column(batch, "topic")
        default_topic = self.options.topic
        fixed_topic = default_topic or ""
        topics: list[str] | None = None
        if topic_col is not None:
            if default_topic is not None:
                topic_col = pc.fill_null(topic_col, default_topic)
            elif topic_col.null_count:
                raise KafkaDataSourceError(
                    f"{SHORT_NAME}: a row has a null topic and no option 'topic' is set"
                )
            found, found_counts = _value_counts(topic_col)
            for topic, count in zip(found, found_counts, strict=True):
                counts[topic] += count
            if len(found) == 1:
                # One topic for the whole Arrow batch (a source's usual case): named once, not per row.
                fixed_topic = found[0]
            else:
                topics = topic_col.to_pylist()
        else:
            assert default_topic is not None  # checked by the driver
            counts[default_topic] += n
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
