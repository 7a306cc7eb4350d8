"""The coordinator sends task assignments in bounded messages: many tasks are spread over several
Assignment messages, each within the bound; a task larger than the bound goes alone; a task larger
than an executor accepts is never sent but FAILED, once per config, without holding up the others."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping, Sequence
from typing import Any, cast

from confluent_kafka.admin import AdminClient

from sluiceway.api.v1 import executor_pb2
from sluiceway.common.limits import ASSIGNMENT_MESSAGE_BYTES
from sluiceway_server.cluster.coordinator import ExecutorCoordinator, Member
from sluiceway_server.herder.active_topics import ActiveTopicTracker
from sluiceway_server.model import ConnectorType, State, TargetState, TaskId
from sluiceway_server.status_writer import StatusWriter
from sluiceway_server.storage import ConnectorOffsetStorage, MemoryLog, OffsetStore, StatusStore

KIB = 1024


class Snapshot:
    """The part of the herder's config snapshot the coordinator reads: running source connectors
    with the task configs given."""

    inconsistent: frozenset[str] = frozenset()

    def __init__(self, tasks: dict[str, list[dict[str, str]]]) -> None:
        self.task_configs = tasks

    def connectors(self) -> Sequence[str]:
        return list(self.task_configs)

    def target_state(self, connector: str) -> TargetState:
        return TargetState.STARTED

    def connector_config(self, connector: str) -> Mapping[str, str] | None:
        if connector not in self.task_configs:
            return None
        return {"connector.class": "DataGenSource", "topic": "t"}

    def tasks(self, connector: str) -> Sequence[Mapping[str, str]]:
        return self.task_configs[connector]

    def frozen(self) -> Snapshot:
        """A copy, as the herder's snapshots are new objects that never change afterwards."""
        return Snapshot({name: [dict(task) for task in tasks] for name, tasks in self.task_configs.items()})


def _memory_offsets() -> OffsetStore:
    store = OffsetStore(lambda on_record: MemoryLog("offsets", on_record))
    store.start(5)
    return store


def _coordinator(status_store: StatusStore, snapshot: Snapshot) -> ExecutorCoordinator:
    writer = StatusWriter(status_store, "replica-1", store_timeout=5.0)
    writer.term = 1

    def current() -> Any:
        return snapshot.frozen()

    return ExecutorCoordinator(
        snapshot=current,
        connector_type=lambda config: ConnectorType.SOURCE,
        status=writer,
        offsets=ConnectorOffsetStorage(
            worker_config={"bootstrap.servers": "memory"},
            offset_store=_memory_offsets(),
            offset_store_factory=lambda own: _memory_offsets(),
            admin_factory=lambda settings: cast(AdminClient, None),  # only sink offsets use it
        ),
        worker_config={},
        heartbeat_interval=0.1,
        session_timeout=10.0,
        topics=ActiveTopicTracker(status_store=status_store, snapshot=current, enabled=False),
    )


def _padded(task: int, size: int) -> dict[str, str]:
    return {"task.id": str(task), "padding": "x" * size}


async def _until(condition: Callable[[], object], what: str) -> None:
    for _ in range(300):
        if condition():
            return
        await asyncio.sleep(0.01)
    raise AssertionError(f"timed out waiting for {what}")


def _drain(member: Member, kind: str) -> list[executor_pb2.ControllerMessage]:
    """The messages of this kind queued for the executor so far (taken off its queue)."""
    found = []
    while not member.outbox.empty():
        message = member.outbox.get_nowait()
        if message is not None and message.WhichOneof("kind") == kind:
            found.append(message)
    return found


def _names(messages: list[executor_pb2.ControllerMessage]) -> list[str]:
    return [item.task for message in messages for item in message.assignment.tasks]


def test_many_tasks_are_spread_over_messages_within_the_bound_each_task_once() -> None:
    count = 12  # 12 x 500 KiB: three times the bound
    snapshot = Snapshot({"big": [_padded(n, 500 * KIB) for n in range(count)]})

    async def scenario() -> None:
        store = StatusStore(lambda on_record: MemoryLog("status", on_record))
        store.start(5)
        coordinator = _coordinator(store, snapshot)
        coordinator.start()
        member = await coordinator.attach(executor_pb2.Hello(executor_id="e1"))
        await _until(lambda: len(member.owned) == count, "every task to be assigned")
        messages = _drain(member, "assignment")
        assert len(messages) >= 3
        assert all(message.ByteSize() <= ASSIGNMENT_MESSAGE_BYTES for message in messages)
        assert sorted(_names(messages)) == sorted(f"connectors/big/tasks/{n}" for n in range(count))
        await coordinator.stop()
        store.stop()

    asyncio.run(scenario())


def test_a_task_too_large_for_the_executor_is_failed_once_and_blocks_no_other() -> None:
    # Small bounds stand in for the real ones: messages of 64 KiB, executors taking 256 KiB.
    snapshot = Snapshot(
        {
            "big": [_padded(0, 20 * KIB), _padded(1, 100 * KIB), _padded(2, 300 * KIB), _padded(3, 20 * KIB)],
            "small": [_padded(0, 10), _padded(1, 10)],
        }
    )
    too_large = "connectors/big/tasks/2"

    async def scenario() -> None:
        store = StatusStore(lambda on_record: MemoryLog("status", on_record))
        store.start(5)
        coordinator = _coordinator(store, snapshot)
        coordinator.assignment_message_bytes = 64 * KIB
        coordinator.max_assignment_bytes = 256 * KIB
        coordinator.start()
        first = await coordinator.attach(executor_pb2.Hello(executor_id="e1"))
        await _until(lambda: len(first.owned) == 5, "the other tasks to be assigned")
        await _until(lambda: store.get_task("big", 2) is not None, "the FAILED status")
        messages = _drain(first, "assignment")
        assert sorted(_names(messages)) == sorted(
            [
                *(f"connectors/big/tasks/{n}" for n in (0, 1, 3)),
                "connectors/small/tasks/0",
                "connectors/small/tasks/1",
            ]
        )
        for message in messages:
            names = _names([message])
            # A task over the bound goes alone; every other message keeps within it.
            assert names == ["connectors/big/tasks/1"] or message.ByteSize() <= 64 * KIB
        failed = store.get_task("big", 2)
        assert failed is not None and failed.state is State.FAILED
        assert failed.trace is not None and "EXECUTOR_MAX_RECEIVE_BYTES" in failed.trace
        assert too_large in failed.trace
        # No other task got a status: nothing was written for them but their assignment.
        assert [record.task for record in store.tasks("big")] == [2] and not store.tasks("small")

        # Another executor attaches: the rebalance moves tasks but does not try the large one again.
        second = await coordinator.attach(executor_pb2.Hello(executor_id="e2"))
        await _until(lambda: not first.outbox.empty(), "a revocation for the balance")
        await asyncio.sleep(0.1)
        assert too_large not in _names(_drain(first, "assignment") + _drain(second, "assignment"))
        assert store.get_task("big", 2) == failed

        # A restart tries it once more, and it fails again (a new generation).
        coordinator.restart_tasks("big", [2])
        await _until(lambda: store.get_task("big", 2) != failed, "the second FAILED status")
        again = store.get_task("big", 2)
        assert again is not None and again.state is State.FAILED and again.generation > failed.generation

        # A smaller config is a new fingerprint: now it is sent.
        snapshot.task_configs["big"][2] = _padded(2, 10)
        coordinator.request_rebalance()
        sent: list[str] = []

        def assigned() -> bool:
            sent.extend(_names(_drain(first, "assignment") + _drain(second, "assignment")))
            return too_large in sent

        await _until(assigned, "the smaller task to be assigned")

        # It grows too large again while running: FAILED, and its executor is told to stop it.
        owner = next(m for m in (first, second) if TaskId("big", 2) in m.owned)
        current = store.get_task("big", 2)
        snapshot.task_configs["big"][2] = _padded(2, 300 * KIB)
        coordinator.request_rebalance()
        revoked: list[str] = []

        def revoking() -> bool:
            revoked.extend(name for m in _drain(owner, "revocation") for name in m.revocation.tasks)
            return too_large in revoked

        await _until(revoking, "the revocation of the grown task")
        await _until(lambda: store.get_task("big", 2) != current, "the third FAILED status")
        await coordinator.stop()
        store.stop()

    asyncio.run(scenario())
