"""The control plane is not in the data path: a DataGenSource → SparkFileSink pipeline on two
executors keeps running while the control plane's leader is killed (three replicas) or the only
replica is killed and restarted. Counted with readers of our own: every generated (task, seq)
reaches the lake exactly once, the source wrote every record once, no task was stopped or
restarted, and no task status ever said UNASSIGNED."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from sluiceway_server.embedded import (
    EmbeddedBroker,
    ManagedProcess,
)
from tests.conftest import ControlPlaneProcess
from tests.fault.fault_helpers import (
    ExecutorStarter,
    create_lake_pipeline,
    executor_tasks,
    server_info,
    topic_records,
    wait_for,
)
from tests.integration.api_helpers import read_topic
from tests.integration.pipeline_helpers import parquet_counts, published_rows

pytestmark = pytest.mark.fault

TASKS = 2
PER_TASK = 20_000
BATCH = 5_000
EXPECTED = TASKS * PER_TASK
SETTINGS = {
    "executor.heartbeat.interval.ms": "500",
    "executor.session.timeout.ms": "10000",
    "plugin.callback.timeout.ms": "30000",
}


def _create_pipeline(address: str, unique: str, out: Path) -> str:
    topic = f"cpfault-{unique}"
    create_lake_pipeline(
        address, unique, out, topic=topic, tasks=TASKS, per_task=PER_TASK, batch=BATCH, rate=3000
    )
    return topic


def _unassigned_writes(bootstrap: str, status_topic: str, unique: str) -> list[str]:
    """Every UNASSIGNED status ever written for the pipeline's tasks (the status topic keeps them all)."""
    return [
        key
        for key, value in read_topic(bootstrap, status_topic)
        if key is not None
        and key.startswith("status-task-")
        and unique in key
        and value is not None
        and value.get("state") == "UNASSIGNED"
    ]


def _task_starts(executor: ManagedProcess) -> int:
    return sum(1 for line in executor.log_path.read_text().splitlines() if " started (generation " in line)


def _check_pipeline(
    spark: SparkSession,
    broker: EmbeddedBroker,
    plane: ControlPlaneProcess,
    topic: str,
    out: Path,
    unique: str,
    executors: list[ManagedProcess],
) -> None:
    def logs() -> str:
        return "\n".join(e.tail() for e in executors)

    wait_for(lambda: published_rows(out) >= EXPECTED, 300, "every record in the lake", logs)
    wait_for(lambda: parquet_counts(spark, out)[1] >= EXPECTED, 60, "every distinct record in the lake", logs)
    time.sleep(3)  # anything written twice would land now
    rows, distinct = parquet_counts(spark, out)
    produced = topic_records(broker.bootstrap_servers, topic)
    print(f"lake rows {rows}, distinct {distinct}, topic records {produced}, generated {EXPECTED}")
    assert distinct == EXPECTED, "records lost"
    assert rows == distinct, f"the sink wrote {rows - distinct} row(s) twice"
    assert produced == EXPECTED, f"the source wrote {produced - EXPECTED} record(s) twice"
    assert _unassigned_writes(broker.bootstrap_servers, plane.topics["status"], unique) == []
    # Each of the four tasks started once, on whichever executor ran it, and never again.
    assert sum(_task_starts(e) for e in executors) == 2 * TASKS, logs()
    assert all(e.process.poll() is None for e in executors)


def test_only_control_plane_killed_and_restarted_pipeline_keeps_running(
    control_plane_factory: Callable[..., ControlPlaneProcess],
    start_executor: ExecutorStarter,
    broker: EmbeddedBroker,
    spark: SparkSession,
    unique: str,
    tmp_path: Path,
) -> None:
    plane = control_plane_factory(**SETTINGS)
    executors = [start_executor(f"{role}-{unique}", [plane.address]) for role in ("a", "b")]
    wait_for(lambda: len(executor_tasks(plane.address)) == 2, 60, "two executors attached")
    out = tmp_path / "lake"
    topic = _create_pipeline(plane.address, unique, out)
    wait_for(lambda: published_rows(out) >= 10_000, 180, "records in the lake")
    before = executor_tasks(plane.address)
    assert sum(len(t) for t in before.values()) == 2 * TASKS
    plane.kill()
    time.sleep(2)
    plane.start()  # same port and internal topics; the executors attach again on their own
    wait_for(lambda: executor_tasks(plane.address) == before, 60, "every task adopted where it ran")
    _check_pipeline(spark, broker, plane, topic, out, unique, executors)


def test_leader_killed_pipeline_keeps_running(
    broker: EmbeddedBroker,
    start_executor: ExecutorStarter,
    spark: SparkSession,
    unique: str,
    tmp_path: Path,
) -> None:
    suffix = f"lk{unique}"
    replicas = [ControlPlaneProcess(broker, suffix, settings=dict(SETTINGS)) for _ in range(3)]
    try:
        replicas[0].start()
        for replica in replicas[1:]:
            replica.start(lead=False)
        addresses = [r.address for r in replicas]
        executors = [start_executor(f"{role}-{unique}", addresses) for role in ("a", "b")]
        wait_for(lambda: len(executor_tasks(replicas[0].address)) == 2, 60, "two executors attached")
        out = tmp_path / "lake"
        topic = _create_pipeline(replicas[1].address, unique, out)  # through a follower
        wait_for(lambda: published_rows(out) >= 10_000, 180, "records in the lake")
        before = executor_tasks(replicas[0].address)
        assert sum(len(t) for t in before.values()) == 2 * TASKS
        replicas[0].kill()
        survivors = replicas[1:]

        def new_leader_has_everything() -> bool:
            info = server_info(survivors[0].address)
            if info is None or info.leader.id not in {r.address for r in survivors}:
                return False
            return executor_tasks(info.leader.id) == before

        wait_for(new_leader_has_everything, 90, "a new leader with every task adopted where it ran")
        _check_pipeline(spark, broker, replicas[1], topic, out, unique, executors)
    finally:
        for replica in replicas:
            if replica.managed is not None and replica.managed.process.poll() is None:
                replica.stop()
