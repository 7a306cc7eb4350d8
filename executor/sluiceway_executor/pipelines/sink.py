"""The sink pipeline: Kafka → converters → the sink task, one bounded batch at a time
(docs/ARCHITECTURE.md §3).

Each batch lists the partitions of ``topics`` / ``topics.regex`` again (a topic created later that
matches the regex is picked up), takes this task's share of them, reads each partition from the
consumer group's committed offset to its exact end (capped by the batch size) inside Spark, and
hands the records to the task. The offsets to commit are the ends of the ranges read.

Committed offsets are read from Kafka once per partition (when the task first sees it) and then
kept in memory from the task's own successful commits. A DataFrame-level task that records each
batch's offsets with its data (``DataFrameSinkTask.written_offsets``, SparkFileSink does) may move a
partition's start past a batch it wrote whose commit never happened (``resume_offset``). Such a task
also records the latest change of the connector's offsets its assignment carried
(``TaskSpec.offsets_change``) and leaves out the batches written before another one: after an
alter or a reset, the records are read again from the new offsets.
"""

from __future__ import annotations

import json
import logging
import re
import time
from collections.abc import Mapping
from typing import TYPE_CHECKING, Final

from confluent_kafka.admin import AdminClient

from sluiceway.common.offsets import OffsetPair
from sluiceway.connect import (
    BatchContext,
    ConnectException,
    DataFrameSinkTask,
    OffsetRange,
    SinkTask,
    Task,
)
from sluiceway.connect.kafka_clients import kafka_client_config, sink_consumer_group
from sluiceway_executor.failures import is_kafka_unreachable, is_spark_session_lost
from sluiceway_executor.kafka_ranges import (
    PartitionRange,
    RecordSample,
    TopicPartitionKey,
    committed_offsets,
    earliest_offsets,
    exact_end_offsets,
    list_partitions,
    plan_ranges,
    task_partitions,
)
from sluiceway_executor.pipelines.batch_sizing import BatchSizer, share_records
from sluiceway_executor.pipelines.error_handling import (
    ErrorHandling,
    FailedRecord,
    first_failure_message,
    log_failures,
)
from sluiceway_executor.pipelines.failure_isolation import is_data_error
from sluiceway_executor.pipelines.loading import worker_policy
from sluiceway_executor.pipelines.observed import Observed, Tally, counts_enabled
from sluiceway_executor.pipelines.pipeline import BatchOutcome
from sluiceway_executor.pipelines.sink_errors import (
    RAW_COLUMN,
    RAW_FIELDS,
    checked_by_halves,
    dead_letter_topic_creator,
    failed_records,
    first_failed_record,
    without_failed,
)
from sluiceway_executor.pipelines.spec import TaskSpec, batch_limits
from sluiceway_executor.record_errors import with_error_column

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

__all__ = ["SinkPipeline", "consumer_group", "resume_offset", "sink_offsets"]

log = logging.getLogger(__name__)

# Timeout of each Kafka metadata/offsets call a batch plans with.
KAFKA_CALL_TIMEOUT_S: Final = 30.0

_FORMAT: Final = "sluiceway-kafka"


def consumer_group(spec: TaskSpec) -> str:
    """The consumer group holding the sink's offsets."""
    return sink_consumer_group(spec.connector, spec.connector_config)


def sink_offsets(ranges: list[PartitionRange]) -> list[OffsetPair]:
    """KIP-875's sink offsets: the next offset to read of each partition read."""
    return [
        ({"kafka_topic": r.topic, "kafka_partition": r.partition}, {"kafka_offset": r.end}) for r in ranges
    ]


def resume_offset(committed: int | None, written: OffsetRange | None, earliest: int | None) -> int | None:
    """Where a partition resumes, given its committed offset and the newest range the sink holds
    for it, written since the latest change of the offsets (``written_offsets`` leaves older ones
    out): past that range when the range starts at the committed offset (or, with nothing
    committed, at the partition's earliest offset), since then it was written but never committed;
    the committed offset otherwise (a range the commit already covers, or an offset moved on purpose)."""
    if written is None:
        return committed
    start = committed if committed is not None else earliest
    return written.end if start == written.start and written.end > written.start else committed


def _ends(outcome: BatchOutcome) -> dict[TopicPartitionKey, int]:
    """The next offset of each partition a batch read (its sink offsets, see ``sink_offsets``)."""
    return {
        (str(partition["kafka_topic"]), int(partition["kafka_partition"])): int(offset["kafka_offset"])
        for partition, offset in outcome.offsets
        if offset is not None
    }


def _topics_setting(spec: TaskSpec) -> tuple[list[str] | None, str | None]:
    def setting(key: str) -> str:
        return (spec.task_config.get(key) or spec.connector_config.get(key) or "").strip()

    topics = [t.strip() for t in setting("topics").split(",") if t.strip()]
    regex = setting("topics.regex") or None
    if topics and regex:
        raise ConnectException("topics and topics.regex are mutually exclusive")
    if not topics and not regex:
        raise ConnectException("a sink connector needs topics or topics.regex")
    return topics or None, regex


class SinkPipeline:
    """Runs one sink task (DataFrame-level, or record-level inside Spark) batch by batch."""

    def __init__(
        self, spark: SparkSession, spec: TaskSpec, worker_config: Mapping[str, str], task_class: type[Task]
    ) -> None:
        if not issubclass(task_class, DataFrameSinkTask | SinkTask):
            raise ConnectException(f"{task_class.__qualname__} is not a sink task")
        self._spark = spark
        self.spec = spec
        self._worker_config = dict(worker_config)
        self._task_class = task_class
        self._task: DataFrameSinkTask | None = None
        self._admin: AdminClient | None = None
        self._committed: dict[TopicPartitionKey, int | None] = {}
        # What the task says it holds already (written_offsets), read at start.
        self._written: dict[TopicPartitionKey, OffsetRange] = {}
        # The latest change of the offsets through the control plane: batches carry it.
        self._offsets_change = spec.offsets_change
        self.group = consumer_group(spec)
        self._topics, self._regex = _topics_setting(spec)
        # Internal topics are never read: a named one fails the task, a regex skips them.
        self._policy = worker_policy(worker_config)
        internal = [t for t in self._topics or () if self._policy.is_internal_topic(t)]
        if internal:
            raise ConnectException(f"a sink connector may not read internal topics: {', '.join(internal)}")
        # The next batch's ranges and the seconds they took to plan, when planned ahead.
        self._ahead: tuple[list[PartitionRange], float] | None = None
        # What each partition holds past the last plan's ranges (the lag once that batch commits),
        # and the counts of the batch being written (see observed.py).
        self._backlog: dict[TopicPartitionKey, int] = {}
        self._observed: tuple[Observed, Observed | None] | None = None
        # metrics.task.counts.enable=false: no counts in the plan; the ranges give the records read.
        self._counting = counts_enabled(worker_config)
        # Records seen while the last plan was made: what the converters may expect.
        self._sample = RecordSample()
        self._sizer = BatchSizer(batch_limits(spec.connector_config))
        self._limit = self._sizer.next_limit()  # the limit of the batch planned last
        admin_config = kafka_client_config(worker_config, "admin", spec.connector_config)
        self._admin_config = admin_config
        consumer_config = kafka_client_config(worker_config, "consumer", spec.connector_config)
        self._bootstrap = consumer_config.pop("bootstrap.servers")
        # The reader is no group member: the group id names the offsets only.
        consumer_config.pop("group.id", None)
        # Where a partition without a committed offset starts (Kafka Connect's default: earliest).
        self._start_at_end = consumer_config.pop("auto.offset.reset", "earliest").strip().lower() in (
            "latest",
            "largest",
            "end",
        )
        self._consumer_config = consumer_config
        from sluiceway_executor.transforms.chain import TransformChain

        self._chain = TransformChain(())  # the connector's, from start()
        self._errors = ErrorHandling.of(spec.connector_config)
        dlq = self._errors.dlq_topic
        if dlq and (dlq in (self._topics or ()) or (self._regex and re.fullmatch(self._regex, dlq))):
            raise ConnectException(f"the dead-letter topic {dlq} is one this sink reads; it may not be")
        # Ranges a batch published but never committed, skipped on resumption: their failed
        # records go to the dead-letter queue with the next commit (see ``_replayed``).
        self._replay: list[PartitionRange] = []

    def start(self) -> None:
        from sluiceway_executor.converters.registry import converter_for
        from sluiceway_executor.transforms.chain import connector_chain

        self._key_converter = converter_for(self.spec.connector_config, "key", self._worker_config)
        self._value_converter = converter_for(self.spec.connector_config, "value", self._worker_config)
        self._chain = connector_chain(self.spec.connector_config, self._policy.plugin_path)
        self._admin = AdminClient(dict(self._admin_config))
        if self._errors.tolerant and self._errors.dlq_topic:
            dead_letter_topic_creator(self._worker_config, self.spec, self._errors).ensure(
                [self._errors.dlq_topic]
            )
        task: DataFrameSinkTask | None = None
        if issubclass(self._task_class, DataFrameSinkTask):
            task = self._task_class()
        elif self._chain or self._errors.tolerant:
            from sluiceway_executor.pipelines.record_tasks import RecordSinkTaskAdapter

            # Converted and transformed in Spark first, then fed to the task record by record.
            task = RecordSinkTaskAdapter(self._task_class, self.spec, self._worker_config)
        if task is not None:
            task.start(self.spec.task_config)
            self._task = task
            held_now = task.written_offsets(self._spark, self.spec.task_index, self._offsets_change)
            self._written = {(tp.topic, tp.partition): held for tp, held in held_now.items()}

    # ------------------------------------------------------------------ planning

    def plan(self, assumed: Mapping[TopicPartitionKey, int] | None = None) -> list[PartitionRange]:
        """The ranges the next batch reads: this task's partitions from the committed offsets (or
        the ``assumed`` ones, a batch's ends whose commit is under way) to their exact ends, at most
        the sizer's limit in all (``share_records``), which the records sampled on the way count
        towards (``batch.max.bytes``)."""
        assumed = assumed or {}
        admin = self._admin
        assert admin is not None, "start() first"
        everything = list_partitions(
            admin, self._topics, self._regex, KAFKA_CALL_TIMEOUT_S, self._policy.is_internal_topic
        )
        mine = task_partitions(everything, self.spec.task_index, self.spec.task_count)
        if not mine:
            return []
        unknown = [
            tp
            for tp in mine
            if (tp.topic, tp.partition) not in self._committed and (tp.topic, tp.partition) not in assumed
        ]
        earliest = earliest_offsets(admin, mine, KAFKA_CALL_TIMEOUT_S)
        if unknown:
            found = committed_offsets(admin, self.group, unknown, KAFKA_CALL_TIMEOUT_S)
            for key, offset in found.items():
                resumed = resume_offset(offset, self._written.get(key), earliest.get(key))
                if resumed != offset and resumed is not None:
                    if self._errors.tolerant and self._errors.dlq_topic:
                        begin = offset if offset is not None else earliest.get(key, 0)
                        self._replay.append(PartitionRange(key[0], key[1], begin, resumed))
                    log.info(
                        "task %s: %s-%d resumes at %s, after a batch written but not committed (at %s)",
                        self.spec.name,
                        key[0],
                        key[1],
                        resumed,
                        offset,
                    )
                self._committed[key] = resumed
        sample = RecordSample()
        ends = exact_end_offsets(
            self._bootstrap, mine, KAFKA_CALL_TIMEOUT_S, self._consumer_config, sample, admin=admin
        )
        self._sizer.observe_sizes(sample.records, sample.total_bytes)
        self._sample = sample
        if self._start_at_end:
            # auto.offset.reset=latest: a partition seen without a committed offset starts at its end.
            for key, end in ends.items():
                if self._committed.get(key) is None:
                    self._committed[key] = end
        committed = {
            key: assumed[key] if key in assumed else self._committed.get(key)
            for key in ((tp.topic, tp.partition) for tp in mine)
        }
        pending = plan_ranges(committed, earliest, ends, None)
        self._limit = limit = self._sizer.next_limit()
        shares = share_records({r.key: r.count for r in pending}, limit)
        self._backlog = {(tp.topic, tp.partition): 0 for tp in mine} | {
            r.key: r.count - shares[r.key] for r in pending
        }
        return [
            PartitionRange(r.topic, r.partition, r.start, r.start + shares[r.key])
            for r in pending
            if shares[r.key] > 0
        ]

    def read(self, ranges: list[PartitionRange]) -> DataFrame:
        """The raw records of ``ranges`` (binary key and value) as a DataFrame."""
        return (
            self._spark.read.format(_FORMAT)
            .option("bootstrap.servers", self._bootstrap)
            .option("ranges", json.dumps([r.to_json() for r in ranges]))
            .option("consumer.config", json.dumps(self._consumer_config))
            .load()
        )

    def converted(self, raw: DataFrame, checked: bool = False, transformed: bool = True) -> DataFrame:
        """Key and value as the connector's converters produce them (DataFrame-level tasks): typed
        columns carry their Connect schemas in their metadata. ``checked`` (``raw`` pinned by the
        caller): a record a converter or transform fails on is marked in the error column, beside
        the record as read (``RAW_COLUMN``), instead of failing the job."""
        from pyspark.sql import functions as F  # noqa: N812 - Spark's usual alias

        from sluiceway_executor.converters.connect_spark_json import with_connect_schemas

        scans = self._key_converter.scans_batch() or self._value_converter.scans_batch()
        if scans and not checked:
            # A converter reads the records once to learn their schemas and the task reads them
            # again: held by Spark after one read from Kafka, they are not fetched twice.
            raw = raw.localCheckpoint()
        frame = raw.select(*RAW_FIELDS)
        if checked:
            frame = with_error_column(frame).withColumn(RAW_COLUMN, F.struct(*RAW_FIELDS))
            frame, key_schema = self._key_converter.checked_frame(frame, "key")
            frame, value_schema = self._value_converter.checked_frame(frame, "value")
        else:
            frame, key_schema = self._key_converter.connect_frame(frame, "key")
            frame, value_schema = self._value_converter.connect_frame(frame, "value")
        schemas = {name: s for name, s in (("key", key_schema), ("value", value_schema)) if s is not None}
        frame = with_connect_schemas(frame, schemas) if schemas else frame
        return self._chain.apply(frame, is_sink=True) if self._chain and transformed else frame

    def _write(self, task: DataFrameSinkTask, raw: DataFrame, context: BatchContext) -> list[FailedRecord]:
        """Hands the batch to the task, converted on the schemas the converters expect when they
        do (no job to learn them); if that fails, perhaps on a record of another schema, once more
        converted on the batch's own. Returns the records left out (errors.tolerance=all)."""
        converters = (self._key_converter, self._value_converter)
        for converter, sample in zip(
            converters, (self._sample.last_key, self._sample.last_value), strict=True
        ):
            converter.expect(sample)
        expected = any(converter.expecting() for converter in converters)
        if self._errors.tolerant:
            # Read from Kafka once for the failed records' job and the task's.
            raw = raw.localCheckpoint()
        try:
            return self._write_once(task, raw, context)
        except Exception as e:
            if not expected:
                raise
            log.info(
                "task %s: batch %d failed when read on the expected schemas; reading its own (%s)",
                self.spec.name,
                context.batch_id,
                str(e).splitlines()[0][:300] if str(e) else type(e).__name__,
            )
            for converter in converters:
                converter.forget_expected()
            return self._write_once(task, raw, context)

    def _write_once(
        self, task: DataFrameSinkTask, raw: DataFrame, context: BatchContext
    ) -> list[FailedRecord]:
        # Counted in the job that writes the batch (or the checkpoint before it); a retry counts anew.
        counting = self._counting
        read = Observed("read", sized=True, enabled=counting)
        raw = read.watch(raw)
        if not self._errors.tolerant and not self._chain:
            # Every record read reaches the task: the one count serves for both. A second observed
            # node in the same job would cost as much again (bench_pipelines.py --metrics-cost).
            self._observed = (read, None)
            task.write_batch(self.converted(raw), context)
            return []
        written = Observed("written", enabled=counting)
        self._observed = (read, written)
        if not self._errors.tolerant:
            task.write_batch(written.watch(self.converted(raw)), context)
            return []
        staged = self._checked(raw)
        failed = failed_records(staged)
        task.write_batch(written.watch(without_failed(staged)), context)
        return failed

    def _first_failure(self, ranges: list[PartitionRange]) -> FailedRecord | None:
        """The first record of ``ranges`` (by topic, partition, offset) a converter or transform
        fails on, read again: what a task that tolerates no errors names when its batch failed."""
        return first_failed_record(self._read_checked(ranges))

    def _replayed(self, ranges: list[PartitionRange]) -> list[FailedRecord]:
        """The failed records of ranges a batch published before its commit was lost: they go to
        the dead-letter queue with this batch's commit."""
        return failed_records(self._read_checked(ranges))

    def _read_checked(self, ranges: list[PartitionRange]) -> DataFrame:
        """``ranges`` read again and checked (``_checked``) on the records' own schemas."""
        for converter in (self._key_converter, self._value_converter):
            converter.forget_expected()
        return self._checked(self.read(ranges).localCheckpoint())

    def _checked(self, raw: DataFrame) -> DataFrame:
        """The batch converted and transformed with its failed records marked (``raw`` pinned),
        pinned in turn. Pinned, it is computed once for the failed records' job and the task's; and
        a filter on the error column cannot be pushed down into the stages, where Spark would
        substitute each stage's expressions into the next and the plan would grow exponentially."""
        try:
            return self.converted(raw, checked=True).localCheckpoint()
        except Exception as e:
            if not is_data_error(e) or not self._chain:
                raise
            log.info(
                "task %s: a record's data failed the transforms; looking for it by halves", self.spec.name
            )
            chain = self._chain
            return checked_by_halves(
                self.converted(raw, checked=True, transformed=False),
                lambda part: chain.apply(part, is_sink=True),
                chain.failing_class(),
                e,
            )

    # ------------------------------------------------------------------ batches

    def plan_ahead(self, outcome: BatchOutcome) -> None:
        """Plans the next batch from ``outcome``'s ends (see ``PlansAhead``). A plan that fails here
        is left to ``run_batch``, which plans again and fails on its own if it must."""
        began = time.monotonic()
        self._ahead = None
        try:
            ranges = self.plan(_ends(outcome))
        except Exception:
            log.debug(
                "task %s: planning ahead failed; the next batch plans again", self.spec.name, exc_info=True
            )
            return
        self._ahead = (ranges, time.monotonic() - began)

    def run_batch(self, batch_id: int) -> BatchOutcome:
        began = time.monotonic()
        ahead, self._ahead = self._ahead, None
        if ahead is not None:
            # Planned while the batch before committed: its seconds were off this batch's path.
            ranges, ahead_seconds = ahead
            plan_step = {"plan_ahead": ahead_seconds}
        else:
            ranges = self.plan()
            plan_step = {"plan": time.monotonic() - began}
        planned = time.monotonic()
        backlog, self._observed = dict(self._backlog), None
        if not ranges and not self._replay:
            return BatchOutcome(records=0, steps=plan_step, backlog=backlog)
        raw = self.read(ranges)
        context = BatchContext(
            self.spec.connector,
            self.spec.task_index,
            batch_id,
            tuple(OffsetRange(r.topic, r.partition, r.start, r.end) for r in ranges),
            offsets_change=self._offsets_change,
            topics_renamed=bool(self._chain),
        )
        failed: list[FailedRecord] = []
        replay, self._replay = self._replay, []
        if not ranges:
            pass  # only the dead letters of a batch published before a crash to commit
        elif self._task is not None:
            failed = self._write_diagnosed(self._task, raw, context, ranges)
        else:
            from sluiceway_executor.pipelines.record_tasks import run_sink_task

            run_sink_task(raw, self._task_class, self.spec, self._worker_config)
        records = sum(r.count for r in ranges)
        written = time.monotonic()
        self._sizer.observe(self._limit, records, written - began)
        log_failures(self._errors, self.spec.name, failed)
        dead = [*(self._replayed(replay) if replay else []), *failed] if self._errors.dlq_topic else []
        read = {r.key for r in ranges}
        handling, connector, index = self._errors, self.spec.connector, self.spec.task_index
        read_tally, written_tally = self._tallies()
        return BatchOutcome(
            records=records,
            offsets=sink_offsets(ranges) + sink_offsets([r for r in replay if r.key not in read]),
            topics=frozenset(r.topic for r in ranges),
            steps={**plan_step, "write": written - planned},
            skipped=len(failed),
            dead_letters=tuple(f.dead_letter(handling, connector, index) for f in dead),
            read=read_tally,
            written=written_tally,
            backlog=backlog,
        )

    def _tallies(self) -> tuple[Tally | None, Tally | None]:
        """The counts of the records read and of those handed to the task, from the batch's job."""
        if self._observed is None:
            return None, None
        read, written = self._observed
        read_tally = read.tally()
        if written is not None:
            return read_tally, written.tally()
        return read_tally, None if read_tally is None else Tally(read_tally.records)

    def _write_diagnosed(
        self, task: DataFrameSinkTask, raw: DataFrame, context: BatchContext, ranges: list[PartitionRange]
    ) -> list[FailedRecord]:
        """``_write``; when the batch fails and the task tolerates no errors, the failure names the
        first record a converter or transform cannot handle, if that is why."""
        try:
            return self._write(task, raw, context)
        except Exception as e:
            if self._errors.tolerant or is_spark_session_lost(e) or is_kafka_unreachable(e):
                raise
            try:
                first = self._first_failure(ranges)
            except Exception:
                log.debug("task %s: looking for the failed record failed", self.spec.name, exc_info=True)
                raise e from None
            if first is None:
                raise
            raise ConnectException(first_failure_message(first)) from e

    def committed(self, outcome: BatchOutcome) -> None:
        self._committed.update(_ends(outcome))

    def stop(self) -> None:
        task, self._task = self._task, None
        if task is not None:
            task.stop()
        self._chain.close()
