"""The leader's side of the executor protocol: membership, heartbeats, assignments with
generations, revocations, and applying what executors report (statuses, offset commits,
active topics) to Kafka — only from the generation a task is currently assigned under."""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import time
from collections.abc import Callable, Coroutine, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, Final

from google.protobuf import duration_pb2

from sluiceway.api.v1 import common_pb2, executor_pb2
from sluiceway.limits import ASSIGNMENT_MESSAGE_BYTES, EXECUTOR_MAX_RECEIVE_BYTES
from sluiceway.offsets import map_to_proto, offsets_from_proto
from sluiceway_server.cluster.assignor import Plan, TaskId, plan
from sluiceway_server.herder.active_topics import ActiveTopicTracker
from sluiceway_server.herder.errors import UnavailableError
from sluiceway_server.model import ConnectorType, State, TargetState
from sluiceway_server.status_writer import StatusWriter
from sluiceway_server.storage.connector_offsets import CommitRejectedError, ConnectorOffsetStorage

log = logging.getLogger(__name__)

# What wraps an Assignment into a ControllerMessage (field tag and length), kept free in the bound.
_ENVELOPE_BYTES: Final = 16
# Kept free below the executor's receive limit for gRPC's own framing.
_FRAMING_MARGIN_BYTES: Final = 64 * 1024

_STATES = {
    common_pb2.STATE_UNASSIGNED: State.UNASSIGNED,
    common_pb2.STATE_RUNNING: State.RUNNING,
    common_pb2.STATE_PAUSED: State.PAUSED,
    common_pb2.STATE_STOPPED: State.STOPPED,
    common_pb2.STATE_FAILED: State.FAILED,
    common_pb2.STATE_RESTARTING: State.RESTARTING,
}
_TARGETS = {
    TargetState.STARTED: common_pb2.TARGET_STATE_RUNNING,
    TargetState.PAUSED: common_pb2.TARGET_STATE_PAUSED,
    TargetState.STOPPED: common_pb2.TARGET_STATE_STOPPED,
}


@dataclass
class OwnedTask:
    generation: int
    fingerprint: str


@dataclass
class Member:
    id: str
    host: str
    spark_remote: str
    version: str
    max_tasks: int
    attach_time: float
    last_heartbeat: float
    outbox: asyncio.Queue[executor_pb2.ControllerMessage | None]
    owned: dict[TaskId, OwnedTask] = field(default_factory=dict)
    revoking: set[TaskId] = field(default_factory=set)
    closed: bool = False

    def send(self, message: executor_pb2.ControllerMessage) -> None:
        if not self.closed:
            self.outbox.put_nowait(message)


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


class ExecutorCoordinator:
    """The leader's end of every executor's attach stream.

    It owns the attached executors (members), their heartbeats and expiry, and which task each one
    runs under which generation; it plans assignments (balanced, sticky, revoke before reassign)
    and applies what executors report — statuses through the StatusWriter, offset commits through
    the ConnectorOffsetStorage, active topics — only when the report's generation is the one the task is
    assigned under. It runs on the control plane's event loop; rebalances are coalesced and
    serialised by one lock; Kafka calls happen in worker threads. On stop() it detaches every
    executor, records their tasks as UNASSIGNED and waits for those writes.
    """

    def __init__(
        self,
        *,
        snapshot: Callable[[], Any],
        connector_type: Callable[[Mapping[str, str]], ConnectorType],
        status: StatusWriter,
        offsets: ConnectorOffsetStorage,
        worker_config: Mapping[str, str],
        heartbeat_interval: float,
        session_timeout: float,
        topics: ActiveTopicTracker,
    ) -> None:
        self._snapshot = snapshot
        self._connector_type = connector_type
        self.status = status
        self.offsets = offsets
        offsets.on_opened = self.request_rebalance
        self.worker_config = dict(worker_config)
        self.heartbeat_interval = heartbeat_interval
        self.session_timeout = session_timeout
        self.topics = topics
        topics.on_reset = self.reset_reported_topics
        self.members: dict[str, Member] = {}
        # Generations are unique across leader terms: the term in the high bits.
        self._generation = status.term << 32
        self._lock = asyncio.Lock()
        self._rebalance_task: asyncio.Task[None] | None = None
        self._rebalance_again = False
        self._expiry_task: asyncio.Task[None] | None = None
        self._stopping = False
        # Status writes in the background (released tasks, tasks too large to send); stop() waits
        # for them so none outlives the stores.
        self._releases: set[asyncio.Task[None]] = set()
        # Assignments are packed into messages of about this size; one task whose message would
        # exceed the second bound is never sent (attributes, so tests can use small bounds).
        self.assignment_message_bytes = ASSIGNMENT_MESSAGE_BYTES
        self.max_assignment_bytes = EXECUTOR_MAX_RECEIVE_BYTES - _FRAMING_MARGIN_BYTES
        # Tasks too large to send, by the fingerprint they were refused with: not tried again
        # until their config, target state or task count changes (or they are restarted).
        self._oversize: dict[TaskId, str] = {}
        # Set (and replaced) whenever an executor gives up tasks; see wait_until_released.
        self._tasks_released = asyncio.Event()

    # ------------------------------------------------------------------ life cycle

    def start(self) -> None:
        self._expiry_task = asyncio.get_running_loop().create_task(
            self._expire_loop(), name="executor-expiry"
        )

    async def stop(self) -> None:
        """Detach every executor, recording its tasks as UNASSIGNED, and return only once every
        status write has finished, so the stores can be stopped right after."""
        self._stopping = True
        loops = [task for task in (self._expiry_task, self._rebalance_task) if task is not None]
        for task in loops:
            task.cancel()
        await asyncio.gather(*loops, return_exceptions=True)
        for member in list(self.members.values()):
            await self.detach(member, "the control plane is shutting down")
        await asyncio.gather(*self._releases, return_exceptions=True)  # _release_done logs failures

    def executors(self) -> list[Member]:
        return sorted(self.members.values(), key=lambda m: m.id)

    def running_tasks(self, connector: str) -> list[TaskId]:
        """The connector's tasks that some executor still holds (running, or revoked and not yet
        acknowledged): until this is empty, they may still commit offsets."""
        return sorted(
            (t for m in self.members.values() for t in m.owned if t.connector == connector),
            key=lambda t: t.task,
        )

    async def wait_until_released(self, connector: str) -> None:
        """Return once no executor holds a task of the connector (the caller bounds the wait)."""
        self.request_rebalance()
        while self.running_tasks(connector):
            await self._tasks_released.wait()

    def _released(self) -> None:
        self._tasks_released.set()
        self._tasks_released = asyncio.Event()

    def _next_generation(self) -> int:
        self._generation += 1
        return self._generation

    # ------------------------------------------------------------------ membership

    async def attach(self, hello: executor_pb2.Hello) -> Member:
        if self._stopping:
            raise UnavailableError(
                "This control plane is shutting down; attach again to a running one",
                reason="NOT_LEADER",
            )
        now = time.monotonic()
        previous = self.members.get(hello.executor_id)
        if previous is not None:
            # The same id attaching again replaces the old session; its tasks are released first.
            await self.detach(previous, "replaced by a new session with the same id")
        member = Member(
            id=hello.executor_id,
            host=hello.host,
            spark_remote=hello.spark_remote,
            version=hello.version,
            max_tasks=max(hello.max_tasks, 0),
            attach_time=time.time(),
            last_heartbeat=now,
            outbox=asyncio.Queue(),
        )
        self.members[member.id] = member
        interval = duration_pb2.Duration()
        interval.FromMilliseconds(int(self.heartbeat_interval * 1000))
        timeout = duration_pb2.Duration()
        timeout.FromMilliseconds(int(self.session_timeout * 1000))
        member.send(
            executor_pb2.ControllerMessage(
                welcome=executor_pb2.Welcome(
                    executor_id=member.id,
                    heartbeat_interval=interval,
                    session_timeout=timeout,
                    worker_config=self.worker_config,
                )
            )
        )
        log.info("executor %s attached from %s (spark %s)", member.id, member.host, member.spark_remote)
        self.request_rebalance()
        return member

    def _close(self, member: Member) -> None:
        if not member.closed:
            member.closed = True
            member.outbox.put_nowait(None)

    async def detach(self, member: Member, reason: str) -> None:
        if self.members.get(member.id) is not member:
            self._close(member)
            return
        del self.members[member.id]
        self._close(member)
        released = list(member.owned)
        member.owned.clear()
        member.revoking.clear()
        self._released()
        log.warning("executor %s detached: %s; releasing %d task(s)", member.id, reason, len(released))

        async def release() -> None:
            try:
                # Its tasks run nowhere now: say so before anyone else is assigned them.
                for task in released:
                    await self._put_task_status(
                        task, State.UNASSIGNED, None, member.id, self._next_generation()
                    )
            finally:
                self.request_rebalance()

        # The stream's teardown may cancel the caller; the release must still complete.
        task = self._in_background(
            release(), f"release-{member.id}", "recording the released tasks as UNASSIGNED"
        )
        await asyncio.shield(task)

    def _in_background(self, work: Coroutine[Any, Any, None], name: str, what: str) -> asyncio.Task[None]:
        """Runs a status write as a task of its own that stop() waits for; a failure is logged."""
        task = asyncio.get_running_loop().create_task(work, name=name)
        self._releases.add(task)

        def done(finished: asyncio.Task[None]) -> None:
            self._releases.discard(finished)
            if not finished.cancelled() and finished.exception() is not None:
                log.warning("%s failed: %s", what, finished.exception())

        task.add_done_callback(done)
        return task

    async def _expire_loop(self) -> None:
        while not self._stopping:
            await asyncio.sleep(min(self.heartbeat_interval, 1.0))
            now = time.monotonic()
            for member in list(self.members.values()):
                if now - member.last_heartbeat > self.session_timeout:
                    member.send(
                        executor_pb2.ControllerMessage(
                            fenced=executor_pb2.Fenced(reason="no heartbeat within the session timeout")
                        )
                    )
                    await self.detach(member, f"no heartbeat for {self.session_timeout:.1f}s")

    # ------------------------------------------------------------------ assignment

    def request_rebalance(self) -> None:
        """Coalesced: one rebalance runs at a time and another follows if asked meanwhile."""
        if self._stopping:
            return
        if self._rebalance_task is not None and not self._rebalance_task.done():
            self._rebalance_again = True
            return
        self._rebalance_task = asyncio.get_running_loop().create_task(
            self._rebalance_loop(), name="rebalance"
        )

    async def _rebalance_loop(self) -> None:
        while True:
            self._rebalance_again = False
            try:
                await self._rebalance()
            except Exception:
                log.exception("rebalance failed; retrying")
                await asyncio.sleep(1.0)
                self._rebalance_again = True
            if not self._rebalance_again or self._stopping:
                return

    def desired(self) -> dict[TaskId, DesiredTask]:
        snap = self._snapshot()
        wanted: dict[TaskId, DesiredTask] = {}
        for connector in snap.connectors():
            target = snap.target_state(connector)
            config = snap.connector_config(connector)
            tasks = snap.tasks(connector)
            if config is None or target not in (TargetState.STARTED, TargetState.PAUSED):
                continue
            if connector in snap.inconsistent:
                continue
            for index, task_config in enumerate(tasks):
                task = TaskId(connector, index)
                wanted[task] = DesiredTask(task, config, task_config, target, len(tasks))
        return wanted

    def _ready(self) -> dict[TaskId, DesiredTask]:
        """The desired tasks whose assignment can be built now. A source task whose connector's own
        offsets topic is not open yet waits (its committed offsets are not known): the topic opens
        in the background, off the loop, and its opening asks for another rebalance."""
        wanted = self.desired()
        # A refused task is forgotten once it changed or is gone, and until then left out.
        self._oversize = {
            t: fp for t, fp in self._oversize.items() if t in wanted and wanted[t].fingerprint == fp
        }
        self.offsets.open_stores(d.connector_config for d in wanted.values() if self._is_source(d))
        return {
            t: d
            for t, d in wanted.items()
            if t not in self._oversize and (not self._is_source(d) or self.offsets.ready(d.connector_config))
        }

    def _is_source(self, desired: DesiredTask) -> bool:
        return self._connector_type(desired.connector_config) is ConnectorType.SOURCE

    async def _rebalance(self) -> None:
        async with self._lock:
            wanted = self._ready()
            owners = {t: m.id for m in self.members.values() for t in m.owned}
            revoking = {t for m in self.members.values() for t in m.revoking}
            # A changed config or target state restarts the task where it runs (new generation).
            for member in self.members.values():
                changed = [
                    wanted[t]
                    for t, owned in member.owned.items()
                    if t in wanted and t not in member.revoking and owned.fingerprint != wanted[t].fingerprint
                ]
                if changed:
                    self._assign(member, changed)
            step: Plan = plan(
                set(wanted), owners, revoking, {m.id: m.max_tasks for m in self.members.values()}
            )
            for executor_id, tasks in step.revoke.items():
                member = self.members[executor_id]
                member.revoking.update(tasks)
                member.send(
                    executor_pb2.ControllerMessage(
                        revocation=executor_pb2.Revocation(tasks=[t.name for t in tasks])
                    )
                )
                log.info("revoking %s from %s", [t.name for t in tasks], executor_id)
            for executor_id, tasks in step.assign.items():
                self._assign(self.members[executor_id], [wanted[t] for t in tasks])

    def _assign(self, member: Member, tasks: Sequence[DesiredTask]) -> None:
        """Sends the tasks in as many Assignment messages as it takes to keep each within
        assignment_message_bytes; a larger task goes alone, one too large for the executor not at all."""
        bound = self.assignment_message_bytes - _ENVELOPE_BYTES
        batch: list[executor_pb2.TaskAssignment] = []
        size = 0
        for desired in tasks:
            generation = self._next_generation()
            item = self._task_assignment(desired, generation)
            # Its share of the Assignment: the field's tag, its length as a varint, the task itself.
            length = item.ByteSize()
            cost = 1 + _varint_bytes(length) + length
            if cost > self.max_assignment_bytes - _ENVELOPE_BYTES:
                self._refuse(desired, generation, cost + _ENVELOPE_BYTES)
                continue
            if batch and size + cost > bound:
                self._send_assignment(member, batch)
                batch, size = [], 0
            member.owned[desired.task] = OwnedTask(generation, desired.fingerprint)
            batch.append(item)
            size += cost
        if batch:
            self._send_assignment(member, batch)

    def _task_assignment(self, desired: DesiredTask, generation: int) -> executor_pb2.TaskAssignment:
        assignment = executor_pb2.TaskAssignment(
            task=desired.task.name,
            generation=generation,
            connector_config=dict(desired.connector_config),
            task_config=dict(desired.task_config),
            target_state=_TARGETS[desired.target],
            task_count=desired.task_count,
        )
        if self._is_source(desired):
            for partition, offset in self.offsets.source_offsets(
                desired.task.connector, desired.connector_config
            ):
                assignment.source_offsets.add(partition=map_to_proto(partition), offset=map_to_proto(offset))
        return assignment

    def _send_assignment(self, member: Member, batch: list[executor_pb2.TaskAssignment]) -> None:
        log.info("assigning %s to %s", [f"{item.task}@{item.generation}" for item in batch], member.id)
        member.send(executor_pb2.ControllerMessage(assignment=executor_pb2.Assignment(tasks=batch)))

    def _refuse(self, desired: DesiredTask, generation: int, size: int) -> None:
        """A task whose assignment the executor would refuse is FAILED instead of sent, once per
        fingerprint, so it neither breaks the executor's stream nor holds up other tasks."""
        task = desired.task
        self._oversize[task] = desired.fingerprint
        trace = (
            f"The assignment of {task.name} is {size} bytes, more than the {self.max_assignment_bytes} "
            f"bytes an executor accepts (EXECUTOR_MAX_RECEIVE_BYTES, {EXECUTOR_MAX_RECEIVE_BYTES // 2**20} "
            "MiB, less room for gRPC framing), so it is not sent to any executor. Make the connector "
            "config or this task's config smaller; the task is tried again when the config changes "
            "or the task is restarted."
        )
        log.error(
            "not assigning %s: its assignment of %d bytes is too large for an executor", task.name, size
        )

        async def fail() -> None:
            if self._snapshot().connector_config(task.connector) is not None:
                await self._put_task_status(task, State.FAILED, trace, self.status.worker_id, generation)

        self._in_background(fail(), f"refuse-{task.name}", f"recording {task.name} as FAILED")
        # The next pass leaves it out: an executor running an earlier config of it gives it up, and
        # the place the planner meant for it goes to another task.
        self.request_rebalance()

    def restart_tasks(self, connector: str, tasks: Sequence[int]) -> None:
        """Restart these tasks where they run: a new generation makes their executor start them afresh.
        A task refused as too large is tried once more."""
        retried = [t for t in (TaskId(connector, n) for n in tasks) if self._oversize.pop(t, None)]
        if retried:
            self.request_rebalance()
        wanted = self._ready()
        for member in self.members.values():
            chosen = [
                wanted[task]
                for task in (TaskId(connector, n) for n in tasks)
                if task in member.owned and task in wanted and task not in member.revoking
            ]
            if chosen:
                self._assign(member, chosen)

    # ------------------------------------------------------------------ executor messages

    def _current(self, member: Member, task_name: str, generation: int) -> TaskId | None:
        try:
            task = TaskId.parse(task_name)
        except ValueError:
            return None
        owned = member.owned.get(task)
        if owned is None or owned.generation != generation:
            log.warning(
                "refusing report for %s generation %d from %s (current: %s)",
                task_name,
                generation,
                member.id,
                owned.generation if owned else "not assigned here",
            )
            return None
        return task

    async def handle(self, member: Member, message: executor_pb2.ExecutorMessage) -> None:
        kind = message.WhichOneof("kind")
        member.last_heartbeat = time.monotonic()
        if kind == "heartbeat":
            return
        if kind == "task_status":
            report = message.task_status
            task = self._current(member, report.task, report.generation)
            if task is not None and self._snapshot().connector_config(task.connector) is None:
                # A deleted connector's statuses are gone; a late report must not bring one back.
                log.info("dropping the status report of %s: its connector was deleted", report.task)
            elif task is not None:
                await self._put_task_status(
                    task,
                    _STATES.get(report.state, State.UNASSIGNED),
                    report.trace or None,
                    member.id,
                    report.generation,
                )
        elif kind == "offset_commit":
            commit = message.offset_commit
            result = executor_pb2.CommitResult(commit_id=commit.commit_id, ok=True)
            try:
                task = self._current(member, commit.task, commit.generation)
                if task is None:
                    raise CommitRejectedError(f"stale generation {commit.generation} for {commit.task}")
                await self._apply_commit(task, commit.offsets)
            except CommitRejectedError as exc:
                result.ok, result.error = False, str(exc)
            except Exception as exc:
                log.exception("applying the offset commit of %s failed", commit.task)
                result.ok, result.error = False, f"{type(exc).__name__}: {exc}"
            member.send(executor_pb2.ControllerMessage(commit_result=result))
        elif kind == "active_topics":
            topics_report = message.active_topics
            task = self._current(member, topics_report.task, topics_report.generation)
            if task is not None:
                await self.topics.record(task.connector, task.task, topics_report.topics)
        elif kind == "revocation_ack":
            for name in message.revocation_ack.tasks:
                try:
                    task = TaskId.parse(name)
                except ValueError:
                    continue
                if task in member.revoking:
                    member.revoking.discard(task)
                    member.owned.pop(task, None)
            self._released()
            self.request_rebalance()

    async def _put_task_status(
        self, task: TaskId, state: State, trace: str | None, worker_id: str, generation: int
    ) -> None:
        await self.status.put_task(task.connector, task.task, state, trace, worker_id, generation)

    async def _apply_commit(self, task: TaskId, offsets: Sequence[Any]) -> None:
        config = self._snapshot().connector_config(task.connector)
        if config is None:
            raise CommitRejectedError(f"connector {task.connector} no longer exists")
        pairs = offsets_from_proto(offsets)
        if not pairs:
            return
        if self._connector_type(config) is ConnectorType.SINK:
            await self.offsets.commit_sink(task.connector, config, pairs)
        else:
            await self.offsets.write_source(task.connector, config, pairs)

    def reset_reported_topics(self, connector: str) -> None:
        """The connector's active topics were reset: every executor forgets which topics the
        connector's tasks reported, so they report the ones they still use again (KIP-558)."""
        message = executor_pb2.ControllerMessage(
            active_topics_reset=executor_pb2.ActiveTopicsReset(connector=connector)
        )
        for member in list(self.members.values()):
            member.send(message)


def _varint_bytes(value: int) -> int:
    """The length of a non-negative protobuf varint."""
    return max(1, (value.bit_length() + 6) // 7)
