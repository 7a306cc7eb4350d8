"""Stopping the executor coordinator: every executor's tasks are recorded UNASSIGNED, and stop()
returns only after those status writes finished, so the stores can stop right after it."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Mapping, Sequence
from typing import Any, cast

import pytest
from confluent_kafka.admin import AdminClient

from sluiceway.api.v1 import executor_pb2
from sluiceway_server.cluster.coordinator import ExecutorCoordinator
from sluiceway_server.herder.errors import UnavailableError
from sluiceway_server.model import ConnectorType, State, TargetState
from sluiceway_server.storage import MemoryLog, OffsetStore, StatusStore, TaskStatusRecord

TASKS = 2


class OneConnector:
    """The part of the herder's config snapshot the coordinator reads: one running connector."""

    inconsistent: frozenset[str] = frozenset()

    def connectors(self) -> Sequence[str]:
        return ["c"]

    def target_state(self, connector: str) -> TargetState:
        return TargetState.STARTED

    def connector_config(self, connector: str) -> Mapping[str, str]:
        return {"connector.class": "DataGenSource", "topic": "t"}

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


def _coordinator(status_store: StatusStore) -> ExecutorCoordinator:
    offsets = OffsetStore(lambda on_record: MemoryLog("offsets", on_record))
    offsets.start(5)
    return ExecutorCoordinator(
        snapshot=OneConnector,
        connector_type=lambda config: ConnectorType.SOURCE,
        status_store=status_store,
        offset_store=offsets,
        offset_store_factory=lambda topic: offsets,
        admin=cast(AdminClient, None),  # only sink offset commits use it
        worker_config={},
        heartbeat_interval=0.1,
        session_timeout=10.0,
        base_generation=1,
        topic_tracking=False,
        store_timeout=5.0,
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
