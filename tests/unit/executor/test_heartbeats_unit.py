"""KIP-910 heartbeat records without Kafka or Spark: which tasks are asked, the connector's settings
over the worker's, the timer, the runner's pause, the pipeline's heartbeat step for a task whose
hook returns nothing, the record-level data source's heartbeat rows, and the built-in tasks' hooks
(DataGen, JDBC). The records' way to Kafka is in tests/integration/test_heartbeats.py."""

from __future__ import annotations

import json
import re
import time
from collections.abc import Mapping
from typing import Any

import pytest

from sluiceway.connect import (
    BatchContext,
    ConnectException,
    DataFrameSourceTask,
    MemoryOffsetStorageReader,
    OffsetStorageReader,
    SourceBatch,
    SourceRecord,
    SourceTask,
)
from sluiceway_executor.connectors.datagen import DataGenBatchTask, DataGenSourceTask, heartbeat_record
from sluiceway_executor.connectors.filestream import FileStreamSinkTask, FileStreamSourceTask
from sluiceway_executor.connectors.jdbc_source import JdbcSourceTask
from sluiceway_executor.datasources.source_task import SourceTaskOptions, poll_source_task
from sluiceway_executor.heartbeats import (
    HeartbeatSettings,
    HeartbeatTimer,
    heartbeat_settings,
    heartbeat_topic_creator,
    overrides_heartbeat_hook,
)
from sluiceway_executor.pipelines.pipeline import BatchOutcome, merge_offsets
from sluiceway_executor.pipelines.source import SourcePipeline
from sluiceway_executor.pipelines.spec import TaskSpec
from sluiceway_executor.runner import TaskRunner
from sluiceway_executor.topic_creation import TopicCreator

# Nothing listens there: a creator that tried to reach it would fail or wait, not pass.
WORKER = {"bootstrap.servers": "127.0.0.1:9"}
DATAGEN_RECORD_TASK = "sluiceway_executor.connectors.datagen.DataGenSourceTask"


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


# ------------------------------------------------------------------ which tasks are asked


class PlainRecordTask(SourceTask):
    def version(self) -> str:
        return "1"

    def start(self, props: Mapping[str, str]) -> None:
        pass

    def poll(self) -> list[SourceRecord] | None:
        return None

    def stop(self) -> None:
        pass


class BeatingRecordTask(PlainRecordTask):
    def produce_heartbeat_records(self) -> list[SourceRecord]:
        return []


class CountingFrameTask(DataFrameSourceTask):
    """Reads nothing; its hook counts the calls and returns nothing."""

    calls = 0

    def version(self) -> str:
        return "1"

    def start(self, props: Mapping[str, str]) -> None:
        pass

    def read_batch(self, spark: Any, offsets: OffsetStorageReader, context: BatchContext) -> SourceBatch:
        return SourceBatch(data=None)

    def produce_heartbeat_records(
        self, offsets: OffsetStorageReader, context: BatchContext
    ) -> list[SourceRecord]:
        type(self).calls += 1
        return []

    def stop(self) -> None:
        pass


class PlainFrameTask(CountingFrameTask):
    produce_heartbeat_records = DataFrameSourceTask.produce_heartbeat_records


def test_only_tasks_with_a_hook_of_their_own_are_asked() -> None:
    assert not overrides_heartbeat_hook(PlainRecordTask)
    assert overrides_heartbeat_hook(BeatingRecordTask)
    assert overrides_heartbeat_hook(CountingFrameTask)
    assert not overrides_heartbeat_hook(PlainFrameTask)
    # The built-ins: DataGen (both kinds) and JDBC have one; FileStream does not; sinks never.
    assert overrides_heartbeat_hook(DataGenBatchTask)
    assert overrides_heartbeat_hook(DataGenSourceTask)
    assert overrides_heartbeat_hook(JdbcSourceTask)
    assert not overrides_heartbeat_hook(FileStreamSourceTask)
    assert not overrides_heartbeat_hook(FileStreamSinkTask)


def test_the_sdk_defaults_return_no_records() -> None:
    assert PlainRecordTask().produce_heartbeat_records() == []
    assert (
        PlainFrameTask().produce_heartbeat_records(MemoryOffsetStorageReader(), BatchContext("c", 0, 0)) == []
    )


# ------------------------------------------------------------------ settings


def test_settings_default_to_off_and_connect_heartbeats() -> None:
    assert heartbeat_settings({}, {}) == HeartbeatSettings(0, "connect-heartbeats")
    assert not heartbeat_settings({}, {}).enabled


def test_the_worker_settings_apply_when_the_connector_sets_nothing() -> None:
    worker = {"heartbeat.interval.ms": "60000", "heartbeat.records.topic": "beats"}
    assert heartbeat_settings(worker, {}) == HeartbeatSettings(60000, "beats")


def test_the_connector_settings_win_key_by_key() -> None:
    worker = {"heartbeat.interval.ms": "60000", "heartbeat.records.topic": "beats"}
    assert heartbeat_settings(worker, {"heartbeat.interval.ms": "500"}) == HeartbeatSettings(500, "beats")
    assert heartbeat_settings(worker, {"heartbeat.records.topic": "mine"}) == HeartbeatSettings(60000, "mine")
    # 0 from the connector turns heartbeats off even when the worker has them on.
    assert not heartbeat_settings(worker, {"heartbeat.interval.ms": "0"}).enabled
    # The connector on, the worker at its default topic.
    assert heartbeat_settings({}, {"heartbeat.interval.ms": " 250 "}) == HeartbeatSettings(
        250, "connect-heartbeats"
    )


def test_an_empty_connector_value_falls_back_to_the_worker() -> None:
    worker = {"heartbeat.interval.ms": "700", "heartbeat.records.topic": "beats"}
    connector = {"heartbeat.interval.ms": "", "heartbeat.records.topic": "  "}
    assert heartbeat_settings(worker, connector) == HeartbeatSettings(700, "beats")


@pytest.mark.parametrize("key", ["heartbeat.records.topic", "heartbeat.interval.ms"])
def test_an_empty_worker_value_is_an_error_not_the_default(key: str) -> None:
    # The control plane and the executor's own config refuse it at start-up; a worker config that
    # still carries one must not send heartbeats where nobody asked.
    with pytest.raises(ConnectException, match=re.escape(f"the worker's {key} is empty")):
        heartbeat_settings({key: " "}, {})
    # A connector that names its own value does not need the worker's.
    own = {"heartbeat.records.topic": "mine", "heartbeat.interval.ms": "5"}
    assert heartbeat_settings({key: ""}, own) == HeartbeatSettings(5, "mine")


@pytest.mark.parametrize("bad", ["-1", "soon", "1.5"])
def test_an_unusable_interval_is_refused(bad: str) -> None:
    with pytest.raises(ConnectException, match=re.escape("heartbeat.interval.ms")):
        heartbeat_settings({}, {"heartbeat.interval.ms": bad})
    with pytest.raises(ConnectException, match=re.escape(repr(bad))):
        heartbeat_settings({"heartbeat.interval.ms": bad}, {})


# ------------------------------------------------------------------ timer


def test_the_timer_is_due_one_interval_after_it_starts_and_after_each_reset() -> None:
    clock = Clock()
    timer = HeartbeatTimer(500, clock=clock)
    assert timer.enabled and not timer.due()
    assert timer.seconds_left() == pytest.approx(0.5)
    clock.now += 0.499
    assert not timer.due()
    clock.now += 0.001
    assert timer.due() and timer.seconds_left() == 0.0
    clock.now += 3  # late: still due once, not three times over
    assert timer.due()
    timer.reset()
    assert not timer.due()
    assert timer.seconds_left() == pytest.approx(0.5)
    clock.now += 0.5
    assert timer.due()


def test_an_interval_of_zero_is_never_due() -> None:
    clock = Clock()
    timer = HeartbeatTimer(0, clock=clock)
    clock.now += 10**6
    assert not timer.enabled and not timer.due()
    assert timer.seconds_left() is None


# ------------------------------------------------------------------ the pipeline's heartbeat step


def frame_spec(config: dict[str, str], task_class: type) -> TaskSpec:
    return TaskSpec(
        name="connectors/c/tasks/0",
        connector="c",
        task_index=0,
        generation=1,
        connector_config={"topic": "data", **config},
        task_config={"topic": "data", "task.class": f"{task_class.__module__}.{task_class.__qualname__}"},
        paused=False,
        task_count=1,
        source_offsets=(({"p": 1}, {"o": 7}),),
    )


def pipeline_for(
    task_class: type, config: dict[str, str], worker: dict[str, str] | None = None
) -> SourcePipeline:
    # No Spark: a batch that reads nothing and a heartbeat that returns nothing never reach it.
    pipeline = SourcePipeline(None, frame_spec(config, task_class), {**WORKER, **(worker or {})}, task_class)  # type: ignore[arg-type]
    pipeline.start()
    return pipeline


def test_a_due_heartbeat_calls_the_hook_and_resets_the_timer_even_without_records() -> None:
    CountingFrameTask.calls = 0
    pipeline = pipeline_for(CountingFrameTask, {"heartbeat.interval.ms": "500"})
    clock = Clock()
    pipeline._heartbeats = HeartbeatTimer(500, clock=clock)
    assert pipeline.run_batch(0) == BatchOutcome(records=0)
    assert CountingFrameTask.calls == 0  # not due yet
    clock.now += 0.5
    assert pipeline.seconds_until_heartbeat() == 0.0
    # Nothing returned: nothing written, nothing to commit; the next one is an interval away.
    assert pipeline.run_batch(1) == BatchOutcome(records=0)
    assert CountingFrameTask.calls == 1
    assert pipeline.seconds_until_heartbeat() == pytest.approx(0.5)
    pipeline.run_batch(2)
    assert CountingFrameTask.calls == 1
    pipeline.stop()


def test_a_task_without_a_hook_of_its_own_gets_no_timer_and_no_creator() -> None:
    worker = {"heartbeat.interval.ms": "1"}
    pipeline = pipeline_for(PlainFrameTask, {}, worker)
    assert pipeline.seconds_until_heartbeat() is None
    assert pipeline._heartbeat_creator is None
    time.sleep(0.01)
    assert pipeline.run_batch(0) == BatchOutcome(records=0)
    pipeline.stop()


def test_heartbeats_off_by_default_even_for_a_task_with_a_hook() -> None:
    CountingFrameTask.calls = 0
    pipeline = pipeline_for(CountingFrameTask, {})
    assert pipeline.seconds_until_heartbeat() is None
    pipeline.run_batch(0)
    assert CountingFrameTask.calls == 0
    # The connector's 0 wins over the worker's interval.
    pipeline = pipeline_for(CountingFrameTask, {"heartbeat.interval.ms": "0"}, {"heartbeat.interval.ms": "1"})
    assert pipeline.seconds_until_heartbeat() is None


class FakeHeartbeatPipeline:
    def __init__(self, left: float | None) -> None:
        self.left = left

    def start(self) -> None: ...

    def run_batch(self, batch_id: int) -> BatchOutcome:
        return BatchOutcome(records=0)

    def committed(self, outcome: BatchOutcome) -> None: ...

    def stop(self) -> None: ...

    def seconds_until_heartbeat(self) -> float | None:
        return self.left


class FakePlainPipeline:
    def start(self) -> None: ...

    def run_batch(self, batch_id: int) -> BatchOutcome:
        return BatchOutcome(records=0)

    def committed(self, outcome: BatchOutcome) -> None: ...

    def stop(self) -> None: ...


def test_the_idle_pause_ends_when_a_heartbeat_falls_due() -> None:
    assert TaskRunner._idle_pause(FakeHeartbeatPipeline(0.3), 1.0) == 0.3
    assert TaskRunner._idle_pause(FakeHeartbeatPipeline(0.0), 1.0) == 0.0
    assert TaskRunner._idle_pause(FakeHeartbeatPipeline(5.0), 1.0) == 1.0
    assert TaskRunner._idle_pause(FakeHeartbeatPipeline(None), 0.4) == 0.4
    assert TaskRunner._idle_pause(FakePlainPipeline(), 0.4) == 0.4


def test_merged_offsets_keep_the_last_offset_of_each_partition() -> None:
    merged = merge_offsets([({"t": 1}, {"seq": 4}), ({"t": 2}, {"seq": 9})], [({"t": 1}, {"seq": 8})])
    assert merged == [({"t": 2}, {"seq": 9}), ({"t": 1}, {"seq": 8})]
    assert merge_offsets([], [({"t": 1}, None)]) == [({"t": 1}, None)]


# ------------------------------------------------------------------ heartbeat topic creation


def test_the_heartbeat_topic_creator_is_active_without_topic_creation_settings() -> None:
    for worker in (WORKER, {**WORKER, "topic.creation.enable": "false"}):
        creator = heartbeat_topic_creator(worker, {"topic": "data"}, task="task 0 of c")
        assert creator.active
        group = creator.group_for("anything")
        assert (group.partitions, group.replication_factor, dict(group.configs)) == (-1, -1, {})
    # The connector's own KIP-158 creator stays off for the same config.
    assert not TopicCreator(WORKER, {"topic": "data"}).active


def test_an_illegal_heartbeat_topic_fails_with_a_message_about_the_heartbeat_topic() -> None:
    creator = heartbeat_topic_creator(WORKER, {}, task="task 0 of c")
    started = time.monotonic()
    with pytest.raises(ConnectException) as caught:
        creator.ensure(["beats/now"])
    assert time.monotonic() - started < 0.5  # refused before asking Kafka
    message = str(caught.value)
    assert "task 0 of c" in message and "'beats/now'" in message
    assert "heartbeat topic: partitions=-1, replication.factor=-1" in message
    assert "heartbeat.records.topic" in message
    assert "topic creation group" not in message


# ------------------------------------------------------------------ record-level tasks inside Spark


def datagen_options(**overrides: Any) -> SourceTaskOptions:
    values: dict[str, Any] = {
        "task_class": DATAGEN_RECORD_TASK,
        "task_config": {"topic": "data", "task.id": "1", "max.records": "6"},
        "offsets": [({"task": 1}, {"seq": 3})],
        "max_records": 100,
        "poll_window_ms": 200,
        "connector_converters": {},
        "worker_converters": {},
    }
    values.update(overrides)
    return SourceTaskOptions.parse(SourceTaskOptions(**values).to_options())


def test_a_record_level_batch_starts_with_the_heartbeat_records_when_asked() -> None:
    rows = list(poll_source_task(datagen_options(heartbeat_topic="beats")))
    beat, *data = rows
    assert beat[0] == "beats" and beat[1] is None and beat[9] is True
    assert json.loads(beat[6]) == {"task": 1} and json.loads(beat[7]) == {"seq": 3}
    value = json.loads(beat[5])
    assert (value["task"], value["seq"]) == (1, 3) and isinstance(value["ts"], int)
    assert beat[4] == b"1-heartbeat"
    # Then the polled records, after it in seq order, so their offset wins.
    assert [row[0] for row in data] == ["data", "data"]
    assert [json.loads(row[7]) for row in data] == [{"seq": 4}, {"seq": 5}]
    assert [row[8] for row in rows] == [0, 1, 2]
    assert [row[9] for row in data] == [False, False]


def test_a_record_level_batch_without_a_heartbeat_topic_does_not_ask_the_task() -> None:
    rows = list(poll_source_task(datagen_options()))
    assert [row[0] for row in rows] == ["data", "data"]
    assert [row[8] for row in rows] == [0, 1]


# ------------------------------------------------------------------ the built-in tasks' hooks


def test_datagen_heartbeats_carry_the_committed_offset() -> None:
    task = DataGenBatchTask(wall_clock=lambda: 1234.5)
    task.start({"topic": "gen", "task.id": "2", "max.records": "10"})
    context = BatchContext("c", 2, 7)
    assert task.produce_heartbeat_records(MemoryOffsetStorageReader(), context) == []
    (record,) = task.produce_heartbeat_records(
        MemoryOffsetStorageReader([({"task": 2}, {"seq": 9})]), context
    )
    assert (record.source_partition, record.source_offset) == ({"task": 2}, {"seq": 9})
    assert record.value == {"task": 2, "seq": 9, "ts": 1234500}
    assert record.key == "2-heartbeat"
    assert heartbeat_record(2, None, "gen", 0) is None


def test_record_level_datagen_heartbeats_follow_its_position() -> None:
    class Context:
        def __init__(self, offsets: list[tuple[dict[str, Any], dict[str, Any]]]) -> None:
            self.reader = MemoryOffsetStorageReader(offsets)

        def config(self) -> Mapping[str, str]:
            return {}

        def offset_storage_reader(self) -> OffsetStorageReader:
            return self.reader

    fresh = DataGenSourceTask()
    fresh.initialize(Context([]))  # type: ignore[arg-type]
    fresh.start({"topic": "gen", "task.id": "0"})
    assert fresh.produce_heartbeat_records() == []
    resumed = DataGenSourceTask()
    resumed.initialize(Context([({"task": 0}, {"seq": 41})]))  # type: ignore[arg-type]
    resumed.start({"topic": "gen", "task.id": "0"})
    (record,) = resumed.produce_heartbeat_records()
    assert record.source_offset == {"seq": 41}


JDBC = {
    "connection.url": "jdbc:postgresql://localhost:5432/db",
    "table": "orders",
    "incrementing.column.name": "id",
    "topic.prefix": "db-",
}


def test_jdbc_heartbeats_send_the_last_copied_value_again() -> None:
    task = JdbcSourceTask()
    with pytest.raises(ConnectException, match="not started"):
        task.produce_heartbeat_records(MemoryOffsetStorageReader(), BatchContext("c", 0, 0))
    task.start(JDBC)
    context = BatchContext("c", 0, 3)
    # Nothing copied yet: no offset to send (and no table query: there is no database here).
    assert task.produce_heartbeat_records(MemoryOffsetStorageReader(), context) == []
    committed = MemoryOffsetStorageReader([({"table": "orders"}, {"incrementing": 1042})])
    (record,) = task.produce_heartbeat_records(committed, context)
    assert (record.source_partition, record.source_offset) == ({"table": "orders"}, {"incrementing": 1042})
    assert record.value == {"table": "orders", "incrementing": 1042}
    with pytest.raises(ConnectException, match="integer"):
        task.produce_heartbeat_records(
            MemoryOffsetStorageReader([({"table": "orders"}, {"incrementing": "x"})]), context
        )
