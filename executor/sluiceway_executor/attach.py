"""The executor's side of the attach stream (``ExecutorService.Attach``, docs/ARCHITECTURE.md §6).

One :class:`ExecutorAgent` per process. It opens the bidi stream, says Hello, waits for Welcome,
then sends a Heartbeat every interval and carries out what the leader says:

- ``Assignment``: start a :class:`~sluiceway_executor.runner.TaskRunner` per new task; a task
  already running whose generation, config or target state changed is stopped between batches
  and started again under the new assignment.
- ``Revocation``: stop those tasks between batches (their batch in flight may still commit: the
  generation is current until acknowledged), then send ``RevocationAck``.
- ``CommitResult``: completes the pending commit with that ``commit_id``.
- ``Fenced``: stop every task without committing anything more and attach again as a new session.

When the stream fails (control plane restarted or unreachable) every task stops between batches
without committing (its uncommitted batch is redone later: at most one duplicate batch per task)
and the agent attaches again with exponential backoff, until it is shut down.
"""

from __future__ import annotations

import itertools
import logging
import queue
import socket
import threading
import time
import uuid
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Final

import grpc

import sluiceway
from sluiceway.api.v1 import common_pb2, executor_pb2, executor_pb2_grpc
from sluiceway.errors import from_rpc_error
from sluiceway.limits import EXECUTOR_MAX_RECEIVE_BYTES
from sluiceway.offsets import OffsetPair, offsets_to_proto
from sluiceway_executor.pipelines.pipeline import PipelineFactory
from sluiceway_executor.pipelines.spec import TaskSpec
from sluiceway_executor.runner import (
    DEFAULT_COMMIT_TIMEOUT_S,
    CommitOutcome,
    CommitStatus,
    TaskRunner,
)

__all__ = ["AttachSettings", "ExecutorAgent", "default_executor_id"]

log = logging.getLogger(__name__)

DEFAULT_HEARTBEAT_INTERVAL_S: Final = 3.0


def default_executor_id() -> str:
    return f"{socket.gethostname()}-{uuid.uuid4().hex[:8]}"


@dataclass(frozen=True)
class AttachSettings:
    # One control-plane address or several, comma-separated: the agent finds the leader from any.
    server: str
    spark_remote: str
    executor_id: str = field(default_factory=default_executor_id)
    max_tasks: int = 0
    host: str = field(default_factory=socket.gethostname)
    version: str = sluiceway.__version__
    initial_backoff: float = 0.2
    max_backoff: float = 5.0
    welcome_timeout: float = 30.0
    commit_timeout: float = DEFAULT_COMMIT_TIMEOUT_S
    poll_interval: float = 0.2
    max_poll_interval: float = 1.0

    @property
    def servers(self) -> list[str]:
        return [address.strip() for address in self.server.split(",") if address.strip()]


class _Targets:
    """Which control-plane address to attach to next: the leader a replica named, else the
    configured addresses in turn."""

    def __init__(self, addresses: list[str]) -> None:
        self._addresses = addresses or ["localhost:8083"]
        self._index = 0
        self._redirect: str | None = None

    @property
    def current(self) -> str:
        return self._redirect or self._addresses[self._index]

    def redirect(self, address: str) -> None:
        self._redirect = address

    def next(self) -> bool:
        """Move on after a failure; True when it is time to back off: every configured address was
        tried in this round, or the leader a replica named did not take us."""
        if self._redirect is not None:
            self._redirect = None
            return True
        self._index = (self._index + 1) % len(self._addresses)
        return self._index == 0


def leader_redirect(exc: grpc.RpcError) -> str | None:
    """The leader's address from a replica's NOT_LEADER answer to Attach, if it named one."""
    if not isinstance(exc, grpc.Call) or exc.code() != grpc.StatusCode.UNAVAILABLE:
        return None
    error = from_rpc_error(exc)
    if error.reason != "NOT_LEADER":
        return None
    return error.metadata.get("leader_address") or None


class _PendingCommit:
    def __init__(self) -> None:
        self.done = threading.Event()
        self.outcome = CommitOutcome(CommitStatus.LOST, "the stream to the control plane closed")

    def resolve(self, outcome: CommitOutcome) -> None:
        self.outcome = outcome
        self.done.set()


class _EndOfStream:
    """Sentinel that ends the request iterator."""


_END: Final = _EndOfStream()


class _Session:
    """One attach stream: its send queue, its tasks and its pending commits. Runners talk to the
    control plane through the session that assigned them (it is their ``TaskHost``)."""

    def __init__(self, agent: ExecutorAgent, address: str) -> None:
        self._agent = agent
        self.address = address
        self._outbox: queue.Queue[executor_pb2.ExecutorMessage | _EndOfStream] = queue.Queue()
        self._lock = threading.Lock()
        self._closed = threading.Event()
        self._pending: dict[int, _PendingCommit] = {}
        self._commit_ids = itertools.count(1)
        self.runners: dict[str, TaskRunner] = {}
        # Revoked runners still finishing their batch: a new assignment of the task waits for them.
        self.retiring: dict[str, TaskRunner] = {}
        self.worker_config: Mapping[str, str] = {}
        self.heartbeat_interval = DEFAULT_HEARTBEAT_INTERVAL_S
        self.welcomed = threading.Event()

    # ------------------------------------------------------------------ sending

    def requests(self) -> Iterator[executor_pb2.ExecutorMessage]:
        """The request stream gRPC consumes on its own thread."""
        while True:
            message = self._outbox.get()
            if isinstance(message, _EndOfStream):
                return
            yield message

    def send(self, message: executor_pb2.ExecutorMessage) -> bool:
        with self._lock:
            if self._closed.is_set():
                return False
            self._outbox.put(message)
            return True

    @property
    def closed(self) -> bool:
        return self._closed.is_set()

    # ------------------------------------------------------------------ TaskHost

    def send_status(self, spec: TaskSpec, state: common_pb2.State.ValueType, trace: str = "") -> None:
        self.send(
            executor_pb2.ExecutorMessage(
                task_status=executor_pb2.TaskStatusReport(
                    task=spec.name, generation=spec.generation, state=state, trace=trace
                )
            )
        )

    def send_active_topics(self, spec: TaskSpec, topics: list[str]) -> None:
        self.send(
            executor_pb2.ExecutorMessage(
                active_topics=executor_pb2.ActiveTopicsReport(
                    task=spec.name, generation=spec.generation, topics=topics
                )
            )
        )

    def commit(self, spec: TaskSpec, offsets: list[OffsetPair], timeout: float) -> CommitOutcome:
        pending = _PendingCommit()
        with self._lock:
            if self._closed.is_set():
                return pending.outcome
            commit_id = next(self._commit_ids)
            self._pending[commit_id] = pending
            self._outbox.put(
                executor_pb2.ExecutorMessage(
                    offset_commit=executor_pb2.OffsetCommit(
                        task=spec.name,
                        generation=spec.generation,
                        commit_id=commit_id,
                        offsets=offsets_to_proto(offsets),
                    )
                )
            )
        if not pending.done.wait(timeout):
            with self._lock:
                self._pending.pop(commit_id, None)
            if pending.done.is_set():
                return pending.outcome
            return CommitOutcome(
                CommitStatus.REJECTED, f"no answer to offset commit {commit_id} within {timeout:.0f}s"
            )
        return pending.outcome

    def commit_result(self, result: executor_pb2.CommitResult) -> None:
        with self._lock:
            pending = self._pending.pop(result.commit_id, None)
        if pending is None:
            log.warning("CommitResult for unknown commit %d (timed out or stale)", result.commit_id)
            return
        if result.ok:
            pending.resolve(CommitOutcome(CommitStatus.OK))
        else:
            pending.resolve(
                CommitOutcome(CommitStatus.REJECTED, result.error or "refused by the control plane")
            )

    # ------------------------------------------------------------------ life cycle

    def running_tasks(self) -> list[str]:
        with self._lock:
            return sorted(name for name, runner in self.runners.items() if runner.alive)

    def all_runners(self) -> list[TaskRunner]:
        with self._lock:
            return [*self.runners.values(), *self.retiring.values()]

    def close(self) -> None:
        """No more messages: pending commits resolve as LOST and the request stream ends."""
        with self._lock:
            if self._closed.is_set():
                return
            self._closed.set()
            pending, self._pending = self._pending, {}
            self._outbox.put(_END)
        for waiter in pending.values():
            waiter.resolve(CommitOutcome(CommitStatus.LOST, "the stream to the control plane closed"))

    def wait_closed(self, timeout: float) -> bool:
        return self._closed.wait(timeout)


class _SessionEndedError(Exception):
    """The leader ended the session (Fenced) or broke the protocol."""


class ExecutorAgent:
    """Attaches to the leader and runs the tasks it assigns, until :meth:`shutdown`."""

    def __init__(self, settings: AttachSettings, factory: PipelineFactory) -> None:
        self.settings = settings
        self._factory = factory
        self._stopping = threading.Event()
        self._lock = threading.Lock()
        self._session: _Session | None = None
        self._call: grpc.RpcContext | None = None
        self.sessions = 0
        self.welcomed = threading.Event()

    @property
    def executor_id(self) -> str:
        return self.settings.executor_id

    @property
    def stopping(self) -> bool:
        return self._stopping.is_set()

    def running_tasks(self) -> list[str]:
        session = self._session
        return session.running_tasks() if session is not None else []

    def runner(self, task: str) -> TaskRunner | None:
        session = self._session
        if session is None:
            return None
        with session._lock:
            return session.runners.get(task)

    # ------------------------------------------------------------------ the loop

    def run(self) -> None:
        """Attaches, and attaches again after every failure, until :meth:`shutdown`."""
        backoff = self.settings.initial_backoff
        last_problem = ""
        targets = _Targets(self.settings.servers)
        while not self._stopping.is_set():
            welcomed = False
            address = targets.current
            redirect: str | None = None
            try:
                welcomed = self._attach_once(address)
                problem = ""
            except _SessionEndedError as exc:
                problem = str(exc)
                welcomed = True  # the leader answered: attach again right away
            except grpc.RpcError as exc:
                code = exc.code() if isinstance(exc, grpc.Call) else None
                details = exc.details() if isinstance(exc, grpc.Call) else str(exc)
                problem = f"{code.name if code else 'error'}: {details}"
                redirect = leader_redirect(exc)
            except Exception as exc:
                log.exception("attach session failed")
                problem = f"{type(exc).__name__}: {exc}"
            if self._stopping.is_set():
                break
            if redirect is not None and redirect != address:
                log.info("%s does not lead; attaching to the leader at %s", address, redirect)
                targets.redirect(redirect)
                continue
            # A session that was welcomed ended: the same address is tried again first (it may be
            # a restart); anything else moves on to the next address.
            round_done = False if welcomed else targets.next()
            if welcomed:
                backoff = self.settings.initial_backoff
            elif not round_done:
                continue
            level = logging.WARNING if problem != last_problem else logging.DEBUG
            log.log(
                level,
                "attach stream to %s ended (%s); attaching again in %.1fs",
                address,
                problem or "closed by the control plane",
                backoff,
            )
            last_problem = problem
            self._stopping.wait(backoff)
            if not welcomed:
                backoff = min(backoff * 2, self.settings.max_backoff)

    def _attach_once(self, address: str) -> bool:
        """One session with the replica at `address`; returns whether it welcomed us."""
        session = _Session(self, address)
        settings = self.settings
        session.send(
            executor_pb2.ExecutorMessage(
                hello=executor_pb2.Hello(
                    executor_id=settings.executor_id,
                    version=settings.version,
                    host=settings.host,
                    spark_remote=settings.spark_remote,
                    max_tasks=settings.max_tasks,
                )
            )
        )
        # Above gRPC's 4 MiB default on purpose: the control plane packs assignments into smaller
        # messages, but one task's configs may be larger, and it never sends more than this.
        channel = grpc.insecure_channel(
            address, options=[("grpc.max_receive_message_length", EXECUTOR_MAX_RECEIVE_BYTES)]
        )
        call = executor_pb2_grpc.ExecutorServiceStub(channel).Attach(session.requests())
        with self._lock:
            if self._stopping.is_set():
                call.cancel()
                channel.close()
                return False
            self._session, self._call = session, call
            self.sessions += 1
        welcome_timer = threading.Timer(settings.welcome_timeout, call.cancel)
        welcome_timer.daemon = True
        welcome_timer.start()
        heartbeat: threading.Thread | None = None
        try:
            for message in call:
                kind = message.WhichOneof("kind")
                if not session.welcomed.is_set():
                    if kind != "welcome":
                        raise _SessionEndedError(f"the leader sent {kind} before Welcome")
                    welcome_timer.cancel()
                    self._welcome(session, message.welcome)
                    heartbeat = threading.Thread(
                        target=self._heartbeats, args=(session,), name="heartbeat", daemon=True
                    )
                    heartbeat.start()
                    continue
                self._dispatch(session, kind, message)
            return session.welcomed.is_set()
        except grpc.RpcError:
            if self._stopping.is_set() and session.welcomed.is_set():
                return True
            raise
        finally:
            welcome_timer.cancel()
            self._end_session(session)
            call.cancel()
            channel.close()
            if heartbeat is not None:
                heartbeat.join(timeout=5)
            with self._lock:
                if self._session is session:
                    self._session, self._call = None, None

    def _welcome(self, session: _Session, welcome: executor_pb2.Welcome) -> None:
        session.worker_config = dict(welcome.worker_config)
        interval = welcome.heartbeat_interval.ToMilliseconds() / 1000.0
        session.heartbeat_interval = interval if interval > 0 else DEFAULT_HEARTBEAT_INTERVAL_S
        session.welcomed.set()
        self.welcomed.set()
        if welcome.executor_id and welcome.executor_id != self.settings.executor_id:
            log.warning(
                "the leader welcomed us as %s, not %s", welcome.executor_id, self.settings.executor_id
            )
        log.info(
            "attached to %s as %s (heartbeat every %.1fs, session timeout %.1fs)",
            session.address,
            self.settings.executor_id,
            session.heartbeat_interval,
            welcome.session_timeout.ToMilliseconds() / 1000.0,
        )

    def _heartbeats(self, session: _Session) -> None:
        while not session.wait_closed(session.heartbeat_interval):
            session.send(
                executor_pb2.ExecutorMessage(
                    heartbeat=executor_pb2.Heartbeat(running_tasks=session.running_tasks())
                )
            )

    def _dispatch(self, session: _Session, kind: str | None, message: executor_pb2.ControllerMessage) -> None:
        if kind == "assignment":
            self._assign(session, message.assignment)
        elif kind == "revocation":
            self._revoke(session, list(message.revocation.tasks))
        elif kind == "commit_result":
            session.commit_result(message.commit_result)
        elif kind == "active_topics_reset":
            connector = message.active_topics_reset.connector
            for runner in session.all_runners():
                if runner.spec.connector == connector:
                    runner.forget_reported_topics()
        elif kind == "fenced":
            raise _SessionEndedError(f"fenced by the leader: {message.fenced.reason or 'no reason given'}")
        elif kind == "welcome":
            log.warning("ignoring a second Welcome on the same stream")
        else:
            log.warning("ignoring an unknown message from the leader (%s)", kind)

    def _assign(self, session: _Session, assignment: executor_pb2.Assignment) -> None:
        if self._stopping.is_set():
            log.info("shutting down: not starting %d assigned task(s)", len(assignment.tasks))
            return
        for item in assignment.tasks:
            try:
                spec = TaskSpec.from_proto(item)
            except ValueError:
                log.error("ignoring an assignment with a malformed task name %r", item.task)
                continue
            with session._lock:
                existing = session.runners.get(spec.name) or session.retiring.get(spec.name)
                if (
                    existing is not None
                    and existing is session.runners.get(spec.name)
                    and existing.spec.same_work(spec)
                    and not existing.stopping
                ):
                    continue
                runner = TaskRunner(
                    spec,
                    session,
                    self._factory,
                    session.worker_config,
                    predecessor=existing,
                    poll_interval=self.settings.poll_interval,
                    max_poll_interval=self.settings.max_poll_interval,
                    commit_timeout=self.settings.commit_timeout,
                )
                session.runners[spec.name] = runner
            log.info(
                "%s %s (generation %d%s)",
                "restarting" if existing is not None else "starting",
                spec.name,
                spec.generation,
                ", paused" if spec.paused else "",
            )
            runner.start()

    def _revoke(self, session: _Session, tasks: list[str]) -> None:
        with session._lock:
            stopping = []
            for name in tasks:
                runner = session.runners.pop(name, None)
                if runner is not None:
                    session.retiring[name] = runner
                    stopping.append(runner)
        log.info("revoked: %s", ", ".join(tasks))
        for runner in stopping:
            runner.stop(commit=True)

        def acknowledge() -> None:
            for runner in stopping:
                runner.join()
            with session._lock:
                for runner in stopping:
                    if session.retiring.get(runner.name) is runner:
                        del session.retiring[runner.name]
            session.send(executor_pb2.ExecutorMessage(revocation_ack=executor_pb2.RevocationAck(tasks=tasks)))

        threading.Thread(target=acknowledge, name="revocation", daemon=True).start()

    def _end_session(self, session: _Session) -> None:
        """Every task stops between batches, committing nothing more; then the stream closes."""
        runners = session.all_runners()
        for runner in runners:
            runner.stop(commit=False)
        session.close()
        for runner in runners:
            runner.join()

    # ------------------------------------------------------------------ shutdown

    def shutdown(self, timeout: float | None = None) -> None:
        """Stops every task between batches (a batch in flight still commits, as the stream is
        still up), then closes the stream; :meth:`run` returns afterwards."""
        self._stopping.set()
        with self._lock:
            session, call = self._session, self._call
        if session is not None:
            runners = session.all_runners()
            for runner in runners:
                runner.stop(commit=True)
            deadline = None if timeout is None else time.monotonic() + timeout
            for runner in runners:
                runner.join(None if deadline is None else max(deadline - time.monotonic(), 0.0))
            session.close()
        if call is not None:
            call.cancel()
