"""KIP-875 "can pause a stopped connector", end to end: pausing a STOPPED connector starts its
plugin, which generates its task configs and is stopped again; the executor gets the tasks paused
and reports them PAUSED; a resume then runs them. A start() that fails leaves the connector FAILED.
Real control plane, executor, Kafka and Spark Connect. (Kafka as shipped leaves such a connector
paused with no tasks.)"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from sluiceway.client import ConnectorStatus, State
from sluiceway_server.embedded import EmbeddedBroker, EmbeddedSparkConnect
from tests.conftest import ControlPlaneProcess
from tests.integration.pipeline_helpers import FAST_EXECUTOR_SESSION, PipelineStack, attach_executor

pytestmark = pytest.mark.integration

CONTROLLABLE = "testing_connectors.ControllableSourceConnector"


@pytest.fixture(scope="module")
def stack(broker: EmbeddedBroker, spark_connect: EmbeddedSparkConnect) -> Iterator[PipelineStack]:
    plane = ControlPlaneProcess(broker, uuid.uuid4().hex[:8], settings=dict(FAST_EXECUTOR_SESSION)).start()
    try:
        started = attach_executor(plane, spark_connect, "pause-stopped")
        yield started
        started.close()
    finally:
        plane.stop()


def _marks(marker: Path) -> list[str]:
    """The connector plugin's callbacks so far, in order (ControllableSourceConnector's marker file)."""
    return marker.read_text().splitlines() if marker.exists() else []


def _in_state(stack: PipelineStack, name: str, state: State, tasks: int) -> ConnectorStatus | None:
    """The status once the connector and exactly `tasks` tasks all report `state`."""
    status = stack.client.connector_status(name)
    if status.connector.state != state or len(status.tasks) != tasks:
        return None
    return status if all(t.status.state == state for t in status.tasks) else None


def test_a_paused_stopped_connector_has_its_tasks_paused_on_the_executor_then_runs(
    stack: PipelineStack, tmp_path: Path
) -> None:
    name = f"pause-stopped-{uuid.uuid4().hex[:10]}"
    marker = tmp_path / "marks"
    config = {
        "connector.class": CONTROLLABLE,
        "marker.file": str(marker),
        "task.count": "2",
        "tasks.max": "2",
    }
    stack.client.create_connector(name, config, initial_state="STOPPED")
    stack.wait_for(lambda: _in_state(stack, name, State.STOPPED, 0), "STOPPED")
    assert _marks(marker) == []

    stack.client.pause_connector(name)
    paused = stack.wait_for(
        lambda: _in_state(stack, name, State.PAUSED, 2), "the connector and its 2 tasks PAUSED"
    )
    assert paused is not None
    # The executor reported them: they are assigned and paused, not merely published.
    executor_id = stack.client.server_info().executors[0].id
    assert [t.status.worker_id for t in paused.tasks] == [executor_id, executor_id]
    # Started to generate the task configs, then stopped: a paused connector's plugin does not run.
    assert _marks(marker) == ["start", "stop"]
    tasks = stack.client.list_tasks(name)
    assert [t.config["task.index"] for t in tasks] == ["0", "1"]

    stack.client.resume_connector(name)
    stack.wait_for(lambda: _in_state(stack, name, State.RUNNING, 2), "the connector and its tasks RUNNING")
    assert _marks(marker) == ["start", "stop", "start"]
    stack.client.delete_connector(name)


def test_a_paused_stopped_connector_whose_start_fails_is_failed_until_fixed(
    stack: PipelineStack, tmp_path: Path
) -> None:
    name = f"pause-fail-{uuid.uuid4().hex[:10]}"
    marker = tmp_path / "marks"
    config = {"connector.class": CONTROLLABLE, "marker.file": str(marker), "fail.start": "true"}
    stack.client.create_connector(name, config, initial_state="STOPPED")
    stack.wait_for(lambda: _in_state(stack, name, State.STOPPED, 0), "STOPPED")

    stack.client.pause_connector(name)
    failed = stack.wait_for(lambda: _in_state(stack, name, State.FAILED, 0), "FAILED without tasks")
    assert failed is not None
    assert "start failed on purpose" in failed.connector.trace
    assert _marks(marker) == ["start"]

    # With the cause removed, the connector (still paused) is started for its task and stopped.
    stack.client.patch_connector_config(name, {"fail.start": "false"})
    stack.wait_for(lambda: _in_state(stack, name, State.PAUSED, 1), "PAUSED with its task")
    assert _marks(marker) == ["start", "start", "stop"]
    stack.client.resume_connector(name)
    stack.wait_for(lambda: _in_state(stack, name, State.RUNNING, 1), "RUNNING")
    stack.client.delete_connector(name)
