"""A compacted topic read from the beginning by a background thread (Kafka Connect's KafkaBasedLog).

Reading "to the end" must be exact on Apache Kafka and on Tansu, whose ListOffsets(latest) answers
the last *batch's* base offset + 1 (a Tansu quirk, docs/ARCHITECTURE.md §9). See
KafkaLog.read_to_end for the scheme."""

from __future__ import annotations

import concurrent.futures
import logging
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any

from confluent_kafka import (
    OFFSET_BEGINNING,
    Consumer,
    IsolationLevel,
    KafkaError,
    KafkaException,
    Message,
    Producer,
    TopicPartition,
)
from confluent_kafka.admin import AdminClient
from confluent_kafka.admin._listoffsets import OffsetSpec

from sluiceway.common.kafka_errors import error_of, transient_exception
from sluiceway.common.retry import Deadline, RetryPolicy
from sluiceway_server.storage.record_log import (
    LogPosition,
    LogRecord,
    LogStoppedError,
    NotLeaderError,
    TopicWriter,
)
from sluiceway_server.storage.topics import TopicSpec, ensure_topic, partition_count, warn_if_not_compacted

log = logging.getLogger(__name__)

_LATEST: OffsetSpec = OffsetSpec.latest()  # type: ignore[no-untyped-call]  # untyped in confluent-kafka 2.16
# ListOffsets again after an error that passes by itself (a partition leader moving, say), within
# the caller's timeout.
_END_OFFSETS_RETRY = RetryPolicy(initial=0.1, maximum=0.1, transient=transient_exception)


_BATCH = 500
_POLL_SECONDS = 0.1
_QUEUE_FULL_SECONDS = 30.0


class KafkaLog:
    """RecordLog on a real broker: an idempotent producer (acks=all) and an assign()-based consumer
    owned by one daemon thread. Other threads never call the consumer; they wait on a condition that
    the thread signals after every batch.

    A `leader_only` log has no producer of its own: it writes through the TopicWriter given to
    `route_writes` (the leader's fenced producer) and refuses writes with NotLeaderError without one.
    """

    def __init__(  # the herder's contract takes these positionally
        self,
        topic: str,
        bootstrap_servers: str,
        on_record: Callable[[LogRecord], None],
        topic_spec: TopicSpec,
        client_config: Mapping[str, str] | None = None,
        producer_config: Mapping[str, str] | None = None,
        consumer_config: Mapping[str, str] | None = None,
        name: str = "",
        leader_only: bool = False,
    ) -> None:
        self.topic = topic
        self.leader_only = leader_only
        self._writer: TopicWriter | None = None
        self._name = name or topic
        self._on_record = on_record
        self._topic_spec = topic_spec
        common: dict[str, str] = {"bootstrap.servers": bootstrap_servers, **(client_config or {})}
        common.setdefault("client.id", f"sluiceway-{self._name}")
        self._admin_config = dict(common)
        self._producer_config: dict[str, Any] = {
            # The Java client's default partitioner, so keys land where Kafka Connect puts them and a
            # topic shared with (or adopted from) Kafka Connect keeps per-key order.
            "partitioner": "murmur2_random",
            **common,
            **(producer_config or {}),
            "enable.idempotence": "true",
            "acks": "all",
            "logger": log,
        }
        self._consumer_config: dict[str, Any] = {
            # Kafka Connect writes internal topics in transactions when exactly-once source support
            # is on; a write it aborted must never be applied here.
            "isolation.level": "read_committed",
            # Writers wait until their record is read back. Brokers that do not wake a waiting fetch
            # when data arrives (Tansu) would add up to this much to every write.
            "fetch.wait.max.ms": "50",
            **common,
            **(consumer_config or {}),
            # confluent-kafka insists on a group id even for assign(); we never join or commit.
            "group.id": f"sluiceway-log-{self._name}-unused",
            "enable.auto.commit": "false",
            "enable.auto.offset.store": "false",
            "auto.offset.reset": "earliest",
            "enable.partition.eof": "true",
            "logger": log,
        }
        self._admin: AdminClient | None = None
        self._producer: Producer | None = None
        self._partitions: list[int] = []
        self._cond = threading.Condition()
        # Per partition: every record below consumed[p] went through on_record (or is not there,
        # e.g. compacted away or a transaction marker, which EOF events account for).
        self._consumed: dict[int, int] = {}
        # Per partition: the highest high watermark seen in fetch responses.
        self._high_watermark: dict[int, int] = {}
        self._running = False
        self._failure: BaseException | None = None
        self._stop_event = threading.Event()
        self._consumer_thread: threading.Thread | None = None
        self._producer_thread: threading.Thread | None = None

    # -- lifecycle -----------------------------------------------------------------------------

    def start(self, timeout: float) -> None:
        """Create the topic if missing, start consuming from the beginning and read to the end."""
        if self._running or self._consumer_thread is not None or self._stop_event.is_set():
            raise RuntimeError(f"log {self._name} already started (a stopped log cannot be restarted)")
        deadline = Deadline(timeout)
        what = f"starting log {self._name} on {self.topic}"
        try:
            # First, so the idempotent producer gets its producer id while we set up the rest.
            if not self.leader_only:
                self._producer = Producer(dict(self._producer_config))
            self._admin = AdminClient(dict(self._admin_config), logger=log)
            created = ensure_topic(self._admin, self.topic, self._topic_spec, deadline.left(what))
            if not created and self._topic_spec.configs.get("cleanup.policy") == "compact":
                warn_if_not_compacted(self._admin, self.topic, min(deadline.left(what), 5.0))
            self._partitions = list(range(partition_count(self._admin, self.topic, deadline.left(what))))
            with self._cond:
                self._consumed = dict.fromkeys(self._partitions, 0)
                self._high_watermark = dict.fromkeys(self._partitions, 0)
                self._running = True
            self._producer_thread = threading.Thread(
                target=self._serve_producer, name=f"{self._name}-producer", daemon=True
            )
            self._producer_thread.start()
            ready: concurrent.futures.Future[None] = concurrent.futures.Future()
            self._consumer_thread = threading.Thread(
                target=self._consume,
                args=(ready, deadline.left(what)),
                name=f"{self._name}-consumer",
                daemon=True,
            )
            self._consumer_thread.start()
            ready.result(timeout=deadline.left(what))
            self.read_to_end(deadline.left(what))
        except BaseException:
            self.stop()
            raise
        log.info("log %s started on topic %s (%d partitions)", self._name, self.topic, len(self._partitions))

    def stop(self) -> None:
        with self._cond:
            self._running = False
            self._cond.notify_all()
        self._stop_event.set()
        consumer_thread = self._consumer_thread
        if consumer_thread is not None and consumer_thread is not threading.current_thread():
            consumer_thread.join(timeout=30)
            self._consumer_thread = None
        producer = self._producer
        if producer is not None and producer.flush(10) > 0:
            log.warning("log %s: dropping records not delivered within 10s of stop", self._name)
            # Fails their futures instead of leaving callers waiting forever.
            producer.purge()
            producer.poll(0)
        if self._producer_thread is not None:
            self._producer_thread.join(timeout=10)
            self._producer_thread = None
        self._producer = None
        self._admin = None

    # -- writing -------------------------------------------------------------------------------

    def route_writes(self, writer: TopicWriter | None) -> None:
        """A leader-only log's writes go through `writer` from now on; None: they are refused."""
        if not self.leader_only:
            raise RuntimeError(f"log {self._name} writes with its own producer")
        self._writer = writer

    def send(
        self, key: bytes | None, value: bytes | None, partition: int | None = None
    ) -> concurrent.futures.Future[LogPosition]:
        if self.leader_only:
            writer = self._writer
            if not self._running:
                raise LogStoppedError(f"log {self._name} is not running")
            if writer is None:
                raise NotLeaderError(f"this replica does not lead: it cannot write to {self.topic}")
            return writer.send(self.topic, key, value, partition)
        producer = self._producer
        if producer is None or not self._running:
            raise LogStoppedError(f"log {self._name} is not running")
        future: concurrent.futures.Future[LogPosition] = concurrent.futures.Future()
        future.set_running_or_notify_cancel()

        def delivered(error: KafkaError | None, message: Message) -> None:
            if error is not None:
                future.set_exception(KafkaException(error))
                return
            offset, part = message.offset(), message.partition()
            if offset is None or part is None:
                future.set_exception(KafkaException(f"delivery report without a position on {self.topic}"))
                return
            future.set_result(LogPosition(part, offset))

        give_up = time.monotonic() + _QUEUE_FULL_SECONDS
        while True:
            try:
                if partition is None:
                    producer.produce(self.topic, value=value, key=key, on_delivery=delivered)
                else:
                    producer.produce(
                        self.topic, value=value, key=key, partition=partition, on_delivery=delivered
                    )
                break
            except BufferError as exc:
                # Local queue full: let the producer thread drain it, then retry (not forever: a
                # broker that is gone for good must not hang the caller past any timeout it has).
                if time.monotonic() >= give_up:
                    future.set_exception(exc)
                    break
                time.sleep(0.01)
            except KafkaException as exc:
                future.set_exception(exc)
                break
        return future

    def flush(self, timeout: float) -> None:
        if self.leader_only:
            return  # a send's future completes only once its transaction committed
        producer = self._producer
        if producer is None:
            raise LogStoppedError(f"log {self._name} is not running")
        left = producer.flush(timeout)
        if left > 0:
            raise TimeoutError(f"log {self._name}: {left} records not delivered after {timeout:.1f}s")

    def _serve_producer(self) -> None:
        """Delivery reports, and the producer's and admin client's log lines, are served by poll()."""
        producer, admin = self._producer, self._admin
        while not self._stop_event.is_set():
            if producer is not None:
                producer.poll(_POLL_SECONDS)
            else:
                self._stop_event.wait(_POLL_SECONDS)
            if admin is not None:
                admin.poll(0)

    # -- reading -------------------------------------------------------------------------------

    def read_to_end(self, timeout: float) -> None:
        """Return once on_record ran for every record written before the call.

        ListOffsets gives per-partition targets, which are exact on Kafka but only a lower bound on
        Tansu (base offset + 1 of the last batch). Once consumption reaches a target we also require
        the high watermark recorded from the fetch that delivered that record (or a later one): that
        fetch carried the whole last batch and its true end, so the combined bound covers every record
        acknowledged before the call. Freezing that watermark at that moment, instead of chasing the
        newest one, keeps the wait bounded under continuous writes. EOF events advance `consumed`
        past transaction markers and compacted gaps, which records alone would not. A transaction
        still open at that watermark (read_committed) is waited for until it commits or aborts."""
        deadline = Deadline(timeout)
        admin = self._admin
        if admin is None or not self._running:
            raise LogStoppedError(f"log {self._name} is not running")
        required = self._end_offsets(admin, deadline)
        frozen: set[int] = set()
        with self._cond:
            while True:
                self._check_alive()
                pending = []
                for part in required:
                    consumed = self._consumed.get(part, 0)
                    if consumed >= required[part] and part not in frozen:
                        frozen.add(part)
                        required[part] = max(required[part], self._high_watermark.get(part, 0))
                    if consumed < required[part]:
                        pending.append(part)
                if not pending:
                    return
                left = deadline.remaining()
                if left <= 0:
                    lag = {p: (self._consumed.get(p, 0), required[p]) for p in pending}
                    raise TimeoutError(
                        f"log {self._name}: not at the end of {self.topic} after {timeout:.1f}s "
                        f"(partition: (consumed, end)) {lag}"
                    )
                self._cond.wait(left)

    def _end_offsets(self, admin: AdminClient, deadline: Deadline) -> dict[int, int]:
        """Latest offsets by ListOffsets, retried on retriable errors (e.g. a leader moving)."""
        what = f"log {self._name}: ListOffsets on {self.topic}"
        retry = _END_OFFSETS_RETRY.start(deadline)
        while True:
            request = {TopicPartition(self.topic, p): _LATEST for p in self._partitions}
            try:
                futures = admin.list_offsets(
                    request,
                    isolation_level=IsolationLevel.READ_COMMITTED,
                    request_timeout=deadline.left(what),
                )
                return {
                    tp.partition: max(int(future.result(timeout=deadline.left(what)).offset), 0)
                    for tp, future in futures.items()
                }
            except KafkaException as exc:
                if not transient_exception(exc):
                    raise
                if not retry.wait():
                    raise TimeoutError(f"{what} timed out: {error_of(exc)}") from exc
                log.debug("%s: retrying after %s", what, error_of(exc))

    def wait_for(self, position: LogPosition, timeout: float) -> None:
        """Return once the record at `position` (a delivery report's offset) went through on_record."""
        deadline = Deadline(timeout)
        with self._cond:
            self._check_alive()
            while self._consumed.get(position.partition, 0) <= position.offset:
                left = deadline.remaining()
                if left <= 0:
                    raise TimeoutError(
                        f"log {self._name}: {position} of {self.topic} not read back after {timeout:.1f}s"
                    )
                self._cond.wait(left)
                self._check_alive()

    def _check_alive(self) -> None:
        if threading.current_thread() is self._consumer_thread:
            # The thread that would make progress is the one waiting.
            raise RuntimeError(f"log {self._name}: cannot wait for the log from its own record callback")
        if self._failure is not None:
            raise LogStoppedError(f"log {self._name}: consumer thread failed: {self._failure!r}")
        if not self._running:
            raise LogStoppedError(f"log {self._name} is not running")

    def _consume(self, ready: concurrent.futures.Future[None], setup_timeout: float) -> None:
        try:
            consumer = Consumer(dict(self._consumer_config))
            # With the leader already known, the initial offset lookup is immediate; assigned
            # before metadata, librdkafka retries it after a backoff (~0.5 s).
            consumer.list_topics(self.topic, timeout=setup_timeout)
            consumer.assign([TopicPartition(self.topic, p, OFFSET_BEGINNING) for p in self._partitions])
        except BaseException as exc:
            ready.set_exception(exc)
            return
        ready.set_result(None)
        try:
            while not self._stop_event.is_set():
                # consume() waits for a full batch or its timeout: block for the first message only,
                # then take whatever else is already there.
                first = consumer.poll(_POLL_SECONDS)
                if first is None:
                    continue
                self._handle_batch(consumer, [first, *consumer.consume(num_messages=_BATCH, timeout=0)])
        except BaseException as exc:
            log.exception("log %s: consumer thread failed", self._name)
            with self._cond:
                self._failure = exc
                self._cond.notify_all()
        finally:
            consumer.close()

    def _handle_batch(self, consumer: Consumer, messages: list[Message]) -> None:
        touched = {m.partition() for m in messages}
        # Before any record of this batch counts as consumed, so a reader that sees the record also
        # sees a watermark at least as new as the fetch that delivered it.
        watermarks: dict[int, int] = {}
        for part in touched:
            if part is None:
                continue
            try:
                _, high = consumer.get_watermark_offsets(TopicPartition(self.topic, part), cached=True)
            except KafkaException:
                continue
            watermarks[part] = high
        with self._cond:
            for part, high in watermarks.items():
                if high > self._high_watermark.get(part, 0):
                    self._high_watermark[part] = high
        for message in messages:
            error = message.error()
            part, offset = message.partition(), message.offset()
            if error is not None:
                if error.code() == KafkaError._PARTITION_EOF and part is not None and offset is not None:
                    self._advance(part, offset)
                elif error.fatal():
                    log.error("log %s: fatal consumer error: %s", self._name, error)
                else:
                    log.warning("log %s: consumer error: %s", self._name, error)
                continue
            if part is None or offset is None:
                continue
            record = LogRecord(part, offset, message.key(), message.value(), message.timestamp()[1])
            try:
                self._on_record(record)
            except Exception:
                # One bad record or listener must not stop the log: later records still apply.
                log.exception("log %s: record callback failed at %d/%d", self._name, part, offset)
            self._advance(part, offset + 1)
        with self._cond:
            self._cond.notify_all()

    def read_lag(self) -> int:
        # From the high watermarks of the fetches so far (Tansu's may stay below the true end, see
        # read_to_end): it can read low while records arrive, and is 0 once caught up.
        with self._cond:
            return sum(max(high - self._consumed.get(p, 0), 0) for p, high in self._high_watermark.items())

    def _advance(self, partition: int, consumed: int) -> None:
        with self._cond:
            if consumed > self._consumed.get(partition, 0):
                self._consumed[partition] = consumed
