"""A task runner after a failure: automatic restarts of a task's own failures (growing pauses, a
limit, off, counting again after a stable run), and waits without a counted attempt when the Spark
Connect session is lost or Kafka is unreachable. Pipelines, committers and the session keeper are
small in-process fakes; the integration and fault tests run the same paths on Kafka and Spark."""

from __future__ import annotations

import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import pytest
from confluent_kafka import KafkaError, KafkaException
from pyspark.errors.exceptions.connect import SparkConnectGrpcException

from sluiceway.api.v1 import common_pb2
from sluiceway.common.offsets import OffsetPair
from sluiceway_executor.offset_commits import CommitOutcome, CommitStatus
from sluiceway_executor.pipelines.pipeline import BatchOutcome, ProducedRecord
from sluiceway_executor.pipelines.spec import TaskSpec
from sluiceway_executor.runner import TaskRunner
from tests.unit.executor.task_hosts import TIMEOUT, RecordingHost, count

FAST = {"task.restart.backoff.initial.ms": "100", "task.restart.backoff.max.ms": "2000"}


@dataclass
class Script:
    """What each run's pipeline does: ``errors[n]`` is raised by run n's first batch (None: it runs)."""

    errors: list[BaseException | None] = field(default_factory=list)
    start_errors: list[BaseException | None] = field(default_factory=list)
    # Seconds each batch takes before it returns.
    batch_seconds: float = 0.01
    runs: list[FakePipeline] = field(default_factory=list)

    def __call__(self, spec: TaskSpec, worker_config: Mapping[str, str]) -> FakePipeline:
        pipeline = FakePipeline(self, spec, len(self.runs), time.monotonic())
        self.runs.append(pipeline)
        return pipeline


@dataclass
class FakePipeline:
    script: Script
    spec: TaskSpec
    run: int
    created: float
    batches: int = 0
    stopped: bool = False

    def start(self) -> None:
        errors = self.script.start_errors
        if self.run < len(errors) and errors[self.run] is not None:
            raise errors[self.run]  # type: ignore[misc]

    def run_batch(self, batch_id: int) -> BatchOutcome:
        time.sleep(self.script.batch_seconds)
        errors = self.script.errors
        if self.batches == 0 and self.run < len(errors) and errors[self.run] is not None:
            raise errors[self.run]  # type: ignore[misc]
        self.batches += 1
        return BatchOutcome(records=1, offsets=[({"p": 0}, {"run": self.run, "batch": self.batches})])

    def committed(self, outcome: BatchOutcome) -> None:
        pass

    def stop(self) -> None:
        self.stopped = True


class Committer:
    def __init__(self, outcomes: list[CommitOutcome] | None = None) -> None:
        self.outcomes = outcomes or []
        self.commits: list[list[OffsetPair]] = []

    def __call__(self, spec: TaskSpec, worker_config: Mapping[str, str]) -> Committer:
        return self

    def open(self, timeout: float) -> None:
        pass

    def commit(
        self, offsets: list[OffsetPair], timeout: float, records: Sequence[ProducedRecord] = ()
    ) -> CommitOutcome:
        self.commits.append(offsets)
        return self.outcomes.pop(0) if self.outcomes else CommitOutcome(CommitStatus.OK)

    def close(self) -> None:
        pass


class Sessions:
    """A session keeper whose sessions are numbers; ``healthy`` answers as told."""

    def __init__(self) -> None:
        self.session = 1
        self.renewed: list[Any] = []
        self.is_healthy = True

    def current(self) -> Any:
        return self.session

    def healthy(self, session: Any, timeout: float = 20.0) -> bool:
        return self.is_healthy

    def renew(self, broken: Any, cancel: threading.Event | None = None) -> Any | None:
        self.renewed.append(broken)
        if broken == self.session:
            self.session += 1
        self.is_healthy = True
        return self.session


def spec(connector: Mapping[str, str] | None = None) -> TaskSpec:
    return TaskSpec(
        "connectors/c/tasks/0",
        "c",
        0,
        7,
        {"connector.class": "X", **(connector or {})},
        {},
        False,
        1,
        fingerprint="fp",
    )


def start(
    script: Script,
    worker: Mapping[str, str] | None = None,
    *,
    connector: Mapping[str, str] | None = None,
    committer: Committer | None = None,
    sessions: Sessions | None = None,
) -> tuple[RecordingHost, TaskRunner]:
    host = RecordingHost()
    runner = TaskRunner(
        spec(connector),
        host,
        script,
        dict(worker or FAST),
        committer_factory=committer or Committer(),
        sessions=sessions,
        poll_interval=0.01,
        max_poll_interval=0.01,
    )
    runner.start()
    return host, runner


@pytest.fixture
def runners() -> Any:
    started: list[TaskRunner] = []
    yield started
    for runner in started:
        runner.stop(commit=False)
    for runner in started:
        assert runner.join(TIMEOUT)


def own_error(n: int) -> RuntimeError:
    return RuntimeError(f"the connector broke ({n})")


def test_a_task_failing_twice_restarts_itself_with_growing_pauses_and_then_runs(
    runners: list[TaskRunner],
) -> None:
    script = Script(errors=[own_error(1), own_error(2)])
    host, runner = start(script)
    runners.append(runner)
    reports = host.wait_for(count(common_pb2.STATE_RUNNING, 3))
    states = [r.state for r in reports]
    assert states[:5] == [
        common_pb2.STATE_RUNNING,
        common_pb2.STATE_RESTARTING,
        common_pb2.STATE_RUNNING,
        common_pb2.STATE_RESTARTING,
        common_pb2.STATE_RUNNING,
    ]
    first, second = reports[1], reports[3]
    assert (first.attempt, second.attempt) == (1, 2)
    assert "RuntimeError: the connector broke (1)" in first.trace
    assert "RuntimeError: the connector broke (2)" in second.trace
    # The pauses: 100 ms then 200 ms, each within 20% either way; the due time says so too.
    first_pause = script.runs[1].created - first.at
    second_pause = script.runs[2].created - second.at
    assert first_pause >= 0.075 and second_pause >= 0.155
    assert second_pause > first_pause
    assert 80 <= first.next_restart_ms - first.wall_ms <= 120
    assert 160 <= second.next_restart_ms - second.wall_ms <= 240
    deadline = time.monotonic() + TIMEOUT
    while script.runs[2].batches < 1 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert not runner.failed and script.runs[2].batches >= 1
    assert script.runs[0].stopped and script.runs[1].stopped


def test_restarts_stop_after_the_attempt_limit_and_the_task_stays_failed() -> None:
    script = Script(errors=[own_error(1), own_error(2), None])
    host, runner = start(script, {**FAST, "task.restart.max.attempts": "1"})
    reports = host.wait_for(count(common_pb2.STATE_FAILED, 1))
    assert runner.join(TIMEOUT) and runner.failed
    assert [r.state for r in reports] == [
        common_pb2.STATE_RUNNING,
        common_pb2.STATE_RESTARTING,
        common_pb2.STATE_RUNNING,
        common_pb2.STATE_FAILED,
    ]
    assert "the connector broke (2)" in reports[-1].trace and reports[-1].attempt == 0
    assert len(script.runs) == 2


@pytest.mark.parametrize(
    ("worker", "connector"),
    [
        ({"task.restart.enable": "false"}, {}),
        ({}, {"task.restart.enable": "false"}),  # the connector's key wins over the worker's
        ({"task.restart.enable": "false"}, {"task.restart.max.attempts": "0"}),
    ],
)
def test_restarts_turned_off_leave_the_task_failed(worker: dict[str, str], connector: dict[str, str]) -> None:
    script = Script(errors=[own_error(1), None])
    host, runner = start(script, {**FAST, **worker}, connector=connector)
    host.wait_for(count(common_pb2.STATE_FAILED, 1))
    assert runner.join(TIMEOUT) and runner.failed and len(script.runs) == 1


def test_a_connector_may_turn_restarts_on_that_the_worker_turned_off(runners: list[TaskRunner]) -> None:
    script = Script(errors=[own_error(1), None])
    host, runner = start(
        script, {**FAST, "task.restart.enable": "false"}, connector={"task.restart.enable": "true"}
    )
    runners.append(runner)
    host.wait_for(count(common_pb2.STATE_RUNNING, 2))
    assert not runner.failed


def test_malformed_restart_settings_fail_the_task_with_the_key() -> None:
    script = Script()
    host, runner = start(script, connector={"task.restart.backoff.max.ms": "soon"})
    (report,) = host.wait_for(count(common_pb2.STATE_FAILED, 1))
    assert "task.restart.backoff.max.ms" in report.trace and script.runs == []
    assert runner.join(TIMEOUT)


def test_the_count_starts_again_after_a_run_longer_than_the_longest_pause(runners: list[TaskRunner]) -> None:
    # Each run fails 0.3 s after it starts, which is longer than the longest pause (0.2 s).
    script = Script(errors=[own_error(1), own_error(2), own_error(3), None], batch_seconds=0.3)
    host, runner = start(
        script, {"task.restart.backoff.initial.ms": "100", "task.restart.backoff.max.ms": "200"}
    )
    runners.append(runner)
    reports = host.wait_for(count(common_pb2.STATE_RESTARTING, 3))
    assert [r.attempt for r in reports if r.state == common_pb2.STATE_RESTARTING] == [1, 1, 1]


def test_a_failure_at_start_counts_like_any_other(runners: list[TaskRunner]) -> None:
    script = Script(start_errors=[ValueError("bad config"), None])
    host, runner = start(script)
    runners.append(runner)
    reports = host.wait_for(count(common_pb2.STATE_RUNNING, 1))
    assert [r.state for r in reports] == [common_pb2.STATE_RESTARTING, common_pb2.STATE_RUNNING]
    assert reports[0].attempt == 1 and "ValueError: bad config" in reports[0].trace
    # The pipeline that failed to start was stopped, so it leaves nothing open behind it.
    assert script.runs[0].stopped


def test_the_next_run_starts_from_the_offsets_committed_so_far(runners: list[TaskRunner]) -> None:
    # Run 0 commits one batch and then fails; run 1 starts from that batch's offset.
    class FailsSecondBatch(Script):
        def __call__(self, spec: TaskSpec, worker_config: Mapping[str, str]) -> FakePipeline:
            pipeline = super().__call__(spec, worker_config)
            if pipeline.run == 0:
                original = pipeline.run_batch

                def run_batch(batch_id: int) -> BatchOutcome:
                    if batch_id == 1:
                        raise own_error(1)
                    return original(batch_id)

                pipeline.run_batch = run_batch  # type: ignore[method-assign]
            return pipeline

    script = FailsSecondBatch()
    host, runner = start(script)
    runners.append(runner)
    host.wait_for(count(common_pb2.STATE_RUNNING, 2))
    assert script.runs[1].spec.source_offsets == (({"p": 0}, {"run": 0, "batch": 1}),)


def test_a_lost_spark_session_is_replaced_without_a_counted_attempt(runners: list[TaskRunner]) -> None:
    sessions = Sessions()
    lost = RuntimeError("[NO_ACTIVE_SESSION] No active Spark session found.")
    script = Script(errors=[lost, None])
    # Restarts off: losing Spark Connect is never the task's failure.
    host, runner = start(script, {**FAST, "task.restart.enable": "false"}, sessions=sessions)
    runners.append(runner)
    reports = host.wait_for(count(common_pb2.STATE_RUNNING, 2))
    assert [r.state for r in reports][:3] == [
        common_pb2.STATE_RUNNING,
        common_pb2.STATE_RESTARTING,
        common_pb2.STATE_RUNNING,
    ]
    assert reports[1].attempt == 0 and reports[1].next_restart_ms == 0
    assert "NO_ACTIVE_SESSION" in reports[1].trace
    assert sessions.renewed == [1] and sessions.session == 2


def test_an_unexplained_error_on_a_session_that_no_longer_answers_renews_it(
    runners: list[TaskRunner],
) -> None:
    sessions = Sessions()
    sessions.is_healthy = False
    script = Script(errors=[SparkConnectGrpcException("something odd"), None])
    host, runner = start(script, {**FAST, "task.restart.enable": "false"}, sessions=sessions)
    runners.append(runner)
    host.wait_for(count(common_pb2.STATE_RUNNING, 2))
    assert sessions.renewed == [1] and not runner.failed


def test_an_unreachable_broker_is_waited_for_without_failing_the_task(runners: list[TaskRunner]) -> None:
    unreachable = KafkaException(KafkaError(KafkaError._TRANSPORT, "broker down"))
    script = Script(errors=[unreachable, unreachable, None])
    host, runner = start(script, {**FAST, "task.restart.enable": "false"})
    runners.append(runner)
    reports = host.wait_for(count(common_pb2.STATE_RUNNING, 3), timeout=15)
    waits = [r for r in reports if r.state == common_pb2.STATE_RESTARTING]
    assert len(waits) == 2 and all(r.attempt == 0 for r in waits)
    # The infrastructure pause starts at about 1 s and doubles.
    first = script.runs[1].created - waits[0].at
    second = script.runs[2].created - waits[1].at
    assert 0.75 <= first <= 1.5 and 1.55 <= second <= 3.0
    assert not runner.failed


def test_a_commit_that_ran_out_of_time_waits_for_kafka(runners: list[TaskRunner]) -> None:
    committer = Committer([CommitOutcome(CommitStatus.REJECTED, "did not finish within 60s", transient=True)])
    script = Script()
    host, runner = start(script, {**FAST, "task.restart.enable": "false"}, committer=committer)
    runners.append(runner)
    reports = host.wait_for(count(common_pb2.STATE_RUNNING, 2))
    assert reports[1].state == common_pb2.STATE_RESTARTING and "did not finish within 60s" in reports[1].trace
    assert not runner.failed


def test_stopping_during_the_pause_ends_the_task_without_failing_it() -> None:
    script = Script(errors=[own_error(1), None])
    host, runner = start(script, {"task.restart.backoff.initial.ms": "30000"})
    host.wait_for(count(common_pb2.STATE_RESTARTING, 1))
    began = time.monotonic()
    runner.stop(commit=True)
    assert runner.join(TIMEOUT) and time.monotonic() - began < 2
    assert not runner.failed and len(script.runs) == 1
    assert host.states() == ["STATE_RUNNING", "STATE_RESTARTING"]
