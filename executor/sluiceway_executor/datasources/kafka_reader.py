"""The `sluiceway-kafka` reader: the planned offset ranges cut into chunks and grouped into splits,
and every split read by one Spark task with one consumer, each of its ranges exactly from `start` up
to `end` (see `sluiceway_executor.datasources.kafka`)."""

from __future__ import annotations

import bisect
import heapq
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

from sluiceway.common.kafka_errors import flagged_retriable
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
    """The records one Spark task reads: of each range, those with start <= offset < end. The
    ranges are of different partitions, so one consumer reads them side by side."""

    ranges: tuple[PartitionRange, ...]


def split_ranges(ranges: Sequence[PartitionRange], max_rows: int, min_rows: int = 1) -> list[KafkaSplit]:
    """Each range cut into consecutive chunks of at most ``max_rows`` offsets (empty ones dropped),
    then the chunks shared among as many splits as the offsets fill at ``min_rows`` each: at least
    one, at most one per chunk, and more where two chunks of one partition would otherwise meet.
    Largest chunk first into the split holding the fewest offsets, so the splits come out even."""
    chunks = [
        PartitionRange(r.topic, r.partition, lo, min(lo + max_rows, r.end))
        for r in ranges
        for lo in range(r.start, r.end, max_rows)
    ]
    if not chunks:
        return []
    total = sum(c.count for c in chunks)
    wanted = min(len(chunks), max(1, -(-total // min_rows)))
    held: list[list[PartitionRange]] = [[] for _ in range(wanted)]
    keys: list[set[tuple[str, int]]] = [set() for _ in range(wanted)]
    lightest = [(0, i) for i in range(wanted)]  # (offsets held, split) as a heap
    for chunk in sorted(chunks, key=lambda c: c.count, reverse=True):
        skipped = []
        while lightest and chunk.key in keys[lightest[0][1]]:
            skipped.append(heapq.heappop(lightest))
        if lightest:
            load, i = heapq.heappop(lightest)
        else:
            load, i = 0, len(held)
            held.append([])
            keys.append(set())
        held[i].append(chunk)
        keys[i].add(chunk.key)
        heapq.heappush(lightest, (load + chunk.count, i))
        for entry in skipped:
            heapq.heappush(lightest, entry)
    splits = [tuple(sorted(h, key=lambda c: (c.topic, c.partition, c.start))) for h in held]
    return [KafkaSplit(s) for s in sorted(splits, key=lambda s: (s[0].topic, s[0].partition, s[0].start))]


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
_partition = Message.partition


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
        splits = split_ranges(
            self.options.ranges, self.options.max_rows_per_split, self.options.min_rows_per_split
        )
        # Spark needs at least one partition; an empty one reads nothing.
        return splits or [KafkaSplit(())]

    def read(self, partition: InputPartition) -> Iterator[Any]:
        assert isinstance(partition, KafkaSplit), partition
        if not partition.ranges:
            return
        yield from read_split(self.options, partition)


def _where(r: PartitionRange) -> str:
    return f"{r.topic}[{r.partition}] offsets [{r.start}, {r.end})"


class _RangeRead:
    """How far the read of one range has come."""

    def __init__(self, planned: PartitionRange) -> None:
        self.planned = planned
        self.position = planned.start
        self.eof_at: int | None = None

    @property
    def done(self) -> bool:
        return self.position >= self.planned.end

    @property
    def left(self) -> int:
        return max(self.planned.end - self.position, 0)

    def take(self, records: Sequence[Message]) -> pa.RecordBatch | None:
        """The records of ``records`` (consecutive ones of this partition) inside the range."""
        # Records always carry an offset; only grows within a partition.
        offsets = cast(list[int], list(map(_offset, records)))
        # Keep start <= offset < end.
        lo = bisect.bisect_left(offsets, self.position)
        hi = bisect.bisect_left(offsets, self.planned.end)
        self.position = max(self.position, offsets[-1] + 1)
        if hi <= lo:
            return None
        return records_to_batch(self.planned.topic, self.planned.partition, records[lo:hi])

    def settle(self) -> bool:
        """Moves on after an end-of-partition event: done when it is at or past ``end``, past a gap
        (compacted records, transaction markers) below a record not yet visible otherwise. True when
        the position moved."""
        if self.eof_at is None or self.eof_at <= self.position:
            return False
        self.position = min(self.eof_at, self.planned.end)
        return True

    def stuck(self, timeout: float) -> KafkaDataSourceError:
        state = f"the partition ends at {self.eof_at}" if self.eof_at is not None else "no records arrived"
        return KafkaDataSourceError(
            f"{SHORT_NAME}: reading {_where(self.planned)}: stuck at offset {self.position} for "
            f"{timeout:.1f}s ({state}); the planned records are missing"
        )


def _message_key(message: Message) -> tuple[str, int]:
    partition = message.partition()
    return message.topic() or "", -1 if partition is None else partition


def _runs(
    records: list[Message], only: tuple[str, int] | None, topic: str | None
) -> Iterator[tuple[tuple[str, int], list[Message]]]:
    """``records`` cut into runs of one partition each, with the partition's key: all of them when
    the split reads ``only`` one partition; by partition number when its partitions are all of one
    ``topic``; by topic and partition otherwise."""
    if only is not None:
        yield only, records
        return
    if topic is not None:
        partitions = np.fromiter(map(_partition, records), dtype=np.int64, count=len(records))
        edges = [0, *(np.flatnonzero(np.diff(partitions)) + 1).tolist(), len(records)]
        for lo, hi in itertools.pairwise(edges):
            yield (topic, int(partitions[lo])), records[lo:hi]
        return
    for key, run in itertools.groupby(records, key=_message_key):
        yield key, list(run)


def read_split(options: ReaderOptions, split: KafkaSplit) -> Iterator[pa.RecordBatch]:
    """Exactly the records of each range of ``split``, in offset order within a partition, as Arrow
    batches of at most MAX_BATCH_ROWS.

    A range is done when the next position reaches `end`: a record at or past `end - 1`, or an EOF
    event at or past `end` (the last offsets may be a gap: compacted records, transaction markers).
    An EOF below `end` means the planned records are not (yet) visible; after `read.timeout.ms`
    without progress on any range the read fails instead of returning short."""
    timeout = options.read_timeout_ms / 1000
    reads = {r.key: _RangeRead(r) for r in split.ranges if r.end > r.start}
    if not reads:
        return
    only = split.ranges[0].key if len(split.ranges) == 1 else None
    topics = {r.topic for r in split.ranges}
    topic = next(iter(topics)) if len(topics) == 1 else None
    consumer = Consumer(options.consumer_settings())
    try:
        # Metadata first: assigned before it, librdkafka waits a retry backoff before its first fetch.
        consumer.list_topics(timeout=timeout)
        consumer.assign(
            [
                KafkaTopicPartition(s.planned.topic, s.planned.partition, s.planned.start)
                for s in reads.values()
            ]
        )
        deadline = time.monotonic() + timeout
        while reads:
            wanted = sum(r.left for r in reads.values())
            messages = consumer.consume(
                num_messages=min(wanted, MAX_BATCH_ROWS), timeout=_CONSUME_WAIT_SECONDS
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
                        state = reads.get(_message_key(m))
                        offset = m.offset()
                        if state is not None and offset is not None:
                            state.eof_at = offset
                    elif not flagged_retriable(error):
                        state = reads.get(_message_key(m))
                        where = (
                            f"{_where(state.planned)} failed at {state.position}"
                            if state is not None
                            else f"{', '.join(_where(r) for r in split.ranges)} failed"
                        )
                        raise KafkaDataSourceError(f"{SHORT_NAME}: reading {where}: {error}")
                    else:
                        log.debug("reading %s: %s", [_where(r) for r in split.ranges], error)
            progressed = bool(records)
            for key, run in _runs(records, only, topic) if records else ():
                state = reads.get(key)
                if state is not None:
                    batch = state.take(run)
                    if batch is not None:
                        yield batch
            for key, state in list(reads.items()):
                progressed = state.settle() or progressed
                if state.done:
                    del reads[key]
                    # Stop fetching it: the rest of the split is what is waited for.
                    consumer.pause([KafkaTopicPartition(key[0], key[1])])
            if progressed:
                deadline = time.monotonic() + timeout
            elif reads and time.monotonic() > deadline:
                raise min(reads.values(), key=lambda r: r.planned.key).stuck(timeout)
    finally:
        consumer.close()
