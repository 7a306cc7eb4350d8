"""The executor's attach loop and task runners against a scripted leader: a real gRPC
`ExecutorService` on a loopback socket that the test drives message by message. Pipelines are
small in-process fakes (no Kafka or Spark here: that is what the integration tests cover)."""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from concurrent import futures
from dataclasses import dataclass, field
from typing import Any

import grpc
import pytest
from google.protobuf import duration_pb2

from sluiceway.api.v1 import common_pb2, executor_pb2, executor_pb2_grpc
from sluiceway.connect.kafka_clients import kafka_client_config
from sluiceway.offsets import map_to_proto, offsets_from_proto
from sluiceway_executor.attach import AttachSettings, ExecutorAgent
from sluiceway_executor.pipelines import parse_task_name
from sluiceway_executor.pipelines.pipeline import BatchOutcome
from sluiceway_executor.pipelines.spec import TaskSpec
from sluiceway_server.embedded import free_port

TIMEOUT = 10.0
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

    def mark(self) -> int:
        """The position the next received message will have: `take(since=...)` and `position`
        then see only messages the executor sent after this call."""
        with self._cond:
            return len(self.received)

    def position(self, kind: str, where: Callable[[Any], bool] = lambda _: True) -> int:
        """Where the first received message of `kind` matching `where` is in the stream."""
        with self._cond:
            for index, message in enumerate(self.received):
                if message.WhichOneof("kind") == kind and where(getattr(message, kind)):
                    return index
        raise AssertionError(f"no {kind} message received")

    def barrier(self) -> None:
        """Sends a revocation of a task never assigned and waits for its acknowledgement. The
        executor handles the leader's messages one at a time and in order, so once the
        acknowledgement is here every message sent before the barrier has been handled."""
        self._markers += 1
        marker = f"connectors/barrier-{self._markers}/tasks/0"
        self.send(revocation=executor_pb2.Revocation(tasks=[marker]))
        self.take("revocation_ack", lambda ack: list(ack.tasks) == [marker])

    def welcome(self, heartbeat_ms: int = 100, **worker: str) -> executor_pb2.Hello:
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
                worker_config={"bootstrap.servers": "kafka:9092", **worker},
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
    ) -> None:
        assignment = executor_pb2.TaskAssignment(
            task=task,
            generation=generation,
            connector_config={"connector.class": "Fake", **(config or {})},
            task_config={"task.class": "fake.Task"},
            target_state=common_pb2.TARGET_STATE_PAUSED if paused else common_pb2.TARGET_STATE_RUNNING,
            task_count=task_count,
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

    def commit(self, task: str = TASK, timeout: float = TIMEOUT) -> executor_pb2.OffsetCommit:
        commit: executor_pb2.OffsetCommit = self.take("offset_commit", lambda c: c.task == task, timeout)
        return commit

    def answer(self, commit: executor_pb2.OffsetCommit, ok: bool = True, error: str = "") -> None:
        self.send(commit_result=executor_pb2.CommitResult(commit_id=commit.commit_id, ok=ok, error=error))


class Leader(executor_pb2_grpc.ExecutorServiceServicer):
    def __init__(self) -> None:
        self.streams: queue.Queue[Stream] = queue.Queue()
        self.all: list[Stream] = []
        # Called as each attach call arrives, before its stream exists.
        self.on_attach: Callable[[], None] = lambda: None

    def Attach(  # noqa: N802 - the RPC's name
        self, request_iterator: Iterator[executor_pb2.ExecutorMessage], context: grpc.ServicerContext
    ) -> Iterator[executor_pb2.ControllerMessage]:
        self.on_attach()
        stream = Stream()
        self.all.append(stream)

        def read() -> None:
            try:
                for message in request_iterator:
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
        # What the pipelines (and anything else a test hooks in) did, in the order it happened.
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


# ------------------------------------------------------------------ fixtures


@pytest.fixture
def server() -> Iterator[LeaderServer]:
    started = LeaderServer(free_port()).start()
    yield started
    started.stop()


@pytest.fixture
def work() -> FakeWork:
    return FakeWork()


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
def agent_factory(server: LeaderServer, work: FakeWork) -> Iterator[Callable[..., ExecutorAgent]]:
    agents: list[tuple[ExecutorAgent, threading.Thread]] = []

    def make(**overrides: Any) -> ExecutorAgent:
        agent = ExecutorAgent(settings_for(server.address, **overrides), work)
        thread = threading.Thread(target=agent.run, daemon=True)
        thread.start()
        agents.append((agent, thread))
        return agent

    yield make
    if work.gate is not None:
        work.gate.set()
    # The leader goes first: no commit waits for an answer the test will never give.
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


# ------------------------------------------------------------------ tests


def test_hello_welcome_heartbeats_status_commits_and_topics(
    server: LeaderServer, work: FakeWork, agent_factory: Callable[..., ExecutorAgent]
) -> None:
    agent_factory()
    stream = server.leader.next_stream()
    hello = stream.welcome(heartbeat_ms=50, **{"producer.linger.ms": "5"})
    assert (hello.executor_id, hello.spark_remote, hello.max_tasks) == ("exec-test", "sc://spark:15002", 4)
    assert hello.version and hello.host

    stream.assign(generation=7, offsets=[({"task": 0}, {"batch": 41, "generation": 6})])
    running = stream.status(common_pb2.STATE_RUNNING)
    assert running.generation == 7
    first = stream.commit()
    assert first.generation == 7
    assert offsets_from_proto(first.offsets) == [({"task": 0}, {"batch": 0, "generation": 7})]
    stream.answer(first)
    second = stream.commit()
    assert second.commit_id != first.commit_id
    stream.answer(second)
    stream.answer(stream.commit())

    # Topics are reported once each, after the batch that used them first was committed.
    topics = [t for report in stream.of_kind("active_topics") for t in report.topics]
    eventually(lambda: len([t for r in stream.of_kind("active_topics") for t in r.topics]) >= 2)
    topics = [t for report in stream.of_kind("active_topics") for t in report.topics]
    assert sorted(topics) == ["topic-0", "topic-1"]
    assert all(report.generation == 7 for report in stream.of_kind("active_topics"))

    beat = stream.take("heartbeat", lambda h: TASK in h.running_tasks)
    assert list(beat.running_tasks) == [TASK]

    (pipeline,) = work.of(TASK)
    assert pipeline.worker_config["producer.linger.ms"] == "5"
    assert pipeline.spec.source_offsets == (({"task": 0}, {"batch": 41, "generation": 6}),)
    assert isinstance(pipeline.spec.source_offsets[0][1]["batch"], int)
    assert pipeline.spec.task_count == 2
    eventually(lambda: len(pipeline.committed_outcomes) >= 3)


def test_an_active_topics_reset_makes_the_connectors_tasks_report_their_topics_again(
    server: LeaderServer, work: FakeWork, agent_factory: Callable[..., ExecutorAgent]
) -> None:
    work.topics_per_batch = lambda n: {"orders"}
    agent_factory()
    stream = server.leader.next_stream()
    stream.welcome()
    stream.assign()
    stream.status(common_pb2.STATE_RUNNING)
    for _ in range(3):
        stream.answer(stream.commit())
    assert [list(r.topics) for r in stream.of_kind("active_topics")] == [["orders"]]

    # Another connector's reset changes nothing; this connector's makes the next batch report again.
    stream.send(active_topics_reset=executor_pb2.ActiveTopicsReset(connector="other"))
    stream.barrier()
    stream.answer(stream.commit())
    # The runner reports after a commit's answer and before its next batch: once the next commit
    # is here, a report of the answered batch would be too.
    following = stream.commit()
    assert len(stream.of_kind("active_topics")) == 1
    stream.answer(following)
    stream.send(active_topics_reset=executor_pb2.ActiveTopicsReset(connector="demo"))
    stream.barrier()
    stream.answer(stream.commit())
    report = stream.take("active_topics", since=stream.position("active_topics") + 1)
    assert (report.task, list(report.topics)) == (TASK, ["orders"])


def test_no_topics_are_reported_when_topic_tracking_is_disabled(
    server: LeaderServer, work: FakeWork, agent_factory: Callable[..., ExecutorAgent]
) -> None:
    agent_factory()
    stream = server.leader.next_stream()
    stream.welcome(100, **{"topic.tracking.enable": "false"})
    stream.assign()
    stream.status(common_pb2.STATE_RUNNING)
    for _ in range(3):
        stream.answer(stream.commit())
    stream.barrier()
    assert stream.of_kind("active_topics") == []


def test_a_refused_commit_fails_the_task_with_the_leaders_message(
    server: LeaderServer, work: FakeWork, agent_factory: Callable[..., ExecutorAgent]
) -> None:
    agent_factory()
    stream = server.leader.next_stream()
    stream.welcome()
    stream.assign(generation=3)
    stream.answer(stream.commit(), ok=False, error="stale generation 3")
    failed = stream.status(common_pb2.STATE_FAILED)
    assert failed.generation == 3
    assert "stale generation 3" in failed.trace
    (pipeline,) = work.of(TASK)
    eventually(lambda: pipeline.stopped)
    assert pipeline.committed_outcomes == []
    assert pipeline.batches == [0]


def test_an_unanswered_commit_times_out_and_fails_the_task(
    server: LeaderServer, work: FakeWork, agent_factory: Callable[..., ExecutorAgent]
) -> None:
    agent_factory(commit_timeout=0.3)
    stream = server.leader.next_stream()
    stream.welcome()
    stream.assign()
    stream.commit()
    failed = stream.status(common_pb2.STATE_FAILED)
    assert "no answer to offset commit" in failed.trace
    eventually(lambda: work.of(TASK)[0].stopped)


def test_a_failing_batch_reports_failed_with_the_full_trace(
    server: LeaderServer, work: FakeWork, agent_factory: Callable[..., ExecutorAgent]
) -> None:
    work.fail_at = 1
    agent_factory()
    stream = server.leader.next_stream()
    stream.welcome()
    stream.assign(generation=5)
    stream.answer(stream.commit())
    failed = stream.status(common_pb2.STATE_FAILED)
    assert failed.generation == 5
    assert "Traceback (most recent call last)" in failed.trace
    assert "RuntimeError: batch 1 exploded" in failed.trace
    (pipeline,) = work.of(TASK)
    eventually(lambda: pipeline.stopped)
    assert pipeline.batches == [0, 1]
    # A failed task is no longer running.
    eventually(lambda: stream.take("heartbeat", lambda h: not h.running_tasks) is not None)


def test_a_task_that_cannot_start_reports_failed(
    server: LeaderServer, work: FakeWork, agent_factory: Callable[..., ExecutorAgent]
) -> None:
    work.fail_start = True
    agent_factory()
    stream = server.leader.next_stream()
    stream.welcome()
    stream.assign()
    failed = stream.status(common_pb2.STATE_FAILED)
    assert "ValueError: cannot start: bad config" in failed.trace
    assert stream.of_kind("offset_commit") == []


def test_paused_task_idles_until_reassigned_running(
    server: LeaderServer, work: FakeWork, agent_factory: Callable[..., ExecutorAgent]
) -> None:
    agent_factory()
    stream = server.leader.next_stream()
    stream.welcome()
    stream.assign(generation=1, paused=True)
    assert stream.status(common_pb2.STATE_PAUSED).generation == 1
    # Two heartbeats sent after the PAUSED report still list the task: it stays assigned, idle.
    after_paused = stream.mark()
    for _ in range(2):
        stream.take("heartbeat", lambda h: TASK in h.running_tasks, since=after_paused)
    assert work.of(TASK) == []  # no pipeline, no batches
    assert stream.of_kind("offset_commit") == []
    stream.take("heartbeat", lambda h: TASK in h.running_tasks)

    stream.assign(generation=2)
    assert stream.status(common_pb2.STATE_RUNNING, generation=2).generation == 2
    # The generation 2 runner starts its pipeline only after the paused runner has ended, so by now
    # everything the paused runner did is visible: it made no pipeline and committed nothing.
    assert [p.spec.generation for p in work.of(TASK)] == [2]
    assert stream.commit().generation == 2
    assert {c.generation for c in stream.of_kind("offset_commit")} == {2}


def test_a_changed_assignment_restarts_the_task_between_batches_without_committing_the_old_batch(
    server: LeaderServer, work: FakeWork, agent_factory: Callable[..., ExecutorAgent]
) -> None:
    agent = agent_factory()
    stream = server.leader.next_stream()
    stream.welcome()
    stream.assign(generation=1)
    first = stream.commit()
    work.gate = threading.Event()
    stream.answer(first)
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
    commit = stream.commit()
    assert commit.generation == 2
    # The old generation's second batch was never committed, and its offsets carried over.
    assert [c.generation for c in stream.of_kind("offset_commit")] == [1, 2]
    new = work.of(TASK)[1]
    assert old.stopped and old.finished == [0, 1]
    events = work.events
    assert events.index("generation 1 stopped") < events.index("generation 2 created"), events
    assert new.spec.connector_config["batch.max.records"] == "5"
    assert new.spec.source_offsets == (({"task": 0}, {"batch": 0, "generation": 1}),)


def test_revocation_stops_between_batches_commits_the_batch_in_flight_then_acks(
    server: LeaderServer, work: FakeWork, agent_factory: Callable[..., ExecutorAgent]
) -> None:
    agent = agent_factory()
    stream = server.leader.next_stream()
    stream.welcome()
    stream.assign(TASK, 1)
    stream.assign(OTHER, 2)
    firsts = [stream.commit(TASK), stream.commit(OTHER)]
    work.gate = threading.Event()
    for first in firsts:
        stream.answer(first)
    eventually(lambda: all(len(p.batches) >= 2 for p in work.pipelines))
    revoked_runner = agent.runner(TASK)
    assert revoked_runner is not None

    stream.send(revocation=executor_pb2.Revocation(tasks=[TASK, "connectors/ghost/tasks/0"]))
    # The agent has handled the revocation once it has asked the runner to stop.
    eventually(lambda: revoked_runner.stopping)
    assert stream.of_kind("revocation_ack") == [], "no ack while the batch is still in flight"
    work.gate.set()
    # The revoked task's batch in flight still commits (its generation is current until the ack).
    in_flight = stream.commit(TASK)
    assert in_flight.generation == 1
    stream.answer(in_flight)
    ack = stream.take("revocation_ack")
    assert sorted(ack.tasks) == sorted([TASK, "connectors/ghost/tasks/0"])
    # The ack came after the commit of the batch that was in flight, so not before that batch ended.
    assert stream.position("offset_commit", lambda c: c.commit_id == in_flight.commit_id) < stream.position(
        "revocation_ack"
    )
    (revoked,) = work.of(TASK)
    assert revoked.stopped
    assert len(revoked.committed_outcomes) == 2
    # The other task keeps running.
    stream.answer(stream.commit(OTHER))
    stream.take("heartbeat", lambda h: list(h.running_tasks) == [OTHER])


def test_stream_failure_stops_tasks_without_committing_and_reattaches(
    server: LeaderServer, work: FakeWork, agent_factory: Callable[..., ExecutorAgent]
) -> None:
    agent = agent_factory()
    stream = server.leader.next_stream()
    stream.welcome()
    stream.assign()
    first = stream.commit()
    work.gate = threading.Event()
    stream.answer(first)
    (pipeline,) = work.of(TASK)
    eventually(lambda: len(pipeline.committed_outcomes) == 1)
    eventually(lambda: len(pipeline.batches) == 2)
    runner = agent.runner(TASK)
    assert runner is not None

    # The control plane goes away while a batch is in flight, and comes back on the same address.
    server.stop()
    # The agent has seen the stream end once it has asked the runner to stop.
    eventually(lambda: runner.stopping)
    assert not pipeline.stopped, "the batch in flight finishes first"
    work.gate.set()
    eventually(lambda: pipeline.stopped)
    assert len(pipeline.committed_outcomes) == 1
    assert pipeline.finished == [0, 1]
    assert work.events[-2:] == ["generation 1 batch 1 finished", "generation 1 stopped"]

    restarted = LeaderServer(server.port).start()
    try:
        again = restarted.leader.next_stream(timeout=TIMEOUT)
        hello = again.welcome()
        assert hello.executor_id == "exec-test"
        assert agent.sessions >= 2
        again.assign(generation=9, offsets=[({"task": 0}, {"batch": 0, "generation": 1})])
        assert again.status(common_pb2.STATE_RUNNING).generation == 9
        again.answer(again.commit())
        # Nothing of the old stream was sent on the new one.
        assert [c.generation for c in again.of_kind("offset_commit")] == [9]
    finally:
        if work.gate is not None:
            work.gate.set()
        agent.shutdown(timeout=5)
        restarted.stop()


def test_attach_retries_with_backoff_until_the_leader_answers(work: FakeWork) -> None:
    port = free_port()
    agent = ExecutorAgent(settings_for(f"127.0.0.1:{port}"), work)
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


def test_fenced_stops_everything_and_attaches_again_as_a_new_session(
    server: LeaderServer, work: FakeWork, agent_factory: Callable[..., ExecutorAgent]
) -> None:
    agent = agent_factory()
    stream = server.leader.next_stream()
    stream.welcome()
    stream.assign()
    first = stream.commit()
    work.gate = threading.Event()
    stream.answer(first)
    (pipeline,) = work.of(TASK)
    eventually(lambda: len(pipeline.batches) == 2)
    runner = agent.runner(TASK)
    assert runner is not None
    server.leader.on_attach = lambda: work.note("attached again")
    stream.send(fenced=executor_pb2.Fenced(reason="no heartbeat within the session timeout"))
    # The agent has handled the fence once it has asked the runner to stop.
    eventually(lambda: runner.stopping)
    assert server.leader.streams.empty(), "attaching again waits until every task has stopped"
    work.gate.set()
    second = server.leader.next_stream()
    eventually(lambda: pipeline.stopped)
    # The batch in flight at the fence was not committed: not on the old stream, nor on the new one.
    assert len(stream.of_kind("offset_commit")) == 1
    assert pipeline.finished == [0, 1]
    second.welcome()
    assert second.of_kind("offset_commit") == []
    eventually(stream.ended.is_set)
    assert work.events.index("generation 1 stopped") < work.events.index("attached again"), work.events


def test_shutdown_lets_the_batch_in_flight_finish_and_commit_then_closes_the_stream(
    server: LeaderServer, work: FakeWork
) -> None:
    agent = ExecutorAgent(settings_for(server.address), work)
    thread = threading.Thread(target=agent.run, daemon=True)
    thread.start()
    stream = server.leader.next_stream()
    stream.welcome()
    stream.assign()
    first = stream.commit()
    work.gate = threading.Event()
    stream.answer(first)
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
    last = stream.commit()
    stream.answer(last)
    stopper.join(timeout=TIMEOUT)
    thread.join(timeout=TIMEOUT)
    assert not thread.is_alive()
    eventually(stream.ended.is_set)
    assert pipeline.stopped and len(pipeline.committed_outcomes) == 2
    assert pipeline.batches == [0, 1], "no batch starts once stopping"
    assert len(server.leader.all) == 1, "no attach after shutdown"


def test_empty_batches_back_off_and_commit_nothing(
    server: LeaderServer, work: FakeWork, agent_factory: Callable[..., ExecutorAgent]
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
    assert stream.of_kind("offset_commit") == []


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
    )
    assignment.source_offsets.add(partition=map_to_proto({"file": "x"}), offset=map_to_proto({"pos": 12}))
    assignment.source_offsets.add(partition=map_to_proto({"file": "y"}))
    spec = TaskSpec.from_proto(assignment)
    assert (spec.connector, spec.task_index, spec.task_count, spec.paused) == ("my-conn", 3, 4, False)
    assert spec.generation == (5 << 32) + 1
    assert spec.source_offsets == (({"file": "x"}, {"pos": 12}), ({"file": "y"}, None))
    with pytest.raises(ValueError, match="not a task resource name"):
        parse_task_name("connectors/x")
