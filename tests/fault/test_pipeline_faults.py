"""Fault tests: an executor killed with SIGKILL mid-run. 200k generated records flow
DataGenSource → Kafka → SparkFileSink; every (task, seq) must arrive in the Parquet sink,
and duplicates stay within one batch per task running on the killed process. (Control-plane
faults: test_control_plane_faults.py.)"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import SparkSession

from tests.fault.fault_helpers import ExecutorStarter, create_lake_pipeline, executor_tasks, wait_for
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


def test_executor_killed_mid_run_loses_nothing(
    plane: Any,
    start_executor: ExecutorStarter,
    spark: SparkSession,
    unique: str,
    tmp_path: Path,
) -> None:
    first = start_executor(f"a-{unique}", [plane.address])
    second = start_executor(f"b-{unique}", [plane.address])
    wait_for(lambda: len(executor_tasks(plane.address)) == 2, 60, "two executors attached")
    out = tmp_path / "parquet"
    create_lake_pipeline(
        plane.address,
        unique,
        out,
        topic=f"fault-{unique}",
        tasks=TASKS,
        per_task=PER_TASK,
        batch=BATCH,
        rate=8_000,
    )
    wait_for(
        lambda: sum(len(t) for t in executor_tasks(plane.address).values()) == 2 * TASKS,
        60,
        "all tasks assigned",
    )
    # Kill an executor once data is flowing, in the middle of the run.
    wait_for(lambda: parquet_counts(spark, out)[1] >= 20_000, 180, "records in the sink", first.tail)
    killed_tasks = len(executor_tasks(plane.address)[f"a-{unique}"])
    first.kill()
    # The survivor takes over every task once the session times out.
    wait_for(lambda: list(executor_tasks(plane.address)) == [f"b-{unique}"], 30, "the dead executor expired")
    wait_for(
        lambda: len(executor_tasks(plane.address)[f"b-{unique}"]) == 2 * TASKS, 30, "failover", second.tail
    )
    wait_for(lambda: parquet_counts(spark, out)[1] == EXPECTED, 300, "every record in the sink", second.tail)
    rows, distinct = parquet_counts(spark, out)
    assert distinct == EXPECTED
    assert rows - distinct <= killed_tasks * BATCH, (rows, distinct, killed_tasks)
