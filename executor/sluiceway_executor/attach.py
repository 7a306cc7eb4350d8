"""The executor's side of the attach stream (``ExecutorService.Attach``, docs/ARCHITECTURE.md §6).

One :class:`ExecutorAgent` per process. It attaches to the leader (found from any of the configured
control-plane addresses), says Hello listing the tasks it already runs, waits for Welcome, then
sends a Heartbeat every interval and carries out what the leader says:

- ``Welcome``: the tasks of the Hello that the leader did not adopt stop at once, without
  committing (they run elsewhere now, or no longer exist); every task reports its topics again.
- ``Assignment``: start a :class:`~sluiceway_executor.runner.TaskRunner` per new task; a task
  already running whose generation, config or target state changed is stopped between batches
  and started again under the new assignment.
- ``Revocation``: stop those tasks between batches (their batch in flight may still commit: the
  generation is current until acknowledged), then send ``RevocationAck``.
- ``ActiveTopicsReset``: that connector's tasks report their topics again.
- ``Fenced``: the leader released every task of this executor: they all stop at once without
  committing anything more, and the agent attaches again.

The runners belong to the agent's :class:`~sluiceway_executor.task_table.TaskTable`, not to a
stream, and commit their offsets to Kafka themselves. When the stream fails (control plane
restarted or unreachable, a new leader) the tasks keep running and the agent attaches again with
exponential backoff, listing them in its next Hello. :meth:`ExecutorAgent.shutdown` stops every
task between batches, letting its batch in flight commit, then sends ``Goodbye`` and closes the
stream.
"""

from __future__ import annotations

import logging
import queue
import socket
import threading
import uuid
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Final

import grpc

import sluiceway
from sluiceway.api.v1 import executor_pb2, executor_pb2_grpc
from sluiceway.common.limits import EXECUTOR_MAX_RECEIVE_BYTES
from sluiceway.common.retry import RetryPolicy
from sluiceway.common.targets import parse_targets
from sluiceway.common.transport import TransportSecurity
from sluiceway.connect.worker_settings import worker_default
from sluiceway.errors import Reason, from_rpc_error
from sluiceway_executor.offset_commits import CommitterFactory, KafkaCommitterFactory
from sluiceway_executor.own_config import merge_worker_config
from sluiceway_executor.pipelines.pipeline import PipelineFactory
from sluiceway_executor.pipelines.spec import TaskSpec
from sluiceway_executor.runner import DEFAULT_COMMIT_TIMEOUT_S, SessionKeeper, TaskRunner
from sluiceway_executor.task_metrics import ExecutorMetrics
from sluiceway_executor.task_table import TaskTable

__all__ = ["AttachSettings", "ExecutorAgent", "default_executor_id", "leader_redirect"]

log = logging.getLogger(__name__)

# Until a Welcome says otherwise: the control plane's default executor.heartbeat.interval.ms.
DEFAULT_HEARTBEAT_INTERVAL_S: Final = int(worker_default("executor.heartbeat.interval.ms")) / 1000
# How long shutdown() waits for the leader to end the stream after Goodbye before cancelling it.
_GOODBYE_WAIT_S: Final = 5.0


def default_executor_id() -> str:
    return f"{socket.gethostname()}-{uuid.uuid4().hex[:8]}"


@dataclass(frozen=True)
class AttachSettings:
    # One control-plane address or several, comma-separated (host:port, [IPv6]:port, host names): the
    # agent finds the leader from any. Each gets a channel of its own, so TLS checks its own name.
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
    # TLS, mutual TLS and the bearer token of the attach stream (default: plaintext, no token).
    security: TransportSecurity = field(default_factory=TransportSecurity)
    # The executor's own worker settings (own_config.load_own_config), laid over Welcome's.
    worker_config: Mapping[str, str] = field(default_factory=dict)
    # Where this executor serves its Prometheus metrics (empty: it does not), for `cluster info`.
    metrics_url: str = ""

    @property
    def servers(self) -> list[str]:
        """The addresses to attach through, read as the client library reads a target
        (`sluiceway.common.targets`): one gRPC target, or a comma list of replicas."""
        return list(parse_targets(self.server)) if self.server.strip() else []


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
    if error.reason != Reason.NOT_LEADER:
        return None
    return error.metadata.get("leader_address") or None


class _EndOfStream:
    """Sentinel that ends the request iterator."""


_END: Final = _EndOfStream()


class _Session:
    """One attach stream: its outgoing queue and what its Welcome said."""

    def __init__(self, address: str) -> None:
        self.address = address
        self._outbox: queue.Queue[executor_pb2.ExecutorMessage | _EndOfStream] = queue.Queue()
        self._lock = threading.Lock()
        self._closed = threading.Event()
        self.worker_config: dict[str, str] = {}
        self.heartbeat_interval = DEFAULT_HEARTBEAT_INTERVAL_S
        self.welcomed = threading.Event()
        # Set once the attach loop is done with the stream.
        self.ended = threading.Event()

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

    def close(self) -> None:
        """No more messages: the request stream ends after those already queued."""
        with self._lock:
            if self._closed.is_set():
                return
            self._closed.set()
            self._outbox.put(_END)

    def wait_closed(self, timeout: float) -> bool:
        return self._closed.wait(timeout)


class _SessionEndedError(Exception):
    """The leader ended the session (Fenced) or broke the protocol."""


class ExecutorAgent:
    """Attaches to the leader and runs the tasks it assigns, until :meth:`shutdown`.

    ``factory`` builds each task's pipeline; ``committer_factory`` its offset committer (by default
    a :class:`~sluiceway_executor.offset_commits.KafkaCommitterFactory`); ``sessions`` replaces the
    Spark Connect session the pipelines run on when it is lost; ``on_worker_config`` hears the
    worker config of each welcome (the executor warms its Spark session up with it).
    """

    def __init__(
        self,
        settings: AttachSettings,
        factory: PipelineFactory,
        *,
        committer_factory: CommitterFactory | None = None,
        sessions: SessionKeeper | None = None,
        metrics: ExecutorMetrics | None = None,
        on_worker_config: Callable[[Mapping[str, str]], None] | None = None,
    ) -> None:
        self.settings = settings
        self._on_worker_config = on_worker_config
        self.tasks = TaskTable(
            factory,
            committer_factory if committer_factory is not None else KafkaCommitterFactory(),
            poll_interval=settings.poll_interval,
            max_poll_interval=settings.max_poll_interval,
            commit_timeout=settings.commit_timeout,
            sessions=sessions,
            metrics=metrics,
        )
        self._stopping = threading.Event()
        self._lock = threading.Lock()
        self._session: _Session | None = None
        self._call: grpc.RpcContext | None = None
        self.sessions = 0
        self.welcomed = threading.Event()
        # What each message of the leader after its Welcome does, by the message's `kind`; a kind
        # missing here (from a newer leader) is logged and ignored.
        self._handlers: Mapping[str, Callable[[_Session, executor_pb2.ControllerMessage], None]] = {
            "assignment": self._on_assignment,
            "revocation": self._on_revocation,
            "active_topics_reset": self._on_active_topics_reset,
            "fenced": self._on_fenced,
            "welcome": self._on_second_welcome,
        }

    @property
    def executor_id(self) -> str:
        return self.settings.executor_id

    @property
    def stopping(self) -> bool:
        return self._stopping.is_set()

    def running_tasks(self) -> list[str]:
        return self.tasks.running()

    def runner(self, task: str) -> TaskRunner | None:
        return self.tasks.runner(task)

    # ------------------------------------------------------------------ the loop

    def run(self) -> None:
        """Attaches, and attaches again after every failure, until :meth:`shutdown`."""
        policy = RetryPolicy(initial=self.settings.initial_backoff, maximum=self.settings.max_backoff)
        retry = policy.start()
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
                retry.reset()
            elif not round_done:
                continue
            delay = retry.next_delay()
            assert delay is not None  # the policy has neither a deadline nor an attempt limit
            if welcomed:
                retry.reset()  # the pause after a welcomed session is not a failure: not counted
            level = logging.WARNING if problem != last_problem else logging.DEBUG
            log.log(
                level,
                "attach stream to %s ended (%s); attaching again in %.1fs",
                address,
                problem or "closed by the control plane",
                delay,
            )
            last_problem = problem
            self._stopping.wait(delay)

    def _attach_once(self, address: str) -> bool:
        """One session with the replica at `address`; returns whether it welcomed us."""
        session = _Session(address)
        settings = self.settings
        hello = executor_pb2.Hello(
            executor_id=settings.executor_id,
            version=settings.version,
            host=settings.host,
            spark_remote=settings.spark_remote,
            max_tasks=settings.max_tasks,
            metrics_url=settings.metrics_url,
        )
        # Above gRPC's 4 MiB default on purpose: the control plane packs assignments into smaller
        # messages, but one task's configs may be larger, and it never sends more than this. Opened
        # before the tasks report to this session: a TLS file that went missing fails here.
        channel = settings.security.channel(
            address, options=[("grpc.max_receive_message_length", EXECUTOR_MAX_RECEIVE_BYTES)]
        )
        with self._lock:
            if self._stopping.is_set():
                channel.close()
                return False
            # From here on the tasks report through this stream, after the Hello.
            self.tasks.connect(session, hello)
            self._session = session
            self.sessions += 1
        call = executor_pb2_grpc.ExecutorServiceStub(channel).Attach(
            session.requests(), metadata=settings.security.metadata() or None
        )
        with self._lock:
            self._call = call
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
            # The tasks go on; until the next stream their reports are only remembered.
            self.tasks.disconnect(session)
            session.close()
            call.cancel()
            channel.close()
            if heartbeat is not None:
                heartbeat.join(timeout=5)
            with self._lock:
                if self._session is session:
                    self._session, self._call = None, None
            session.ended.set()

    def _welcome(self, session: _Session, welcome: executor_pb2.Welcome) -> None:
        # The leader keeps its secrets to itself: the executor's own settings fill them in.
        session.worker_config = merge_worker_config(welcome.worker_config, self.settings.worker_config)
        interval = welcome.heartbeat_interval.ToMilliseconds() / 1000.0
        session.heartbeat_interval = interval if interval > 0 else DEFAULT_HEARTBEAT_INTERVAL_S
        if welcome.executor_id and welcome.executor_id != self.settings.executor_id:
            log.warning(
                "the leader welcomed us as %s, not %s", welcome.executor_id, self.settings.executor_id
            )
        dropped = self.tasks.keep_only(welcome.adopted_tasks)
        if dropped:
            log.info("the leader did not adopt %s: stopping without committing", ", ".join(dropped))
        # The leader may be a new one: every task reports the topics it uses again (KIP-558).
        self.tasks.forget_topics()
        session.welcomed.set()
        self.welcomed.set()
        if self._on_worker_config is not None:
            self._on_worker_config(session.worker_config)
        log.info(
            "attached to %s as %s (heartbeat every %.1fs, session timeout %.1fs, %d task(s) kept)",
            session.address,
            self.settings.executor_id,
            session.heartbeat_interval,
            welcome.session_timeout.ToMilliseconds() / 1000.0,
            len(welcome.adopted_tasks),
        )

    def _heartbeats(self, session: _Session) -> None:
        # A sign of life, with each task's progress (the leader shows it in the task's status). Its
        # running_tasks stays empty: the tasks an executor runs are listed once, in its Hello.
        while not session.wait_closed(session.heartbeat_interval):
            beat = executor_pb2.Heartbeat(progress=self.tasks.progress_reports())
            session.send(executor_pb2.ExecutorMessage(heartbeat=beat))

    def _dispatch(self, session: _Session, kind: str | None, message: executor_pb2.ControllerMessage) -> None:
        handler = None if kind is None else self._handlers.get(kind)
        if handler is None:
            log.warning("ignoring an unknown message from the leader (%s)", kind)
            return
        handler(session, message)

    def _on_assignment(self, session: _Session, message: executor_pb2.ControllerMessage) -> None:
        assignment = message.assignment
        if self._stopping.is_set():
            log.info("shutting down: not starting %d assigned task(s)", len(assignment.tasks))
            return
        specs = []
        for item in assignment.tasks:
            try:
                specs.append(TaskSpec.from_proto(item))
            except ValueError:
                log.error("ignoring an assignment with a malformed task name %r", item.task)
        self.tasks.assign(specs, session.worker_config)

    def _on_revocation(self, session: _Session, message: executor_pb2.ControllerMessage) -> None:
        tasks = list(message.revocation.tasks)
        log.info("revoked: %s", ", ".join(tasks))
        ack = executor_pb2.ExecutorMessage(revocation_ack=executor_pb2.RevocationAck(tasks=tasks))

        def acknowledge() -> None:
            # On the stream that revoked them; if it is gone, so is the leader that asked.
            session.send(ack)

        self.tasks.revoke(tasks, then=acknowledge)

    def _on_active_topics_reset(self, session: _Session, message: executor_pb2.ControllerMessage) -> None:
        self.tasks.forget_topics(message.active_topics_reset.connector)

    def _on_fenced(self, session: _Session, message: executor_pb2.ControllerMessage) -> None:
        self.tasks.release_all()
        raise _SessionEndedError(f"fenced by the leader: {message.fenced.reason or 'no reason given'}")

    def _on_second_welcome(self, session: _Session, message: executor_pb2.ControllerMessage) -> None:
        log.warning("ignoring a second Welcome on the same stream")

    # ------------------------------------------------------------------ shutdown

    def shutdown(self, timeout: float | None = None) -> None:
        """Stops every task between batches, letting its batch in flight commit, and waits for them
        (up to ``timeout``); then says Goodbye, when every task has ended, and closes the stream.
        :meth:`run` returns afterwards."""
        self._stopping.set()
        all_ended = self.tasks.stop_all(timeout)
        with self._lock:
            session = self._session
        if session is not None:
            if all_ended:
                session.send(executor_pb2.ExecutorMessage(goodbye=executor_pb2.Goodbye()))
            else:
                log.warning(
                    "some tasks are still running after %ss; closing the stream without Goodbye", timeout
                )
            session.close()
            # The leader ends the stream once it has read everything up to the end of ours.
            session.ended.wait(_GOODBYE_WAIT_S)
        with self._lock:
            call = self._call
        if call is not None:
            call.cancel()
