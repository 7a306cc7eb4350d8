"""Planning of exact, bounded Kafka reads for sink tasks (runs in the executor process).

A sink batch reads, for each partition of the task's share, the records in [start, end): start is the
consumer group's committed offset (or the earliest offset when there is none, Kafka Connect's default
`auto.offset.reset=earliest`), end is the partition's true end when the batch was planned, capped by
the batch size. The read inside Spark (datasources/kafka_reader.py) then returns exactly those records.

"True end" needs care: Tansu's ListOffsets(latest) answers the last *batch's* base offset + 1, so it
lags the real end whenever producers batch (a Tansu quirk, docs/ARCHITECTURE.md §9).
`exact_end_offsets` takes ListOffsets as a lower bound and fetches from just below it to the
partition-EOF event, whose offset is the high watermark of a real fetch: exact on Apache Kafka and
on Tansu."""

from __future__ import annotations

import logging
import re
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final, Protocol, TypeVar

from confluent_kafka import (
    Consumer,
    ConsumerGroupTopicPartitions,
    IsolationLevel,
    KafkaError,
    KafkaException,
    TopicPartition,
)
from confluent_kafka.admin import AdminClient
from confluent_kafka.admin._listoffsets import OffsetSpec

from sluiceway.common.kafka_errors import flagged_retriable, transient_exception
from sluiceway.common.retry import Deadline, Retry, RetryPolicy

log = logging.getLogger(__name__)

TopicPartitionKey = tuple[str, int]
"""(topic, partition): the key of every offsets map in this module."""

_T = TypeVar("_T")

# An Admin API call of the planner again after an error that passes by itself, within its timeout.
_RETRY = RetryPolicy(initial=0.1, maximum=0.1, transient=transient_exception)


@dataclass(frozen=True)
class PartitionRange:
    """The records of one partition with start <= offset < end (end exclusive)."""

    topic: str
    partition: int
    start: int
    end: int

    @property
    def count(self) -> int:
        """Offsets covered; the records may be fewer (compaction, transaction markers)."""
        return max(self.end - self.start, 0)

    @property
    def key(self) -> TopicPartitionKey:
        return (self.topic, self.partition)

    def to_json(self) -> dict[str, Any]:
        """The form the `sluiceway-kafka` reader takes in its `ranges` option."""
        return {"topic": self.topic, "partition": self.partition, "start": self.start, "end": self.end}


class _MetadataSource(Protocol):
    # AdminClient, Consumer and Producer all answer list_topics.
    def list_topics(self, topic: str | None = None, timeout: float = -1) -> Any: ...


def list_partitions(
    admin_or_consumer: _MetadataSource,
    topics: Sequence[str] | None,
    regex: str | None,
    timeout: float,
    internal: Callable[[str], bool] | None = None,
) -> list[TopicPartition]:
    """Every partition of the named `topics`, or of every topic whose whole name matches `regex`
    (Kafka's `topics.regex`: a full match, internal `__*` topics excluded as the Java consumer does
    for pattern subscriptions, and so are the topics `internal` says are, such as the worker's
    own), sorted by (topic, partition). Named topics that do not exist (yet) contribute nothing: a
    sink waits for them as Kafka Connect's consumer does."""
    names = [t for t in (topics or []) if t]
    if names and regex:
        raise ValueError("topics and topics.regex are mutually exclusive")
    if not names and not regex:
        return []
    pattern = re.compile(regex) if regex else None
    # All topics in one request: a metadata request naming a topic can auto-create it on brokers
    # with auto.create.topics.enable.
    metadata = admin_or_consumer.list_topics(timeout=max(timeout, 0.1))
    wanted = set(names)
    result: list[TopicPartition] = []
    for name, topic in metadata.topics.items():
        if topic.error is not None:
            continue
        if pattern is not None:
            if name.startswith("__") or pattern.fullmatch(name) is None:
                continue
            if internal is not None and internal(name):
                continue
        elif name not in wanted:
            continue
        result.extend(TopicPartition(name, p) for p in topic.partitions)
    result.sort(key=lambda tp: (tp.topic, tp.partition))
    return result


def task_partitions(all_partitions: Sequence[_T], task_index: int, task_count: int) -> list[_T]:
    """Task `task_index`'s share of the sorted partition list: the i-th goes to task i % task_count.
    Deterministic, so every executor computes the same split without talking to the others."""
    if task_count < 1:
        raise ValueError(f"task_count must be >= 1, got {task_count}")
    if not 0 <= task_index < task_count:
        raise ValueError(f"task_index must be in [0, {task_count}), got {task_index}")
    return [tp for i, tp in enumerate(all_partitions) if i % task_count == task_index]


def _keys(partitions: Sequence[TopicPartition]) -> list[TopicPartitionKey]:
    return [(tp.topic, tp.partition) for tp in partitions]


def committed_offsets(
    admin: AdminClient, group_id: str, partitions: Sequence[TopicPartition], timeout: float
) -> dict[TopicPartitionKey, int | None]:
    """The consumer group's committed offset of each partition (None: nothing committed), via the
    Admin API: Tansu refuses commits and fetches from consumers that are not group members."""
    if not partitions:
        return {}
    deadline = Deadline(timeout)
    retry = _RETRY.start(deadline)
    what = f"committed offsets of group {group_id!r}"
    request = [ConsumerGroupTopicPartitions(group_id, [TopicPartition(t, p) for t, p in _keys(partitions)])]
    while True:
        try:
            futures = admin.list_consumer_group_offsets(request, request_timeout=deadline.left(what))
            answer = futures[group_id].result(timeout=deadline.left(what))
            break
        except KafkaException as exc:
            _retry_or_raise(retry, exc, what)
    result: dict[TopicPartitionKey, int | None] = dict.fromkeys(_keys(partitions))
    for tp in answer.topic_partitions or []:
        if tp.error is not None:
            raise KafkaException(tp.error)
        # OFFSET_INVALID (-1001) and any other negative offset: nothing committed.
        result[(tp.topic, tp.partition)] = tp.offset if tp.offset >= 0 else None
    return result


def _list_offsets(
    admin: AdminClient, partitions: Sequence[TopicPartition], spec: OffsetSpec, timeout: float, what: str
) -> dict[TopicPartitionKey, int]:
    if not partitions:
        return {}
    deadline = Deadline(timeout)
    retry = _RETRY.start(deadline)
    while True:
        request = {TopicPartition(t, p): spec for t, p in _keys(partitions)}
        try:
            futures = admin.list_offsets(
                request,
                isolation_level=IsolationLevel.READ_COMMITTED,
                request_timeout=deadline.left(what),
            )
            return {
                (tp.topic, tp.partition): max(int(future.result(timeout=deadline.left(what)).offset), 0)
                for tp, future in futures.items()
            }
        except KafkaException as exc:
            _retry_or_raise(retry, exc, what)


def _retry_or_raise(retry: Retry, exc: KafkaException, what: str) -> None:
    """Returns once it is time to try again after ``exc``; raises ``exc`` when it does not pass by
    itself, and TimeoutError when the deadline comes first."""
    if not retry.policy.transient(exc):
        raise exc
    if not retry.wait():
        raise TimeoutError(f"{what} timed out: {exc}") from exc
    log.debug("%s: retrying after %s", what, exc)


def earliest_offsets(
    admin: AdminClient, partitions: Sequence[TopicPartition], timeout: float
) -> dict[TopicPartitionKey, int]:
    """Each partition's log start offset (ListOffsets earliest)."""
    spec = OffsetSpec.earliest()  # type: ignore[no-untyped-call]  # untyped in confluent-kafka 2.16
    return _list_offsets(admin, partitions, spec, timeout, "ListOffsets(earliest)")


def listed_end_offsets(
    admin: AdminClient, partitions: Sequence[TopicPartition], timeout: float
) -> dict[TopicPartitionKey, int]:
    """ListOffsets(latest, read_committed): exact on Apache Kafka, only a lower bound on Tansu."""
    spec = OffsetSpec.latest()  # type: ignore[no-untyped-call]  # untyped in confluent-kafka 2.16
    return _list_offsets(admin, partitions, spec, timeout, "ListOffsets(latest)")


@dataclass
class RecordSample:
    """Records seen on the way: how many and the bytes of their keys and values (the topic's
    record size), and the last key and value that were not null (what the next records are likely
    to look like)."""

    records: int = 0
    total_bytes: int = 0
    last_key: bytes | None = None
    last_value: bytes | None = None

    def add(self, key: bytes | None, value: bytes | None) -> None:
        self.records += 1
        self.total_bytes += len(key or b"") + len(value or b"")
        self.last_key = key if key is not None else self.last_key
        self.last_value = value if value is not None else self.last_value


# How long one wait for the end-of-partition events lasts: consume() holds a call for the whole of
# it unless 10,000 events arrive, so a longer wait would be paid by every plan.
_EOF_POLL_S: Final = 0.002


def exact_end_offsets(
    bootstrap_servers: str,
    partitions: Sequence[TopicPartition],
    timeout: float,
    client_config: Mapping[str, str] | None = None,
    sample: RecordSample | None = None,
    admin: AdminClient | None = None,
) -> dict[TopicPartitionKey, int]:
    """The true end (the next offset to be written; for read_committed, the last stable offset) of
    each partition, exact on Apache Kafka and on Tansu.

    ListOffsets gives a lower bound L per partition. One consumer, assigned every partition at
    max(L - 1, 0) with `enable.partition.eof`, fetches to the partition-EOF event: its offset is the
    end reported by a real fetch. Starting one below L means at most the partition's last batch is
    transferred (on Kafka, one record). The records that fetch brings are added to ``sample``.
    ``admin`` asks for the lower bounds (a client of the caller's, kept from call to call); without
    it, one is made for this call."""
    if not partitions:
        return {}
    deadline = Deadline(timeout)
    what = f"exact end offsets of {len(partitions)} partition(s)"
    common: dict[str, Any] = {"bootstrap.servers": bootstrap_servers, **(client_config or {})}
    common.setdefault("client.id", "sluiceway-end-offsets")
    if admin is None:
        admin = AdminClient(dict(common), logger=log)
    lower = listed_end_offsets(admin, partitions, deadline.left(what))
    consumer = Consumer(
        {
            **common,
            # confluent-kafka insists on a group id even for assign(); it never joins or commits.
            "group.id": f"sluiceway-end-offsets-{uuid.uuid4().hex}",
            "enable.auto.commit": "false",
            "enable.auto.offset.store": "false",
            # L - 1 below the log start (records deleted meanwhile): the end is still found from there.
            "auto.offset.reset": "earliest",
            "enable.partition.eof": "true",
            "isolation.level": "read_committed",
            # Only the last batch of each partition is needed: do not prefetch more than that.
            "queued.max.messages.kbytes": "4096",
            # EOF comes from a fetch at the end, which brokers that do not wake waiting fetches (Tansu)
            # hold for fetch.wait.max.ms.
            "fetch.wait.max.ms": "10",
            # A new client waits half of this (at least 11 ms) before it connects to a broker it
            # learned from metadata: 50 ms of every plan at librdkafka's default of 100.
            "reconnect.backoff.ms": "20",
            "logger": log,
        }
    )
    try:
        # Metadata first: assigned before it, librdkafka waits a retry backoff before its first fetch.
        consumer.list_topics(timeout=deadline.left(what))
        consumer.assign([TopicPartition(t, p, max(lower[(t, p)] - 1, 0)) for t, p in _keys(partitions)])
        ends: dict[TopicPartitionKey, int] = {}
        pending = set(_keys(partitions))
        while pending:
            left = deadline.remaining()
            if left <= 0:
                raise TimeoutError(
                    f"{what}: no end-of-partition after {timeout:.1f}s for {sorted(pending)} "
                    f"(ListOffsets lower bounds {[lower[k] for k in sorted(pending)]})"
                )
            for message in consumer.consume(num_messages=10_000, timeout=min(left, _EOF_POLL_S)):
                error = message.error()
                if error is None:
                    if sample is not None:
                        sample.add(message.key(), message.value())
                    continue
                if error.code() == KafkaError._PARTITION_EOF:
                    key = (message.topic(), message.partition())
                    if key in pending:
                        offset = message.offset()
                        ends[key] = max(int(offset if offset is not None else 0), lower[key])
                        pending.discard(key)
                        # Stop fetching it: the rest of the partitions are what we wait for.
                        consumer.pause([TopicPartition(key[0], key[1])])
                elif not flagged_retriable(error):
                    raise KafkaException(error)
                else:
                    log.debug("%s: %s", what, error)
        return ends
    finally:
        consumer.close()


def plan_ranges(
    committed: Mapping[TopicPartitionKey, int | None],
    earliest: Mapping[TopicPartitionKey, int],
    ends: Mapping[TopicPartitionKey, int],
    max_records_per_partition: int | None,
) -> list[PartitionRange]:
    """One range per partition of `ends` with something to read, sorted by (topic, partition).

    start = the committed offset, or the earliest when none (Kafka Connect's auto.offset.reset=earliest);
    a committed offset below the earliest (records deleted) is moved up to it, one above the end (e.g. the
    topic was recreated) down to it. end = min(true end, start + max_records_per_partition)."""
    if max_records_per_partition is not None and max_records_per_partition < 1:
        raise ValueError(f"max_records_per_partition must be >= 1, got {max_records_per_partition}")
    ranges: list[PartitionRange] = []
    for key in sorted(ends):
        true_end = ends[key]
        low = earliest.get(key, 0)
        position = committed.get(key)
        start = low if position is None else position
        start = min(max(start, low), true_end)
        end = (
            true_end
            if max_records_per_partition is None
            else min(true_end, start + max_records_per_partition)
        )
        if end > start:
            ranges.append(PartitionRange(key[0], key[1], start, end))
    return ranges
