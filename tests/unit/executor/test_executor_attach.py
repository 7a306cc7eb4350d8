"""The executor's attach loop and task runners against a scripted leader: a real gRPC
`ExecutorService` on a loopback socket that the test drives message by message. Pipelines and
offset committers are small in-process fakes (no Kafka or Spark here: the integration tests cover
those); each fake commit waits until the test answers it, as Kafka would."""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent import futures
from dataclasses import dataclass, field
from typing import Any, cast

import grpc
import pytest
from confluent_kafka import KafkaError, KafkaException
from google.protobuf import duration_pb2

from sluiceway.api.v1 import common_pb2, executor_pb2, executor_pb2_grpc
from sluiceway.common.offsets import OffsetPair, map_to_proto
from sluiceway.connect import PluginRegistry
from sluiceway.connect.kafka_clients import kafka_client_config
from sluiceway_executor.attach import AttachSettings, ExecutorAgent
from sluiceway_executor.connectors.filestream import FileStreamSinkConnector, FileStreamSourceConnector
from sluiceway_executor.offset_commits import (
    CommitOutcome,
    CommitStatus,
    KafkaCommitterFactory,
    KafkaOffsetCommitter,
)
from sluiceway_executor.pipelines import parse_task_name
from sluiceway_executor.pipelines.pipeline import BatchOutcome, ProducedRecord
from sluiceway_executor.pipelines.spec import TaskSpec
from sluiceway_server.embedded import free_port

TIMEOUT = 10.0
# A Welcome's worker config turning automatic restarts off, for tests of a single failure.
NO_RESTARTS = {"task.restart.enable": "false"}
TASK = "connectors/demo/tasks/0"
OTHER = "connectors/demo/tasks/1"

# ------------------------------------------------------------------ the scripted leader


class Stream:
    """One attach stream as the leader sees it."""

    def __init__(self) -> None:
        self.outbox: queue.Queue[executor_pb2.ControllerMessage | None] = queue.Queue()
        self._cond = threading.Condition()
        self.received: list[executor_pb2.ExecutorMessage] = []
        self._taken: set[int] = set()
        self._markers = 0
        self.ended = threading.Event()

    def deliver(self, message: executor_pb2.ExecutorMessage) -> None:
        with self._cond:
            self.received.append(message)
            self._cond.notify_all()

    def send(self, **kind: Any) -> None:
        self.outbox.put(executor_pb2.ControllerMessage(**kind))

    def close(self) -> None:
        self.outbox.put(None)

    def take(
        self,
        kind: str,
        where: Callable[[Any], bool] = lambda _: True,
        timeout: float = TIMEOUT,
        *,
        since: int = 0,
    ) -> Any:
        """The first not yet taken message of `kind` (its payload) matching `where`, among those
        received at position `since` (see `mark`) or later."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while True:
                for index, message in enumerate(self.received):
                    if index < since or index in self._taken or message.WhichOneof("kind") != kind:
                        continue
                    payload = getattr(message, kind)
                    if where(payload):
                        self._taken.add(index)
                        return payload
                left = deadline - time.monotonic()
                if left <= 0:
                    kinds = [m.WhichOneof("kind") for m in self.received]
                    raise AssertionError(f"no {kind} message within {timeout}s; received {kinds}")
                self._cond.wait(left)

    def of_kind(self, kind: str) -> list[Any]:
        with self._cond:
            return [getattr(m, kind) for m in self.received if m.WhichOneof("kind") == kind]

    def kinds(self) -> list[str | None]:
        with self._cond:
            return [m.WhichOneof("kind") for m in self.received]

    def mark(self) -> int:
        """The position the next received message will have: `take(since=...)` then sees only
        messages the executor sent after this call."""
        with self._cond:
            return len(self.received)

    def barrier(self) -> None:
        """Sends a revocation of a task never assigned and waits for its acknowledgement. The
        executor handles the leader's messages one at a time and in order, so once the
        acknowledgement is here every message sent before the barrier has been handled."""
        self._markers += 1
        marker = f"connectors/barrier-{self._markers}/tasks/0"
        self.send(revocation=executor_pb2.Revocation(tasks=[marker]))
        self.take("revocation_ack", lambda ack: list(ack.tasks) == [marker])

    def welcome(
        self,
        heartbeat_ms: int = 100,
        *,
        adopted: list[str] | None = None,
        worker: Mapping[str, str] | None = None,
    ) -> executor_pb2.Hello:
        """Answers the Hello. `adopted`: the tasks the executor keeps; by default every task the
        Hello listed (a leader that agrees with everything)."""
        hello: executor_pb2.Hello = self.take("hello")
        interval = duration_pb2.Duration()
        interval.FromMilliseconds(heartbeat_ms)
        timeout = duration_pb2.Duration()
        timeout.FromMilliseconds(heartbeat_ms * 10)
        self.send(
            welcome=executor_pb2.Welcome(
                executor_id=hello.executor_id,
                heartbeat_interval=interval,
                session_timeout=timeout,
                worker_config={"bootstrap.servers": "kafka:9092", **(worker or {})},
                adopted_tasks=[t.task for t in hello.running_tasks] if adopted is None else adopted,
            )
        )
        return hello

    def assign(
        self,
        task: str = TASK,
        generation: int = 1,
        *,
        paused: bool = False,
        config: Mapping[str, str] | None = None,
        offsets: list[tuple[dict[str, Any], dict[str, Any]]] | None = None,
        task_count: int = 2,
        fingerprint: str = "",
    ) -> None:
        assignment = executor_pb2.TaskAssignment(
            task=task,
            generation=generation,
            connector_config={"connector.class": "Fake", **(config or {})},
            task_config={"task.class": "fake.Task"},
            target_state=common_pb2.TARGET_STATE_PAUSED if paused else common_pb2.TARGET_STATE_RUNNING,
            task_count=task_count,
            fingerprint=fingerprint or f"fp-{generation}",
        )
        for partition, offset in offsets or []:
            assignment.source_offsets.add(partition=map_to_proto(partition), offset=map_to_proto(offset))
        self.send(assignment=executor_pb2.Assignment(tasks=[assignment]))

    def status(
        self, state: int, task: str = TASK, generation: int | None = None, timeout: float = TIMEOUT
    ) -> executor_pb2.TaskStatusReport:
        report: executor_pb2.TaskStatusReport = self.take(
            "task_status",
            lambda r: r.task == task and r.state == state and generation in (None, r.generation),
            timeout,
        )
        return report


class Leader(executor_pb2_grpc.ExecutorServiceServicer):
    def __init__(self) -> None:
        self.streams: queue.Queue[Stream] = queue.Queue()
        self.all: list[Stream] = []
        # Called as each attach call arrives, before its stream exists.
        self.on_attach: Callable[[], None] = lambda: None
        # Called with every message from the executor as it arrives.
        self.on_message: Callable[[executor_pb2.ExecutorMessage], None] = lambda _: None

    def Attach(  # noqa: N802 - the RPC's name
        self, request_iterator: Iterator[executor_pb2.ExecutorMessage], context: grpc.ServicerContext
    ) -> Iterator[executor_pb2.ControllerMessage]:
        self.on_attach()
        stream = Stream()
        self.all.append(stream)

        def read() -> None:
            try:
                for message in request_iterator:
                    self.on_message(message)
                    stream.deliver(message)
            except grpc.RpcError:
                pass
            finally:
                stream.ended.set()
                stream.close()

        threading.Thread(target=read, daemon=True).start()
        context.add_callback(stream.close)
        self.streams.put(stream)
        while True:
            message = stream.outbox.get()
            if message is None:
                return
            yield message

    def next_stream(self, timeout: float = TIMEOUT) -> Stream:
        return self.streams.get(timeout=timeout)


@dataclass
class LeaderServer:
    port: int
    leader: Leader = field(default_factory=Leader)
    server: grpc.Server | None = None

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self) -> LeaderServer:
        self.server = grpc.server(futures.ThreadPoolExecutor(max_workers=8))
        executor_pb2_grpc.add_ExecutorServiceServicer_to_server(self.leader, self.server)
        self.server.add_insecure_port(self.address)
        self.server.start()
        return self

    def stop(self) -> None:
        server, self.server = self.server, None
        if server is None:
            return
        for stream in self.leader.all:
            stream.close()
        server.stop(0).wait(5)


# ------------------------------------------------------------------ fake pipelines


class FakeWork:
    """Shared script of every fake pipeline: how batches behave, and what happened."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.pipelines: list[FakePipeline] = []
        self.gate: threading.Event | None = None
        self.in_batch = threading.Event()
        self.fail_at: int | None = None
        self.fail_start = False
        self.empty = False
        self.topics_per_batch: Callable[[int], set[str]] = lambda n: {f"topic-{n % 2}"}
        # What the pipelines, committers (and anything else a test hooks in) did, in order.
        self.events: list[str] = []

    def note(self, event: str) -> None:
        with self.lock:
            self.events.append(event)

    def __call__(self, spec: TaskSpec, worker_config: Mapping[str, str]) -> FakePipeline:
        pipeline = FakePipeline(self, spec, dict(worker_config))
        with self.lock:
            self.pipelines.append(pipeline)
            self.events.append(f"generation {spec.generation} created")
        return pipeline

    def of(self, task: str) -> list[FakePipeline]:
        with self.lock:
            return [p for p in self.pipelines if p.spec.name == task]


@dataclass
class FakePipeline:
    work: FakeWork
    spec: TaskSpec
    worker_config: dict[str, str]
    started: bool = False
    stopped: bool = False
    batches: list[int] = field(default_factory=list)
    finished: list[int] = field(default_factory=list)
    committed_outcomes: list[BatchOutcome] = field(default_factory=list)
    # time.monotonic() as each batch began.
    batch_starts: list[float] = field(default_factory=list)

    def start(self) -> None:
        if self.work.fail_start:
            raise ValueError("cannot start: bad config")
        self.started = True

    def run_batch(self, batch_id: int) -> BatchOutcome:
        self.batch_starts.append(time.monotonic())
        self.batches.append(batch_id)
        self.work.in_batch.set()
        if self.work.fail_at == batch_id:
            raise RuntimeError(f"batch {batch_id} exploded")
        gate = self.work.gate
        if gate is not None:
            assert gate.wait(TIMEOUT), "the test never opened the gate"
        self.finished.append(batch_id)
        self.work.note(f"generation {self.spec.generation} batch {batch_id} finished")
        if self.work.empty:
            return BatchOutcome(records=0)
        _, index = parse_task_name(self.spec.name)
        return BatchOutcome(
            records=10,
            offsets=[({"task": index}, {"batch": batch_id, "generation": self.spec.generation})],
            topics=frozenset(self.work.topics_per_batch(batch_id)),
        )

    def committed(self, outcome: BatchOutcome) -> None:
        self.committed_outcomes.append(outcome)

    def stop(self) -> None:
        self.stopped = True
        self.work.note(f"generation {self.spec.generation} stopped")


# ------------------------------------------------------------------ fake offset committers


@dataclass
class Commit:
    """One commit a runner made, waiting for the test's answer."""

    task: str
    generation: int
    offsets: list[OffsetPair]
    done: threading.Event = field(default_factory=threading.Event)
    outcome: CommitOutcome | None = None

    def answer(self, status: CommitStatus = CommitStatus.OK, error: str = "") -> None:
        self.outcome = CommitOutcome(status, error)
        self.done.set()


class FakeCommits:
    """Every fake committer's commits, in order. Each commit waits for `Commit.answer` (or times
    out as REJECTED); after `release()` every commit, pending or to come, is answered OK."""

    def __init__(self, work: FakeWork) -> None:
        self.work = work
        self._cond = threading.Condition()
        self.commits: list[Commit] = []
        self._taken: set[int] = set()
        self.open_error: Exception | None = None
        # (task, generation, worker config) of every committer opened.
        self.opened: list[tuple[str, int, dict[str, str]]] = []
        self.closed: list[tuple[str, int]] = []
        self._released = False

    def __call__(self, spec: TaskSpec, worker_config: Mapping[str, str]) -> FakeCommitter:
        return FakeCommitter(self, spec, dict(worker_config))

    def add(self, commit: Commit) -> None:
        with self._cond:
            self.commits.append(commit)
            if self._released:
                commit.answer()
            self._cond.notify_all()

    def take(self, task: str = TASK, timeout: float = TIMEOUT) -> Commit:
        """The first commit of `task` not yet taken."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while True:
                for index, commit in enumerate(self.commits):
                    if index not in self._taken and commit.task == task:
                        self._taken.add(index)
                        return commit
                left = deadline - time.monotonic()
                if left <= 0:
                    raise AssertionError(f"no commit of {task} within {timeout}s")
                self._cond.wait(left)

    def of(self, task: str = TASK) -> list[Commit]:
        with self._cond:
            return [c for c in self.commits if c.task == task]

    def release(self) -> None:
        with self._cond:
            self._released = True
            for commit in self.commits:
                if not commit.done.is_set():
                    commit.answer()


@dataclass
class FakeCommitter:
    commits: FakeCommits
    spec: TaskSpec
    worker_config: dict[str, str]

    def open(self, timeout: float) -> None:
        if self.commits.open_error is not None:
            raise self.commits.open_error
        self.commits.opened.append((self.spec.name, self.spec.generation, self.worker_config))

    def commit(
        self, offsets: list[OffsetPair], timeout: float, records: Sequence[ProducedRecord] = ()
    ) -> CommitOutcome:
        commit = Commit(self.spec.name, self.spec.generation, offsets)
        self.commits.add(commit)
        if not commit.done.wait(timeout):
            return CommitOutcome(CommitStatus.REJECTED, "no answer")
        assert commit.outcome is not None
        self.commits.work.note(f"generation {self.spec.generation} commit {commit.outcome.status.value}")
        return commit.outcome

    def close(self) -> None:
        self.commits.closed.append((self.spec.name, self.spec.generation))


# ------------------------------------------------------------------ fixtures


@pytest.fixture
def server() -> Iterator[LeaderServer]:
    started = LeaderServer(free_port()).start()
    yield started
    started.stop()


@pytest.fixture
def work() -> FakeWork:
    return FakeWork()


@pytest.fixture
def commits(work: FakeWork) -> FakeCommits:
    return FakeCommits(work)


def settings_for(address: str, **overrides: Any) -> AttachSettings:
    values: dict[str, Any] = {
        "server": address,
        "spark_remote": "sc://spark:15002",
        "executor_id": "exec-test",
        "max_tasks": 4,
        "initial_backoff": 0.05,
        "max_backoff": 0.2,
        "commit_timeout": 5.0,
        "poll_interval": 0.01,
        "max_poll_interval": 0.05,
        **overrides,
    }
    return AttachSettings(**values)


@pytest.fixture
def agent_factory(
    server: LeaderServer, work: FakeWork, commits: FakeCommits
) -> Iterator[Callable[..., ExecutorAgent]]:
    agents: list[tuple[ExecutorAgent, threading.Thread]] = []

    def make(**overrides: Any) -> ExecutorAgent:
        agent = ExecutorAgent(settings_for(server.address, **overrides), work, committer_factory=commits)
        thread = threading.Thread(target=agent.run, daemon=True)
        thread.start()
        agents.append((agent, thread))
        return agent

    yield make
    # Nothing may wait for an answer the test will never give.
    commits.release()
    if work.gate is not None:
        work.gate.set()
    server.stop()
    for agent, thread in agents:
        agent.shutdown(timeout=5)
        thread.join(timeout=5)
        assert not thread.is_alive(), "the attach loop did not end after shutdown()"


def eventually(check: Callable[[], bool], timeout: float = TIMEOUT) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError("condition not met in time")
        time.sleep(0.01)


def restart(server: LeaderServer) -> LeaderServer:
    """A new scripted leader on the same address (the first must have been stopped)."""
    return LeaderServer(server.port).start()


# ------------------------------------------------------------------ one stream


def test_hello_welcome_heartbeats_status_commits_and_topics(
    server: LeaderServer, work: FakeWork, commits: FakeCommits, agent_factory: Callable[..., ExecutorAgent]
) -> None:
    agent = agent_factory()
    stream = server.leader.next_stream()
    hello = stream.welcome(heartbeat_ms=50, worker={"producer.linger.ms": "5"})
    assert (hello.executor_id, hello.spark_remote, hello.max_tasks) == ("exec-test", "sc://spark:15002", 4)
    assert hello.version and hello.host
    assert list(hello.running_tasks) == []

    stream.assign(generation=7, offsets=[({"task": 0}, {"batch": 41, "generation": 6})], fingerprint="fp")
    running = stream.status(common_pb2.STATE_RUNNING)
    assert running.generation == 7
    # The committer was opened, with the Welcome's worker config, before the task said RUNNING.
    ((task, generation, worker_config),) = commits.opened
    assert (task, generation, worker_config["producer.linger.ms"]) == (TASK, 7, "5")
    first = commits.take()
    assert first.generation == 7
    assert first.offsets == [({"task": 0}, {"batch": 0, "generation": 7})]
    first.answer()
    commits.take().answer()
    commits.take().answer()

    # Topics are reported once each, after the batch that used them first was committed.
    eventually(lambda: len([t for r in stream.of_kind("active_topics") for t in r.topics]) >= 2)
    topics = [t for report in stream.of_kind("active_topics") for t in report.topics]
    assert sorted(topics) == ["topic-0", "topic-1"]
    assert all(report.generation == 7 for report in stream.of_kind("active_topics"))

    # A heartbeat is a sign of life and nothing more: what the executor runs goes in its Hello.
    beat = stream.take("heartbeat")
    assert list(beat.running_tasks) == []
    assert agent.running_tasks() == [TASK]

    (pipeline,) = work.of(TASK)
    assert pipeline.worker_config["producer.linger.ms"] == "5"
    assert pipeline.spec.source_offsets == (({"task": 0}, {"batch": 41, "generation": 6}),)
    assert isinstance(pipeline.spec.source_offsets[0][1]["batch"], int)
    assert pipeline.spec.task_count == 2
    assert pipeline.spec.fingerprint == "fp"
    eventually(lambda: len(pipeline.committed_outcomes) >= 3)
    assert "offset_commit" not in stream.kinds()


def test_an_active_topics_reset_makes_the_connectors_tasks_report_their_topics_again(
    server: LeaderServer, commits: FakeCommits, work: FakeWork, agent_factory: Callable[..., ExecutorAgent]
) -> None:
    work.topics_per_batch = lambda n: {"orders"}
    agent_factory()
    stream = server.leader.next_stream()
    stream.welcome()
    stream.assign()
    stream.status(common_pb2.STATE_RUNNING)
    for _ in range(3):
        commits.take().answer()
    # The runner queues its report after a commit's answer and before its next batch: once the next
    # commit is here and a barrier's acknowledgement (queued later) has arrived, so has the report.
    following = commits.take()
    stream.barrier()
    assert [list(r.topics) for r in stream.of_kind("active_topics")] == [["orders"]]

    # Another connector's reset changes nothing; this connector's makes the next batch report again.
    stream.send(active_topics_reset=executor_pb2.ActiveTopicsReset(connector="other"))
    stream.barrier()
    following.answer()
    after = commits.take()
    stream.barrier()
    assert len(stream.of_kind("active_topics")) == 1
    stream.send(active_topics_reset=executor_pb2.ActiveTopicsReset(connector="demo"))
    stream.barrier()
    after.answer()
    commits.take()
    stream.barrier()
    reports = stream.of_kind("active_topics")
    assert [(r.task, list(r.topics)) for r in reports] == [(TASK, ["orders"]), (TASK, ["orders"])]


def test_no_topics_are_reported_when_topic_tracking_is_disabled(
    server: LeaderServer, commits: FakeCommits, agent_factory: Callable[..., ExecutorAgent]
) -> None:
    agent_factory()
    stream = server.leader.next_stream()
    stream.welcome(worker={"topic.tracking.enable": "false"})
    stream.assign()
    stream.status(common_pb2.STATE_RUNNING)
    for _ in range(3):
        commits.take().answer()
    commits.take()
    stream.barrier()
    assert stream.of_kind("active_topics") == []


def test_a_rejected_commit_fails_the_task_with_the_committers_message(
    server: LeaderServer, work: FakeWork, commits: FakeCommits, agent_factory: Callable[..., ExecutorAgent]
) -> None:
    agent_factory()
    stream = server.leader.next_stream()
    stream.welcome(worker=NO_RESTARTS)
    stream.assign(generation=3)
    commits.take().answer(CommitStatus.REJECTED, "the offsets topic is gone")
    failed = stream.status(common_pb2.STATE_FAILED)
    assert failed.generation == 3
    assert "Offset commit failed: the offsets topic is gone" in failed.trace
    (pipeline,) = work.of(TASK)
    eventually(lambda: pipeline.stopped)
    assert pipeline.committed_outcomes == []
    assert pipeline.batches == [0]
    assert commits.closed == [(TASK, 3)]


def test_a_fenced_commit_ends_the_task_quietly(
    server: LeaderServer, work: FakeWork, commits: FakeCommits, agent_factory: Callable[..., ExecutorAgent]
) -> None:
    agent = agent_factory()
    stream = server.leader.next_stream()
    stream.welcome()
    stream.assign(generation=4)
    stream.status(common_pb2.STATE_RUNNING)
    commits.take().answer()
    commits.take().answer(CommitStatus.FENCED, "a newer producer holds the id")
    (pipeline,) = work.of(TASK)
    eventually(lambda: pipeline.stopped)
    runner = agent.runner(TASK)
    assert runner is not None and runner.fenced and not runner.failed
    assert runner.join(TIMEOUT)
    # No FAILED status, no further batch or commit; the task no longer runs.
    stream.barrier()
    assert [r.state for r in stream.of_kind("task_status")] == [common_pb2.STATE_RUNNING]
    assert pipeline.batches == [0, 1] and len(pipeline.committed_outcomes) == 1
    assert len(commits.of(TASK)) == 2
    assert commits.closed == [(TASK, 4)]
    eventually(lambda: agent.running_tasks() == [])

    # Attached again, the executor does not claim the task.
    server.stop()
    again = restart(server)
    try:
        hello = again.leader.next_stream().welcome()
        assert list(hello.running_tasks) == []
    finally:
        again.stop()


def test_a_failing_batch_reports_failed_with_the_full_trace(
    server: LeaderServer, work: FakeWork, commits: FakeCommits, agent_factory: Callable[..., ExecutorAgent]
) -> None:
    work.fail_at = 1
    agent = agent_factory()
    stream = server.leader.next_stream()
    stream.welcome(worker=NO_RESTARTS)
    stream.assign(generation=5)
    commits.take().answer()
    failed = stream.status(common_pb2.STATE_FAILED)
    assert failed.generation == 5
    assert "Traceback (most recent call last)" in failed.trace
    assert "RuntimeError: batch 1 exploded" in failed.trace
    (pipeline,) = work.of(TASK)
    eventually(lambda: pipeline.stopped)
    assert pipeline.batches == [0, 1]
    assert commits.closed == [(TASK, 5)]
    # A failed task is no longer running.
    eventually(lambda: agent.running_tasks() == [])


def test_a_task_that_cannot_start_reports_failed(
    server: LeaderServer, work: FakeWork, commits: FakeCommits, agent_factory: Callable[..., ExecutorAgent]
) -> None:
    work.fail_start = True
    agent_factory()
    stream = server.leader.next_stream()
    stream.welcome(worker=NO_RESTARTS)
    stream.assign()
    failed = stream.status(common_pb2.STATE_FAILED)
    assert "ValueError: cannot start: bad config" in failed.trace
    # The committer opens while the pipeline starts (as Kafka Connect takes over a task's
    # transactional id before it starts the task); it commits nothing and is closed again.
    assert commits.commits == []
    assert [(task, generation) for task, generation, _ in commits.opened] == [(TASK, 1)]
    assert commits.closed == [(TASK, 1)]


def test_a_committer_that_cannot_open_in_time_waits_for_kafka_without_failing(
    server: LeaderServer, work: FakeWork, commits: FakeCommits, agent_factory: Callable[..., ExecutorAgent]
) -> None:
    commits.open_error = TimeoutError("cannot take over transactional id g-demo-0 within 5s")
    agent_factory()
    stream = server.leader.next_stream()
    # Kafka's absence is not the task's failure: restarts being off changes nothing.
    stream.welcome(worker=NO_RESTARTS)
    stream.assign(generation=2)
    waiting = stream.status(common_pb2.STATE_RESTARTING)
    assert waiting.generation == 2 and waiting.restart_attempt == 0
    assert not waiting.HasField("next_restart_time")
    assert "TimeoutError: cannot take over transactional id g-demo-0" in waiting.trace
    (pipeline,) = work.of(TASK)
    eventually(lambda: pipeline.stopped)
    assert pipeline.started and pipeline.batches == []
    # Kafka answers again: the next run opens its committer and runs.
    commits.open_error = None
    assert stream.status(common_pb2.STATE_RUNNING, timeout=TIMEOUT).generation == 2
    commits.take().answer()
    assert [r.state for r in stream.of_kind("task_status")] == [
        common_pb2.STATE_RESTARTING,
        common_pb2.STATE_RUNNING,
    ]


def test_paused_task_idles_until_reassigned_running(
    server: LeaderServer, work: FakeWork, commits: FakeCommits, agent_factory: Callable[..., ExecutorAgent]
) -> None:
    agent = agent_factory()
    stream = server.leader.next_stream()
    stream.welcome()
    stream.assign(generation=1, paused=True)
    assert stream.status(common_pb2.STATE_PAUSED).generation == 1
    # Two heartbeats after the PAUSED report, the task still runs: it stays assigned, idle.
    after_paused = stream.mark()
    for _ in range(2):
        stream.take("heartbeat", since=after_paused)
    assert agent.running_tasks() == [TASK]
    assert work.of(TASK) == []  # no pipeline, no batches
    assert commits.opened == [] and commits.commits == []  # and no committer

    stream.assign(generation=2)
    assert stream.status(common_pb2.STATE_RUNNING, generation=2).generation == 2
    # The generation 2 runner starts its pipeline only after the paused runner has ended, so by now
    # everything the paused runner did is visible: it made no pipeline and committed nothing.
    assert [p.spec.generation for p in work.of(TASK)] == [2]
    assert commits.take().generation == 2
    assert {c.generation for c in commits.commits} == {2}


def test_a_changed_assignment_restarts_the_task_between_batches_without_committing_the_old_batch(
    server: LeaderServer, work: FakeWork, commits: FakeCommits, agent_factory: Callable[..., ExecutorAgent]
) -> None:
    agent = agent_factory()
    stream = server.leader.next_stream()
    stream.welcome()
    stream.assign(generation=1)
    first = commits.take()
    work.gate = threading.Event()
    first.answer()
    (old,) = work.of(TASK)
    # The next batch is now in flight and held.
    eventually(lambda: len(old.batches) == 2)
    old_runner = agent.runner(TASK)
    assert old_runner is not None

    # Same generation and config again: nothing happens. After the barrier the agent has handled
    # the assignment: the runner is the same one, and nobody asked it to stop.
    stream.assign(generation=1)
    stream.barrier()
    assert agent.runner(TASK) is old_runner
    assert not old_runner.stopping
    assert len(work.of(TASK)) == 1

    # A new generation: the agent installs a new runner, whose thread first asks the old one to stop.
    stream.assign(generation=2, config={"batch.max.records": "5"})
    eventually(lambda: agent.runner(TASK) is not old_runner)
    eventually(lambda: old_runner.stopping)
    assert len(work.of(TASK)) == 1, "the new run must wait until the batch in flight ended"
    work.gate.set()
    stream.status(common_pb2.STATE_RUNNING, generation=1)
    assert stream.status(common_pb2.STATE_RUNNING, generation=2).generation == 2
    assert commits.take().generation == 2
    # The old generation's second batch was never committed, and its offsets carried over.
    assert [c.generation for c in commits.commits] == [1, 2]
    new = work.of(TASK)[1]
    assert old.stopped and old.finished == [0, 1]
    events = work.events
    assert events.index("generation 1 stopped") < events.index("generation 2 created"), events
    assert new.spec.connector_config["batch.max.records"] == "5"
    assert new.spec.source_offsets == (({"task": 0}, {"batch": 0, "generation": 1}),)
    assert commits.closed[0] == (TASK, 1)


def test_revocation_stops_between_batches_commits_the_batch_in_flight_then_acks(
    server: LeaderServer, work: FakeWork, commits: FakeCommits, agent_factory: Callable[..., ExecutorAgent]
) -> None:
    agent = agent_factory()
    stream = server.leader.next_stream()
    stream.welcome()
    stream.assign(TASK, 1)
    stream.assign(OTHER, 2)
    firsts = [commits.take(TASK), commits.take(OTHER)]
    work.gate = threading.Event()
    for first in firsts:
        first.answer()
    eventually(lambda: all(len(p.batches) >= 2 for p in work.pipelines))
    revoked_runner = agent.runner(TASK)
    assert revoked_runner is not None

    stream.send(revocation=executor_pb2.Revocation(tasks=[TASK, "connectors/ghost/tasks/0"]))
    # The agent has handled the revocation once it has asked the runner to stop.
    eventually(lambda: revoked_runner.stopping)
    work.gate.set()
    # The revoked task's batch in flight still commits (its generation is current until the ack).
    in_flight = commits.take(TASK)
    assert in_flight.generation == 1
    assert not revoked_runner.join(0.2), "the runner waits for its commit"
    assert stream.of_kind("revocation_ack") == [], "no ack while the batch in flight is not committed"
    in_flight.answer()
    ack = stream.take("revocation_ack")
    assert sorted(ack.tasks) == sorted([TASK, "connectors/ghost/tasks/0"])
    (revoked,) = work.of(TASK)
    assert revoked.stopped
    assert len(revoked.committed_outcomes) == 2
    assert agent.runner(TASK) is None
    # The other task keeps running.
    commits.take(OTHER).answer()
    eventually(lambda: agent.running_tasks() == [OTHER])


def test_empty_batches_back_off_and_commit_nothing(
    server: LeaderServer, work: FakeWork, commits: FakeCommits, agent_factory: Callable[..., ExecutorAgent]
) -> None:
    work.empty = True
    agent_factory(poll_interval=0.05, max_poll_interval=0.2)
    stream = server.leader.next_stream()
    stream.welcome()
    stream.assign()
    stream.status(common_pb2.STATE_RUNNING)
    (pipeline,) = work.of(TASK)
    # Wait for the first batch that begins a second or more after the first one: every batch of
    # that first second has then been run and handled (a batch begins only after the one before
    # it was handled).
    eventually(lambda: len(pipeline.batch_starts) > 0)
    first = pipeline.batch_starts[0]
    eventually(lambda: pipeline.batch_starts[-1] >= first + 1.0)
    within_a_second = [t for t in pipeline.batch_starts if t < first + 1.0]
    # 0.05 + 0.1 + 0.2 + 0.2 … within a second: a handful of polls, not hundreds.
    assert 3 <= len(within_a_second) <= 10
    assert commits.commits == []


# ------------------------------------------------------------------ across streams


def test_tasks_keep_running_and_committing_while_the_stream_is_down_and_are_listed_in_the_next_hello(
    server: LeaderServer, work: FakeWork, commits: FakeCommits, agent_factory: Callable[..., ExecutorAgent]
) -> None:
    work.topics_per_batch = lambda n: {"orders"}
    agent = agent_factory()
    stream = server.leader.next_stream()
    stream.welcome()
    stream.assign(generation=7, fingerprint="fp-seven")
    stream.status(common_pb2.STATE_RUNNING)
    commits.take().answer()
    runner = agent.runner(TASK)
    assert runner is not None

    # The control plane goes away; the task does not notice.
    server.stop()
    eventually(stream.ended.is_set)
    for _ in range(3):
        commits.take().answer()
    assert agent.runner(TASK) is runner and runner.alive and not runner.stopping

    restarted = restart(server)
    try:
        again = restarted.leader.next_stream()
        hello = again.welcome()
        (listed,) = hello.running_tasks
        assert (listed.task, listed.generation, listed.fingerprint) == (TASK, 7, "fp-seven")
        assert (listed.state, listed.trace) == (common_pb2.STATE_RUNNING, "")
        assert agent.sessions == 2
        # Adopted: the same runner goes on (heartbeats begin once the Welcome was handled), and
        # reports its topics again to the new leader.
        again.take("heartbeat")
        assert agent.running_tasks() == [TASK]
        commits.take().answer()
        commits.take().answer()
        report = again.take("active_topics")
        assert (report.task, report.generation, list(report.topics)) == (TASK, 7, ["orders"])
        assert agent.runner(TASK) is runner and not runner.stopping
        (pipeline,) = work.of(TASK)
        assert not pipeline.stopped and len(commits.of(TASK)) >= 6

        # A new generation from the new leader replaces the runner from the old stream.
        again.assign(generation=8, fingerprint="fp-eight")
        assert again.status(common_pb2.STATE_RUNNING, generation=8).generation == 8
        assert pipeline.stopped and agent.runner(TASK) is not runner
    finally:
        commits.release()
        agent.shutdown(timeout=5)
        restarted.stop()


def test_a_status_reported_while_the_stream_is_down_goes_out_in_the_next_hello(
    server: LeaderServer, work: FakeWork, commits: FakeCommits, agent_factory: Callable[..., ExecutorAgent]
) -> None:
    agent = agent_factory()
    stream = server.leader.next_stream()
    stream.welcome(worker=NO_RESTARTS)
    stream.assign(generation=3)
    stream.assign(OTHER, generation=4, paused=True)
    stream.status(common_pb2.STATE_PAUSED, OTHER)
    commits.take().answer()
    pending = commits.take()

    server.stop()
    eventually(stream.ended.is_set)
    pending.answer(CommitStatus.REJECTED, "the offsets topic is gone")
    (pipeline,) = work.of(TASK)
    eventually(lambda: pipeline.stopped)

    restarted = restart(server)
    try:
        again = restarted.leader.next_stream()
        hello = again.welcome(adopted=[TASK, OTHER])
        listed = {t.task: t for t in hello.running_tasks}
        assert sorted(listed) == [TASK, OTHER]
        assert (listed[TASK].generation, listed[TASK].fingerprint, listed[TASK].state) == (
            3,
            "fp-3",
            common_pb2.STATE_FAILED,
        )
        assert "Offset commit failed: the offsets topic is gone" in listed[TASK].trace
        assert (listed[OTHER].generation, listed[OTHER].state) == (4, common_pb2.STATE_PAUSED)
        # The failed task is kept, not running: only the paused one runs.
        eventually(lambda: agent.running_tasks() == [OTHER])
        assert agent.runner(TASK) is not None
    finally:
        agent.shutdown(timeout=5)
        restarted.stop()


def test_a_welcome_stops_the_tasks_it_does_not_adopt_without_committing(
    server: LeaderServer, work: FakeWork, commits: FakeCommits, agent_factory: Callable[..., ExecutorAgent]
) -> None:
    agent = agent_factory()
    stream = server.leader.next_stream()
    stream.welcome()
    stream.assign(TASK, 1)
    stream.assign(OTHER, 2)
    firsts = [commits.take(TASK), commits.take(OTHER)]
    work.gate = threading.Event()
    for first in firsts:
        first.answer()
    eventually(lambda: all(len(p.batches) >= 2 for p in work.pipelines))
    kept, dropped = agent.runner(TASK), agent.runner(OTHER)
    assert kept is not None and dropped is not None

    server.stop()
    eventually(stream.ended.is_set)
    restarted = restart(server)
    try:
        again = restarted.leader.next_stream()
        hello = again.welcome(adopted=[TASK])
        assert sorted(t.task for t in hello.running_tasks) == [TASK, OTHER]
        eventually(lambda: dropped.stopping)
        assert agent.runner(OTHER) is None and agent.runner(TASK) is kept and not kept.stopping
        work.gate.set()
        # The kept task commits its batch in flight and goes on; the other ends without committing.
        commits.take(TASK).answer()
        (other,) = work.of(OTHER)
        eventually(lambda: other.stopped)
        assert other.finished == [0, 1] and len(commits.of(OTHER)) == 1
        eventually(lambda: agent.running_tasks() == [TASK])
    finally:
        commits.release()
        agent.shutdown(timeout=5)
        restarted.stop()


def test_fenced_stops_every_task_without_committing_and_attaches_again(
    server: LeaderServer, work: FakeWork, commits: FakeCommits, agent_factory: Callable[..., ExecutorAgent]
) -> None:
    agent = agent_factory()
    stream = server.leader.next_stream()
    stream.welcome()
    stream.assign()
    first = commits.take()
    work.gate = threading.Event()
    first.answer()
    (pipeline,) = work.of(TASK)
    eventually(lambda: len(pipeline.batches) == 2)
    runner = agent.runner(TASK)
    assert runner is not None
    stream.send(fenced=executor_pb2.Fenced(reason="no heartbeat within the session timeout"))
    # The agent asks the runner to stop and attaches again at once: the new Hello lists nothing.
    second = server.leader.next_stream()
    assert runner.stopping
    hello = second.welcome()
    assert list(hello.running_tasks) == []
    assert agent.runner(TASK) is None
    work.gate.set()
    eventually(lambda: pipeline.stopped)
    # The batch in flight at the fence was not committed.
    assert len(commits.of(TASK)) == 1
    assert pipeline.finished == [0, 1]
    eventually(stream.ended.is_set)

    # The leader can assign the task again; the new runner starts after the old one ended.
    second.assign(generation=5)
    assert second.status(common_pb2.STATE_RUNNING, generation=5).generation == 5
    assert commits.take().generation == 5


def test_shutdown_commits_the_batches_in_flight_then_says_goodbye_and_closes_the_stream(
    server: LeaderServer, work: FakeWork, commits: FakeCommits
) -> None:
    agent = ExecutorAgent(settings_for(server.address), work, committer_factory=commits)
    thread = threading.Thread(target=agent.run, daemon=True)
    thread.start()
    server.leader.on_message = lambda m: work.note(str(m.WhichOneof("kind")))
    stream = server.leader.next_stream()
    stream.welcome()
    stream.assign()
    first = commits.take()
    work.gate = threading.Event()
    first.answer()
    (pipeline,) = work.of(TASK)
    eventually(lambda: len(pipeline.batches) == 2)
    runner = agent.runner(TASK)
    assert runner is not None

    stopper = threading.Thread(target=agent.shutdown, daemon=True)
    stopper.start()
    # shutdown() has begun once it has asked the runner to stop; the batch in flight holds it there.
    eventually(lambda: runner.stopping)
    assert agent.stopping
    assert thread.is_alive()
    work.gate.set()
    last = commits.take()
    assert stream.of_kind("goodbye") == [], "no Goodbye while a task is still committing"
    last.answer()
    stopper.join(timeout=TIMEOUT)
    thread.join(timeout=TIMEOUT)
    assert not thread.is_alive()
    eventually(stream.ended.is_set)
    assert pipeline.stopped and len(pipeline.committed_outcomes) == 2
    assert pipeline.batches == [0, 1], "no batch starts once stopping"
    # Goodbye came after the task had committed and stopped, and was the stream's last message.
    events = work.events
    last_commit = events.index("generation 1 commit ok", events.index("generation 1 batch 1 finished"))
    assert last_commit < events.index("generation 1 stopped") < events.index("goodbye"), events
    assert stream.kinds()[-1] == "goodbye"
    assert len(server.leader.all) == 1, "no attach after shutdown"


def test_attach_retries_with_backoff_until_the_leader_answers(work: FakeWork, commits: FakeCommits) -> None:
    port = free_port()
    agent = ExecutorAgent(settings_for(f"127.0.0.1:{port}"), work, committer_factory=commits)
    thread = threading.Thread(target=agent.run, daemon=True)
    thread.start()
    # Three attempts with no leader listening, backing off in between.
    eventually(lambda: agent.sessions >= 3)
    assert not agent.welcomed.is_set()
    late = LeaderServer(port).start()
    try:
        stream = late.leader.next_stream(timeout=TIMEOUT)
        stream.welcome()
        eventually(agent.welcomed.is_set)
    finally:
        agent.shutdown(timeout=5)
        thread.join(timeout=5)
        late.stop()
    assert not thread.is_alive()


# ------------------------------------------------------------------ plain values


def test_kafka_client_config_layers_worker_role_and_connector_overrides() -> None:
    worker = {
        "bootstrap.servers": "k:9092",
        "security.protocol": "SASL_SSL",
        "sasl.mechanism": "PLAIN",
        "producer.linger.ms": "50",
        "consumer.fetch.min.bytes": "1",
        "group.id": "cluster",
        "config.storage.topic": "connect-configs",
    }
    connector = {"producer.override.linger.ms": "5", "consumer.override.group.id": "g"}
    assert kafka_client_config(worker, "producer", connector) == {
        "bootstrap.servers": "k:9092",
        "security.protocol": "SASL_SSL",
        "sasl.mechanism": "PLAIN",
        "linger.ms": "5",
    }
    assert kafka_client_config(worker, "consumer", connector) == {
        "bootstrap.servers": "k:9092",
        "security.protocol": "SASL_SSL",
        "sasl.mechanism": "PLAIN",
        "fetch.min.bytes": "1",
        "group.id": "g",
    }


def test_task_spec_reads_the_assignment() -> None:
    assignment = executor_pb2.TaskAssignment(
        task="connectors/my-conn/tasks/3",
        generation=(5 << 32) + 1,
        connector_config={"a": "1"},
        task_config={"b": "2"},
        target_state=common_pb2.TARGET_STATE_RUNNING,
        task_count=4,
        fingerprint="abc123",
    )
    assignment.source_offsets.add(partition=map_to_proto({"file": "x"}), offset=map_to_proto({"pos": 12}))
    assignment.source_offsets.add(partition=map_to_proto({"file": "y"}))
    spec = TaskSpec.from_proto(assignment)
    assert (spec.connector, spec.task_index, spec.task_count, spec.paused) == ("my-conn", 3, 4, False)
    assert spec.generation == (5 << 32) + 1
    assert spec.fingerprint == "abc123"
    assert spec.source_offsets == (({"file": "x"}, {"pos": 12}), ({"file": "y"}, None))
    with pytest.raises(ValueError, match="not a task resource name"):
        parse_task_name("connectors/x")


# ------------------------------------------------------------------ the Kafka committer, scripted


class ScriptedProducer:
    """Stands in for confluent_kafka.Producer: records each call, and raises the errors a test
    queued for a call (one per call, in order) before it succeeds."""

    def __init__(self, config: dict[str, Any]) -> None:
        self.config = config
        self.calls: list[str] = []
        self.errors: dict[str, list[KafkaError]] = {}
        self.produced: list[tuple[str, bytes | None, bytes | None]] = []
        self.sent: list[tuple[list[tuple[str, int, int]], Any]] = []
        self.closed = False

    def _call(self, name: str) -> None:
        self.calls.append(name)
        queued = self.errors.get(name)
        if queued:
            raise KafkaException(queued.pop(0))

    def list_topics(self, topic: str | None = None, timeout: float = -1) -> object:
        return None

    def init_transactions(self, timeout: float) -> None:
        self._call("init")

    def begin_transaction(self) -> None:
        self._call("begin")

    def produce(self, topic: str, key: bytes | None = None, value: bytes | None = None) -> None:
        self._call("produce")
        self.produced.append((topic, key, value))

    def send_offsets_to_transaction(self, positions: list[Any], metadata: Any, timeout: float) -> None:
        self._call("send_offsets")
        self.sent.append(([(tp.topic, tp.partition, tp.offset) for tp in positions], metadata))

    def commit_transaction(self, timeout: float) -> None:
        self._call("commit")

    def abort_transaction(self, timeout: float) -> None:
        self._call("abort")

    def close(self) -> None:
        self.closed = True


class ScriptedConsumer:
    def __init__(self, config: dict[str, Any]) -> None:
        self.config = config
        self.closed = False

    def consumer_group_metadata(self) -> str:
        return f"metadata of {self.config['group.id']}"

    def close(self) -> None:
        self.closed = True


WORKER = {"bootstrap.servers": "k:9092", "group.id": "cluster-a", "offset.storage.topic": "offs"}


def scripted_committer(
    *, source: bool = True, config: Mapping[str, str] | None = None
) -> tuple[KafkaOffsetCommitter, ScriptedProducer, list[ScriptedConsumer]]:
    producers: list[ScriptedProducer] = []
    consumers: list[ScriptedConsumer] = []

    def producer(settings: dict[str, Any]) -> Any:
        producers.append(ScriptedProducer(settings))
        return producers[-1]

    def consumer(settings: dict[str, Any]) -> Any:
        consumers.append(ScriptedConsumer(settings))
        return consumers[-1]

    spec = TaskSpec(
        name="connectors/demo/tasks/3",
        connector="demo",
        task_index=3,
        generation=1,
        connector_config=dict(config or {}),
        task_config={},
        paused=False,
        task_count=4,
    )
    committer = KafkaOffsetCommitter(
        spec, WORKER, source=source, producer_factory=producer, consumer_factory=consumer
    )
    committer.open(5.0)
    return committer, producers[0], consumers


def test_a_source_commit_is_one_transaction_of_offset_records() -> None:
    committer, producer, consumers = scripted_committer()
    config = producer.config
    assert config["transactional.id"] == "cluster-a-demo-3"
    assert (config["enable.idempotence"], config["acks"], config["partitioner"]) == (
        "true",
        "all",
        "murmur2_random",
    )
    assert config["bootstrap.servers"] == "k:9092" and "demo" in config["client.id"]
    assert consumers == []
    outcome = committer.commit([({"f": "a"}, {"pos": 1}), ({"f": "b"}, None)], 5.0)
    assert outcome == CommitOutcome(CommitStatus.OK)
    assert producer.calls == ["init", "begin", "produce", "produce", "commit"]
    assert producer.produced == [
        ("offs", b'["demo",{"f":"a"}]', b'{"pos":1}'),
        ("offs", b'["demo",{"f":"b"}]', None),
    ]
    committer.close()
    assert not producer.closed, "destroyed, not closed: Producer.close() may wait forever"


def test_a_sink_commit_sends_the_offsets_to_the_connectors_group() -> None:
    committer, producer, (consumer,) = scripted_committer(
        source=False, config={"consumer.override.group.id": "my-group"}
    )
    assert consumer.config["group.id"] == "my-group"
    pair = ({"kafka_topic": "t", "kafka_partition": 2}, {"kafka_offset": 40})
    assert committer.commit([pair], 5.0).status is CommitStatus.OK
    # With the offsets, a tombstone no reader acts on: Tansu drops a record-less transaction's offsets.
    assert producer.calls == ["init", "begin", "produce", "send_offsets", "commit"]
    assert producer.produced == [("offs", b'["demo",{"kafka_partition":2,"kafka_topic":"t"}]', None)]
    assert producer.sent == [([("t", 2, 40)], "metadata of my-group")]
    committer.close()
    assert consumer.closed


def test_retriable_errors_are_retried_and_abortable_ones_abort_and_start_again() -> None:
    committer, producer, _ = scripted_committer()
    producer.errors["commit"] = [
        KafkaError(KafkaError._TIMED_OUT, "slow", retriable=True),
        KafkaError(KafkaError._MSG_TIMED_OUT, "lost a record", txn_requires_abort=True),
    ]
    assert committer.commit([({"f": "a"}, {"pos": 1})], 5.0).status is CommitStatus.OK
    assert producer.calls[1:] == [
        "begin",
        "produce",
        "commit",
        "commit",
        "abort",
        "begin",
        "produce",
        "commit",
    ]


@pytest.mark.parametrize(
    "error",
    [
        KafkaError(KafkaError._FENCED, "fenced by a newer instance", fatal=True),
        # As librdkafka reports a fenced send_offsets_to_transaction: abortable, not fatal.
        KafkaError(KafkaError._FENCED, "fenced by a newer instance", txn_requires_abort=True),
        KafkaError(KafkaError.PRODUCER_FENCED, "fenced"),
        KafkaError(KafkaError.INVALID_PRODUCER_EPOCH, "old epoch"),
        KafkaError(KafkaError._INCONSISTENT, "fatal for another reason", fatal=True),
    ],
    ids=lambda e: e.name(),
)
def test_a_fenced_or_fatal_producer_gives_fenced_for_good(error: KafkaError) -> None:
    committer, producer, _ = scripted_committer(source=False)
    producer.errors["send_offsets"] = [error]
    pair = ({"kafka_topic": "t", "kafka_partition": 0}, {"kafka_offset": 1})
    outcome = committer.commit([pair], 5.0)
    assert outcome.status is CommitStatus.FENCED and error.str() in outcome.error
    calls = len(producer.calls)
    assert committer.commit([pair], 5.0) == outcome
    assert len(producer.calls) == calls, "a fenced committer does not try again"
    committer.close()
    assert producer.calls[-1] != "abort", "nothing is aborted once fenced"


def test_other_errors_and_lasting_retriable_ones_reject_the_commit() -> None:
    committer, producer, _ = scripted_committer()
    producer.errors["commit"] = [KafkaError(KafkaError.TOPIC_AUTHORIZATION_FAILED, "not allowed")]
    refused = committer.commit([({"f": "a"}, {"pos": 1})], 5.0)
    assert refused.status is CommitStatus.REJECTED and "not allowed" in refused.error

    committer, producer, _ = scripted_committer()
    producer.errors["commit"] = [KafkaError(KafkaError._TIMED_OUT, "slow", retriable=True)] * 100
    late = committer.commit([({"f": "a"}, {"pos": 1})], 0.5)
    assert late.status is CommitStatus.REJECTED and "did not finish within" in late.error
    # The transaction it left open is aborted when the committer closes.
    committer.close()
    assert producer.calls[-1] == "abort"
    malformed = scripted_committer(source=False)[0].commit([({"kafka_topic": "t"}, {"kafka_offset": 1})], 5.0)
    assert malformed.status is CommitStatus.REJECTED and "not a sink offset" in malformed.error


def test_open_retries_retriable_errors_and_raises_the_others() -> None:
    spec = TaskSpec("connectors/demo/tasks/0", "demo", 0, 1, {}, {}, False, 1)

    def opened(error: KafkaError, times: int, timeout: float) -> ScriptedProducer:
        scripted = ScriptedProducer({})
        scripted.errors["init"] = [error] * times
        committer = KafkaOffsetCommitter(
            spec, WORKER, source=True, producer_factory=lambda _: cast(Any, scripted)
        )
        committer.open(timeout)
        return scripted

    loading = KafkaError(KafkaError.COORDINATOR_NOT_AVAILABLE, "loading")
    assert opened(loading, 1, 5.0).calls == ["init", "init"]
    with pytest.raises(RuntimeError, match="cannot take over transactional id cluster-a-demo-0"):
        opened(KafkaError(KafkaError.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, "no", fatal=True), 1, 5.0)
    started = time.monotonic()
    with pytest.raises(TimeoutError, match="within 0s: slow"):
        opened(KafkaError(KafkaError._TIMED_OUT, "slow", retriable=True), 1000, 0.3)
    assert time.monotonic() - started < 1.0


def test_the_kafka_committer_factory_picks_the_connectors_kind() -> None:
    factory = KafkaCommitterFactory(PluginRegistry.of(FileStreamSourceConnector, FileStreamSinkConnector))
    for connector_class, source in (("FileStreamSource", True), ("FileStreamSinkConnector", False)):
        spec = TaskSpec("connectors/f/tasks/0", "f", 0, 1, {"connector.class": connector_class}, {}, False, 1)
        committer = factory(spec, WORKER)
        assert isinstance(committer, KafkaOffsetCommitter) and committer.source is source
