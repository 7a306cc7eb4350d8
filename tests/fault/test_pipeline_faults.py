"""Fault tests: an executor killed with SIGKILL mid-run. 200k generated records flow
DataGenSource → Kafka → SparkFileSink; every (task, seq) must arrive in the Parquet sink,
and duplicates stay within one batch per task running on the killed process. (Control-plane
faults: test_control_plane_faults.py.)"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import grpc
import pytest
from pyspark.sql import SparkSession

from sluiceway.api.v1 import cluster_pb2, cluster_pb2_grpc, connectors_pb2, connectors_pb2_grpc
from sluiceway_server.embedded import EmbeddedSparkConnect, ManagedProcess, executor_argv, spawn
from tests.conftest import LOG_DIR
from tests.integration.pipeline_helpers import parquet_counts

pytestmark = pytest.mark.fault

TASKS = 2
PER_TASK = 100_000
BATCH = 10_000
EXPECTED = TASKS * PER_TASK


@pytest.fixture
def plane(control_plane_factory: Callable[..., Any]) -> Any:
    return control_plane_factory(
        **{"executor.heartbeat.interval.ms": "500", "executor.session.timeout.ms": "3000"}
    )


@pytest.fixture
def start_executor(
    spark_connect: EmbeddedSparkConnect, unique: str
) -> Iterator[Callable[[Any, str], ManagedProcess]]:
    started: list[ManagedProcess] = []

    def start(plane: Any, executor_id: str) -> ManagedProcess:
        process = spawn(
            f"executor-{executor_id}",
            executor_argv(plane.address, spark_connect.remote, "--id", executor_id),
            LOG_DIR,
        )
        started.append(process)
        return process

    yield start
    for process in started:
        if process.process.poll() is None:
            process.stop(timeout=60)


def create_pipeline(address: str, unique: str, out: Path, rate: int) -> None:
    topic = f"fault-{unique}"
    configs = {
        f"gen-{unique}": {
            "connector.class": "DataGenSource",
            "topic": topic,
            "tasks.max": str(TASKS),
            "max.records": str(PER_TASK),
            "records.per.sec": str(rate),
            "batch.max.records": str(BATCH),
        },
        f"sink-{unique}": {
            "connector.class": "SparkFileSink",
            "topics": topic,
            "path": str(out),
            "format": "parquet",
            "tasks.max": str(TASKS),
            "batch.max.records": str(BATCH),
        },
    }
    with grpc.insecure_channel(address) as channel:
        stub = connectors_pb2_grpc.ConnectorServiceStub(channel)
        for name, config in configs.items():
            stub.CreateConnector(
                connectors_pb2.CreateConnectorRequest(
                    connector_id=name, connector=connectors_pb2.Connector(config=config)
                ),
                timeout=60,
            )


def executors(address: str) -> dict[str, list[str]]:
    with grpc.insecure_channel(address) as channel:
        info = cluster_pb2_grpc.ClusterServiceStub(channel).GetServerInfo(
            cluster_pb2.GetServerInfoRequest(), timeout=10
        )
    return {e.id: list(e.tasks) for e in info.executors}


def wait_for(
    probe: Callable[[], bool], timeout: float, what: str, logs: Callable[[], str] = lambda: ""
) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if probe():
            return
        time.sleep(1)
    raise AssertionError(f"timed out waiting for {what}\n{logs()}")


def test_executor_killed_mid_run_loses_nothing(
    plane: Any,
    start_executor: Callable[[Any, str], ManagedProcess],
    spark: SparkSession,
    unique: str,
    tmp_path: Path,
) -> None:
    first = start_executor(plane, f"a-{unique}")
    second = start_executor(plane, f"b-{unique}")
    wait_for(lambda: len(executors(plane.address)) == 2, 60, "two executors attached")
    out = tmp_path / "parquet"
    create_pipeline(plane.address, unique, out, rate=8_000)
    wait_for(
        lambda: sum(len(t) for t in executors(plane.address).values()) == 2 * TASKS, 60, "all tasks assigned"
    )
    # Kill an executor once data is flowing, in the middle of the run.
    wait_for(lambda: parquet_counts(spark, out)[1] >= 20_000, 180, "records in the sink", first.tail)
    killed_tasks = len(executors(plane.address)[f"a-{unique}"])
    first.kill()
    # The survivor takes over every task once the session times out.
    wait_for(lambda: list(executors(plane.address)) == [f"b-{unique}"], 30, "the dead executor expired")
    wait_for(lambda: len(executors(plane.address)[f"b-{unique}"]) == 2 * TASKS, 30, "failover", second.tail)
    wait_for(lambda: parquet_counts(spark, out)[1] == EXPECTED, 300, "every record in the sink", second.tail)
    rows, distinct = parquet_counts(spark, out)
    assert distinct == EXPECTED
    assert rows - distinct <= killed_tasks * BATCH, (rows, distinct, killed_tasks)
