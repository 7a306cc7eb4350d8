"""The `sluiceway-kafka` reader: each planned offset range cut into splits, and every split read by one
Spark task with its own consumer, exactly from `start` up to `end` (see
`sluiceway_executor.datasources.kafka`)."""

from __future__ import annotations

import bisect
import itertools
import logging
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any, cast

import numpy as np
import pyarrow as pa
from confluent_kafka import TIMESTAMP_NOT_AVAILABLE, Consumer, KafkaError, Message
from confluent_kafka import TopicPartition as KafkaTopicPartition
from pyspark.sql.datasource import DataSourceReader, InputPartition

from sluiceway_executor.datasources.kafka_common import (
    ARROW_SCHEMA,
    HEADERS_ARROW,
    SHORT_NAME,
    KafkaDataSourceError,
    ReaderOptions,
)
from sluiceway_executor.kafka_ranges import PartitionRange

log = logging.getLogger(__name__)

# Rows per Arrow batch: large enough to amortise per-batch costs, small enough to bound memory.
MAX_BATCH_ROWS = 10_000
# How long one consume() call waits for a full batch before returning what it has.
_CONSUME_WAIT_SECONDS = 0.1


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
        return pa.nulls(len(headers), HEADERS_ARROW)
    # Header values may be bytes or None; Spark's Kafka source also gives null for "no headers".
    rows = [None if h is None else [{"key": k, "value": v} for k, v in h] for h in headers]
    return pa.array(rows, type=HEADERS_ARROW)


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
