"""Tasks: record-level ones that mirror Kafka Connect's SourceTask/SinkTask, and DataFrame-level ones
that read or write a whole Spark batch.

Spark is imported only for type checking: the control plane imports this module without Spark.
"""

from __future__ import annotations

import abc
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from sluiceway.connect.records import OffsetRange, RecordMetadata, SinkRecord, SourceRecord, TopicPartition

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

__all__ = [
    "BatchContext",
    "DataFrameSinkTask",
    "DataFrameSourceTask",
    "MemoryOffsetStorageReader",
    "OffsetStorageReader",
    "SimpleSourceTaskContext",
    "SinkTask",
    "SinkTaskContext",
    "SourceBatch",
    "SourceTask",
    "SourceTaskContext",
    "Task",
]


class Task(abc.ABC):
    """One unit of a connector's work; the executor runs it with one of the task configs."""

    @abc.abstractmethod
    def version(self) -> str: ...

    @abc.abstractmethod
    def start(self, props: Mapping[str, str]) -> None: ...

    @abc.abstractmethod
    def stop(self) -> None:
        """Called once, possibly from another thread than ``poll``/``put``; must make them return soon."""


class OffsetStorageReader(abc.ABC):
    """Read access to the source offsets committed for the task's connector (Kafka's OffsetStorageReader)."""

    @abc.abstractmethod
    def offsets(self, partitions: Iterable[Mapping[str, Any]]) -> list[tuple[dict[str, Any], dict[str, Any]]]:
        """(partition, offset) for each of ``partitions`` that has a committed offset, in input order."""

    def offset(self, partition: Mapping[str, Any]) -> dict[str, Any] | None:
        """The committed offset of one source partition, or None when there is none."""
        found = self.offsets([partition])
        return found[0][1] if found else None


def partition_key(partition: Mapping[str, Any]) -> str:
    """Canonical text of a source partition: equal maps give equal keys whatever their order."""
    return json.dumps(partition, sort_keys=True, separators=(",", ":"))


class MemoryOffsetStorageReader(OffsetStorageReader):
    """An offset reader over offsets already loaded in memory (e.g. read from the offsets topic)."""

    def __init__(self, offsets: Iterable[tuple[Mapping[str, Any], Mapping[str, Any] | None]] = ()) -> None:
        self._offsets: dict[str, tuple[dict[str, Any], dict[str, Any]]] = {}
        for partition, offset in offsets:
            self.put(partition, offset)

    def put(self, partition: Mapping[str, Any], offset: Mapping[str, Any] | None) -> None:
        """Records a committed offset; None removes it (a reset)."""
        key = partition_key(partition)
        if offset is None:
            self._offsets.pop(key, None)
        else:
            self._offsets[key] = (dict(partition), dict(offset))

    def offsets(self, partitions: Iterable[Mapping[str, Any]]) -> list[tuple[dict[str, Any], dict[str, Any]]]:
        found: list[tuple[dict[str, Any], dict[str, Any]]] = []
        for partition in partitions:
            stored = self._offsets.get(partition_key(partition))
            if stored is not None:
                found.append((dict(partition), dict(stored[1])))
        return found


class SourceTaskContext(abc.ABC):
    """What a running source task can ask the executor for (Kafka's SourceTaskContext)."""

    @abc.abstractmethod
    def config(self) -> Mapping[str, str]:
        """The task's configuration."""

    @abc.abstractmethod
    def offset_storage_reader(self) -> OffsetStorageReader: ...


@dataclass(frozen=True)
class SimpleSourceTaskContext(SourceTaskContext):
    """A source task context over a fixed config and offset reader."""

    task_config: Mapping[str, str]
    reader: OffsetStorageReader = field(default_factory=MemoryOffsetStorageReader)

    def config(self) -> Mapping[str, str]:
        return self.task_config

    def offset_storage_reader(self) -> OffsetStorageReader:
        return self.reader


class SourceTask(Task):
    """Record-level source task: the executor polls it inside a Spark job (Kafka's SourceTask)."""

    _context: SourceTaskContext | None = None

    def initialize(self, context: SourceTaskContext) -> None:
        self._context = context

    @property
    def context(self) -> SourceTaskContext:
        if self._context is None:
            raise RuntimeError(f"{type(self).__name__} has not been initialized")
        return self._context

    @abc.abstractmethod
    def poll(self) -> list[SourceRecord] | None:
        """The next records, or None/[] when there are none yet; may block briefly."""

    def commit(self) -> None:
        """Hook for after the offsets of the polled records are committed; does nothing by default.

        Not called yet by Sluiceway's executors.
        """

    def commit_record(self, record: SourceRecord, metadata: RecordMetadata | None) -> None:
        """Hook for after ``record`` is in Kafka (``metadata`` None: a transform dropped it).

        Not called yet by Sluiceway's executors.
        """

    def produce_heartbeat_records(self) -> list[SourceRecord]:
        """Heartbeat records (KIP-910): lets the task move its source offsets while ``poll`` has
        nothing to send, e.g. past changes of the source it does not copy.

        When the connector's heartbeat interval (``heartbeat.interval.ms``) is above 0 and has run
        out, the executor calls this at the start of a batch, before the first ``poll``. Each record
        returned goes to the heartbeat topic (``heartbeat.records.topic``) whatever its own
        ``topic`` and ``kafka_partition``; its key, value and headers go through the connector's
        converters; its source offset is committed with the batch's, as if ``poll`` had returned it.
        The next call comes one interval later, whether or not this one returned records.

        The default returns no records, and the executor never calls a task that keeps it, so a
        task without heartbeats costs nothing. The task's offsets (through its context) are those
        committed before the batch.
        """
        return []


class SinkTaskContext(abc.ABC):
    """What a running sink task can ask the executor for (Kafka's SinkTaskContext).

    Inside Spark the executor ignores ``offset``, ``timeout``, ``pause`` and ``resume`` for now.
    """

    @abc.abstractmethod
    def config(self) -> Mapping[str, str]: ...

    @abc.abstractmethod
    def offset(self, offsets: Mapping[TopicPartition, int]) -> None:
        """Asks to continue reading these partitions from the given offsets (a rewind or a skip)."""

    @abc.abstractmethod
    def timeout(self, timeout_ms: int) -> None:
        """How long to wait before retrying a ``put`` that raised RetriableException."""

    @abc.abstractmethod
    def assignment(self) -> set[TopicPartition]: ...

    @abc.abstractmethod
    def pause(self, *partitions: TopicPartition) -> None: ...

    @abc.abstractmethod
    def resume(self, *partitions: TopicPartition) -> None: ...

    @abc.abstractmethod
    def request_commit(self) -> None:
        """Asks for an offset commit soon; every batch already ends with one."""


class SinkTask(Task):
    """Record-level sink task: the executor hands it each batch's records inside a Spark job (Kafka's
    SinkTask)."""

    TOPICS_CONFIG = "topics"
    TOPICS_REGEX_CONFIG = "topics.regex"

    _context: SinkTaskContext | None = None

    def initialize(self, context: SinkTaskContext) -> None:
        self._context = context

    @property
    def context(self) -> SinkTaskContext:
        if self._context is None:
            raise RuntimeError(f"{type(self).__name__} has not been initialized")
        return self._context

    @abc.abstractmethod
    def put(self, records: Sequence[SinkRecord]) -> None: ...

    def flush(self, current_offsets: Mapping[TopicPartition, int]) -> None:
        """Must make everything passed to ``put`` so far durable; does nothing by default."""

    def pre_commit(self, current_offsets: Mapping[TopicPartition, int]) -> Mapping[TopicPartition, int]:
        """Called at the end of each batch; the default flushes and returns ``current_offsets``.

        The returned offsets are not used yet: the batch's offsets are committed once its job succeeds.
        """
        self.flush(current_offsets)
        return current_offsets

    def open(self, partitions: Sequence[TopicPartition]) -> None:
        """The task starts receiving records of these partitions."""

    def close(self, partitions: Sequence[TopicPartition]) -> None:
        """The task gets no more records of these partitions; write out what it buffers for them."""


@dataclass(frozen=True)
class BatchContext:
    """Identifies one micro-batch of a DataFrame-level task. ``batch_id`` counts the batches of one
    run of the task (it starts at 0 again after every restart). For a sink batch, ``ranges`` are
    the Kafka offsets it holds, one range per partition; a source batch has none. For a source
    batch, ``max_records`` is the most records the executor wants in it (the connector's
    ``batch.*`` bounds and what earlier batches took; None: no bound), which a task should keep to.
    For a sink batch, ``offsets_change`` names the latest change of the connector's offsets made
    through the control plane (a KIP-875 alter or reset) before the task started ("" when there was
    none); a sink that stores ``ranges`` with its data stores it too (see
    ``DataFrameSinkTask.written_offsets``). ``topics_renamed`` is true when the connector's
    transforms may have given a sink batch's records other topics than the ranges they were read
    from: the ``topic`` column then says where each record goes."""

    connector: str
    task_id: int
    batch_id: int
    ranges: tuple[OffsetRange, ...] = ()
    max_records: int | None = None
    offsets_change: str = ""
    topics_renamed: bool = False


@dataclass(frozen=True)
class SourceBatch:
    """What a DataFrame-level source task read in one batch.

    ``data`` has one row per record with columns ``value`` and, optionally, ``key``, ``topic``
    (when the task routes records itself), ``partition`` and ``timestamp``; the executor converts key
    and value with the configured converters. ``offsets`` are the source offsets reached by this
    batch, committed once the records are durable in Kafka. ``data`` is None when nothing is new.

    ``end_of_data`` says that the task has nothing more to read after this batch (a bounded source
    that has read all of it, such as DataGenSource at ``max.records``): the executor keeps calling
    ``read_batch`` as before, but the task's status shows it RUNNING with the detail "idle: end of
    data" from then on, until a batch brings records again. A task that leaves it False and finds
    nothing for a while is shown "idle: no new records" instead.

    ``topics``, when the task knows them, are the topics its ``topic`` column holds. The executor
    then takes them as the batch's topics (to check and create before writing) instead of running a
    Spark job to find them in the records; a record whose topic is not among them fails the batch
    before anything of it is written to that topic.
    """

    data: DataFrame | None
    offsets: list[tuple[Mapping[str, Any], Mapping[str, Any]]] = field(default_factory=list)
    end_of_data: bool = False
    topics: frozenset[str] | None = None


class DataFrameSourceTask(Task):
    """A source task that reads a whole batch as a Spark DataFrame.

    It is stateless between batches: ``offsets`` reflects what has been committed, so a retried batch
    reads the same range again.
    """

    @abc.abstractmethod
    def read_batch(
        self, spark: SparkSession, offsets: OffsetStorageReader, context: BatchContext
    ) -> SourceBatch:
        """Reads the next bounded batch after the committed ``offsets``."""

    def produce_heartbeat_records(
        self, offsets: OffsetStorageReader, context: BatchContext
    ) -> list[SourceRecord]:
        """Heartbeat records (KIP-910), as ``SourceTask.produce_heartbeat_records`` describes: called
        when a heartbeat is due, before the ``read_batch`` of batch ``context.batch_id``, with the
        committed ``offsets``. The records go to the heartbeat topic, converted one by one by the
        connector's converters (a task's records are few here); their source offsets are committed
        with that batch's, and ``read_batch`` already sees them in its ``offsets``.

        The default returns no records, and the executor never calls a task that keeps it.
        """
        return []


class DataFrameSinkTask(Task):
    """A sink task that writes a whole batch as a Spark DataFrame.

    The batch has one row per record with the columns ``topic`` (string), ``partition`` (int),
    ``offset`` (long), ``timestamp`` (timestamp), ``key`` and ``value`` (as the converters produced
    them: a string, binary, or a struct when the value carries a schema) and ``headers``. Offsets are
    committed once ``write_batch`` returns, so it must only return when the data is durable.

    A batch may be handed over a second time right after ``write_batch`` raised: a converter that
    typed the records on the schema it expected (the previous batch's) fails the write on a record
    of another schema, and the batch is then typed on its own schemas and written again. So, as
    after any failure, a write that raised must be safe to follow with the same records.
    """

    @abc.abstractmethod
    def write_batch(self, batch: DataFrame, context: BatchContext) -> None: ...

    def written_offsets(
        self, spark: SparkSession, task_id: int, offsets_change: str = ""
    ) -> Mapping[TopicPartition, OffsetRange]:
        """For a sink that stores, atomically with each batch's data, which offsets the batch holds
        (``context.ranges``) and ``context.offsets_change``: the range of the newest batch it holds
        for each partition, whichever task wrote it, leaving out a batch stored with another
        ``offsets_change`` than this one. Called once before each run's first batch, after
        ``start``; also the place to clear what an interrupted batch of task ``task_id`` left behind.

        A batch written whose offsets were not committed (the executor died in between) is then
        skipped instead of written again: a partition whose committed offset is the start of its
        newest written range, or that has no committed offset while that range starts at the
        partition's earliest offset, resumes at the range's end. Any other committed offset is where
        the partition resumes. A batch written before the connector's offsets were last altered or
        reset says nothing about a commit, since the change came after it: it must be left out, and
        the partition then resumes at the offset the change set, writing those records again. The
        default holds nothing, and every partition resumes at its committed offset."""
        return {}
