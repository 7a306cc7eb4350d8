"""The leader's side of the executor protocol: membership, heartbeats, assignments with
generations, revocations, and applying what executors report (statuses, offset commits,
active topics) to Kafka — only from the generation a task is currently assigned under."""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from confluent_kafka import ConsumerGroupTopicPartitions, TopicPartition
from confluent_kafka.admin import AdminClient
from google.protobuf import duration_pb2

from sluiceway.api.v1 import common_pb2, executor_pb2
from sluiceway.offsets import dict_to_struct, offsets_from_proto
from sluiceway_server.cluster.assignor import Plan, TaskId, plan
from sluiceway_server.herder.errors import UnavailableError
from sluiceway_server.model import ConnectorType, State, TargetState
from sluiceway_server.storage import (
    ErrorEntry,
    OffsetStore,
    StatusStore,
    TaskStatusRecord,
    TopicStatusRecord,
)

log = logging.getLogger(__name__)

MAX_RECENT_ERRORS = 10
_STATES = {
    common_pb2.UNASSIGNED: State.UNASSIGNED,
    common_pb2.STATE_RUNNING: State.RUNNING,
    common_pb2.STATE_PAUSED: State.PAUSED,
    common_pb2.STATE_STOPPED: State.STOPPED,
    common_pb2.FAILED: State.FAILED,
    common_pb2.RESTARTING: State.RESTARTING,
}
_TARGETS = {
    TargetState.STARTED: common_pb2.RUNNING,
    TargetState.PAUSED: common_pb2.PAUSED,
    TargetState.STOPPED: common_pb2.STOPPED,
}


class CommitRejectedError(Exception):
    """An offset commit that must not be applied (stale generation, bad offsets)."""


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

    @property
    def fingerprint(self) -> str:
        blob = json.dumps(
            [dict(self.connector_config), dict(self.task_config), self.target.value, self.task_count],
            sort_keys=True,
        )
        return hashlib.sha256(blob.encode()).hexdigest()


class ExecutorCoordinator:
    def __init__(
        self,
        *,
        snapshot: Callable[[], Any],
        connector_type: Callable[[Mapping[str, str]], ConnectorType],
        status_store: StatusStore,
        offset_store: OffsetStore,
        offset_store_factory: Callable[[str], OffsetStore],
        admin: AdminClient,
        worker_config: Mapping[str, str],
        heartbeat_interval: float,
        session_timeout: float,
        base_generation: int,
        topic_tracking: bool,
        store_timeout: float = 30.0,
    ) -> None:
        self._snapshot = snapshot
        self._connector_type = connector_type
        self.status_store = status_store
        self.offset_store = offset_store
        self._offset_store_factory = offset_store_factory
        self._own_offset_stores: dict[str, OffsetStore] = {}
        self.admin = admin
        self.worker_config = dict(worker_config)
        self.heartbeat_interval = heartbeat_interval
        self.session_timeout = session_timeout
        self.topic_tracking = topic_tracking
        self.store_timeout = store_timeout
        self.members: dict[str, Member] = {}
        # Generations are unique across leader terms: the term's base in the high bits.
        self._generation = base_generation << 32
        self._lock = asyncio.Lock()
        self._rebalance_task: asyncio.Task[None] | None = None
        self._rebalance_again = False
        self._expiry_task: asyncio.Task[None] | None = None
        self._seen_topics: set[tuple[str, str]] = set()
        self._stopping = False
        # Status writes for released tasks; stop() waits for them so none outlives the stores.
        self._releases: set[asyncio.Task[None]] = set()

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
        for store in self._own_offset_stores.values():
            await asyncio.to_thread(store.stop)

    def executors(self) -> list[Member]:
        return sorted(self.members.values(), key=lambda m: m.id)

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
        task = asyncio.get_running_loop().create_task(release(), name=f"release-{member.id}")
        self._releases.add(task)
        task.add_done_callback(self._release_done)
        await asyncio.shield(task)

    def _release_done(self, task: asyncio.Task[None]) -> None:
        self._releases.discard(task)
        if not task.cancelled() and task.exception() is not None:
            log.warning("recording the released tasks as UNASSIGNED failed: %s", task.exception())

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

    async def _rebalance(self) -> None:
        async with self._lock:
            wanted = self.desired()
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
        message = executor_pb2.Assignment()
        for desired in tasks:
            generation = self._next_generation()
            member.owned[desired.task] = OwnedTask(generation, desired.fingerprint)
            assignment = message.tasks.add(
                task=desired.task.name,
                generation=generation,
                connector_config=dict(desired.connector_config),
                task_config=dict(desired.task_config),
                target_state=_TARGETS[desired.target],
                task_count=desired.task_count,
            )
            if self._connector_type(desired.connector_config) is ConnectorType.SOURCE:
                for partition, offset in self._source_offsets(
                    desired.task.connector, desired.connector_config
                ):
                    assignment.source_offsets.add(
                        partition=dict_to_struct(partition), offset=dict_to_struct(offset)
                    )
        log.info(
            "assigning %s to %s",
            [f"{t.task.name}@{member.owned[t.task].generation}" for t in tasks],
            member.id,
        )
        member.send(executor_pb2.ControllerMessage(assignment=message))

    def restart_tasks(self, connector: str, tasks: Sequence[int]) -> None:
        """Restart these tasks where they run: a new generation makes their executor start them afresh."""
        wanted = self.desired()
        for member in self.members.values():
            chosen = [
                wanted[TaskId(connector, n)]
                for n in tasks
                if TaskId(connector, n) in member.owned
                and TaskId(connector, n) in wanted
                and TaskId(connector, n) not in member.revoking
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
            if task is not None:
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
            if task is not None and self.topic_tracking:
                await self._record_topics(task, topics_report.topics)
        elif kind == "revocation_ack":
            for name in message.revocation_ack.tasks:
                try:
                    task = TaskId.parse(name)
                except ValueError:
                    continue
                if task in member.revoking:
                    member.revoking.discard(task)
                    member.owned.pop(task, None)
            self.request_rebalance()

    async def _put_task_status(
        self, task: TaskId, state: State, trace: str | None, worker_id: str, generation: int
    ) -> None:
        current = self.status_store.get_task(task.connector, task.task)
        history = current.recent_errors if current is not None else ()
        if state is State.FAILED:
            message = (trace or "").strip().splitlines()[-1:] or ["task failed"]
            entry = ErrorEntry(int(time.time() * 1000), message[0], trace or "", worker_id)
            history = (entry, *history)[:MAX_RECENT_ERRORS]
        record = TaskStatusRecord(task.connector, task.task, state, trace, worker_id, generation, history)
        await asyncio.to_thread(self.status_store.put_task, record, self.store_timeout)

    def _source_offsets(
        self, connector: str, config: Mapping[str, str]
    ) -> list[tuple[dict[str, Any], dict[str, Any]]]:
        """Read from the global topic and the connector's own one; its own wins."""
        merged = {json.dumps(p, sort_keys=True): (p, o) for p, o in self.offset_store.offsets(connector)}
        own = self._own_offset_store(config)
        if own is not None:
            merged.update({json.dumps(p, sort_keys=True): (p, o) for p, o in own.offsets(connector)})
        return list(merged.values())

    def _own_offset_store(self, config: Mapping[str, str]) -> OffsetStore | None:
        topic = config.get("offsets.storage.topic", "").strip()
        if not topic:
            return None
        store = self._own_offset_stores.get(topic)
        if store is None:
            store = self._offset_store_factory(topic)
            self._own_offset_stores[topic] = store
        return store

    async def _apply_commit(self, task: TaskId, offsets: Sequence[Any]) -> None:
        config = self._snapshot().connector_config(task.connector)
        if config is None:
            raise CommitRejectedError(f"connector {task.connector} no longer exists")
        pairs = offsets_from_proto(offsets)
        if not pairs:
            return
        if self._connector_type(config) is ConnectorType.SINK:
            await asyncio.to_thread(self._commit_sink, task.connector, config, pairs)
            return
        store = self._own_offset_store(config) or self.offset_store
        await asyncio.to_thread(store.put, task.connector, pairs, self.store_timeout)

    def _commit_sink(
        self,
        connector: str,
        config: Mapping[str, str],
        pairs: Sequence[tuple[dict[str, Any], dict[str, Any] | None]],
    ) -> None:
        group = config.get("consumer.override.group.id") or f"connect-{connector}"
        partitions = []
        for partition, offset in pairs:
            try:
                topic, number = str(partition["kafka_topic"]), int(partition["kafka_partition"])
                position = int(offset["kafka_offset"]) if offset is not None else None
            except (KeyError, TypeError, ValueError) as exc:
                raise CommitRejectedError(f"malformed sink offset {partition} → {offset}: {exc}") from exc
            if position is None or position < 0:
                raise CommitRejectedError(f"sink offsets must be non-negative, got {offset} for {partition}")
            partitions.append(TopicPartition(topic, number, position))
        futures = self.admin.alter_consumer_group_offsets([ConsumerGroupTopicPartitions(group, partitions)])
        for future in futures.values():
            result = future.result(timeout=self.store_timeout)
            failed = [tp for tp in result.topic_partitions if tp.error is not None]
            if failed:
                raise RuntimeError(f"committing offsets of group {group} failed: {failed}")

    async def _record_topics(self, task: TaskId, topics: Sequence[str]) -> None:
        known = {r.topic for r in self.status_store.topics(task.connector)}
        for topic in topics:
            if topic in known or (task.connector, topic) in self._seen_topics:
                continue
            self._seen_topics.add((task.connector, topic))
            record = TopicStatusRecord(topic, task.connector, task.task, int(time.time() * 1000))
            await asyncio.to_thread(self.status_store.put_topic, record, self.store_timeout)

    def forget_connector(self, connector: str) -> None:
        """The connector was deleted: a new connector of that name records its topics afresh."""
        self._seen_topics = {(c, t) for c, t in self._seen_topics if c != connector}
