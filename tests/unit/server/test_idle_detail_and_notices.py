"""Issue 31, items 8 and 10, on the control plane without Kafka: the idle detail in the status
topic's record (Kafka Connect's four keys unchanged beside it), the COMMITTED_OFFSETS_EXIST notice
of a create (and no notice, and no failure, when the look-up fails), and a restart's answer that
keeps each task's executor as its worker. The same flows run on the real broker in
tests/integration/test_idle_status.py."""

from __future__ import annotations

import json
from collections.abc import Callable

import pytest

from sluiceway.api.v1 import common_pb2, executor_pb2
from sluiceway.cli.output import generation_label as cli_generation_label
from sluiceway.common.generations import generation_label
from sluiceway_server.cluster.members import DETAIL_MAX_CHARS, choose_adopted
from sluiceway_server.herder.offset_notices import COMMITTED_OFFSETS_EXIST
from sluiceway_server.model import State, TargetState, TaskId
from sluiceway_server.storage import LogRecord, MemoryLog, RecordLog, StatusStore, TaskStatusRecord
from sluiceway_server.storage.status_store import encode_status
from tests.plugins.testing_connectors import ControllableSinkConnector
from tests.unit.server.test_herder_memory import DATAGEN, Bed, run, settle

EXECUTOR = "executor-7"
GENERATION = (3 << 32) + 12


def _idle_record() -> TaskStatusRecord:
    return TaskStatusRecord(
        "c",
        0,
        State.RUNNING,
        None,
        EXECUTOR,
        GENERATION,
        detail="idle: end of data",
        idle_since_ms=1_700_000_000_123,
    )


def test_the_idle_detail_rides_beside_kafka_connects_keys() -> None:
    value = json.loads(encode_status(_idle_record()))
    assert value == {
        "state": "RUNNING",
        "trace": None,
        "worker_id": EXECUTOR,
        "generation": GENERATION,
        "detail": "idle: end of data",
        "idle_since_ms": 1_700_000_000_123,
    }
    # A busy task's record is Kafka Connect's own, byte for byte.
    busy = TaskStatusRecord("c", 0, State.RUNNING, None, EXECUTOR, GENERATION)
    assert encode_status(busy) == (
        b'{"state":"RUNNING","trace":null,"worker_id":"executor-7","generation":12884901900}'
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


def test_the_store_reads_the_detail_back_and_drops_a_malformed_one_only() -> None:
    record = _read_back(json.loads(encode_status(_idle_record())))
    assert record is not None
    assert (record.detail, record.idle_since_ms) == ("idle: end of data", 1_700_000_000_123)
    bad = _read_back({"state": "RUNNING", "trace": None, "worker_id": EXECUTOR, "generation": 5, "detail": 7})
    assert bad is not None and bad.state is State.RUNNING and bad.detail == ""


def test_an_adopted_task_keeps_its_idle_detail_only_while_running() -> None:
    def running(state: common_pb2.State.ValueType, detail: str) -> executor_pb2.RunningTask:
        item = executor_pb2.RunningTask(
            task="connectors/c/tasks/0", generation=GENERATION, fingerprint="f", state=state, detail=detail
        )
        item.idle_since.FromMilliseconds(1_700_000_000_000)
        return item

    for state, detail, kept in [
        (common_pb2.STATE_RUNNING, "idle: no new records", ("idle: no new records", 1_700_000_000_000)),
        (common_pb2.STATE_PAUSED, "idle: no new records", ("", 0)),
        (common_pb2.STATE_RUNNING, "x" * 1000, ("x" * DETAIL_MAX_CHARS, 1_700_000_000_000)),
    ]:
        (adopted,) = choose_adopted(
            EXECUTOR,
            [running(state, detail)],
            desired={TaskId("c", 0)},
            taken=set(),
            floor=lambda task: 0,
        )
        assert (adopted.detail, adopted.idle_since_ms) == kept


# --- notices -----------------------------------------------------------------------------------


def test_create_notes_source_offsets_left_by_an_earlier_connector_of_the_name() -> None:
    async def test(bed: Bed) -> None:
        fresh = await bed.herder.create_connector("fresh", DATAGEN, TargetState.STOPPED)
        assert fresh.notices == ()
        bed.offset_store.put("dg", [({"task": 0}, {"seq": 41})], 5)
        checked = await bed.herder.create_connector("dg", DATAGEN, TargetState.STARTED, validate_only=True)
        (notice,) = checked.notices
        assert notice.code == COMMITTED_OFFSETS_EXIST
        assert "1 source partition in offsets topic offsets" in notice.message
        assert (
            "--initial-state stopped" in notice.message and "`sluiceway offsets reset dg`" in notice.message
        )
        created = await bed.herder.create_connector("dg", DATAGEN, TargetState.STOPPED)
        (notice,) = created.notices
        assert notice.code == COMMITTED_OFFSETS_EXIST
        assert notice.message.startswith("Connector dg resumes from offsets committed under this name")
        assert "`sluiceway connectors delete dg --delete-offsets`" in notice.message
        # Reads carry no notice.
        assert (await bed.herder.connector_info("dg")).notices == ()
        # Replace that creates notes them too; one that changes an existing connector does not.
        bed.offset_store.put("dg2", [({"task": 0}, {"seq": 3})], 5)
        info, created_now = await bed.herder.replace_connector_config("dg2", DATAGEN)
        assert created_now and [n.code for n in info.notices] == [COMMITTED_OFFSETS_EXIST]
        info, created_now = await bed.herder.replace_connector_config("dg2", {**DATAGEN, "tasks.max": "1"})
        assert not created_now and info.notices == ()

    run(test)


def test_a_failed_offsets_look_up_gives_no_notice_and_the_create_goes_on() -> None:
    # The bed's admin factory fails every call: a sink's consumer group cannot be read.
    sink = {"connector.class": "ControllableSink", "topics": "t"}

    async def test(bed: Bed) -> None:
        info = await bed.herder.create_connector("s", sink, TargetState.STOPPED)
        assert info.notices == () and bed.herder.snapshot().contains("s")

    run(test, plugins=[ControllableSinkConnector])


# --- a restart's answer -----------------------------------------------------------------------


def test_a_restart_answer_shows_each_task_on_its_executor() -> None:
    async def test(bed: Bed) -> None:
        await bed.herder.create_connector("dg", DATAGEN, TargetState.STARTED)
        await settle(bed, "dg", State.RUNNING, tasks=3)
        bed.status_store.put_task(TaskStatusRecord("dg", 1, State.FAILED, "boom", EXECUTOR, GENERATION), 5)
        planned = await bed.herder.restart_connector("dg", include_tasks=True, only_failed=True)
        by_task = {t.task: t.status for t in planned.tasks}
        assert by_task[1].state is State.RESTARTING
        assert (by_task[1].worker_id, by_task[1].generation, by_task[1].trace) == (
            EXECUTOR,
            GENERATION,
            "boom",
        )
        assert by_task[0].state is State.UNASSIGNED
        # A connector restart shows the connector on the replica its status names.
        planned = await bed.herder.restart_connector("dg", include_tasks=False, only_failed=False)
        assert planned.connector.state is State.RESTARTING and planned.connector.worker_id == "test:1"

    run(test)


# --- the generation's one readable form ----------------------------------------------------------


@pytest.mark.parametrize(
    ("generation", "label"),
    [(0, "-"), (-4, "-"), (7, "7"), ((1 << 32) + 1, "1.1"), (4294967297, "1.1"), ((12 << 32) + 40, "12.40")],
)
def test_a_generation_reads_epoch_dot_count_in_the_cli_too(generation: int, label: str) -> None:
    assert generation_label(generation) == label == cli_generation_label(generation)
