"""Fault tests: an executor killed with SIGKILL mid-run (issue 12, Done-when (b)). 100k generated
records flow DataGenSource → Kafka → SparkFileSink on two executors. Counted with readers of our
own: nothing is lost (every (task, seq) is in the lake), the sink writes nothing twice (lake rows =
topic records), and the source redoes at most one batch per source task of the killed executor.
(Control-plane faults: test_control_plane_faults.py; Spark Connect: test_spark_faults.py.)"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import SparkSession

from sluiceway_server.embedded import EmbeddedBroker
from tests.fault.fault_helpers import (
    ExecutorStarter,
    create_lake_pipeline,
    executor_tasks,
    topic_records,
    wait_for,
)
from tests.integration.pipeline_helpers import parquet_counts, published_rows

pytestmark = pytest.mark.fault

TASKS = 2
PER_TASK = 50_000
BATCH = 5_000
EXPECTED = TASKS * PER_TASK


@pytest.fixture
def plane(control_plane_factory: Callable[..., Any]) -> Any:
    return control_plane_factory(
        **{"executor.heartbeat.interval.ms": "500", "executor.session.timeout.ms": "3000"}
    )


def test_executor_killed_mid_run_loses_nothing(
    plane: Any,
    start_executor: ExecutorStarter,
    broker: EmbeddedBroker,
    spark: SparkSession,
    unique: str,
    tmp_path: Path,
) -> None:
    first = start_executor(f"a-{unique}", [plane.address])
    second = start_executor(f"b-{unique}", [plane.address])
    wait_for(lambda: len(executor_tasks(plane.address)) == 2, 60, "two executors attached")
    out = tmp_path / "parquet"
    topic = f"fault-{unique}"
    create_lake_pipeline(
        plane.address,
        unique,
        out,
        topic=topic,
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
    wait_for(lambda: published_rows(out) >= 10_000, 180, "records in the sink", first.tail)
    killed_sources = sum(
        1 for task in executor_tasks(plane.address)[f"a-{unique}"] if f"gen-{unique}" in task
    )
    first.kill()
    # The survivor takes over every task once the session times out.
    wait_for(lambda: list(executor_tasks(plane.address)) == [f"b-{unique}"], 30, "the dead executor expired")
    wait_for(
        lambda: len(executor_tasks(plane.address)[f"b-{unique}"]) == 2 * TASKS, 30, "failover", second.tail
    )
    wait_for(lambda: published_rows(out) >= EXPECTED, 300, "every record in the sink", second.tail)
    # The source may have written a batch twice: rows can count EXPECTED before every record is in.
    wait_for(lambda: parquet_counts(spark, out)[1] >= EXPECTED, 60, "every distinct record", second.tail)
    time.sleep(3)  # anything written twice would land now
    rows, distinct = parquet_counts(spark, out)
    produced = topic_records(broker.bootstrap_servers, topic)
    print(f"lake rows {rows}, distinct {distinct}, topic records {produced}, generated {EXPECTED}")
    assert distinct == EXPECTED, f"{EXPECTED - distinct} record(s) lost"
    assert rows == produced, f"the sink wrote {rows - produced} row(s) twice"
    assert EXPECTED <= produced <= EXPECTED + killed_sources * BATCH, (produced, killed_sources)
