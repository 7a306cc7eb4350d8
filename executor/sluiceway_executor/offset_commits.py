"""How a task commits its offsets: straight to Kafka, in a transaction of its own
(docs/ARCHITECTURE.md §3 and §7).

Each task runner has one :class:`OffsetCommitter`. The Kafka implementation,
:class:`KafkaOffsetCommitter`, holds a transactional producer whose ``transactional.id`` is
``task_transactional_id(group.id, connector, task)``, on the cluster ``offset_commit_config``
names (the id and cluster the control plane fences). ``open()`` calls ``init_transactions``, which
fences any earlier holder of the id, such as an executor that still runs the task after the control
plane gave it to this one. Every commit is one transaction:

- source tasks: one record per source partition in the connector's offsets topic, keyed and valued
  as the control plane reads them (``sluiceway.common.offsets.source_offset_key``/``source_offset_value``);
- sink tasks: the batch's dead-letter records (``ProducedRecord``, errors.tolerance=all) and the
  ends of the ranges read, sent to the connector's consumer group with
  ``send_offsets_to_transaction`` (the group metadata comes from a consumer that never subscribes),
  plus, when the group lives on the worker's cluster, one tombstone in the worker's offsets topic
  under a key no source partition has (``["{connector}", {"kafka_topic", "kafka_partition"}]``): a
  no-op for every reader, there because Tansu 0.6.0 drops the group offsets of every transaction
  after a producer's first unless the transaction also holds a record.

A commit is OK only once ``commit_transaction`` returned. When a newer holder of the id fenced the
producer (or the producer failed fatally for another reason) the commit is FENCED and the committer
refuses every later one.
"""

from __future__ import annotations

import enum
import functools
import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final, Protocol

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition

from sluiceway.common.kafka_errors import is_transient, transient_exception
from sluiceway.common.offsets import OffsetPair, source_offset_key, source_offset_value
from sluiceway.common.retry import Deadline, RetryPolicy
from sluiceway.connect import PluginRegistry, PluginType
from sluiceway.connect.kafka_clients import (
    connect_first,
    offset_commit_config,
    sink_consumer_group,
    source_offsets_topic,
    task_transactional_id,
)
from sluiceway.connect.worker_settings import worker_default
from sluiceway_executor.pipelines.loading import worker_policy
from sluiceway_executor.pipelines.pipeline import ProducedRecord
from sluiceway_executor.pipelines.spec import TaskSpec

__all__ = [
    "CommitOutcome",
    "CommitStatus",
    "CommitterFactory",
    "KafkaCommitterFactory",
    "KafkaOffsetCommitter",
    "OffsetCommitter",
]

log = logging.getLogger(__name__)

# The control plane's default group.id, for a worker config that names none (the control plane
# fences task ids with the same default).
_DEFAULT_GROUP_ID: Final = "sluiceway-cluster"
# A call of the transaction again after an error that passes by itself, and a whole commit again
# after an aborted transaction, both within the commit's (or open's) timeout.
_RETRY: Final = RetryPolicy(initial=0.1, maximum=0.1, transient=transient_exception)
_CLOSE_ABORT_TIMEOUT_S: Final = 5.0
# Errors that mean a newer producer holds the transactional id. librdkafka reports some of them as
# abortable rather than fatal (a fenced send_offsets_to_transaction, for one), so the code decides.
_FENCING_CODES: Final = frozenset(
    {
        KafkaError._FENCED,
        KafkaError.PRODUCER_FENCED,
        KafkaError.INVALID_PRODUCER_EPOCH,
        KafkaError.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
    }
)


class CommitStatus(enum.Enum):
    OK = "ok"
    # The commit failed (Kafka refused it, or it did not finish in time).
    REJECTED = "rejected"
    # A newer holder of the task's transactional id fenced this committer: the task runs elsewhere
    # now, and nothing more of this runner may be committed.
    FENCED = "fenced"


@dataclass(frozen=True)
class CommitOutcome:
    status: CommitStatus
    error: str = ""
    # A REJECTED commit that failed for want of Kafka (time ran out, a broker was unreachable):
    # the task is not at fault and waits for Kafka instead of failing.
    transient: bool = False


class OffsetCommitter(Protocol):
    """Commits one task's offsets: ``open`` once before the first commit (it raises when it cannot
    take over the task's commits), ``commit`` per batch, ``close`` at the end."""

    def open(self, timeout: float) -> None: ...

    def commit(
        self, offsets: list[OffsetPair], timeout: float, records: Sequence[ProducedRecord] = ()
    ) -> CommitOutcome: ...

    def close(self) -> None: ...


CommitterFactory = Callable[[TaskSpec, Mapping[str, str]], OffsetCommitter]
"""Builds a task's committer from its spec and the worker config of the executor's Welcome."""


class KafkaCommitterFactory:
    """The executor's :data:`CommitterFactory`: a :class:`KafkaOffsetCommitter` per task, of the
    kind (source or sink) of its connector plugin, which it finds as the pipelines do."""

    def __init__(self, registry: PluginRegistry | None = None) -> None:
        self._registry = registry

    def __call__(self, spec: TaskSpec, worker_config: Mapping[str, str]) -> OffsetCommitter:
        if self._registry is None:
            self._registry = PluginRegistry.discover()
        registry = self._registry.with_plugin_path(worker_policy(worker_config).plugin_path)
        plugin = registry.resolve(spec.connector_config.get("connector.class", ""))
        return KafkaOffsetCommitter(spec, worker_config, source=plugin.type is PluginType.SOURCE)


class _FencedError(Exception):
    """The producer cannot commit any more: a newer holder of its id fenced it (``fenced``), or it
    failed fatally for another reason."""

    def __init__(self, message: str, *, fenced: bool) -> None:
        super().__init__(message)
        self.fenced = fenced


class _OutOfTimeError(Exception):
    """Retriable errors went on until the deadline; the message is the last of them."""


class _FencingLogFilter(logging.Filter):
    """librdkafka logs being fenced as an error, even as critical. For this producer that is how a
    takeover ends, which the runner reports itself: those lines go out at INFO."""

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno > logging.INFO and "fenced" in record.getMessage().lower():
            record.levelno, record.levelname = logging.INFO, logging.getLevelName(logging.INFO)
        return True


# librdkafka's own lines about these producers go through this logger.
_client_log = logging.getLogger(f"{__name__}.client")
_client_log.addFilter(_FencingLogFilter())


class KafkaOffsetCommitter:
    """One task's offset commits through a transactional producer (see the module docstring)."""

    def __init__(
        self,
        spec: TaskSpec,
        worker_config: Mapping[str, str],
        *,
        source: bool,
        producer_factory: Callable[[dict[str, Any]], Producer] = Producer,
        consumer_factory: Callable[[dict[str, Any]], Consumer] = Consumer,
    ) -> None:
        self.spec = spec
        self.source = source
        group_id = worker_config.get("group.id") or _DEFAULT_GROUP_ID
        self.transactional_id = task_transactional_id(group_id, spec.connector, spec.task_index)
        connection = offset_commit_config(worker_config, spec.connector_config, source=source)
        client_id = f"sluiceway-offsets-{spec.connector}-{spec.task_index}"
        self._producer_config: dict[str, Any] = {
            # The Java client's default partitioner: an offset record lands where Kafka Connect and
            # the control plane put the records with the same key.
            "partitioner": "murmur2_random",
            "client.id": client_id,
            **connection,
            "transactional.id": self.transactional_id,
            "enable.idempotence": "true",
            "acks": "all",
            "logger": _client_log,
        }
        self._consumer_config: dict[str, Any] = {
            **connection,
            "client.id": client_id,
            "group.id": sink_consumer_group(spec.connector, spec.connector_config),
            "enable.auto.commit": "false",
            "logger": _client_log,
        }
        # Source tasks: the offsets topic; None for sink tasks.
        self.topic = source_offsets_topic(worker_config, spec.connector_config) if source else None
        # Sink tasks whose group is on the worker's cluster: where each commit writes its tombstone.
        self._marker_topic: str | None = None
        if not source and connection.get("bootstrap.servers") == worker_config.get("bootstrap.servers"):
            self._marker_topic = worker_config.get("offset.storage.topic") or worker_default(
                "offset.storage.topic"
            )
        self._producer_factory = producer_factory
        self._consumer_factory = consumer_factory
        self._producer: Producer | None = None
        self._consumer: Consumer | None = None
        self._group_metadata: Any = None
        self._fenced: str | None = None
        # From begin_transaction until that transaction was committed or aborted.
        self._in_transaction = False

    # ------------------------------------------------------------------ life cycle

    def open(self, timeout: float) -> None:
        """Takes over the task's transactional id, fencing its earlier holders. Raises
        TimeoutError when retriable errors last ``timeout``, RuntimeError or the KafkaException
        for any other failure."""
        deadline = Deadline(timeout)
        producer = self._producer_factory(dict(self._producer_config))
        self._producer = producer
        connect_first(producer, deadline.remaining())
        try:
            self._retrying(producer.init_transactions, deadline)
        except _FencedError as exc:
            raise RuntimeError(f"cannot take over transactional id {self.transactional_id}: {exc}") from None
        except _OutOfTimeError as exc:
            raise TimeoutError(
                f"cannot take over transactional id {self.transactional_id} within {timeout:.0f}s: {exc}"
            ) from None
        if not self.source:
            self._consumer = self._consumer_factory(dict(self._consumer_config))
            self._group_metadata = self._consumer.consumer_group_metadata()
        log.debug("task %s commits its offsets as %s", self.spec.name, self.transactional_id)

    def close(self) -> None:
        """Aborts a transaction a failed commit left open (waiting a few seconds at most, and not
        once fenced), then lets the producer go. It is destroyed without ``Producer.close()``,
        which aborts an open transaction with no time limit: for a fenced producer that may never
        end (Tansu does not answer it)."""
        consumer, self._consumer = self._consumer, None
        producer, self._producer = self._producer, None
        if consumer is not None:
            try:
                consumer.close()
            except Exception:
                log.debug("closing the group-metadata consumer of %s failed", self.spec.name, exc_info=True)
        if producer is not None and self._in_transaction and self._fenced is None:
            try:
                producer.abort_transaction(_CLOSE_ABORT_TIMEOUT_S)
            except KafkaException as exc:
                log.info("task %s: aborting its open offsets transaction failed: %s", self.spec.name, exc)
        self._in_transaction = False
        del producer

    # ------------------------------------------------------------------ commits

    def commit(
        self, offsets: list[OffsetPair], timeout: float, records: Sequence[ProducedRecord] = ()
    ) -> CommitOutcome:
        """Commits ``offsets`` and writes ``records`` in one transaction."""
        if self._fenced is not None:
            return CommitOutcome(CommitStatus.FENCED, self._fenced)
        producer = self._producer
        if producer is None:
            return CommitOutcome(CommitStatus.REJECTED, "the offset committer is not open")
        try:
            positions = None if self.source else [_topic_partition(p, o) for p, o in offsets]
        except ValueError as exc:
            return CommitOutcome(CommitStatus.REJECTED, str(exc))
        deadline = Deadline(timeout)
        again = _RETRY.start(deadline)
        while True:
            try:
                self._transaction(producer, offsets, positions, records, deadline)
                return CommitOutcome(CommitStatus.OK)
            except _FencedError as exc:
                return self._fence(exc)
            except _OutOfTimeError as exc:
                return CommitOutcome(
                    CommitStatus.REJECTED,
                    f"the offset commit did not finish within {timeout:.0f}s: {exc}",
                    transient=True,
                )
            except KafkaException as exc:
                error = _error_of(exc)
                if error is None or not error.txn_requires_abort():
                    return CommitOutcome(
                        CommitStatus.REJECTED,
                        _describe(exc),
                        transient=error is not None and is_transient(error),
                    )
                problem = _describe(exc)
            # The transaction failed and must be aborted; then the whole commit is tried again.
            try:
                self._retrying(producer.abort_transaction, deadline)
                self._in_transaction = False
            except _FencedError as exc:
                return self._fence(exc)
            except (_OutOfTimeError, KafkaException) as exc:
                return CommitOutcome(
                    CommitStatus.REJECTED,
                    f"{problem}; aborting the transaction failed: {exc}",
                    transient=True,
                )
            if not again.wait():
                return CommitOutcome(
                    CommitStatus.REJECTED, f"{problem} (no time left to try again)", transient=True
                )
            log.info("task %s: offset commit aborted (%s); trying again", self.spec.name, problem)

    def _transaction(
        self,
        producer: Producer,
        offsets: list[OffsetPair],
        positions: list[TopicPartition] | None,
        records: Sequence[ProducedRecord],
        deadline: Deadline,
    ) -> None:
        _checked(producer.begin_transaction)
        self._in_transaction = True
        for record in records:
            self._produce(producer, record, deadline)
        if positions is None:
            topic = self.topic or ""
            for partition, offset in offsets:
                key = source_offset_key(self.spec.connector, partition)
                value = source_offset_value(offset)
                _checked(functools.partial(producer.produce, topic, key=key, value=value))
        else:
            if self._marker_topic is not None and positions:
                first = positions[0]
                key = source_offset_key(
                    self.spec.connector, {"kafka_partition": first.partition, "kafka_topic": first.topic}
                )
                _checked(functools.partial(producer.produce, self._marker_topic, key=key, value=None))
            send = functools.partial(producer.send_offsets_to_transaction, positions, self._group_metadata)
            self._retrying(send, deadline)
        self._retrying(producer.commit_transaction, deadline)
        self._in_transaction = False

    @staticmethod
    def _produce(producer: Producer, record: ProducedRecord, deadline: Deadline) -> None:
        """Queues ``record`` in the open transaction, waiting for room while the queue is full."""
        while True:
            try:
                _checked(
                    functools.partial(
                        producer.produce,
                        record.topic,
                        key=record.key,
                        value=record.value,
                        headers=list(record.headers) or None,
                        timestamp=record.timestamp_ms or 0,
                    )
                )
                return
            except BufferError:
                if deadline.remaining() <= 0:
                    raise _OutOfTimeError("the producer's queue stayed full") from None
                producer.poll(0.1)

    def _fence(self, exc: _FencedError) -> CommitOutcome:
        message = str(exc)
        if not exc.fenced:
            log.warning("task %s: the offsets producer failed for good: %s", self.spec.name, message)
        self._fenced = message
        return CommitOutcome(CommitStatus.FENCED, message)

    @staticmethod
    def _retrying(call: Callable[[float], None], deadline: Deadline) -> None:
        """Calls ``call(seconds left)`` until it succeeds, retrying retriable errors until the
        deadline (then _OutOfTimeError). Fencing and fatal errors raise _FencedError, any other
        error its KafkaException."""
        retry = _RETRY.start(deadline)
        problem = "no time was left"
        while True:
            left = deadline.remaining()
            if left <= 0:
                raise _OutOfTimeError(problem)
            try:
                _checked(functools.partial(call, left))
                return
            except KafkaException as exc:
                if not transient_exception(exc):
                    raise
                problem = _describe(exc)
                if not retry.wait():
                    raise _OutOfTimeError(problem) from None


def _checked(call: Callable[[], None]) -> None:
    """Runs ``call``, turning a fencing or fatal Kafka error into _FencedError."""
    try:
        call()
    except KafkaException as exc:
        error = _error_of(exc)
        if error is not None and (error.code() in _FENCING_CODES or error.fatal()):
            raise _FencedError(_describe(exc), fenced=error.code() in _FENCING_CODES) from exc
        raise


def _topic_partition(partition: Mapping[str, Any], offset: Mapping[str, Any] | None) -> TopicPartition:
    """A sink offset pair ({kafka_topic, kafka_partition} -> {kafka_offset}) as Kafka takes it;
    ValueError when it is not one."""
    try:
        if offset is None:
            raise KeyError("kafka_offset")
        return TopicPartition(
            str(partition["kafka_topic"]), int(partition["kafka_partition"]), int(offset["kafka_offset"])
        )
    except (KeyError, TypeError, ValueError) as exc:
        raise ValueError(f"not a sink offset: {dict(partition)} -> {offset} ({exc!r})") from None


def _error_of(exc: KafkaException) -> KafkaError | None:
    error = exc.args[0] if exc.args else None
    return error if isinstance(error, KafkaError) else None


def _describe(exc: KafkaException) -> str:
    error = _error_of(exc)
    if error is None:
        return str(exc)
    return f"{error.str()} ({error.name()})"
