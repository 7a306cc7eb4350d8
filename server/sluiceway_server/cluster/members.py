"""The coordinator's bookkeeping of executors: what a member is and owns, what a desired task is,
which of the tasks an attaching executor already runs it may keep (adoption), and the messages and
reports that concern one member."""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
from collections.abc import Callable, Container, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from google.protobuf import duration_pb2, timestamp_pb2

from sluiceway.api.v1 import common_pb2, executor_pb2
from sluiceway.common.generations import generation_label
from sluiceway_server.model import State, TargetState, TaskId
from sluiceway_server.status_writer import StatusWriter
from sluiceway_server.storage import StatusStore, TaskStatusRecord

log = logging.getLogger(__name__)

STATES = {
    common_pb2.STATE_UNASSIGNED: State.UNASSIGNED,
    common_pb2.STATE_RUNNING: State.RUNNING,
    common_pb2.STATE_PAUSED: State.PAUSED,
    common_pb2.STATE_STOPPED: State.STOPPED,
    common_pb2.STATE_FAILED: State.FAILED,
    common_pb2.STATE_RESTARTING: State.RESTARTING,
}
# The states a running task can be reported in when its executor attaches.
ADOPTABLE_STATES = (State.RUNNING, State.PAUSED, State.RESTARTING, State.FAILED)
# The longest idle note of a task status kept (an executor's notes are a few words).
DETAIL_MAX_CHARS = 200
# Task states that say an executor holds the task and may commit its offsets (RESTARTING: it waits
# to run again, for an automatic restart or for Spark Connect or Kafka).
LIVE_STATES = (State.RUNNING, State.PAUSED, State.RESTARTING)


@dataclass
class OwnedTask:
    generation: int
    fingerprint: str


@dataclass
class Member:
    """One executor, from its attach until it is released or replaced by a new session.

    `connected` is false once its stream ended: it keeps its tasks (it runs them still) until it
    attaches again or the session timeout passes, is sent nothing and gets no new tasks."""

    id: str
    host: str
    spark_remote: str
    version: str
    max_tasks: int
    # Its Prometheus endpoint, as its Hello said (empty: none).
    metrics_url: str
    attach_time: float
    last_heartbeat: float
    outbox: asyncio.Queue[executor_pb2.ControllerMessage | None]
    owned: dict[TaskId, OwnedTask] = field(default_factory=dict)
    revoking: set[TaskId] = field(default_factory=set)
    closed: bool = False
    connected: bool = True
    disconnected_at: float | None = None
    # Restarts asked for while it was disconnected; carried out once it attaches again.
    restarts: set[TaskId] = field(default_factory=set)
    # Its tasks' progress from its last heartbeat, with the generation each was measured under.
    progress: dict[TaskId, tuple[int, common_pb2.TaskProgress]] = field(default_factory=dict)
    # The status writes of the tasks it adopted on attach; its status reports wait for them.
    status_writes: asyncio.Task[None] | None = None
    # Who attached it (api/auth.py); "" while authentication is off.
    principal: str = ""

    @property
    def last_seen(self) -> float:
        """When it last gave a sign of life: its last message, or the end of its stream if later."""
        return max(self.last_heartbeat, self.disconnected_at or 0.0)

    def send(self, message: executor_pb2.ControllerMessage) -> None:
        if not self.closed:
            self.outbox.put_nowait(message)

    def close(self) -> None:
        """End its stream: the outbox's None makes the servicer finish the call."""
        if not self.closed:
            self.closed = True
            self.outbox.put_nowait(None)

    def record_progress(self, reports: Iterable[executor_pb2.TaskProgressReport]) -> None:
        """A heartbeat's progress reports replace the earlier ones (a task missing there has none)."""
        progress = {}
        for report in reports:
            try:
                progress[TaskId.parse(report.task)] = (report.generation, report.progress)
            except ValueError:
                continue
        self.progress = progress

    def revocation_acknowledged(self, names: Iterable[str]) -> None:
        """The executor stopped these tasks after their revocation: they are no longer its. A name
        that does not parse or was not being revoked here changes nothing."""
        for name in names:
            try:
                task = TaskId.parse(name)
            except ValueError:
                continue
            if task in self.revoking:
                self.revoking.discard(task)
                self.owned.pop(task, None)
                self.restarts.discard(task)


@dataclass(frozen=True)
class DesiredTask:
    task: TaskId
    connector_config: Mapping[str, str]
    task_config: Mapping[str, str]
    target: TargetState
    task_count: int

    @cached_property
    def fingerprint(self) -> str:
        blob = json.dumps(
            [dict(self.connector_config), dict(self.task_config), self.target.value, self.task_count],
            sort_keys=True,
        )
        return hashlib.sha256(blob.encode()).hexdigest()


def placeable(
    snap: Any, connector: str
) -> tuple[Mapping[str, str], Sequence[Mapping[str, str]], TargetState] | None:
    """A connector's config, task configs and target state when its tasks should run (it is STARTED
    or PAUSED and its task set is consistent); None otherwise."""
    config = snap.connector_config(connector)
    target = snap.target_state(connector)
    if config is None or target not in (TargetState.STARTED, TargetState.PAUSED):
        return None
    if connector in snap.inconsistent:
        return None
    return config, snap.tasks(connector), target


def connector_desired_tasks(
    connector: str,
    config: Mapping[str, str],
    tasks: Sequence[Mapping[str, str]],
    target: TargetState,
) -> dict[TaskId, DesiredTask]:
    """One placeable connector's tasks, by task."""
    return {
        TaskId(connector, index): DesiredTask(
            TaskId(connector, index), config, task_config, target, len(tasks)
        )
        for index, task_config in enumerate(tasks)
    }


def desired_tasks(snap: Any) -> dict[TaskId, DesiredTask]:
    """The tasks that should run, from a config snapshot: those of every ``placeable`` connector
    (the coordinator keeps them per connector instead: cluster/wanted.py)."""
    wanted: dict[TaskId, DesiredTask] = {}
    for connector in snap.connectors():
        found = placeable(snap, connector)
        if found is not None:
            wanted.update(connector_desired_tasks(connector, *found))
    return wanted


def send_assignment(member: Member, batch: Sequence[executor_pb2.TaskAssignment]) -> None:
    """Sends these assignments to the member in one message, and logs each as `TASK@EPOCH.COUNT`."""
    log.info("assigning %s to %s", [f"{t.task}@{generation_label(t.generation)}" for t in batch], member.id)
    member.send(executor_pb2.ControllerMessage(assignment=executor_pb2.Assignment(tasks=batch)))


def welcome(
    executor_id: str,
    heartbeat_interval: float,
    session_timeout: float,
    worker_config: Mapping[str, str],
    adopted_tasks: Sequence[str],
) -> executor_pb2.ControllerMessage:
    interval = duration_pb2.Duration()
    interval.FromMilliseconds(int(heartbeat_interval * 1000))
    timeout = duration_pb2.Duration()
    timeout.FromMilliseconds(int(session_timeout * 1000))
    return executor_pb2.ControllerMessage(
        welcome=executor_pb2.Welcome(
            executor_id=executor_id,
            heartbeat_interval=interval,
            session_timeout=timeout,
            worker_config=worker_config,
            adopted_tasks=adopted_tasks,
        )
    )


async def record_status_report(
    status: StatusWriter, member: Member, report: executor_pb2.TaskStatusReport, snapshot: Callable[[], Any]
) -> None:
    """Writes the status an executor reported for a task it holds under the report's generation,
    once the statuses written when it attached are (a failure there was logged). A report of
    another task or generation is dropped (``current_task``), and so is one whose connector the
    config ``snapshot`` no longer has: a deleted connector's statuses are gone, and a late report
    must not bring one back."""
    if member.status_writes is not None:
        await asyncio.wait({member.status_writes})
    task = current_task(member, report.task, report.generation)
    if task is None:
        return
    if snapshot().connector_config(task.connector) is None:
        log.info("dropping the status report of %s: its connector was deleted", report.task)
        return
    due = report.next_restart_time.ToMilliseconds() if report.HasField("next_restart_time") else 0
    state = STATES.get(report.state, State.UNASSIGNED)
    detail, idle_since = _idleness(state, report.detail, report.idle_since)
    skipped, dead_lettered = _record_counts(state, report.records_skipped, report.records_dead_lettered)
    await status.put_task(
        task.connector,
        task.task,
        state,
        report.trace or None,
        member.id,
        report.generation,
        member.principal,
        restart_attempt=report.restart_attempt,
        next_restart_ms=due,
        detail=detail,
        idle_since_ms=idle_since,
        records_skipped=skipped,
        records_dead_lettered=dead_lettered,
    )


def _idleness(state: State, detail: str, since: timestamp_pb2.Timestamp) -> tuple[str, int]:
    """The idle note and its time (ms) an executor sent, kept only with RUNNING (the one state in
    which a task can be idle) and cut to DETAIL_MAX_CHARS."""
    if state is not State.RUNNING or not detail:
        return "", 0
    return detail[:DETAIL_MAX_CHARS], max(since.ToMilliseconds(), 0)


def _record_counts(state: State, skipped: int, dead_lettered: int) -> tuple[int, int]:
    """The records a task left out and dead-lettered, as its executor counted them: kept only with
    RUNNING (a task that stopped running starts counting afresh), never below 0."""
    if state is not State.RUNNING:
        return 0, 0
    return max(skipped, 0), max(dead_lettered, 0)


def current_task(member: Member, task_name: str, generation: int) -> TaskId | None:
    """The task a report is about, when the member holds it under that generation; else None (a
    stale or unknown report, logged)."""
    try:
        task = TaskId.parse(task_name)
    except ValueError:
        return None
    owned = member.owned.get(task)
    if owned is None or owned.generation != generation:
        log.warning(
            "refusing report for %s generation %s from %s (current: %s)",
            task_name,
            generation_label(generation),
            member.id,
            generation_label(owned.generation) if owned else "not assigned here",
        )
        return None
    return task


@dataclass(frozen=True)
class Adopted:
    """A task an executor reported running when it attached, and keeps."""

    task: TaskId
    generation: int
    fingerprint: str
    state: State
    trace: str | None
    detail: str = ""
    idle_since_ms: int = 0
    records_skipped: int = 0
    records_dead_lettered: int = 0


def choose_adopted(
    executor_id: str,
    running: Sequence[executor_pb2.RunningTask],
    *,
    desired: Container[TaskId],
    taken: Container[TaskId],
    floor: Callable[[TaskId], int],
) -> list[Adopted]:
    """The reported tasks the executor keeps: well formed (a task name, a positive generation, a
    state of RUNNING, PAUSED, RESTARTING or FAILED, listed once), desired, not `taken` (owned or being revoked
    by another member, or released and not yet placeable), and reported under a generation no
    lower than `floor(task)`, the latest generation the task was recorded or released under (a
    lower one means the task was released, or assigned elsewhere, since this executor got it).
    Every refusal is logged."""
    kept: dict[TaskId, Adopted] = {}
    for item in running:
        try:
            task = TaskId.parse(item.task)
        except ValueError:
            log.warning("executor %s reported a running task with a bad name %r", executor_id, item.task)
            continue
        state = STATES.get(item.state)
        reason = None
        if task in kept:
            reason = "listed twice"
        elif item.generation <= 0 or state not in ADOPTABLE_STATES:
            reason = f"malformed (generation {generation_label(item.generation)}, state {item.state})"
        elif task not in desired:
            reason = "not desired"
        elif task in taken:
            reason = "held elsewhere"
        elif item.generation < floor(task):
            older = generation_label(floor(task))
            reason = f"generation {generation_label(item.generation)} is older than {older}"
        if reason is not None:
            log.info("executor %s does not keep %s: %s", executor_id, item.task, reason)
            continue
        assert state is not None
        # A task waiting for its automatic restart keeps the trace of the failure it waits after.
        trace = (item.trace or None) if state in (State.FAILED, State.RESTARTING) else None
        detail, idle_since = _idleness(state, item.detail, item.idle_since)
        skipped, dead_lettered = _record_counts(state, item.records_skipped, item.records_dead_lettered)
        kept[task] = Adopted(
            task, item.generation, item.fingerprint, state, trace, detail, idle_since, skipped, dead_lettered
        )
    return list(kept.values())


async def write_adopted(
    status: StatusWriter,
    member: Member,
    updates: Sequence[Adopted],
    desired: Callable[[], Container[TaskId]],
) -> None:
    """Records the statuses of tasks the member kept as it attached, as it reported them, except
    for a task no longer `desired` (its connector was stopped or deleted since)."""
    for a in updates:
        if a.task in desired():
            await status.put_task(
                a.task.connector,
                a.task.task,
                a.state,
                a.trace,
                member.id,
                a.generation,
                member.principal,
                detail=a.detail,
                idle_since_ms=a.idle_since_ms,
                records_skipped=a.records_skipped,
                records_dead_lettered=a.records_dead_lettered,
            )


def status_differs(record: TaskStatusRecord | None, adopted: Adopted, member: Member) -> bool:
    """Whether the status topic says something other than the executor about an adopted task."""
    return record is None or (
        record.state,
        record.generation,
        record.worker_id,
        record.worker_principal,
        record.detail,
        record.records_skipped,
        record.records_dead_lettered,
    ) != (
        adopted.state,
        adopted.generation,
        member.id,
        member.principal,
        adopted.detail,
        adopted.records_skipped,
        adopted.records_dead_lettered,
    )


def executors_with_live_tasks(store: StatusStore) -> dict[str, str]:
    """The executors the status topic shows running a task (RUNNING or PAUSED), each with the
    principal it attached as ("" when its records name none): at the start of a term, those a new
    coordinator waits for before it places tasks, keeping each one's id for its principal."""
    holders: dict[str, str] = {}
    for connector in store.connectors():
        for record in store.tasks(connector):
            if record.state in LIVE_STATES and record.worker_id:
                holders[record.worker_id] = holders.get(record.worker_id) or record.worker_principal
    return holders


def task_progress(members: Iterable[Member], connector: str) -> dict[str, common_pb2.TaskProgress]:
    """The progress of the connector's tasks by task name, each from the member that holds the task
    under the generation it measured it in (a report from before a move or restart is not used)."""
    found = {}
    for member in members:
        for task, (generation, progress) in member.progress.items():
            owned = member.owned.get(task)
            if task.connector == connector and owned is not None and owned.generation == generation:
                found[task.name] = progress
    return found
