"""The executor coordinator over memory stores: stopping closes every stream and writes no status;
status writes under way finish before stop() returns; a late report of a deleted connector writes
nothing; every assignment carries its fingerprint, and a sink task's also the latest recorded
change of its connector's offsets; a connector's own offsets topic that is slow to open holds up
neither the event loop nor other connectors' assignments; and at the start of a term nothing is
placed until the executors that ran tasks attach again or the grace passes, after which tasks left
on an executor that never came back are fenced before they are placed.

The helpers here (snapshot, stores, fake fencer, coordinator factory) serve test_adoption.py too."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, cast

import pytest
from confluent_kafka.admin import AdminClient

from sluiceway.api.v1 import common_pb2, executor_pb2
from sluiceway.common.offsets import map_from_proto, offsets_from_proto, sink_offsets_change
from sluiceway_server.cluster.coordinator import ExecutorCoordinator, Member
from sluiceway_server.cluster.members import desired_tasks, executors_with_live_tasks, task_progress
from sluiceway_server.errors import PermissionDeniedError, UnavailableError
from sluiceway_server.herder.active_topics import ActiveTopicTracker
from sluiceway_server.model import ConnectorType, State, TargetState, TaskId
from sluiceway_server.status_writer import StatusWriter
from sluiceway_server.storage import (
    ConnectorOffsetStorage,
    MemoryLog,
    OffsetStore,
    OwnOffsetsTopic,
    StatusStore,
    TaskStatusRecord,
)
from sluiceway_server.storage.task_fencing import TaskFencer

TASKS = 2
TERM = 1


class Snapshot:
    """The part of the herder's config snapshot the coordinator reads: running source connectors
    with TASKS tasks each (tests change `configs` and `task_counts` to reconfigure)."""

    inconsistent: frozenset[str] = frozenset()

    def __init__(self, configs: Mapping[str, Mapping[str, str]] | None = None) -> None:
        self.configs = dict(configs or {"c": {"connector.class": "DataGenSource", "topic": "t"}})
        self.task_counts: dict[str, int] = {}

    def connectors(self) -> Sequence[str]:
        return list(self.configs)

    def target_state(self, connector: str) -> TargetState:
        return TargetState.STARTED

    def connector_config(self, connector: str) -> Mapping[str, str] | None:
        return self.configs.get(connector)

    def tasks(self, connector: str) -> Sequence[Mapping[str, str]]:
        return [{"task.id": str(n)} for n in range(self.task_counts.get(connector, TASKS))]

    def frozen(self) -> Snapshot:
        """A copy as the herder's snapshots are: a new object, never changed afterwards (the
        coordinator may keep what it derived from one while it gets the same object again)."""
        copy = Snapshot()
        copy.configs = dict(self.configs)
        copy.task_counts = dict(self.task_counts)
        copy.inconsistent = self.inconsistent
        return copy


class GatedStatusStore(StatusStore):
    """Task status writes wait for the gate: a slow broker, held open on purpose."""

    def __init__(self) -> None:
        super().__init__(lambda on_record: MemoryLog("status", on_record))
        self.gate = threading.Event()
        self.gate.set()
        self.writes: list[TaskStatusRecord] = []

    def put_task(self, status: TaskStatusRecord, timeout: float = 30.0) -> None:
        assert self.gate.wait(timeout)
        self.writes.append(status)
        super().put_task(status, timeout)


class FakeFencer(TaskFencer):
    """Records what it is asked to fence; each call waits for `gate`, and fails while `failures`
    is positive."""

    def __init__(self) -> None:
        super().__init__({"bootstrap.servers": "memory", "group.id": "g"})
        self.calls: list[tuple[str, list[int], bool]] = []
        self.gate = asyncio.Event()
        self.gate.set()
        self.failures = 0

    async def fence(
        self, connector: str, connector_config: Mapping[str, str], tasks: Iterable[int], *, source: bool
    ) -> None:
        await self.gate.wait()
        if self.failures > 0:
            self.failures -= 1
            raise TimeoutError("the broker did not answer")
        self.calls.append((connector, sorted(tasks), source))


def _memory_offsets(topic: str = "offsets") -> OffsetStore:
    store = OffsetStore(lambda on_record: MemoryLog(topic, on_record))
    store.start(5)
    return store


def status_store() -> GatedStatusStore:
    store = GatedStatusStore()
    store.start(5)
    return store


def make_coordinator(
    store: StatusStore,
    snapshot: Snapshot | None = None,
    offset_store_factory: Callable[[OwnOffsetsTopic], OffsetStore] | None = None,
    *,
    fencer: TaskFencer | None = None,
    expected: Mapping[str, str] | None = None,
    grace: float = 0.0,
    session_timeout: float = 10.0,
    connector_type: ConnectorType = ConnectorType.SOURCE,
) -> ExecutorCoordinator:
    current_snapshot = snapshot or Snapshot()
    writer = StatusWriter(store, "replica-1", store_timeout=5.0)
    writer.term = TERM

    def current() -> Any:
        return current_snapshot.frozen()

    return ExecutorCoordinator(
        snapshot=current,
        connector_type=lambda config: connector_type,
        status=writer,
        offsets=ConnectorOffsetStorage(
            worker_config={"bootstrap.servers": "memory"},
            offset_store=_memory_offsets(),
            offset_store_factory=offset_store_factory or (lambda own: _memory_offsets(own.topic)),
            admin_factory=lambda settings: cast(AdminClient, None),  # only sink offsets use it
        ),
        worker_config={},
        heartbeat_interval=0.05,
        session_timeout=session_timeout,
        topics=ActiveTopicTracker(status_store=store, snapshot=current, enabled=False),
        fencer=fencer,
        expected_executors=expected,
        grace=grace,
    )


async def until(condition: Callable[[], object], what: str, timeout: float = 3.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.01)


async def attached(coordinator: ExecutorCoordinator, executor_id: str, tasks: int = TASKS) -> Member:
    member = await coordinator.attach(executor_pb2.Hello(executor_id=executor_id))
    await until(lambda: len(member.owned) == tasks, f"{tasks} task(s) assigned to {executor_id}")
    return member


def drain(member: Member) -> list[executor_pb2.ControllerMessage | None]:
    """Every message queued for the executor so far (taken off its queue); None ends the stream."""
    found: list[executor_pb2.ControllerMessage | None] = []
    while not member.outbox.empty():
        found.append(member.outbox.get_nowait())
    return found


def of_kind(messages: Sequence[executor_pb2.ControllerMessage | None], kind: str) -> list[Any]:
    return [getattr(m, kind) for m in messages if m is not None and m.WhichOneof("kind") == kind]


def assigned(messages: Sequence[executor_pb2.ControllerMessage | None]) -> list[executor_pb2.TaskAssignment]:
    return [item for assignment in of_kind(messages, "assignment") for item in assignment.tasks]


async def report_running(coordinator: ExecutorCoordinator, member: Member) -> None:
    """The executor reports every task it owns RUNNING, as a runner that started would."""
    for task, owned in list(member.owned.items()):
        report = executor_pb2.TaskStatusReport(
            task=task.name, generation=owned.generation, state=common_pb2.STATE_RUNNING
        )
        await coordinator.handle(member, executor_pb2.ExecutorMessage(task_status=report))


def running(member: Member) -> list[executor_pb2.RunningTask]:
    """The Hello's list of the tasks a member runs, as its executor would send it."""
    return [
        executor_pb2.RunningTask(
            task=task.name,
            generation=owned.generation,
            fingerprint=owned.fingerprint,
            state=common_pb2.STATE_RUNNING,
        )
        for task, owned in sorted(member.owned.items())
    ]


def states(store: StatusStore, connector: str = "c") -> list[State]:
    return [record.state for record in store.tasks(connector)]


def test_stop_closes_every_stream_and_writes_no_status() -> None:
    async def scenario() -> None:
        store = status_store()
        coordinator = make_coordinator(store)
        coordinator.start()
        member = await attached(coordinator, "e1")
        await report_running(coordinator, member)
        written = len(store.writes)
        await coordinator.stop()
        assert member.closed and drain(member)[-1] is None
        await asyncio.sleep(0.1)
        assert len(store.writes) == written and states(store) == [State.RUNNING] * TASKS
        with pytest.raises(UnavailableError) as refused:
            await coordinator.attach(executor_pb2.Hello(executor_id="e2"))
        assert refused.value.reason == "NOT_LEADER"
        store.stop()

    asyncio.run(scenario())


def test_a_status_report_arriving_after_the_connector_was_deleted_writes_nothing() -> None:
    async def scenario() -> None:
        store = status_store()
        snapshot = Snapshot()
        coordinator = make_coordinator(store, snapshot)
        coordinator.start()
        member = await attached(coordinator, "e1")
        task, owned = next(iter(member.owned.items()))
        snapshot.configs = {}
        report = executor_pb2.TaskStatusReport(
            task=task.name, generation=owned.generation, state=common_pb2.STATE_FAILED, trace="late"
        )
        await coordinator.handle(member, executor_pb2.ExecutorMessage(task_status=report))
        assert State.FAILED not in states(store)
        await coordinator.stop()
        store.stop()

    asyncio.run(scenario())


def test_stop_waits_for_the_status_writes_of_a_release() -> None:
    async def scenario() -> None:
        store = status_store()
        coordinator = make_coordinator(store)
        coordinator.start()
        member = await attached(coordinator, "e1")
        store.gate.clear()
        # The executor says goodbye while the status topic is slow to take the UNASSIGNED records.
        await coordinator.handle(member, executor_pb2.ExecutorMessage(goodbye=executor_pb2.Goodbye()))
        stopping = asyncio.create_task(coordinator.stop())
        await asyncio.sleep(0.2)
        assert not stopping.done(), "stop() returned while a status write was still under way"
        store.gate.set()
        await asyncio.wait_for(stopping, 5)
        assert states(store) == [State.UNASSIGNED] * TASKS
        store.stop()

    asyncio.run(scenario())


def test_every_assignment_carries_the_fingerprint_of_what_it_assigns() -> None:
    async def scenario() -> None:
        store = status_store()
        snapshot = Snapshot()
        coordinator = make_coordinator(store, snapshot)
        coordinator.start()
        member = await attached(coordinator, "e1")
        desired = desired_tasks(snapshot)
        items = assigned(drain(member))
        assert {item.task: item.fingerprint for item in items} == {
            task.name: desired[task].fingerprint for task in desired
        }
        # A reconfiguration restarts the tasks in place with the new fingerprint.
        snapshot.configs["c"] = {**snapshot.configs["c"], "topic": "u"}
        coordinator.request_rebalance()
        await until(lambda: not member.outbox.empty(), "the new assignment")
        await asyncio.sleep(0.05)
        changed = desired_tasks(snapshot)
        again = assigned(drain(member))
        assert {item.task: item.fingerprint for item in again} == {
            task.name: changed[task].fingerprint for task in changed
        }
        assert all(item.fingerprint != desired[TaskId.parse(item.task)].fingerprint for item in again)
        await coordinator.stop()
        store.stop()

    asyncio.run(scenario())


def test_a_sink_task_assignment_carries_the_latest_change_of_its_offsets() -> None:
    snapshot = Snapshot(
        {
            "changed": {"connector.class": "SparkFileSink", "topics": "t"},
            "untouched": {"connector.class": "SparkFileSink", "topics": "t"},
        }
    )

    async def scenario() -> None:
        store = status_store()
        coordinator = make_coordinator(store, snapshot, connector_type=ConnectorType.SINK)
        await coordinator.offsets.record_sink_change("changed")
        await coordinator.offsets.record_sink_change("changed")
        [(_, latest)] = coordinator.offsets.sink_change("changed")
        coordinator.start()
        member = await coordinator.attach(executor_pb2.Hello(executor_id="e1", max_tasks=10))
        await until(lambda: len(member.owned) == 2 * TASKS, "every task assigned")
        carried = {
            item.task: sink_offsets_change(offsets_from_proto(item.source_offsets))
            for item in assigned(drain(member))
        }
        assert carried == {
            **{f"connectors/changed/tasks/{n}": latest["id"] for n in range(TASKS)},
            **{f"connectors/untouched/tasks/{n}": "" for n in range(TASKS)},
        }
        await coordinator.stop()
        store.stop()

    asyncio.run(scenario())


def test_a_source_connector_named_like_a_changed_sink_sees_no_record_of_that_change() -> None:
    config = {"connector.class": "DataGenSource", "topic": "t"}
    snapshot = Snapshot({"reused": config})

    async def scenario() -> None:
        store = status_store()
        coordinator = make_coordinator(store, snapshot)
        # A sink of this name had its offsets changed, then was deleted; a source took the name.
        await coordinator.offsets.record_sink_change("reused")
        assert coordinator.offsets.sink_change("reused")
        assert coordinator.offsets.source_offsets("reused", config) == []
        assert await coordinator.offsets.read_source("reused", config) == []
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
        store = status_store()
        coordinator = make_coordinator(store, snapshot, slow_broker)
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
        await until(lambda: {t.connector for t in member.owned} == {"plain"}, "the plain tasks", 0.5)
        assert not opened.is_set()
        await until(lambda: len(member.owned) == 2 * TASKS, "every task")
        probing = False
        await prober
        assert lag < 0.1, f"the event loop was blocked for {lag * 1000:.0f} ms"
        # The own topic's offsets reached the assignment.
        own_task = next(t for t in assigned(drain(member)) if t.task == "connectors/own/tasks/0")
        assert [map_from_proto(o.offset) for o in own_task.source_offsets] == [{"seq": 41}]
        await coordinator.stop()
        store.stop()

    asyncio.run(scenario())


# ---------------------------------------------------------------------- the grace at term start


def _put_running(store: StatusStore, task: int, worker: str, generation: int, connector: str = "c") -> None:
    store.put_task(TaskStatusRecord(connector, task, State.RUNNING, None, worker, generation), 5)


def test_expected_executors_are_those_the_status_topic_shows_running_or_paused_tasks() -> None:
    store = status_store()
    _put_running(store, 0, "e1", 7)
    store.put_task(TaskStatusRecord("c", 1, State.PAUSED, None, "e2", 7), 5)
    store.put_task(TaskStatusRecord("d", 0, State.FAILED, "boom", "e3", 7), 5)
    store.put_task(TaskStatusRecord("d", 1, State.UNASSIGNED, None, "e4", 7), 5)
    assert executors_with_live_tasks(store) == {"e1": "", "e2": ""}
    store.stop()


def test_expected_executors_keep_the_principal_their_task_statuses_record() -> None:
    store = status_store()
    _put_running(store, 0, "e1", 7)  # written before the executor's principal was recorded
    store.put_task(TaskStatusRecord("c", 1, State.RUNNING, None, "e1", 7, worker_principal="CN=exec-a"), 5)
    store.put_task(TaskStatusRecord("d", 0, State.PAUSED, None, "e2", 7, worker_principal="exec-b"), 5)
    assert executors_with_live_tasks(store) == {"e1": "CN=exec-a", "e2": "exec-b"}
    store.stop()


def test_during_the_grace_an_expected_executor_id_is_kept_for_its_principal() -> None:
    async def scenario() -> None:
        store = status_store()
        coordinator = make_coordinator(store, expected={"e1": "exec-a", "e2": ""}, grace=0.5)
        coordinator.start()
        with pytest.raises(PermissionDeniedError, match="belongs to another principal"):
            await coordinator.attach(executor_pb2.Hello(executor_id="e1"), "exec-b")
        assert "e1" not in coordinator.members
        # No principal recorded (authentication was off): the id is anyone's.
        await coordinator.attach(executor_pb2.Hello(executor_id="e2"), "exec-b")
        # Once the id is held, the session's principal is what counts.
        member = await coordinator.attach(executor_pb2.Hello(executor_id="e1"), "exec-a")
        with pytest.raises(PermissionDeniedError):
            await coordinator.attach(executor_pb2.Hello(executor_id="e1"), "exec-b")
        assert coordinator.members["e1"] is member
        await coordinator.stop()
        store.stop()

    asyncio.run(scenario())


def test_after_the_grace_a_recorded_principal_no_longer_holds_the_id() -> None:
    async def scenario() -> None:
        store = status_store()
        coordinator = make_coordinator(store, expected={"e1": "exec-a"}, grace=0.2)
        coordinator.start()
        await asyncio.sleep(0.3)
        member = await coordinator.attach(executor_pb2.Hello(executor_id="e1"), "exec-c")
        assert member.principal == "exec-c"
        await coordinator.stop()
        store.stop()

    asyncio.run(scenario())


def test_task_statuses_an_executor_reports_record_its_principal() -> None:
    async def scenario() -> None:
        store = status_store()
        coordinator = make_coordinator(store)
        coordinator.start()
        member = await coordinator.attach(executor_pb2.Hello(executor_id="e1"), "exec-a")
        await until(lambda: len(member.owned) == TASKS, "tasks assigned")
        await report_running(coordinator, member)
        records = store.tasks("c")
        assert [(r.state, r.worker_id, r.worker_principal) for r in records] == [
            (State.RUNNING, "e1", "exec-a")
        ] * TASKS
        assert executors_with_live_tasks(store) == {"e1": "exec-a"}
        await coordinator.stop()
        store.stop()

    asyncio.run(scenario())


def test_a_task_restarting_by_itself_is_recorded_with_its_attempt_due_time_and_error_history() -> None:
    async def scenario() -> None:
        store = status_store()
        coordinator = make_coordinator(store)
        coordinator.start()
        member = await coordinator.attach(executor_pb2.Hello(executor_id="e1"), "")
        await until(lambda: len(member.owned) == TASKS, "tasks assigned")
        task, owned = sorted(member.owned.items())[0]

        async def report(
            state: common_pb2.State.ValueType, trace: str = "", attempt: int = 0, due_ms: int = 0
        ) -> None:
            status = executor_pb2.TaskStatusReport(
                task=task.name, generation=owned.generation, state=state, trace=trace, restart_attempt=attempt
            )
            if due_ms:
                status.next_restart_time.FromMilliseconds(due_ms)
            await coordinator.handle(member, executor_pb2.ExecutorMessage(task_status=status))

        trace = "Traceback (most recent call last):\nRuntimeError: broke"
        await report(common_pb2.STATE_RESTARTING, trace, 1, 1_700_000_001_000)
        # The executor repeats a report (as when it attaches again): no second history entry.
        await report(common_pb2.STATE_RESTARTING, trace, 1, 1_700_000_001_000)
        await report(common_pb2.STATE_RUNNING)
        await report(common_pb2.STATE_RESTARTING, trace, 2, 1_700_000_003_000)
        record = store.get_task(task.connector, task.task)
        assert record is not None and record.state is State.RESTARTING
        assert (record.restart_attempt, record.next_restart_ms) == (2, 1_700_000_003_000)
        assert [e.message for e in record.recent_errors] == ["RuntimeError: broke"] * 2
        # A RESTARTING task is still held by its executor.
        assert executors_with_live_tasks(store) == {"e1": ""}
        await report(common_pb2.STATE_RUNNING)
        record = store.get_task(task.connector, task.task)
        assert record is not None and (record.restart_attempt, record.next_restart_ms) == (0, 0)
        assert len(record.recent_errors) == 2
        await coordinator.stop()
        store.stop()

    asyncio.run(scenario())


def test_nothing_is_placed_until_every_expected_executor_attached() -> None:
    async def scenario() -> None:
        store = status_store()
        snapshot = Snapshot()
        coordinator = make_coordinator(store, snapshot, expected={"e1": "", "e2": ""}, grace=10.0)
        coordinator.start()
        newcomer = await coordinator.attach(executor_pb2.Hello(executor_id="e2"))
        await asyncio.sleep(0.3)
        assert not newcomer.owned and not assigned(drain(newcomer))
        # e1 comes back running task 0; now every expected executor is here and task 1 is placed.
        fingerprint = desired_tasks(snapshot)[TaskId("c", 0)].fingerprint
        hello = executor_pb2.Hello(
            executor_id="e1",
            running_tasks=[
                executor_pb2.RunningTask(
                    task="connectors/c/tasks/0",
                    generation=5,
                    fingerprint=fingerprint,
                    state=common_pb2.STATE_RUNNING,
                )
            ],
        )
        returning = await coordinator.attach(hello)
        await until(lambda: TaskId("c", 1) in newcomer.owned, "task 1 to be placed")
        assert returning.owned == {TaskId("c", 0): returning.owned[TaskId("c", 0)]}
        assert returning.owned[TaskId("c", 0)].generation == 5
        await coordinator.stop()
        store.stop()

    asyncio.run(scenario())


def test_during_the_grace_a_changed_task_is_restarted_in_place_and_nothing_else_moves() -> None:
    async def scenario() -> None:
        store = status_store()
        snapshot = Snapshot()
        snapshot.task_counts["c"] = 1
        coordinator = make_coordinator(store, snapshot, expected={"e1": "", "absent": ""}, grace=10.0)
        coordinator.start()
        hello = executor_pb2.Hello(
            executor_id="e1",
            running_tasks=[
                executor_pb2.RunningTask(
                    task="connectors/c/tasks/0",
                    generation=5,
                    fingerprint="an older config",
                    state=common_pb2.STATE_RUNNING,
                )
            ],
        )
        member = await coordinator.attach(hello)
        await until(lambda: member.owned[TaskId("c", 0)].generation != 5, "the restart in place")
        restarted = assigned(drain(member))
        assert [item.task for item in restarted] == ["connectors/c/tasks/0"]
        assert restarted[0].generation > TERM << 32
        # A second executor gets nothing during the grace, though the balance would give it a task.
        snapshot.task_counts["c"] = 2
        other = await coordinator.attach(executor_pb2.Hello(executor_id="e2"))
        coordinator.request_rebalance()
        await asyncio.sleep(0.3)
        assert not other.owned and TaskId("c", 1) not in member.owned
        await coordinator.stop()
        store.stop()

    asyncio.run(scenario())


def test_after_the_grace_tasks_of_executors_that_did_not_return_are_fenced_then_placed() -> None:
    async def scenario() -> None:
        store = status_store()
        _put_running(store, 0, "gone", (TERM - 1 << 32) + 3)
        fencer = FakeFencer()
        coordinator = make_coordinator(store, fencer=fencer, expected={"gone": ""}, grace=0.3)
        coordinator.start()
        member = await coordinator.attach(executor_pb2.Hello(executor_id="e1"))
        fencer.gate.clear()
        await asyncio.sleep(0.15)
        assert not member.owned, "placed during the grace"
        # Task 1 has no status and is placed when the grace ends; task 0 waits for its fencing.
        await until(lambda: TaskId("c", 1) in member.owned, "task 1 to be placed after the grace")
        await asyncio.sleep(0.1)
        assert TaskId("c", 0) not in member.owned
        assert coordinator.running_tasks("c") == [TaskId("c", 0), TaskId("c", 1)]  # 0 is held
        fencer.gate.set()
        await until(lambda: len(member.owned) == TASKS, "task 0 to be placed once fenced")
        assert fencer.calls == [("c", [0], True)]
        record = store.get_task("c", 0)
        assert record is not None and record.worker_id == "gone"
        assert record.state is State.UNASSIGNED and record.generation > TERM << 32
        await coordinator.stop()
        store.stop()

    asyncio.run(scenario())


def test_heartbeats_bring_the_progress_of_the_tasks_each_executor_holds() -> None:
    async def scenario() -> None:
        store = status_store()
        coordinator = make_coordinator(store)
        coordinator.start()
        member = await attached(coordinator, "e1")
        (task, owned), *others = sorted(member.owned.items())
        reports = [
            executor_pb2.TaskProgressReport(
                task=task.name,
                generation=owned.generation,
                progress=common_pb2.TaskProgress(records_per_second=12.5, lag=40),
            ),
            # Measured under an older generation (before a restart), and of no task at all: unused.
            *(executor_pb2.TaskProgressReport(task=t.name, generation=o.generation - 1) for t, o in others),
            executor_pb2.TaskProgressReport(task="not a task name"),
        ]
        beat = executor_pb2.Heartbeat(progress=reports)
        await coordinator.handle(member, executor_pb2.ExecutorMessage(heartbeat=beat))
        found = task_progress(coordinator.executors(), "c")
        assert list(found) == [task.name]
        assert (found[task.name].records_per_second, found[task.name].lag) == (12.5, 40)
        assert task_progress(coordinator.executors(), "other") == {}
        # The next heartbeat replaces it all: a task missing there has no progress.
        await coordinator.handle(member, executor_pb2.ExecutorMessage(heartbeat=executor_pb2.Heartbeat()))
        assert task_progress(coordinator.executors(), "c") == {}
        await coordinator.stop()
        store.stop()

    asyncio.run(scenario())
