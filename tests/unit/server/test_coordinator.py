"""The executor coordinator over memory stores: stopping records every executor's tasks UNASSIGNED
and returns only after those writes finished; a connector's own offsets topic that is slow to open
holds up neither the event loop nor other connectors' assignments."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any, cast

import pytest
from confluent_kafka.admin import AdminClient

from sluiceway.api.v1 import common_pb2, executor_pb2
from sluiceway.offsets import map_from_proto
from sluiceway_server.cluster.coordinator import ExecutorCoordinator
from sluiceway_server.herder.active_topics import ActiveTopicTracker
from sluiceway_server.herder.errors import UnavailableError
from sluiceway_server.model import ConnectorType, State, TargetState
from sluiceway_server.status_writer import StatusWriter
from sluiceway_server.storage import (
    ConnectorOffsetStorage,
    MemoryLog,
    OffsetStore,
    OwnOffsetsTopic,
    StatusStore,
    TaskStatusRecord,
)

TASKS = 2


class Snapshot:
    """The part of the herder's config snapshot the coordinator reads: running source connectors."""

    inconsistent: frozenset[str] = frozenset()

    def __init__(self, configs: Mapping[str, Mapping[str, str]] | None = None) -> None:
        self.configs = configs or {"c": {"connector.class": "DataGenSource", "topic": "t"}}

    def connectors(self) -> Sequence[str]:
        return list(self.configs)

    def target_state(self, connector: str) -> TargetState:
        return TargetState.STARTED

    def connector_config(self, connector: str) -> Mapping[str, str]:
        return self.configs[connector]

    def tasks(self, connector: str) -> Sequence[Mapping[str, str]]:
        return [{"task.id": str(n)} for n in range(TASKS)]


class GatedStatusStore(StatusStore):
    """Task status writes wait for the gate: a slow broker, held open on purpose."""

    def __init__(self) -> None:
        super().__init__(lambda on_record: MemoryLog("status", on_record))
        self.gate = threading.Event()
        self.gate.set()

    def put_task(self, status: TaskStatusRecord, timeout: float = 30.0) -> None:
        assert self.gate.wait(timeout)
        super().put_task(status, timeout)


def _memory_offsets(topic: str = "offsets") -> OffsetStore:
    store = OffsetStore(lambda on_record: MemoryLog(topic, on_record))
    store.start(5)
    return store


def _writer(status_store: StatusStore) -> StatusWriter:
    writer = StatusWriter(status_store, "replica-1", store_timeout=5.0)
    writer.term = 1
    return writer


def _coordinator(
    status_store: StatusStore,
    snapshot: Snapshot | None = None,
    offset_store_factory: Callable[[OwnOffsetsTopic], OffsetStore] | None = None,
) -> ExecutorCoordinator:
    offsets = _memory_offsets()

    def current() -> Any:
        return snapshot or Snapshot()

    return ExecutorCoordinator(
        snapshot=current,
        connector_type=lambda config: ConnectorType.SOURCE,
        status=_writer(status_store),
        offsets=ConnectorOffsetStorage(
            worker_config={"bootstrap.servers": "memory"},
            offset_store=offsets,
            offset_store_factory=offset_store_factory or (lambda own: _memory_offsets(own.topic)),
            admin_factory=lambda settings: cast(AdminClient, None),  # only sink offsets use it
        ),
        worker_config={},
        heartbeat_interval=0.1,
        session_timeout=10.0,
        topics=ActiveTopicTracker(status_store=status_store, snapshot=current, enabled=False),
    )


async def _attached(coordinator: ExecutorCoordinator, executor_id: str) -> Any:
    member = await coordinator.attach(executor_pb2.Hello(executor_id=executor_id))
    for _ in range(200):
        if len(member.owned) == TASKS:
            return member
        await asyncio.sleep(0.01)
    raise AssertionError("no assignment")


def _states(store: StatusStore) -> list[State]:
    return [record.state for record in store.tasks("c")]


def test_stop_detaches_executors_and_records_their_tasks_unassigned() -> None:
    async def scenario() -> None:
        store = GatedStatusStore()
        store.start(5)
        coordinator = _coordinator(store)
        coordinator.start()
        member = await _attached(coordinator, "e1")
        await coordinator.stop()
        assert member.closed and not coordinator.members
        assert _states(store) == [State.UNASSIGNED] * TASKS
        with pytest.raises(UnavailableError) as refused:
            await coordinator.attach(executor_pb2.Hello(executor_id="e2"))
        assert refused.value.reason == "NOT_LEADER"
        store.stop()

    asyncio.run(scenario())


def test_a_status_report_arriving_after_the_connector_was_deleted_writes_nothing() -> None:
    class Configs(Snapshot):
        def connector_config(self, connector: str) -> Mapping[str, str] | None:  # type: ignore[override]
            return self.configs.get(connector)

    async def scenario() -> None:
        store = GatedStatusStore()
        store.start(5)
        snapshot = Configs()
        coordinator = _coordinator(store, snapshot)
        coordinator.start()
        member = await _attached(coordinator, "e1")
        task, owned = next(iter(member.owned.items()))
        snapshot.configs = {}
        report = executor_pb2.TaskStatusReport(
            task=f"connectors/{task.connector}/tasks/{task.task}",
            generation=owned.generation,
            state=common_pb2.STATE_FAILED,
            trace="offset commit refused: connector c no longer exists",
        )
        await coordinator.handle(member, executor_pb2.ExecutorMessage(task_status=report))
        assert State.FAILED not in _states(store)
        await coordinator.stop()
        store.stop()

    asyncio.run(scenario())


def test_stop_waits_for_a_release_whose_caller_was_cancelled() -> None:
    async def scenario() -> None:
        store = GatedStatusStore()
        store.start(5)
        coordinator = _coordinator(store)
        coordinator.start()
        member = await _attached(coordinator, "e1")
        store.gate.clear()
        # The executor's stream ends and its teardown is cancelled while the release is in flight.
        detaching = asyncio.create_task(coordinator.detach(member, "stream closed"))
        await asyncio.sleep(0.05)
        detaching.cancel()
        stopping = asyncio.create_task(coordinator.stop())
        await asyncio.sleep(0.2)
        assert not stopping.done(), "stop() returned while a status write was still under way"
        store.gate.set()
        await asyncio.wait_for(stopping, 5)
        assert _states(store) == [State.UNASSIGNED] * TASKS
        store.stop()

    asyncio.run(scenario())


def test_a_slow_own_offsets_topic_blocks_neither_the_loop_nor_other_connectors() -> None:
    opened = threading.Event()

    def slow_broker(own: OwnOffsetsTopic) -> OffsetStore:
        time.sleep(1.0)  # creating the topic and reading it to the end takes this long
        store = _memory_offsets(own.topic)
        store.put("own", [({"task": 0}, {"seq": 41})], 5)
        opened.set()
        return store

    snapshot = Snapshot(
        {
            "own": {"connector.class": "DataGenSource", "topic": "t", "offsets.storage.topic": "own-offsets"},
            "plain": {"connector.class": "DataGenSource", "topic": "t"},
        }
    )

    async def scenario() -> None:
        store = GatedStatusStore()
        store.start(5)
        coordinator = _coordinator(store, snapshot, slow_broker)
        coordinator.start()
        lag = 0.0
        probing = True

        async def probe() -> None:
            nonlocal lag
            while probing:
                before = time.monotonic()
                await asyncio.sleep(0.01)
                lag = max(lag, time.monotonic() - before - 0.01)

        prober = asyncio.create_task(probe())
        member = await coordinator.attach(executor_pb2.Hello(executor_id="e1", max_tasks=10))
        # The plain connector's tasks are assigned while the own topic is still opening.
        for _ in range(50):
            if {t.connector for t in member.owned} == {"plain"}:
                break
            await asyncio.sleep(0.01)
        assert {t.connector for t in member.owned} == {"plain"}
        assert not opened.is_set()
        for _ in range(300):
            if len(member.owned) == 2 * TASKS:
                break
            await asyncio.sleep(0.01)
        assert len(member.owned) == 2 * TASKS
        probing = False
        await prober
        assert lag < 0.1, f"the event loop was blocked for {lag * 1000:.0f} ms"
        # The own topic's offsets reached the assignment.
        sent: list[executor_pb2.TaskAssignment] = []
        while not member.outbox.empty():
            message = member.outbox.get_nowait()
            if message is not None and message.WhichOneof("kind") == "assignment":
                sent.extend(message.assignment.tasks)
        own_task = next(t for t in sent if t.task == "connectors/own/tasks/0")
        assert [map_from_proto(o.offset) for o in own_task.source_offsets] == [{"seq": 41}]
        await coordinator.stop()
        store.stop()

    asyncio.run(scenario())
