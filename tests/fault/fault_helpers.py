"""What the fault tests share: the DataGenSource → SparkFileSink pipeline they break, executors of
their own, and reads of the control plane that tolerate it being down."""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import grpc
import pytest
from confluent_kafka import Consumer, KafkaError, TopicPartition

from sluiceway.api.v1 import cluster_pb2, cluster_pb2_grpc, connectors_pb2, connectors_pb2_grpc
from sluiceway_server.embedded import EmbeddedSparkConnect, ManagedProcess, executor_argv, spawn
from tests.conftest import LOG_DIR
from tests.integration.api_helpers import read_topic

ExecutorStarter = Callable[[str, list[str]], ManagedProcess]


@pytest.fixture
def start_executor(spark_connect: EmbeddedSparkConnect) -> Iterator[ExecutorStarter]:
    """`start(executor_id, control-plane addresses)`: an executor process, stopped at the end."""
    started: list[ManagedProcess] = []

    def start(executor_id: str, servers: list[str]) -> ManagedProcess:
        argv = executor_argv(
            ",".join(servers), spark_connect.remote, "--id", executor_id, "--log-level", "INFO"
        )
        process = spawn(f"executor-{executor_id}", argv, LOG_DIR)
        started.append(process)
        return process

    yield start
    for process in started:
        if process.process.poll() is None:
            process.stop(timeout=60)


def create_lake_pipeline(
    address: str,
    unique: str,
    out: Path,
    *,
    topic: str,
    tasks: int,
    per_task: int | None,
    batch: int,
    rate: int,
) -> None:
    """`gen-{unique}` (DataGenSource, `per_task` records per task, or no end when None, at `rate` per
    second each) into `topic`, and `sink-{unique}` (SparkFileSink, Parquet under `out`) out of it."""
    source = {
        "connector.class": "DataGenSource",
        "topic": topic,
        "tasks.max": str(tasks),
        "records.per.sec": str(rate),
        "batch.max.records": str(batch),
    }
    if per_task is not None:
        source["max.records"] = str(per_task)
    configs = {
        f"gen-{unique}": source,
        f"sink-{unique}": {
            "connector.class": "SparkFileSink",
            "topics": topic,
            "path": str(out),
            "format": "parquet",
            "tasks.max": str(tasks),
            "batch.max.records": str(batch),
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


def generated_records(bootstrap: str, topic: str) -> tuple[int, int, int]:
    """(records, distinct (task, seq), what the sources generated) of a DataGenSource's topic; what
    they generated is the sum over tasks of the highest seq + 1, as each task counts from 0."""
    seen: set[tuple[int, int]] = set()
    highest: dict[int, int] = {}
    records = 0
    for _, value in read_topic(bootstrap, topic, timeout=180):
        task, seq = int(value["task"]), int(value["seq"])
        records += 1
        seen.add((task, seq))
        highest[task] = max(seq, highest.get(task, -1))
    return records, len(seen), sum(seq + 1 for seq in highest.values())


def server_info(address: str) -> cluster_pb2.ServerInfo | None:
    """The replica's GetServerInfo, or None while it does not answer."""
    try:
        with grpc.insecure_channel(address) as channel:
            info: cluster_pb2.ServerInfo = cluster_pb2_grpc.ClusterServiceStub(channel).GetServerInfo(
                cluster_pb2.GetServerInfoRequest(), timeout=5
            )
            return info
    except grpc.RpcError:
        return None


def executor_tasks(address: str) -> dict[str, list[str]]:
    """Executor id → its tasks, as the replica reports them ({} while it does not answer)."""
    info = server_info(address)
    return {} if info is None else {e.id: list(e.tasks) for e in info.executors}


def wait_for(
    probe: Callable[[], object], timeout: float, what: str, logs: Callable[[], str] = lambda: ""
) -> None:
    """Poll `probe` until it is truthy; on a timeout fail with `logs()`."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if probe():
            return
        time.sleep(0.5)
    raise AssertionError(f"timed out waiting for {what}\n{logs()}")


def wait_while_growing(
    count: Callable[[], int],
    target: int,
    stall: float,
    what: str,
    logs: Callable[[], str] = lambda: "",
    every: float = 2.0,
) -> None:
    """Poll `count` until it reaches `target`, for as long as it keeps growing: fail once it has
    not grown for `stall` seconds. A slow machine makes the wait longer; a pipeline that stopped
    delivering still fails."""
    best, grew_at = count(), time.monotonic()
    while best < target:
        if time.monotonic() - grew_at > stall:
            raise AssertionError(
                f"timed out waiting for {what}: {best} of {target}, no growth for {stall:.0f}s\n{logs()}"
            )
        time.sleep(every)
        now = count()
        if now > best:
            best, grew_at = now, time.monotonic()


def topic_records(bootstrap: str, topic: str) -> int:
    """How many records the data topic holds (every one the source wrote, duplicates included)."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"counter-{uuid.uuid4().hex[:8]}",
            "enable.auto.commit": False,
            "enable.partition.eof": True,
            "fetch.wait.max.ms": 50,
        }
    )
    try:
        partitions = list(consumer.list_topics(topic, timeout=15).topics[topic].partitions)
        consumer.assign([TopicPartition(topic, p, 0) for p in partitions])
        pending, count = set(partitions), 0
        deadline = time.monotonic() + 120
        while pending and time.monotonic() < deadline:
            for message in consumer.consume(10_000, timeout=1.0):
                error = message.error()
                if error is not None:
                    if error.code() == KafkaError._PARTITION_EOF:
                        pending.discard(message.partition())
                    continue
                count += 1
        assert not pending, f"could not read {topic} to its end"
        return count
    finally:
        consumer.close()


def failed_statuses(bootstrap: str, status_topic: str, unique: str) -> list[tuple[str, str]]:
    """Every FAILED status ever written for the tasks of connectors named with ``unique``, as (key,
    first line of its trace)."""
    return [
        (key, (value.get("trace") or "").splitlines()[0] if value.get("trace") else "")
        for key, value in read_topic(bootstrap, status_topic)
        if key is not None
        and key.startswith("status-task-")
        and unique in key
        and value is not None
        and value.get("state") == "FAILED"
    ]
