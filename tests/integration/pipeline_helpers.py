"""Helpers for tests that run whole pipelines through real executors."""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Final, TypeVar

from confluent_kafka import KafkaError, KafkaException, TopicCollection
from confluent_kafka.admin import AdminClient
from pyspark.sql import SparkSession
from pyspark.sql import functions as F  # noqa: N812 - Spark's usual alias

from sluiceway.client import SluicewayClient
from sluiceway.common.offsets import OffsetPair, offsets_from_proto
from sluiceway_executor.pipelines.spec import TaskSpec
from sluiceway_server.embedded import EmbeddedSparkConnect, ManagedProcess, executor_argv, spawn
from tests.conftest import LOG_DIR, ControlPlaneProcess

T = TypeVar("T")


def parquet_counts(spark: SparkSession, path: Path) -> tuple[int, int]:
    """(rows, distinct (task, seq)) of the generated records in a sink's Parquet files."""
    if not any(path.glob("task=*/batch=*")):  # nothing published yet (batches are staged in _staging)
        return 0, 0
    parsed = spark.read.parquet(str(path)).select(
        F.from_json(F.col("value").cast("string"), "task INT, seq LONG").alias("v")
    )
    row = parsed.agg(
        F.count(F.lit(1)).alias("rows"), F.count_distinct(F.col("v.task"), F.col("v.seq")).alias("distinct")
    ).first()
    assert row is not None
    return int(row["rows"]), int(row["distinct"])


def published_rows(path: Path) -> int:
    """The rows of a Parquet lake's published batches (``task=N/batch=KEY``), summed from the files'
    footers in this process: no Spark job. For waits that poll a growing lake, whose Spark reads
    would take the cores from the pipeline under test; distinct counts still come from Spark. A
    batch directory appears whole (a rename), and its files never change afterwards."""
    import pyarrow.parquet as pq

    return sum(
        pq.read_metadata(file).num_rows
        for file in path.glob("task=*/batch=*/*.parquet")
        if not file.name.startswith(("_", "."))
    )


def typed_lake_counts(spark: SparkSession, path: Path) -> tuple[int, int]:
    """(rows, distinct keys) of a typed lake (a DataGen struct value per row, keyed task-seq)."""
    if not any(path.glob("task=*/batch=*")):
        return 0, 0
    row = (
        spark.read.option("mergeSchema", "true")
        .parquet(str(path))
        .agg(F.count(F.lit(1)).alias("rows"), F.count_distinct(F.col("kafka_key")).alias("distinct"))
        .first()
    )
    assert row is not None
    return int(row["rows"]), int(row["distinct"])


# Executors notice a dead control plane and planes a dead executor within seconds, not the defaults.
FAST_EXECUTOR_SESSION: Final = {
    "executor.heartbeat.interval.ms": "500",
    "executor.session.timeout.ms": "5000",
}
TIMEOUT: Final = 90.0


@dataclass
class PipelineStack:
    """A control plane of a test's own with one executor attached, and a client of the plane."""

    plane: ControlPlaneProcess
    client: SluicewayClient
    executor: ManagedProcess

    def logs(self) -> str:
        plane = self.plane.managed.tail() if self.plane.managed is not None else ""
        return f"--- executor\n{self.executor.tail()}\n--- control plane\n{plane}"

    def wait_for(self, probe: Callable[[], T], what: str, timeout: float = TIMEOUT) -> T:
        """Polls `probe` until it returns something truthy and returns that; fails at once if the
        executor exits, and with both processes' logs on a timeout."""
        deadline = time.monotonic() + timeout
        last: T | None = None
        while time.monotonic() < deadline:
            assert self.executor.process.poll() is None, f"the executor exited\n{self.logs()}"
            last = probe()
            if last:
                return last
            time.sleep(0.5)
        raise AssertionError(f"timed out after {timeout}s waiting for {what}; last={last!r}\n{self.logs()}")

    def close(self) -> None:
        self.client.close()
        self.executor.stop(timeout=60)


def attach_executor(
    plane: ControlPlaneProcess, spark_connect: EmbeddedSparkConnect, role: str, *extra: str
) -> PipelineStack:
    """Starts an executor for `plane` and waits until it is attached (it loads the test plugins
    from the plane's plugin.path, which Welcome carries). `role` names it in ids and log files;
    `extra` are more executor flags (its TLS and credentials); the stack's client reaches the plane
    as `plane.security` says."""
    executor_id = f"{role}-{uuid.uuid4().hex[:8]}"
    process = spawn(
        f"executor-{executor_id}",
        executor_argv(
            plane.address, spark_connect.remote, "--id", executor_id, "--log-level", "INFO", *extra
        ),
        LOG_DIR,
    )
    stack = PipelineStack(plane, SluicewayClient(plane.address, timeout=30, security=plane.security), process)
    try:
        stack.wait_for(
            lambda: [e.id for e in stack.client.server_info().executors] == [executor_id],
            "the executor to attach",
        )
    except BaseException:
        stack.close()
        raise
    return stack


def committed_offsets(client: SluicewayClient, name: str) -> list[OffsetPair]:
    """The connector's committed offsets, as OffsetService answers them."""
    return offsets_from_proto(client.get_offsets(name).offsets)


def topic_exists(admin: AdminClient, topic: str) -> bool:
    """Whether the topic exists, asked with DescribeTopics (a metadata request might create it)."""
    future = admin.describe_topics(TopicCollection([topic]), request_timeout=15)[topic]
    try:
        future.result(timeout=20)
    except KafkaException as exc:
        if exc.args[0].code() == KafkaError.UNKNOWN_TOPIC_OR_PART:
            return False
        raise
    return True


def task_spec(connector: str, config: Mapping[str, str], task_class: str) -> TaskSpec:
    """Task 0 of ``connector`` as the control plane would hand it to an executor, for tests that
    run a pipeline in their own process."""
    return TaskSpec(
        name=f"connectors/{connector}/tasks/0",
        connector=connector,
        task_index=0,
        generation=1,
        connector_config=dict(config),
        task_config={**config, "task.id": "0", "task.class": task_class},
        paused=False,
        task_count=1,
    )
