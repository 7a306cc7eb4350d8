"""Issue 31, items 8 and 10, through the client as a user calls it, on a real control plane,
executor, Kafka and Spark Connect:

- a DataGen that has written its `max.records` shows RUNNING with the detail "idle: end of data"
  and since when, and the status topic holds Kafka Connect's four keys beside ours;
- creating a connector again under a name whose offsets are still committed (deleted without
  `--delete-offsets`) answers a COMMITTED_OFFSETS_EXIST notice, validate_only too, for a source
  (the offsets topic) and a sink (its consumer group); the recreated task resumes and is idle at
  once; after `delete --delete-offsets` there is no notice;
- a sink with nothing left to read shows "idle: no new records";
- a restart's answer shows each task RESTARTING on its executor, not on the control plane.

The CLI shows both: the idle detail in the status table, the notice after `create`."""

from __future__ import annotations

import re
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from sluiceway.api.v1 import common_pb2, connectors_pb2
from sluiceway.client import Connector, Notice, SluicewayClient
from sluiceway_server.embedded import EmbeddedBroker, EmbeddedSparkConnect
from tests.conftest import ControlPlaneProcess
from tests.integration.api_helpers import read_topic
from tests.integration.pipeline_helpers import (
    FAST_EXECUTOR_SESSION,
    PipelineStack,
    attach_executor,
    committed_offsets,
)

pytestmark = pytest.mark.integration

END_OF_DATA = "idle: end of data"
NO_NEW_RECORDS = "idle: no new records"
SINK = "testing_connectors.ControllableSinkConnector"
RECORDS = 40


@pytest.fixture(scope="module")
def stack(broker: EmbeddedBroker, spark_connect: EmbeddedSparkConnect) -> Iterator[PipelineStack]:
    plane = ControlPlaneProcess(broker, uuid.uuid4().hex[:8], settings=dict(FAST_EXECUTOR_SESSION)).start()
    try:
        started = attach_executor(plane, spark_connect, "idle")
        yield started
        started.close()
    finally:
        plane.stop()


def _datagen(topic: str) -> dict[str, str]:
    return {"connector.class": "DataGenSource", "topic": topic, "tasks.max": "1", "max.records": str(RECORDS)}


def _task(client: SluicewayClient, name: str) -> connectors_pb2.InstanceStatus:
    status: connectors_pb2.InstanceStatus = client.task_status(name, 0).status.raw
    return status


def _idle(
    stack: PipelineStack, name: str, detail: str, timeout: float = 90.0
) -> connectors_pb2.InstanceStatus:
    def probe() -> connectors_pb2.InstanceStatus | None:
        status = _task(stack.client, name)
        return status if status.state == common_pb2.STATE_RUNNING and status.detail == detail else None

    found = stack.wait_for(probe, f"task 0 of {name} to show {detail!r}", timeout)
    assert found is not None
    return found


def _notices(connector: Connector) -> list[Notice]:
    return list(connector.notices)


def _executor_id(stack: PipelineStack) -> str:
    (executor,) = stack.client.server_info().executors
    return executor.id


def test_a_datagen_at_max_records_is_idle_and_its_name_carries_a_notice(
    stack: PipelineStack, broker: EmbeddedBroker
) -> None:
    client = stack.client
    name = f"idle-{uuid.uuid4().hex[:8]}"
    topic = f"{name}-out"
    began_ms = int(time.time() * 1000)
    created = client.create_connector(name, _datagen(topic))
    assert _notices(created) == []
    status = _idle(stack, name, END_OF_DATA)
    assert began_ms <= status.idle_since.ToMilliseconds() <= int(time.time() * 1000)
    assert status.worker_id == _executor_id(stack)
    assert len(read_topic(broker.bootstrap_servers, topic)) == RECORDS
    # The status topic: Kafka Connect's four keys, and ours beside them.
    records = read_topic(broker.bootstrap_servers, stack.plane.topics["status"])
    latest = [value for key, value in records if key == f"status-task-{name}-0"][-1]
    assert {"state", "trace", "worker_id", "generation"} <= set(latest)
    assert (latest["state"], latest["detail"]) == ("RUNNING", END_OF_DATA)
    assert latest["idle_since_ms"] == status.idle_since.ToMilliseconds()

    # Deleted without its offsets, then created again: the answers say the offsets are there.
    client.delete_connector(name, wait=True)
    checked = client.create_connector(name, _datagen(topic), validate_only=True)
    (notice,) = _notices(checked)
    assert notice.code == "COMMITTED_OFFSETS_EXIST"
    assert f"in offsets topic {stack.plane.topics['offset']}" in notice.message
    assert f"`sluiceway offsets reset {name}`" in notice.message
    again = client.create_connector(name, _datagen(topic))
    (notice,) = _notices(again)
    assert notice.code == "COMMITTED_OFFSETS_EXIST"
    assert f"`sluiceway connectors delete {name} --delete-offsets`" in notice.message
    assert f"`sluiceway connectors stop {name}`" in notice.message
    # It resumed at the end of its data: idle at once, nothing written twice.
    _idle(stack, name, END_OF_DATA)
    assert committed_offsets(client, name) == [({"task": 0}, {"seq": RECORDS - 1})]
    assert len(read_topic(broker.bootstrap_servers, topic)) == RECORDS

    # Deleted with its offsets: a new connector of the name starts afresh, and is told nothing.
    client.delete_connector(name, delete_offsets=True)
    fresh = client.create_connector(name, _datagen(topic))
    assert _notices(fresh) == []
    _idle(stack, name, END_OF_DATA)
    assert len(read_topic(broker.bootstrap_servers, topic)) == 2 * RECORDS
    client.delete_connector(name, delete_offsets=True)


def test_a_sink_with_nothing_to_read_is_idle_and_its_group_carries_a_notice(stack: PipelineStack) -> None:
    client = stack.client
    source = f"idle-src-{uuid.uuid4().hex[:8]}"
    topic = f"{source}-out"
    client.create_connector(source, _datagen(topic))
    _idle(stack, source, END_OF_DATA)
    sink = f"idle-sink-{uuid.uuid4().hex[:8]}"
    config = {"connector.class": SINK, "topics": topic}
    client.create_connector(sink, config)
    try:

        def read_all() -> bool:
            offsets = committed_offsets(client, sink)
            return sum(int(offset["kafka_offset"]) for _, offset in offsets if offset) == RECORDS

        stack.wait_for(read_all, "the sink to commit every record")
        # Its batches come back empty from then on: idle after about ten seconds.
        status = _idle(stack, sink, NO_NEW_RECORDS, timeout=60)
        assert status.HasField("idle_since")

        client.delete_connector(sink, wait=True)
        recreated = client.create_connector(sink, config)
        (notice,) = _notices(recreated)
        assert notice.code == "COMMITTED_OFFSETS_EXIST"
        assert f"consumer group connect-{sink} has offsets" in notice.message
    finally:
        client.delete_connector(sink, delete_offsets=True)
        client.delete_connector(source, delete_offsets=True)


def test_a_restart_shows_the_task_restarting_on_its_executor(stack: PipelineStack) -> None:
    client = stack.client
    name = f"idle-rs-{uuid.uuid4().hex[:8]}"
    client.create_connector(name, _datagen(f"{name}-out"))
    try:
        before = _idle(stack, name, END_OF_DATA)
        planned = client.restart_connector(name, include_tasks=True)
        (task,) = planned.tasks
        restarting: connectors_pb2.InstanceStatus = task.status.raw
        assert restarting.state == common_pb2.STATE_RESTARTING
        assert restarting.worker_id == _executor_id(stack) != stack.plane.address
        assert restarting.generation == before.generation and restarting.detail == ""
        # The connector itself restarts on the control plane, which its status names.
        assert planned.connector.raw.state == common_pb2.STATE_RESTARTING
        assert planned.connector.raw.worker_id

        # The task runs again under a new generation, and is idle again at once.
        def rerun() -> connectors_pb2.InstanceStatus | None:
            status = _task(client, name)
            again = status.generation > before.generation and status.detail == END_OF_DATA
            return status if again else None

        after = stack.wait_for(rerun, "the restarted task to run and be idle again")
        assert after is not None and after.worker_id == _executor_id(stack)
    finally:
        client.delete_connector(name, delete_offsets=True)


def _cli(stack: PipelineStack, *args: str) -> str:
    """The `sluiceway` console script against the stack, as a user types it; its standard output."""
    result = subprocess.run(
        [str(Path(sys.executable).parent / "sluiceway"), "--server", stack.plane.address, *args],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    return result.stdout


def test_the_cli_shows_an_idle_task_and_the_offsets_a_name_carries(stack: PipelineStack) -> None:
    name = f"idle-cli-{uuid.uuid4().hex[:8]}"
    settings = [f"{key}={value}" for key, value in _datagen(f"{name}-out").items()]
    first = _cli(stack, "connectors", "create", name, *settings)
    assert "Note:" not in first
    try:
        _idle(stack, name, END_OF_DATA)
        status = _cli(stack, "connectors", "status", name)
        (row,) = [line for line in status.splitlines() if line.startswith("task 0")]
        assert re.search(r"RUNNING \(idle: end of data, since \d{4}-\d\d-\d\dT[\d:]+Z\)", row), row
        assert _executor_id(stack) in row, row
        # The generation reads EPOCH.COUNT in the table, and the same in the executor's log.
        generation = re.search(r"\s(\d+\.\d+)\s", row)
        assert generation is not None, row
        started = f"task connectors/{name}/tasks/0 started (generation {generation[1]})"
        assert started in stack.executor.log_path.read_text(), started

        _cli(stack, "connectors", "delete", name, "--wait")
        checked = _cli(stack, "connectors", "create", name, *settings, "--validate-only")
        assert checked.startswith(f"The config is valid; connector {name} was not created.\n"), checked
        assert "Note: Offsets committed under the name" in checked, checked
        again = _cli(stack, "connectors", "create", name, *settings)
        assert again.startswith(
            f"Created connector {name}.\n\nNote: Connector {name} resumes from offsets"
        ), again
        assert f"sluiceway connectors delete {name} --delete-offsets" in again
    finally:
        stack.client.delete_connector(name, delete_offsets=True)
