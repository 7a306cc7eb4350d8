"""End to end: a real control plane, a real `sluiceway executor` process, the real broker and
Spark Connect. DataGenSource → Kafka → SparkFileSink to Parquet holds every generated
`(task, seq)` exactly once; task statuses name the executor; SIGTERM stops it cleanly."""

from __future__ import annotations

import signal
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import grpc
import pytest
from pyspark.sql import SparkSession

from sluiceway.api.v1 import common_pb2, connectors_pb2, connectors_pb2_grpc
from sluiceway_server.embedded import EmbeddedSparkConnect, ManagedProcess, executor_argv, spawn
from tests.conftest import LOG_DIR
from tests.integration.pipeline_helpers import parquet_counts

pytestmark = pytest.mark.integration

RECORDS_PER_TASK = 20_000
TASKS = 2


@pytest.fixture
def plane(control_plane_factory: Callable[..., Any]) -> Any:
    # A plane of its own: the executor must only see this test's connectors.
    return control_plane_factory(
        **{"executor.heartbeat.interval.ms": "500", "executor.session.timeout.ms": "5000"}
    )


@pytest.fixture
def executor(
    plane: Any, spark_connect: EmbeddedSparkConnect, unique: str
) -> Iterator[tuple[str, ManagedProcess]]:
    executor_id = f"exec-{unique}"
    process = spawn(
        f"executor-{unique}",
        executor_argv(plane.address, spark_connect.remote, "--id", executor_id, "--log-level", "INFO"),
        LOG_DIR,
    )
    yield executor_id, process
    process.stop(timeout=60)


def create(stub: connectors_pb2_grpc.ConnectorServiceStub, name: str, config: dict[str, str]) -> None:
    stub.CreateConnector(
        connectors_pb2.CreateConnectorRequest(
            connector_id=name, connector=connectors_pb2.Connector(config=config)
        ),
        timeout=30,
    )


def test_datagen_to_parquet_through_a_real_executor(
    plane: Any,
    executor: tuple[str, ManagedProcess],
    spark: SparkSession,
    unique: str,
    tmp_path: Path,
) -> None:
    executor_id, process = executor
    topic = f"e2e-{unique}"
    out = tmp_path / "parquet"
    with grpc.insecure_channel(plane.address) as channel:
        stub = connectors_pb2_grpc.ConnectorServiceStub(channel)
        create(
            stub,
            f"gen-{unique}",
            {
                "connector.class": "DataGenSource",
                "topic": topic,
                "max.records": str(RECORDS_PER_TASK),
                "batch.max.records": "8000",
                "tasks.max": str(TASKS),
            },
        )
        create(
            stub,
            f"sink-{unique}",
            {"connector.class": "SparkFileSink", "topics": topic, "path": str(out), "format": "parquet"},
        )

        expected = RECORDS_PER_TASK * TASKS
        deadline = time.monotonic() + 180
        counts = (0, 0)
        while time.monotonic() < deadline:
            assert process.process.poll() is None, f"the executor exited:\n{process.tail()}"
            counts = parquet_counts(spark, out)
            if counts[1] == expected:
                break
            time.sleep(2)
        assert counts[1] == expected, f"{counts} after 180s\n{process.tail()}"
        # No batch was redone: nothing failed or restarted.
        assert counts[0] == expected

        for name in (f"gen-{unique}", f"sink-{unique}"):
            status = stub.GetConnectorStatus(
                connectors_pb2.GetConnectorStatusRequest(name=f"connectors/{name}"), timeout=10
            )
            tasks = {t.id: t.status for t in status.tasks}
            expected_tasks = TASKS if name.startswith("gen") else 1
            assert sorted(tasks) == list(range(expected_tasks)), status
            for task_status in tasks.values():
                assert task_status.state == common_pb2.STATE_RUNNING, status
                assert task_status.worker_id == executor_id

    # SIGTERM: tasks stop between batches, the stream closes, the process exits 0.
    process.process.send_signal(signal.SIGTERM)
    assert process.process.wait(60) == 0, process.tail()
    assert parquet_counts(spark, out) == (expected, expected)
    # Its session ran the two empty jobs as soon as the worker config arrived.
    assert "Spark Connect session 1 warmed up in" in process.log_path.read_text(encoding="utf-8")
