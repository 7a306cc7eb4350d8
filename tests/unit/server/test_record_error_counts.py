"""The records a sink task left out (errors.tolerance=all) and dead-lettered, on the control plane:
an executor's report and the Hello of an executor attaching again put them in the task's status
record (beside Kafka Connect's keys, left out at 0, kept only with RUNNING), the status topic reads
them back, and the API answers them in InstanceStatus. The executor's side is
tests/unit/executor/test_runner_record_counts.py."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable

from sluiceway.api.v1 import common_pb2, executor_pb2
from sluiceway_server.api.convert import instance_status
from sluiceway_server.cluster.members import choose_adopted, desired_tasks
from sluiceway_server.herder.views import InstanceStatusView, restarting
from sluiceway_server.model import State, TaskId
from sluiceway_server.storage import (
    ConnectorStatusRecord,
    LogRecord,
    MemoryLog,
    RecordLog,
    StatusStore,
    TaskStatusRecord,
)
from sluiceway_server.storage.status_store import encode_status
from tests.unit.server.test_coordinator import (
    TASKS,
    TERM,
    Snapshot,
    make_coordinator,
    status_store,
    until,
)

EXECUTOR = "executor-3"
GENERATION = (2 << 32) + 5


def _counted(skipped: int, dead_lettered: int, detail: str = "", idle_since_ms: int = 0) -> TaskStatusRecord:
    return TaskStatusRecord(
        "c",
        0,
        State.RUNNING,
        None,
        EXECUTOR,
        GENERATION,
        detail=detail,
        idle_since_ms=idle_since_ms,
        records_skipped=skipped,
        records_dead_lettered=dead_lettered,
    )


def _read_back(value: dict[str, object]) -> TaskStatusRecord | None:
    """Task 0 of connector c as the store reads a raw record with this value."""
    logs: list[MemoryLog] = []

    def make(on_record: Callable[[LogRecord], None]) -> RecordLog:
        logs.append(MemoryLog("status", on_record))
        return logs[-1]

    store = StatusStore(make)
    store.start(5)
    try:
        logs[0].send(b"status-task-c-0", json.dumps(value).encode())
        store.read_to_end(5)
        return store.get_task("c", 0)
    finally:
        store.stop()


# --- the status record ---------------------------------------------------------------------------


def test_the_counts_ride_beside_kafka_connects_keys_and_are_left_out_at_zero() -> None:
    value = json.loads(encode_status(_counted(3, 2, "idle: no new records", 17)))
    assert value == {
        "state": "RUNNING",
        "trace": None,
        "worker_id": EXECUTOR,
        "generation": GENERATION,
        "detail": "idle: no new records",
        "idle_since_ms": 17,
        "records_skipped": 3,
        "records_dead_lettered": 2,
    }
    # Skipped without a dead-letter topic: only the one count.
    assert "records_dead_lettered" not in json.loads(encode_status(_counted(4, 0)))
    assert json.loads(encode_status(_counted(0, 0))) == {
        "state": "RUNNING",
        "trace": None,
        "worker_id": EXECUTOR,
        "generation": GENERATION,
    }


def test_the_store_reads_the_counts_back_and_a_malformed_one_as_zero() -> None:
    record = _read_back(json.loads(encode_status(_counted(3, 2))))
    assert record is not None
    assert (record.records_skipped, record.records_dead_lettered) == (3, 2)
    base: dict[str, object] = {"state": "RUNNING", "trace": None, "worker_id": EXECUTOR, "generation": 5}
    for bad in (-1, "3", True, 1.5):
        read = _read_back({**base, "records_skipped": bad, "records_dead_lettered": 2})
        assert read is not None and read.state is State.RUNNING
        assert (read.records_skipped, read.records_dead_lettered) == (0, 2)
    plain = _read_back(base)
    assert plain is not None and (plain.records_skipped, plain.records_dead_lettered) == (0, 0)


# --- executor reports ----------------------------------------------------------------------------


def test_reported_counts_are_recorded_with_running_only() -> None:
    async def scenario() -> None:
        store = status_store()
        coordinator = make_coordinator(store)
        coordinator.start()
        member = await coordinator.attach(executor_pb2.Hello(executor_id="e1"), "")
        await until(lambda: len(member.owned) == TASKS, "tasks assigned")
        task, owned = sorted(member.owned.items())[0]

        async def report(
            state: common_pb2.State.ValueType, skipped: int, dead_lettered: int, detail: str = ""
        ) -> TaskStatusRecord:
            status = executor_pb2.TaskStatusReport(
                task=task.name,
                generation=owned.generation,
                state=state,
                detail=detail,
                records_skipped=skipped,
                records_dead_lettered=dead_lettered,
            )
            if detail:
                status.idle_since.FromMilliseconds(1_700_000_000_000)
            await coordinator.handle(member, executor_pb2.ExecutorMessage(task_status=status))
            record = store.get_task(task.connector, task.task)
            assert record is not None
            return record

        record = await report(common_pb2.STATE_RUNNING, 3, 1)
        assert (record.state, record.records_skipped, record.records_dead_lettered) == (State.RUNNING, 3, 1)
        # New counts of an idle task: the idle detail stays beside them.
        record = await report(common_pb2.STATE_RUNNING, 5, 2, "idle: end of data")
        assert (record.detail, record.idle_since_ms) == ("idle: end of data", 1_700_000_000_000)
        assert (record.records_skipped, record.records_dead_lettered) == (5, 2)
        # Only a RUNNING task keeps counts: a task that stopped running counts afresh when it starts.
        record = await report(common_pb2.STATE_RESTARTING, 5, 2)
        assert (record.records_skipped, record.records_dead_lettered) == (0, 0)
        record = await report(common_pb2.STATE_RUNNING, 1, 0)
        assert (record.records_skipped, record.records_dead_lettered) == (1, 0)
        await coordinator.stop()
        store.stop()

    asyncio.run(scenario())


def _running_task(
    snapshot: Snapshot, task: int, state: common_pb2.State.ValueType, skipped: int, dead_lettered: int
) -> executor_pb2.RunningTask:
    return executor_pb2.RunningTask(
        task=f"connectors/c/tasks/{task}",
        generation=((TERM - 1) << 32) + 7,
        fingerprint=desired_tasks(snapshot)[TaskId("c", task)].fingerprint,
        state=state,
        records_skipped=skipped,
        records_dead_lettered=dead_lettered,
    )


def test_an_adopted_task_keeps_its_counts_only_while_running() -> None:
    snapshot = Snapshot()
    adopted = choose_adopted(
        EXECUTOR,
        [
            _running_task(snapshot, 0, common_pb2.STATE_RUNNING, 9, 4),
            _running_task(snapshot, 1, common_pb2.STATE_PAUSED, 9, 4),
        ],
        desired={TaskId("c", 0), TaskId("c", 1)},
        taken=set(),
        floor=lambda task: 0,
    )
    assert [(a.records_skipped, a.records_dead_lettered) for a in adopted] == [(9, 4), (0, 0)]


def test_an_executor_attaching_again_records_counts_the_status_topic_lacks() -> None:
    async def scenario() -> None:
        store = status_store()
        snapshot = Snapshot()
        generation = ((TERM - 1) << 32) + 7
        # Task 0's record already says what the executor will; task 1's has older counts.
        store.put_task(
            TaskStatusRecord(
                "c", 0, State.RUNNING, None, "e1", generation, records_skipped=2, records_dead_lettered=1
            ),
            5,
        )
        store.put_task(TaskStatusRecord("c", 1, State.RUNNING, None, "e1", generation, records_skipped=2), 5)
        written = len(store.writes)
        coordinator = make_coordinator(store, snapshot)
        coordinator.start()
        hello = executor_pb2.Hello(
            executor_id="e1",
            running_tasks=[
                _running_task(snapshot, 0, common_pb2.STATE_RUNNING, 2, 1),
                _running_task(snapshot, 1, common_pb2.STATE_RUNNING, 6, 0),
            ],
        )
        await coordinator.attach(hello)
        await until(lambda: len(store.writes) > written, "the adopted status with new counts")
        await asyncio.sleep(0.2)
        assert len(store.writes) == written + 1, "only the record whose counts differ is written"
        first, second = store.tasks("c")
        assert (first.records_skipped, first.records_dead_lettered) == (2, 1)
        assert (second.records_skipped, second.records_dead_lettered) == (6, 0)
        await coordinator.stop()
        store.stop()

    asyncio.run(scenario())


# --- the API answer -------------------------------------------------------------------------------


def test_instance_status_answers_a_tasks_counts() -> None:
    message = instance_status(InstanceStatusView.of(_counted(3, 2)))
    assert (message.records_skipped, message.records_dead_lettered) == (3, 2)
    quiet = instance_status(InstanceStatusView.of(_counted(0, 0)))
    assert (quiet.records_skipped, quiet.records_dead_lettered) == (0, 0)
    connector = ConnectorStatusRecord("c", State.RUNNING, None, "replica-1", 1)
    assert instance_status(InstanceStatusView.of(connector)).records_skipped == 0
    # A restart's answer shows the task RESTARTING, its counts gone with the run that made them.
    restarted = restarting(InstanceStatusView.of(_counted(3, 2)), 1_700_000_000_000)
    assert (restarted.state, restarted.records_skipped, restarted.records_dead_lettered) == (
        State.RESTARTING,
        0,
        0,
    )
