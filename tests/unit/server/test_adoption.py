"""Executors that attach with tasks they already run, and streams that end: the coordinator keeps
what an executor may keep (desired, held by no one else, not released since) and records the
reported status where the status topic says otherwise; an executor whose stream ended keeps its
tasks in place and continues when it attaches again; one that does not come back within the
session timeout, or stays silent while connected, is released and its tasks fenced before they run
elsewhere; Goodbye releases at once without fencing."""

from __future__ import annotations

import asyncio

import pytest

from sluiceway.api.v1 import common_pb2, executor_pb2
from sluiceway_server.cluster.coordinator import ExecutorCoordinator, Member
from sluiceway_server.cluster.members import desired_tasks
from sluiceway_server.model import State, TaskId
from sluiceway_server.storage import TaskStatusRecord
from tests.unit.server.test_coordinator import (
    TASKS,
    TERM,
    FakeFencer,
    Snapshot,
    assigned,
    attached,
    drain,
    make_coordinator,
    of_kind,
    report_running,
    running,
    states,
    status_store,
    until,
)

GENERATION = ((TERM - 1) << 32) + 7  # from the previous leader's term


def _running_task(
    snapshot: Snapshot,
    task: int,
    *,
    generation: int = GENERATION,
    state: common_pb2.State.ValueType = common_pb2.STATE_RUNNING,
    trace: str = "",
    connector: str = "c",
    fingerprint: str | None = None,
) -> executor_pb2.RunningTask:
    desired = desired_tasks(snapshot)
    if fingerprint is None:
        fingerprint = desired[TaskId(connector, task)].fingerprint
    return executor_pb2.RunningTask(
        task=f"connectors/{connector}/tasks/{task}",
        generation=generation,
        fingerprint=fingerprint,
        state=state,
        trace=trace,
    )


def _welcome(member: Member) -> executor_pb2.Welcome:
    welcomes = of_kind(drain(member), "welcome")
    assert len(welcomes) == 1
    welcome: executor_pb2.Welcome = welcomes[0]
    return welcome


async def _heartbeats(coordinator: ExecutorCoordinator, member: Member) -> None:
    while True:
        await coordinator.handle(member, executor_pb2.ExecutorMessage(heartbeat=executor_pb2.Heartbeat()))
        await asyncio.sleep(0.05)


async def _goodbye(coordinator: ExecutorCoordinator, member: Member) -> None:
    await coordinator.handle(member, executor_pb2.ExecutorMessage(goodbye=executor_pb2.Goodbye()))


@pytest.mark.parametrize(
    ("reported", "recorded"),
    [(common_pb2.STATE_FAILED, State.FAILED), (common_pb2.STATE_RESTARTING, State.RESTARTING)],
)
def test_an_executor_keeps_the_tasks_it_runs_and_their_statuses_are_recorded(
    reported: common_pb2.State.ValueType, recorded: State
) -> None:
    async def scenario() -> None:
        store = status_store()
        snapshot = Snapshot()
        coordinator = make_coordinator(store, snapshot)
        coordinator.start()
        hello = executor_pb2.Hello(
            executor_id="e1",
            running_tasks=[
                _running_task(snapshot, 0),
                _running_task(snapshot, 1, state=reported, trace="ValueError: bad row"),
            ],
        )
        member = await coordinator.attach(hello)
        await asyncio.sleep(0.2)
        messages = drain(member)
        assert list(of_kind(messages, "welcome")[0].adopted_tasks) == [
            "connectors/c/tasks/0",
            "connectors/c/tasks/1",
        ]
        assert not assigned(messages), "adopted tasks with the desired fingerprint are not assigned again"
        assert {t: o.generation for t, o in member.owned.items()} == {
            TaskId("c", 0): GENERATION,
            TaskId("c", 1): GENERATION,
        }
        await until(lambda: len(store.tasks("c")) == TASKS, "the adopted statuses")
        first, second = store.tasks("c")
        assert (first.state, first.worker_id, first.generation) == (State.RUNNING, "e1", GENERATION)
        assert (second.state, second.trace, second.generation) == (
            recorded,
            "ValueError: bad row",
            GENERATION,
        )
        assert second.recent_errors and second.recent_errors[0].message == "ValueError: bad row"
        await coordinator.stop()
        store.stop()

    asyncio.run(scenario())


def test_no_status_is_written_when_the_status_topic_already_says_the_same() -> None:
    async def scenario() -> None:
        store = status_store()
        snapshot = Snapshot()
        for task in range(TASKS):
            store.put_task(TaskStatusRecord("c", task, State.RUNNING, None, "e1", GENERATION), 5)
        written = len(store.writes)
        coordinator = make_coordinator(store, snapshot)
        coordinator.start()
        hello = executor_pb2.Hello(
            executor_id="e1", running_tasks=[_running_task(snapshot, n) for n in range(TASKS)]
        )
        member = await coordinator.attach(hello)
        assert len(_welcome(member).adopted_tasks) == TASKS
        await asyncio.sleep(0.2)
        assert len(store.writes) == written
        await coordinator.stop()
        store.stop()

    asyncio.run(scenario())


def test_a_changed_task_is_kept_and_restarted_in_place_under_a_new_generation() -> None:
    async def scenario() -> None:
        store = status_store()
        snapshot = Snapshot()
        coordinator = make_coordinator(store, snapshot)
        coordinator.start()
        hello = executor_pb2.Hello(
            executor_id="e1",
            running_tasks=[_running_task(snapshot, 0, fingerprint="old"), _running_task(snapshot, 1)],
        )
        member = await coordinator.attach(hello)
        await until(lambda: member.owned[TaskId("c", 0)].generation != GENERATION, "the restart")
        messages = drain(member)
        assert len(of_kind(messages, "welcome")[0].adopted_tasks) == TASKS
        assert [item.task for item in assigned(messages)] == ["connectors/c/tasks/0"]
        assert member.owned[TaskId("c", 1)].generation == GENERATION
        await coordinator.stop()
        store.stop()

    asyncio.run(scenario())


def test_tasks_held_elsewhere_not_desired_malformed_or_released_since_are_refused() -> None:
    async def scenario() -> None:
        store = status_store()
        snapshot = Snapshot()
        snapshot.configs["d"] = {"connector.class": "DataGenSource", "topic": "t"}
        snapshot.task_counts["d"] = 1
        # The status topic says d/0 was recorded under a later generation than the one reported.
        store.put_task(TaskStatusRecord("d", 0, State.UNASSIGNED, None, "e0", GENERATION + 5), 5)
        coordinator = make_coordinator(store, snapshot)
        coordinator.start()
        holder = await coordinator.attach(executor_pb2.Hello(executor_id="e1", max_tasks=TASKS))
        await until(lambda: set(holder.owned) == {TaskId("c", 0), TaskId("c", 1)}, "c's tasks on e1")
        c_task = TaskId("c", 0)
        hello = executor_pb2.Hello(
            executor_id="e2",
            running_tasks=[
                _running_task(snapshot, c_task.task),  # held by e1
                _running_task(snapshot, 0, connector="d"),  # older than the status topic's record
                executor_pb2.RunningTask(  # no such connector
                    task="connectors/gone/tasks/0", generation=GENERATION, state=common_pb2.STATE_RUNNING
                ),
                executor_pb2.RunningTask(  # no such task
                    task="connectors/c/tasks/9", generation=GENERATION, state=common_pb2.STATE_RUNNING
                ),
                executor_pb2.RunningTask(  # not a task name
                    task="connectors/c", generation=GENERATION, state=common_pb2.STATE_RUNNING
                ),
                executor_pb2.RunningTask(  # no generation
                    task="connectors/c/tasks/1", generation=0, state=common_pb2.STATE_RUNNING
                ),
            ],
        )
        member = await coordinator.attach(hello)
        assert list(_welcome(member).adopted_tasks) == []
        assert c_task in holder.owned
        await asyncio.sleep(0.1)
        record = store.get_task("d", 0)
        assert record is not None and record.generation == GENERATION + 5  # nothing written for it
        await coordinator.stop()
        store.stop()

    asyncio.run(scenario())


def test_a_disconnected_executor_keeps_its_tasks_and_continues_when_it_attaches_again() -> None:
    async def scenario() -> None:
        store = status_store()
        coordinator = make_coordinator(store)
        coordinator.start()
        first = await attached(coordinator, "e1")
        await report_running(coordinator, first)
        generations = {t: o.generation for t, o in first.owned.items()}
        written = len(store.writes)
        coordinator.disconnect(first, "stream closed")
        assert first.closed and not first.connected and coordinator.members["e1"] is first
        # Another executor gets none of its tasks meanwhile, and the disconnected one is sent nothing.
        other = await coordinator.attach(executor_pb2.Hello(executor_id="e2"))
        coordinator.request_rebalance()
        await asyncio.sleep(0.3)
        assert not other.owned and not assigned(drain(other))
        assert coordinator.running_tasks("c") == sorted(generations)
        again = await coordinator.attach(executor_pb2.Hello(executor_id="e1", running_tasks=running(first)))
        await asyncio.sleep(0.2)
        messages = drain(again)
        assert len(of_kind(messages, "welcome")[0].adopted_tasks) == TASKS
        # The balance may move one task to e2 by revocation; nothing is assigned to e1 again.
        assert not assigned(messages)
        assert {t: again.owned[t].generation for t in generations} == generations
        assert coordinator.members["e1"] is again and not first.owned
        assert len(store.writes) == written and states(store) == [State.RUNNING] * TASKS
        await coordinator.stop()
        store.stop()

    asyncio.run(scenario())


def test_a_second_session_replaces_the_first_and_takes_its_tasks_over() -> None:
    async def scenario() -> None:
        store = status_store()
        coordinator = make_coordinator(store)
        coordinator.start()
        first = await attached(coordinator, "e1")
        generations = {t: o.generation for t, o in first.owned.items()}
        drain(first)
        # The executor runs only task 0 now (task 1 stopped); it attaches while the first stream
        # is still open.
        kept = running(first)[:1]
        second = await coordinator.attach(executor_pb2.Hello(executor_id="e1", running_tasks=kept))
        assert drain(first) == [None]
        # The first session's late messages change nothing.
        await coordinator.handle(first, executor_pb2.ExecutorMessage(goodbye=executor_pb2.Goodbye()))
        assert coordinator.members["e1"] is second
        assert list(_welcome(second).adopted_tasks) == ["connectors/c/tasks/0"]
        await until(lambda: len(second.owned) == TASKS, "task 1 to be assigned again")
        assert second.owned[TaskId("c", 0)].generation == generations[TaskId("c", 0)]
        assert second.owned[TaskId("c", 1)].generation > generations[TaskId("c", 1)]
        await coordinator.stop()
        store.stop()

    asyncio.run(scenario())


def test_a_restart_asked_while_disconnected_happens_once_the_executor_is_back() -> None:
    async def scenario() -> None:
        store = status_store()
        coordinator = make_coordinator(store)
        coordinator.start()
        first = await attached(coordinator, "e1")
        generations = {t: o.generation for t, o in first.owned.items()}
        coordinator.disconnect(first, "stream closed")
        coordinator.restart_tasks("c", [1])
        again = await coordinator.attach(executor_pb2.Hello(executor_id="e1", running_tasks=running(first)))
        await until(lambda: again.owned[TaskId("c", 1)].generation > generations[TaskId("c", 1)], "restart")
        assert [item.task for item in assigned(drain(again))] == ["connectors/c/tasks/1"]
        assert again.owned[TaskId("c", 0)].generation == generations[TaskId("c", 0)]
        await coordinator.stop()
        store.stop()

    asyncio.run(scenario())


def test_an_executor_that_does_not_come_back_is_released_and_its_tasks_fenced_first() -> None:
    async def scenario() -> None:
        store = status_store()
        fencer = FakeFencer()
        coordinator = make_coordinator(store, fencer=fencer, session_timeout=0.3)
        coordinator.start()
        first = await attached(coordinator, "e1")
        # e1's stream ends and it never attaches again; e2 attaches meanwhile.
        fencer.gate.clear()
        owned = set(first.owned)
        hello_again = executor_pb2.Hello(executor_id="e1", running_tasks=running(first))
        coordinator.disconnect(first, "stream closed")
        other = await coordinator.attach(executor_pb2.Hello(executor_id="e2"))
        beating = asyncio.create_task(_heartbeats(coordinator, other))
        await until(lambda: "e1" not in coordinator.members, "e1 to be released")
        await until(lambda: states(store) == [State.UNASSIGNED] * TASKS, "the UNASSIGNED statuses")
        await asyncio.sleep(0.1)
        assert not owned & set(other.owned), "a task ran elsewhere before it was fenced"
        fencer.gate.set()
        await until(lambda: owned <= set(other.owned), "the released tasks to move")
        assert fencer.calls == [("c", sorted(t.task for t in owned), True)]
        # A late attach under the same id does not get them back: they were released.
        late = await coordinator.attach(hello_again)
        assert len(hello_again.running_tasks) == TASKS and list(_welcome(late).adopted_tasks) == []
        beating.cancel()
        await coordinator.stop()
        store.stop()

    asyncio.run(scenario())


def test_a_silent_connected_executor_is_fenced_released_and_its_tasks_fenced() -> None:
    async def scenario() -> None:
        store = status_store()
        fencer = FakeFencer()
        fencer.failures = 1  # the first attempt fails and is retried
        coordinator = make_coordinator(store, fencer=fencer, session_timeout=0.3)
        coordinator.start()
        member = await attached(coordinator, "e1")
        hello_again = executor_pb2.Hello(executor_id="e1", running_tasks=running(member))
        drain(member)
        await until(lambda: "e1" not in coordinator.members, "e1 to be declared dead")
        messages = drain(member)
        assert of_kind(messages, "fenced") and messages[-1] is None
        await until(lambda: fencer.calls == [("c", [0, 1], True)], "the fencing, after a retry")
        assert states(store) == [State.UNASSIGNED] * TASKS
        await until(lambda: not coordinator.running_tasks("c"), "the tasks to be free")
        # It attaches again reporting the tasks it ran: they were released since, so it keeps none,
        # and gets them assigned afresh under new generations.
        again = await coordinator.attach(hello_again)
        assert list(_welcome(again).adopted_tasks) == []
        await until(lambda: len(again.owned) == TASKS, "a fresh assignment")
        old = {TaskId.parse(t.task): t.generation for t in hello_again.running_tasks}
        assert all(again.owned[t].generation > old[t] for t in old)
        await coordinator.stop()
        store.stop()

    asyncio.run(scenario())


def test_goodbye_releases_at_once_without_fencing() -> None:
    async def scenario() -> None:
        store = status_store()
        fencer = FakeFencer()
        coordinator = make_coordinator(store, fencer=fencer)
        coordinator.start()
        leaving = await attached(coordinator, "e1")
        staying = await coordinator.attach(executor_pb2.Hello(executor_id="e2"))
        await report_running(coordinator, leaving)
        released = set(leaving.owned)
        await _goodbye(coordinator, leaving)
        assert "e1" not in coordinator.members and drain(leaving)[-1] is None
        await until(lambda: released <= set(staying.owned), "its tasks to move")
        assert fencer.calls == []
        assert {r.task: r.state for r in store.tasks("c")} == {
            **{t.task: State.RUNNING for t in staying.owned},
            **{t.task: State.UNASSIGNED for t in released},
        }
        # The stream's end that follows changes nothing.
        coordinator.disconnect(leaving, "stream ended")
        assert "e1" not in coordinator.members
        await coordinator.stop()
        store.stop()

    asyncio.run(scenario())
