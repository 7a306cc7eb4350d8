"""The leader's writes to the internal topics, fenced through Kafka: a transactional producer with
one fixed `transactional.id` per control-plane cluster (`{group.id}-leader`, as Kafka Connect's
leader uses). A new leader's `init_transactions` bumps the producer epoch of that id, after which
the broker refuses every write of the producer it replaced: a deposed leader that wakes up cannot
change state, whatever it still believes."""

from __future__ import annotations

import concurrent.futures
import logging
import queue
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from confluent_kafka import KafkaError, KafkaException, Message, Producer

from sluiceway.common.kafka_errors import error_of, retriable_exception
from sluiceway.common.retry import Deadline, RetryPolicy
from sluiceway.connect.kafka_clients import connect_first
from sluiceway_server.storage.record_log import LogPosition, NotLeaderError

log = logging.getLogger(__name__)

# Records sent together share one transaction; a bound keeps one transaction small.
_MAX_BATCH = 500
# commit_transaction is called again while librdkafka flags its error retriable, which is its
# contract for "the commit may still go through, call it again" (any other error needs an abort or
# is fatal, so the shared transient test is not the one here). Each call may take 30 s; past a
# minute the writer stops trying (see _commit).
_COMMIT_TIMEOUT_S: Final = 30.0
_COMMIT_RETRY: Final = RetryPolicy(initial=0.2, maximum=0.2, deadline=60.0, transient=retriable_exception)


def leader_transactional_id(group_id: str) -> str:
    return f"{group_id}-leader"


@dataclass
class _Pending:
    topic: str
    key: bytes | None
    value: bytes | None
    partition: int | None
    future: concurrent.futures.Future[LogPosition]
    position: LogPosition | None = None
    error: KafkaError | None = None


@dataclass
class _Batch:
    records: list[_Pending] = field(default_factory=list)


class LeaderWriter:
    """One transactional producer, owned by one thread that writes what callers send in
    transactions of up to 500 records (whatever queued while the previous one committed).

    Guarantees: a send's future completes with the record's position only once its transaction
    committed; it fails with NotLeaderError once the producer was fenced (or closed) or its commit
    was given up with its outcome unknown (`_commit`), and with the Kafka error when its transaction
    had to be aborted, in which case nothing of it is visible to readers that read committed records
    (Kafka; Tansu shows aborted records, see docs/ARCHITECTURE.md §9). `on_fenced` is called once, on
    the writer's thread, when the broker fences the producer or the writer gives up.

    Threading: `send` may be called from any thread; `start` and `close` from one owner.
    """

    def __init__(
        self,
        transactional_id: str,
        bootstrap_servers: str,
        producer_config: Mapping[str, str] | None = None,
        on_fenced: Callable[[str], None] | None = None,
    ) -> None:
        self.transactional_id = transactional_id
        self._config: dict[str, Any] = {
            # As KafkaLog's producers: keys land where Kafka Connect puts them.
            "partitioner": "murmur2_random",
            "bootstrap.servers": bootstrap_servers,
            "client.id": f"sluiceway-{transactional_id}",
            **(producer_config or {}),
            "transactional.id": transactional_id,
            "enable.idempotence": "true",
            "acks": "all",
            "logger": log,
        }
        self._on_fenced = on_fenced
        self._queue: queue.SimpleQueue[_Pending | None] = queue.SimpleQueue()
        self._producer: Producer | None = None
        self._thread: threading.Thread | None = None
        self._failure: str | None = None
        self._lock = threading.Lock()

    def start(self, timeout: float) -> None:
        """Take over the transactional id: once this returns, the previous holder is fenced and any
        transaction it left open is aborted."""
        deadline = Deadline(timeout)
        producer = Producer(dict(self._config))
        connect_first(producer, timeout)
        producer.init_transactions(deadline.remaining(at_least=0.1))
        self._producer = producer
        self._thread = threading.Thread(target=self._serve, name="leader-writer", daemon=True)
        self._thread.start()
        log.info("leader writer took over transactional id %s", self.transactional_id)

    @property
    def fenced(self) -> bool:
        return self._failure is not None

    def send(
        self, topic: str, key: bytes | None, value: bytes | None, partition: int | None = None
    ) -> concurrent.futures.Future[LogPosition]:
        future: concurrent.futures.Future[LogPosition] = concurrent.futures.Future()
        future.set_running_or_notify_cancel()
        with self._lock:
            failure = self._failure
            if failure is None and self._producer is None:
                failure = "the leader writer is not started"
            if failure is None:
                self._queue.put(_Pending(topic, key, value, partition, future))
                return future
        future.set_exception(NotLeaderError(failure))
        return future

    def close(self) -> None:
        """Stop writing: records not yet in a transaction fail with NotLeaderError."""
        with self._lock:
            if self._failure is None:
                self._failure = "this replica stopped leading"
        self._queue.put(None)
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout=30)
        self._fail_queued()

    # -- the writer thread ---------------------------------------------------------------------

    def _serve(self) -> None:
        while True:
            first = self._queue.get()
            if first is None or self._failure is not None:
                if first is not None:
                    first.future.set_exception(NotLeaderError(self._failure or "closed"))
                return
            batch = _Batch([first])
            while len(batch.records) < _MAX_BATCH:
                try:
                    item = self._queue.get_nowait()
                except queue.Empty:
                    break
                if item is None:
                    self._queue.put(None)  # seen again by the outer loop once this batch is done
                    break
                batch.records.append(item)
            self._write(batch)

    def _write(self, batch: _Batch) -> None:
        producer = self._producer
        assert producer is not None
        try:
            producer.begin_transaction()
            for pending in batch.records:
                self._produce(producer, pending)
            self._commit(producer)
        except KafkaException as exc:
            self._failed(producer, batch, exc)
            return
        for pending in batch.records:
            if pending.error is not None or pending.position is None:
                error = pending.error or KafkaError(KafkaError._FAIL, "no delivery report")
                pending.future.set_exception(KafkaException(error))
            else:
                pending.future.set_result(pending.position)

    def _produce(self, producer: Producer, pending: _Pending) -> None:
        def delivered(error: KafkaError | None, message: Message) -> None:
            offset, part = message.offset(), message.partition()
            if error is not None:
                pending.error = error
            elif offset is not None and part is not None:
                pending.position = LogPosition(part, offset)

        while True:
            try:
                if pending.partition is None:
                    producer.produce(
                        pending.topic, value=pending.value, key=pending.key, on_delivery=delivered
                    )
                else:
                    producer.produce(
                        pending.topic,
                        value=pending.value,
                        key=pending.key,
                        partition=pending.partition,
                        on_delivery=delivered,
                    )
                return
            except BufferError:
                producer.poll(0.05)

    @staticmethod
    def _commit(producer: Producer) -> None:
        """Commits the open transaction. A retriable error (a coordinator moving, a timeout) is
        retried under _COMMIT_RETRY; any other error is raised as it is, for _failed to abort or give
        up. When the retriable errors outlast the deadline, whether the transaction committed is
        unknown, and neither another commit nor an abort is safe: the error raised then is neither
        retriable nor abortable, so _failed ends the writer and the term, as for a fenced producer.
        The next leader's init_transactions settles the transaction one way or the other before it
        reads the topics to the end; callers get NotLeaderError, as when a leader dies during a
        call, and a client's retry with the same request_id is answered as after a failover."""
        retry = _COMMIT_RETRY.start()
        while True:
            try:
                producer.commit_transaction(min(_COMMIT_TIMEOUT_S, retry.deadline.remaining(at_least=0.1)))
                return
            except KafkaException as exc:
                if retry.again(exc):
                    continue
                if not retriable_exception(exc):
                    raise
                given_up = f"the transaction did not commit within {_COMMIT_RETRY.deadline:.0f}s"
                raise KafkaException(
                    KafkaError(KafkaError._TIMED_OUT, f"{given_up}: {error_of(exc)}")
                ) from exc

    def _failed(self, producer: Producer, batch: _Batch, exc: KafkaException) -> None:
        error = exc.args[0] if exc.args else None
        fatal = not isinstance(error, KafkaError) or error.fatal() or not error.txn_requires_abort()
        if not fatal:
            try:
                producer.abort_transaction(30)
            except KafkaException as abort_exc:
                log.error("leader writer: aborting a failed transaction failed: %s", abort_exc)
                fatal = True
        if not fatal:
            for pending in batch.records:
                pending.future.set_exception(exc)
            return
        reason = f"the leader's producer was fenced or failed: {error}"
        with self._lock:
            self._failure = reason
        log.warning("leader writer %s: %s", self.transactional_id, reason)
        for pending in batch.records:
            pending.future.set_exception(NotLeaderError(reason))
        self._fail_queued()
        if self._on_fenced is not None:
            self._on_fenced(reason)

    def _fail_queued(self) -> None:
        while True:
            try:
                item = self._queue.get_nowait()
            except queue.Empty:
                return
            if item is not None:
                item.future.set_exception(NotLeaderError(self._failure or "closed"))
