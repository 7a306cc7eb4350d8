"""Automatic restarts end to end (issue 12, Done-when (c)): a task whose connector fails its first
two runs restarts itself twice, each time after a longer pause, and then runs; the status read over
the control plane's socket shows both failures in the task's error history. A manual restart
starts the count again. Real control plane, executor, Kafka and Spark Connect."""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from sluiceway.client import InstanceStatus, State
from sluiceway_server.embedded import EmbeddedBroker, EmbeddedSparkConnect
from tests.conftest import ControlPlaneProcess
from tests.integration.api_helpers import read_topic
from tests.integration.pipeline_helpers import FAST_EXECUTOR_SESSION, PipelineStack, attach_executor

pytestmark = pytest.mark.integration

FLAKY = "testing_connectors.FlakySourceConnector"


@pytest.fixture(scope="module")
def stack(broker: EmbeddedBroker, spark_connect: EmbeddedSparkConnect) -> Iterator[PipelineStack]:
    plane = ControlPlaneProcess(broker, uuid.uuid4().hex[:8], settings=dict(FAST_EXECUTOR_SESSION)).start()
    try:
        started = attach_executor(plane, spark_connect, "restarts")
        yield started
        started.close()
    finally:
        plane.stop()


def _log(path: Path) -> list[tuple[str, float]]:
    """(event, time) of each line of a FlakySourceTask's log: ("start", t) and ("fail", t)."""
    events = []
    for line in path.read_text().splitlines():
        parts = line.split()
        events.append((parts[0], float(parts[-1])))
    return events


def test_a_task_failing_twice_restarts_itself_with_growing_pauses_then_runs(
    stack: PipelineStack, broker: EmbeddedBroker, tmp_path: Path
) -> None:
    name = f"flaky-{uuid.uuid4().hex[:10]}"
    topic = f"{name}-out"
    log = tmp_path / "flaky.log"
    stack.client.create_connector(
        name,
        {
            "connector.class": FLAKY,
            "flaky.failures": "2",
            "flaky.log.file": str(log),
            "flaky.topic": topic,
            "task.restart.backoff.initial.ms": "1500",
        },
    )
    try:
        seen: list[tuple[int, int, int]] = []  # (state, attempt, due ms) of each status polled

        def ran() -> InstanceStatus | None:
            status = stack.client.task_status(name, 0).status
            seen.append((status.state, status.restart_attempt, status.raw.next_restart_time.ToMilliseconds()))
            done = status.state == State.RUNNING and len(status.recent_errors) == 2
            return status if done and len(read_topic(broker.bootstrap_servers, topic)) == 10 else None

        status = stack.wait_for(ran, "the task to run after two failures", timeout=120)
        assert status is not None
        # The history, newest first: both failures, with their times and the executor.
        newest, oldest = status.recent_errors
        assert "failing on purpose (2)" in newest.message and "failing on purpose (1)" in oldest.message
        assert newest.time is not None and oldest.time is not None and newest.time > oldest.time
        assert newest.worker_id == oldest.worker_id == status.worker_id
        assert status.restart_attempt == 0 and status.next_restart_time is None
        # Any RESTARTING status caught while polling named its attempt and when it was due.
        waiting = [(attempt, due) for state, attempt, due in seen if state == State.RESTARTING]
        assert {attempt for attempt, _ in waiting} <= {1, 2} and all(due > 0 for _, due in waiting)
        # Three runs: each failure followed by a pause of 1.5 s, then 3 s (each ±20%), plus the time
        # a new run takes to start.
        events = _log(log)
        assert [event for event, _ in events] == ["start", "fail", "start", "fail", "start"]
        pauses = [events[2][1] - events[1][1], events[4][1] - events[3][1]]
        assert 1.2 <= pauses[0] < pauses[1], pauses
        assert 2.4 <= pauses[1] <= 3.6 + 5.0, pauses
    finally:
        stack.client.delete_connector(name)


def test_a_manual_restart_starts_the_count_again(stack: PipelineStack, tmp_path: Path) -> None:
    name = f"flaky-manual-{uuid.uuid4().hex[:10]}"
    log = tmp_path / "flaky.log"
    stack.client.create_connector(
        name,
        {
            "connector.class": FLAKY,
            "flaky.failures": "100",
            "flaky.log.file": str(log),
            "flaky.topic": f"{name}-out",
            "task.restart.backoff.initial.ms": "2000",
            "task.restart.backoff.max.ms": "60000",
        },
    )
    try:

        def attempt_at_least(n: int) -> Callable[[], bool]:
            def check() -> bool:
                status = stack.client.task_status(name, 0).status
                return status.state == State.RESTARTING and status.restart_attempt >= n

            return check

        stack.wait_for(attempt_at_least(2), "the second automatic restart to be scheduled", timeout=60)
        failures_before = sum(event == "fail" for event, _ in _log(log))
        stack.client.restart_task(name, 0)

        def restarted_from_one() -> InstanceStatus | None:
            status = stack.client.task_status(name, 0).status
            fails = sum(event == "fail" for event, _ in _log(log))
            fresh = status.state == State.RESTARTING and fails > failures_before
            return status if fresh and status.restart_attempt == 1 else None

        status = stack.wait_for(
            restarted_from_one, "the restarted task's first automatic restart", timeout=60
        )
        assert status is not None
        due_in = status.raw.next_restart_time.ToMilliseconds() - int(time.time() * 1000)
        assert due_in <= 2400  # the first pause again (2 s), not the third (8 s)
    finally:
        stack.client.delete_connector(name)
