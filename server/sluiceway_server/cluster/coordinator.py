"""The leader's side of the executor protocol: membership, adoption of the tasks executors already
run, heartbeats and expiry, assignments with generations, revocations, fencing of released tasks,
and applying what executors report (statuses, active topics) to Kafka — only from the generation a
task is currently assigned under."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, Final

from sluiceway.api.v1 import common_pb2, executor_pb2
from sluiceway.common.limits import ASSIGNMENT_MESSAGE_BYTES, EXECUTOR_MAX_RECEIVE_BYTES
from sluiceway.common.offsets import map_to_proto
from sluiceway.common.retry import RetryPolicy
from sluiceway.common.secrets import looks_secret
from sluiceway.errors import Reason
from sluiceway_server.cluster.assignment_size import (
    ENVELOPE_BYTES,
    FRAMING_MARGIN_BYTES,
    entry_bytes,
    oversize_trace,
)
from sluiceway_server.cluster.assignor import Plan, plan
from sluiceway_server.cluster.members import (
    Adopted,
    DesiredTask,
    Member,
    OwnedTask,
    choose_adopted,
    current_task,
    record_status_report,
    send_assignment,
    status_differs,
    welcome,
    write_adopted,
)
from sluiceway_server.cluster.releases import BackgroundWrites, Releases
from sluiceway_server.cluster.wanted import WantedTasks
from sluiceway_server.errors import PermissionDeniedError, UnavailableError
from sluiceway_server.herder.active_topics import ActiveTopicTracker
from sluiceway_server.model import ConnectorType, State, TargetState, TaskId
from sluiceway_server.status_writer import StatusWriter
from sluiceway_server.storage.connector_offsets import ConnectorOffsetStorage
from sluiceway_server.storage.task_fencing import TaskFencer

__all__ = ["DesiredTask", "ExecutorCoordinator", "Member", "OwnedTask"]

log = logging.getLogger(__name__)

# The owner the planner sees for released tasks that may not be placed yet (their UNASSIGNED status
# or their fencing is still under way): no member has this id, so they are neither placed nor revoked.
_HELD: Final = ""
# A failed rebalance waits about a second each time (the same pause, so each wait is a fresh run).
_REBALANCE_RETRY: Final = RetryPolicy(initial=1.0, maximum=1.0)
_MAX_REBALANCE_PAUSE_S: Final = 1.0

_Handler = Callable[["ExecutorCoordinator", Member, executor_pb2.ExecutorMessage], Awaitable[None]]

_TARGETS = {
    TargetState.STARTED: common_pb2.TARGET_STATE_RUNNING,
    TargetState.PAUSED: common_pb2.TARGET_STATE_PAUSED,
    TargetState.STOPPED: common_pb2.TARGET_STATE_STOPPED,
}


class ExecutorCoordinator:
    """The leader's end of every executor's attach stream, for one leader term.

    It owns the members (executors), their heartbeats and expiry, and which task each one runs
    under which generation. An executor that attaches lists the tasks it runs already; it keeps
    those that are still wanted and held by no one else (adoption). A stream that ends without
    Goodbye leaves the member in place, disconnected, with its tasks, until it attaches again or
    `session_timeout` passes; then, or when a connected member stays silent that long, its tasks
    are released: recorded UNASSIGNED and fenced (their transactional ids taken over, so the
    executor can no longer commit for them) before the planner may place them elsewhere. Goodbye
    releases at once without fencing. The planner is balanced, sticky and revokes before it
    reassigns; until the `expected_executors` have attached or `grace` has passed since start(),
    it only restarts changed tasks in place and revokes unwanted ones. Reports (statuses, active
    topics) are applied only when their generation is the one the task is assigned under.

    It runs on the control plane's event loop; rebalances are coalesced and serialised by one lock;
    Kafka calls happen in worker threads. stop() closes every stream and leaves the executors'
    tasks running and their statuses as they are, for the next leader to adopt.
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
        fencer: TaskFencer | None = None,
        expected_executors: Mapping[str, str] | None = None,
        grace: float = 0.0,
        on_rebalance: Callable[[float], None] | None = None,
    ) -> None:
        self._on_rebalance = on_rebalance  # told the seconds of each rebalance that completed
        self._snapshot = snapshot
        self._connector_type = connector_type
        # Each connector's desired tasks and own offsets topic, kept while its config is unchanged.
        self._wanted_tasks = WantedTasks(connector_type, offsets)
        self.status = status
        self.offsets = offsets
        offsets.on_opened = self.request_rebalance
        # What Welcome sends: the worker's settings less every secret (executors take their own
        # credentials from their own config; see executor --config).
        self.worker_config = {k: v for k, v in worker_config.items() if not looks_secret(k)}
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
        # Status writes in the background (releases, adoptions, tasks too large to send); stop()
        # waits for them so none outlives the stores.
        self._writes = BackgroundWrites()
        # Released tasks on their way back to the planner (fencer None: they are not fenced).
        self.releases = Releases(
            status=status,
            snapshot=snapshot,
            connector_type=connector_type,
            fencer=fencer,
            background=self._writes.start,
            next_generation=self._next_generation,
            on_free=self._freed,
        )
        # Assignments are packed into messages of about this size; one task whose message would
        # exceed the second bound is never sent (attributes, so tests can use small bounds).
        self.assignment_message_bytes = ASSIGNMENT_MESSAGE_BYTES
        self.max_assignment_bytes = EXECUTOR_MAX_RECEIVE_BYTES - FRAMING_MARGIN_BYTES
        # Tasks too large to send, by the fingerprint they were refused with: not tried again
        # until their config, target state or task count changes (or they are restarted).
        self._oversize: dict[TaskId, str] = {}
        # Set (and replaced) whenever an executor gives up tasks; see wait_until_released.
        self._tasks_released = asyncio.Event()
        # The term-start grace: executors that ran tasks and have not attached yet (each with the
        # principal its id is kept for), and until when they are waited for (set again by start()).
        self.grace = grace
        self._awaiting = dict(expected_executors or {}) if grace > 0 else {}
        self._grace_until = time.monotonic() + grace
        self._grace_timer: asyncio.TimerHandle | None = None

    # ------------------------------------------------------------------ life cycle

    def start(self) -> None:
        loop = asyncio.get_running_loop()
        self._grace_until = time.monotonic() + self.grace
        if self._awaiting:
            log.info(
                "placing no tasks for up to %.1fs, until executors %s attach again",
                self.grace,
                sorted(self._awaiting),
            )
            self._grace_timer = loop.call_later(self.grace, self.request_rebalance)
        self._expiry_task = loop.create_task(self._expire_loop(), name="executor-expiry")

    async def stop(self) -> None:
        """Close every executor's stream without releasing its tasks or writing any status (the
        executors keep running them and attach to the next leader), stop fencing, and return once
        the status writes under way have finished, so the stores can be stopped right after."""
        self._stopping = True
        if self._grace_timer is not None:
            self._grace_timer.cancel()
        loops = [task for task in (self._expiry_task, self._rebalance_task) if task is not None]
        for task in loops:
            task.cancel()
        await asyncio.gather(*loops, return_exceptions=True)
        await self.releases.stop()
        for member in list(self.members.values()):
            member.close()
        self.members.clear()
        await self._writes.wait()

    def executors(self) -> list[Member]:
        """Every member, connected or not."""
        return sorted(self.members.values(), key=lambda m: m.id)

    def running_tasks(self, connector: str) -> list[TaskId]:
        """The connector's tasks that some executor may still hold (running, revoked and not yet
        acknowledged, on a disconnected executor, or released and not yet recorded UNASSIGNED or
        fenced): until this is empty, they may still commit offsets."""
        held = {t for m in self.members.values() for t in m.owned} | set(self.releases.held)
        return sorted((t for t in held if t.connector == connector), key=lambda t: t.task)

    async def wait_until_released(self, connector: str) -> None:
        """Return once no executor holds a task of the connector (the caller bounds the wait)."""
        self.request_rebalance()
        while self.running_tasks(connector):
            await self._tasks_released.wait()

    def _released(self) -> None:
        self._tasks_released.set()
        self._tasks_released = asyncio.Event()

    def _freed(self) -> None:
        self._released()
        self.request_rebalance()

    def _next_generation(self) -> int:
        self._generation += 1
        return self._generation

    def _in_grace(self) -> bool:
        """Whether expected executors are still awaited at the start of the term."""
        if self._awaiting and time.monotonic() >= self._grace_until:
            log.warning(
                "executors %s did not attach within %.1fs; placing tasks", sorted(self._awaiting), self.grace
            )
            self._awaiting.clear()
        return bool(self._awaiting)

    # ------------------------------------------------------------------ membership

    async def attach(self, hello: executor_pb2.Hello, principal: str = "") -> Member:
        """A new session of an executor: it keeps the tasks it reports that it may keep (Welcome
        names them); the reported status of each is written when the status topic says otherwise.
        An earlier session of the same executor ends, its tasks passing to this one the same way,
        but only when both come from the same principal: an executor id is not another's to take,
        neither while a session holds it nor, during the grace, when the status topic records it."""
        if self._stopping:
            raise UnavailableError(
                "This control plane is shutting down; attach again to a running one",
                reason=Reason.NOT_LEADER,
            )
        held = self.members.get(hello.executor_id)
        owner = held.principal if held is not None else self._awaiting.get(hello.executor_id, principal)
        if owner and owner != principal and (held is not None or self._in_grace()):
            raise PermissionDeniedError(
                f"Executor id {hello.executor_id} belongs to another principal",
                metadata={"executor_id": hello.executor_id},
            )
        previous = self.members.pop(hello.executor_id, None)
        if previous is not None:
            previous.close()
        member = Member(
            id=hello.executor_id,
            host=hello.host,
            spark_remote=hello.spark_remote,
            version=hello.version,
            metrics_url=hello.metrics_url,
            max_tasks=max(hello.max_tasks, 0),
            attach_time=time.time(),
            last_heartbeat=time.monotonic(),
            outbox=asyncio.Queue(),
            principal=principal,
        )
        adopted = self._adopt(member, hello.running_tasks, previous)
        self.members[member.id] = member
        if member.id in self._awaiting:
            del self._awaiting[member.id]
            if not self._awaiting:
                log.info("every executor that ran tasks has attached again")
        member.send(
            welcome(
                member.id,
                self.heartbeat_interval,
                self.session_timeout,
                self.worker_config,
                [a.task.name for a in adopted],
            )
        )
        if member.revoking:
            # The earlier session may not have received the revocation: ask again.
            self._revoke(member, sorted(member.revoking))
        log.info(
            "executor %s attached from %s (spark %s)%s, keeping %d of the %d task(s) it runs",
            member.id,
            member.host,
            member.spark_remote,
            " again" if previous is not None else "",
            len(adopted),
            len(hello.running_tasks),
        )
        self.request_rebalance()
        return member

    def _adopt(
        self, member: Member, running: Sequence[executor_pb2.RunningTask], previous: Member | None
    ) -> list[Adopted]:
        taken = {t for m in self.members.values() for t in (*m.owned, *m.revoking)}
        taken.update(self.releases.held)
        adopted = choose_adopted(
            member.id, running, desired=self.desired(), taken=taken, floor=self.releases.floor
        )
        restarts = previous.restarts if previous is not None else set()
        for item in adopted:
            # A restart asked for while it was away: an empty fingerprint differs from any desired
            # one, so the next rebalance assigns the task again in place.
            fingerprint = "" if item.task in restarts else item.fingerprint
            member.owned[item.task] = OwnedTask(item.generation, fingerprint)
            if previous is not None and item.task in previous.revoking:
                member.revoking.add(item.task)
        if previous is not None:
            # Tasks the earlier session held that the executor no longer runs are free again.
            if set(previous.owned) - set(member.owned):
                self._released()
            previous.owned.clear()
            previous.revoking.clear()
            previous.restarts.clear()
        store = self.status.store
        updates = [
            a for a in adopted if status_differs(store.get_task(a.task.connector, a.task.task), a, member)
        ]
        if updates:
            member.status_writes = self._writes.start(
                write_adopted(self.status, member, updates, self.desired),
                f"adopt-{member.id}",
                f"recording the statuses of the tasks executor {member.id} kept",
            )
        return adopted

    def disconnect(self, member: Member, reason: str) -> None:
        """The member's stream ended without Goodbye: it keeps its tasks, disconnected, until it
        attaches again or its session times out. Nothing to do for an earlier session."""
        member.close()
        if self.members.get(member.id) is not member or not member.connected:
            return
        member.connected = False
        member.disconnected_at = time.monotonic()
        log.warning(
            "executor %s disconnected (%s); it keeps its %d task(s) for up to %.1fs",
            member.id,
            reason,
            len(member.owned),
            self.session_timeout,
        )

    def release(self, member: Member, reason: str, *, fence: bool) -> None:
        """End the member and release its tasks: each still desired is recorded UNASSIGNED and, with
        `fence`, each is fenced (its transactional id taken over); only then may the planner place
        it elsewhere. Nothing to do for an earlier session."""
        member.close()
        if self.members.get(member.id) is not member:
            return
        del self.members[member.id]
        released = dict.fromkeys(member.owned, member.id)
        member.owned.clear()
        member.revoking.clear()
        member.restarts.clear()
        log.warning("executor %s released: %s; releasing %d task(s)", member.id, reason, len(released))
        self.releases.hold(released, fence=fence, why=f"executor {member.id} released")

    async def _expire_loop(self) -> None:
        while not self._stopping:
            await asyncio.sleep(min(self.heartbeat_interval, 1.0))
            now = time.monotonic()
            for member in list(self.members.values()):
                if now - member.last_seen <= self.session_timeout:
                    continue
                if member.connected:
                    member.send(
                        executor_pb2.ControllerMessage(
                            fenced=executor_pb2.Fenced(reason="no heartbeat within the session timeout")
                        )
                    )
                    reason = f"no heartbeat for {self.session_timeout:.1f}s"
                else:
                    reason = f"not attached again within {self.session_timeout:.1f}s"
                self.release(member, reason, fence=True)

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
            began = time.monotonic()
            try:
                await self._rebalance()
                took = time.monotonic() - began
                if self._on_rebalance is not None:
                    self._on_rebalance(took)
            except Exception:
                log.exception("rebalance failed; retrying")
                await _REBALANCE_RETRY.start().wait_async()
                self._rebalance_again = True
                took = 0.0
            if not self._rebalance_again or self._stopping:
                return
            # A rebalance looks at every task: pausing as long as the last one took leaves at least
            # half of the loop to the calls when thousands of connectors are created back to back.
            await asyncio.sleep(min(took, _MAX_REBALANCE_PAUSE_S))

    def desired(self) -> dict[TaskId, DesiredTask]:
        return self._wanted_tasks.desired(self._snapshot())

    def _wanted(self) -> tuple[dict[TaskId, DesiredTask], dict[TaskId, DesiredTask]]:
        """The desired tasks that may run (all but those refused as too large), and of those the
        ones whose assignment can be built now. A source task whose connector's own offsets topic is
        not open yet waits (its committed offsets are not known): the topic opens in the background,
        off the loop, and its opening asks for another rebalance."""
        wanted = self.desired()
        # A refused task is forgotten once it changed or is gone, and until then left out.
        self._oversize = {
            t: fp for t, fp in self._oversize.items() if t in wanted and wanted[t].fingerprint == fp
        }
        eligible = {t: d for t, d in wanted.items() if t not in self._oversize} if self._oversize else wanted
        return eligible, self._wanted_tasks.ready(eligible)

    async def _rebalance(self) -> None:
        async with self._lock:
            eligible, ready = self._wanted()
            live = {m.id: m for m in self.members.values() if m.connected}
            if not live:
                return  # nothing to place, restart or revoke (nor to fence for placing) yet
            owners = {t: m.id for m in self.members.values() for t in m.owned}
            owners.update(dict.fromkeys(self.releases.held, _HELD))
            revoking = {t for m in self.members.values() for t in m.revoking}
            # A changed config or target state restarts the task where it runs (new generation).
            for member in live.values():
                changed = [
                    ready[t]
                    for t, owned in member.owned.items()
                    if t in ready and t not in member.revoking and owned.fingerprint != ready[t].fingerprint
                ]
                if changed:
                    self._assign(member, changed)
            placing = not self._in_grace()
            if placing:
                leftovers = self.releases.hold_leftovers((t for t in ready if t not in owners), self.members)
                owners.update(dict.fromkeys(leftovers, _HELD))
            # Tasks placed already stay wanted while they wait for their offsets topic to open.
            considered = set(ready) | {t for t in owners if t in eligible}
            step: Plan = plan(considered, owners, revoking, {m.id: m.max_tasks for m in live.values()})
            for executor_id, tasks in step.revoke.items():
                # During the grace only tasks no longer wanted are revoked, none for the balance.
                chosen = tasks if placing else [t for t in tasks if t not in considered]
                if chosen:
                    self._revoke(live[executor_id], chosen)
            if placing:
                for executor_id, tasks in step.assign.items():
                    self._assign(live[executor_id], [ready[t] for t in tasks])

    def _revoke(self, member: Member, tasks: Sequence[TaskId]) -> None:
        member.revoking.update(tasks)
        member.send(
            executor_pb2.ControllerMessage(revocation=executor_pb2.Revocation(tasks=[t.name for t in tasks]))
        )
        log.info("revoking %s from %s", [t.name for t in tasks], member.id)

    def _assign(self, member: Member, tasks: Sequence[DesiredTask]) -> None:
        """Sends the tasks in as many Assignment messages as it takes to keep each within
        assignment_message_bytes; a larger task goes alone, one too large for the executor not at all."""
        bound = self.assignment_message_bytes - ENVELOPE_BYTES
        batch: list[executor_pb2.TaskAssignment] = []
        size = 0
        for desired in tasks:
            generation = self._next_generation()
            item = self._task_assignment(desired, generation)
            cost = entry_bytes(item)
            if cost > self.max_assignment_bytes - ENVELOPE_BYTES:
                self._refuse(desired, generation, cost + ENVELOPE_BYTES)
                continue
            if batch and size + cost > bound:
                send_assignment(member, batch)
                batch, size = [], 0
            member.owned[desired.task] = OwnedTask(generation, desired.fingerprint)
            batch.append(item)
            size += cost
        if batch:
            send_assignment(member, batch)

    def _task_assignment(self, desired: DesiredTask, generation: int) -> executor_pb2.TaskAssignment:
        assignment = executor_pb2.TaskAssignment(
            task=desired.task.name,
            generation=generation,
            connector_config=dict(desired.connector_config),
            task_config=dict(desired.task_config),
            target_state=_TARGETS[desired.target],
            task_count=desired.task_count,
            fingerprint=desired.fingerprint,
        )
        connector = desired.task.connector
        # A sink task gets the record of the latest change of its offsets (SINK_OFFSETS_CHANGE).
        carried = (
            self.offsets.source_offsets(connector, desired.connector_config)
            if self._connector_type(desired.connector_config) is ConnectorType.SOURCE
            else self.offsets.sink_change(connector)
        )
        for partition, offset in carried:
            assignment.source_offsets.add(partition=map_to_proto(partition), offset=map_to_proto(offset))
        return assignment

    def _refuse(self, desired: DesiredTask, generation: int, size: int) -> None:
        """A task whose assignment the executor would refuse is FAILED instead of sent, once per
        fingerprint, so it neither breaks the executor's stream nor holds up other tasks."""
        task = desired.task
        self._oversize[task] = desired.fingerprint
        trace = oversize_trace(task.name, size, self.max_assignment_bytes)
        log.error(
            "not assigning %s: its assignment of %d bytes is too large for an executor", task.name, size
        )

        async def fail() -> None:
            if self._snapshot().connector_config(task.connector) is not None:
                await self.status.put_task(
                    task.connector, task.task, State.FAILED, trace, self.status.worker_id, generation
                )

        self._writes.start(fail(), f"refuse-{task.name}", f"recording {task.name} as FAILED")
        # The next pass leaves it out: an executor running an earlier config of it gives it up, and
        # the place the planner meant for it goes to another task.
        self.request_rebalance()

    def restart_tasks(self, connector: str, tasks: Sequence[int]) -> None:
        """Restart these tasks where they run: a new generation makes their executor start them afresh
        (on a disconnected executor, once it attaches again). A task refused as too large is tried
        once more."""
        chosen_tasks = [TaskId(connector, n) for n in tasks]
        if [t for t in chosen_tasks if self._oversize.pop(t, None)]:
            self.request_rebalance()
        _, ready = self._wanted()
        for member in self.members.values():
            chosen = [
                ready[task]
                for task in chosen_tasks
                if task in member.owned and task in ready and task not in member.revoking
            ]
            if not chosen:
                continue
            if member.connected:
                self._assign(member, chosen)
            else:
                member.restarts.update(d.task for d in chosen)

    # ------------------------------------------------------------------ executor messages

    async def handle(self, member: Member, message: executor_pb2.ExecutorMessage) -> None:
        kind = message.WhichOneof("kind")
        if self.members.get(member.id) is not member:
            log.info("ignoring %s from an ended session of executor %s", kind, member.id)
            return
        member.last_heartbeat = time.monotonic()
        handler = None if kind is None else self._HANDLERS.get(kind)
        if handler is not None:
            await handler(self, member, message)

    async def _on_heartbeat(self, member: Member, message: executor_pb2.ExecutorMessage) -> None:
        member.record_progress(message.heartbeat.progress)

    async def _on_task_status(self, member: Member, message: executor_pb2.ExecutorMessage) -> None:
        await record_status_report(self.status, member, message.task_status, self._snapshot)

    async def _on_active_topics(self, member: Member, message: executor_pb2.ExecutorMessage) -> None:
        report = message.active_topics
        task = current_task(member, report.task, report.generation)
        if task is not None:
            await self.topics.record(task.connector, task.task, report.topics)

    async def _on_revocation_ack(self, member: Member, message: executor_pb2.ExecutorMessage) -> None:
        member.revocation_acknowledged(message.revocation_ack.tasks)
        self._released()
        self.request_rebalance()

    async def _on_goodbye(self, member: Member, message: executor_pb2.ExecutorMessage) -> None:
        # Its tasks stopped and committed what they will: no fencing needed.
        self.release(member, "it shut down", fence=False)

    # What each kind of executor message does besides showing that the executor is alive (a
    # Heartbeat also brings its tasks' progress); a kind missing here (a second Hello) does nothing more.
    _HANDLERS: Final[Mapping[str, _Handler]] = {
        "heartbeat": _on_heartbeat,
        "task_status": _on_task_status,
        "active_topics": _on_active_topics,
        "revocation_ack": _on_revocation_ack,
        "goodbye": _on_goodbye,
    }

    def reset_reported_topics(self, connector: str) -> None:
        """The connector's active topics were reset: every executor forgets which topics the
        connector's tasks reported, so they report the ones they still use again (KIP-558)."""
        message = executor_pb2.ControllerMessage(
            active_topics_reset=executor_pb2.ActiveTopicsReset(connector=connector)
        )
        for member in list(self.members.values()):
            member.send(message)
