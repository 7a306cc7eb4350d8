"""Spark Connect killed with SIGKILL in the middle of a DataGenSource → SparkFileSink pipeline (two
executors, 40k records) and started again on the same port (issue 12, Done-when (a)). Nobody
restarts anything: every task recovers by itself once Spark is back, no record is lost, the sink
writes no record twice (lake rows = topic records), the source redid at most one batch per task,
and no task status ever said FAILED."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from sluiceway_server.embedded import (
    EmbeddedBroker,
    EmbeddedSparkConnect,
    ManagedProcess,
    executor_argv,
    spawn,
    start_spark_connect,
)
from tests.conftest import LOG_DIR, ControlPlaneProcess
from tests.fault.fault_helpers import (
    create_lake_pipeline,
    executor_tasks,
    failed_statuses,
    topic_records,
    wait_for,
    wait_while_growing,
)
from tests.integration.pipeline_helpers import parquet_counts, published_rows

pytestmark = pytest.mark.fault

TASKS = 2
PER_TASK = 20_000
BATCH = 5_000
EXPECTED = TASKS * PER_TASK
# Spark stays down this long: long enough for every task to notice.
DOWN_S = 5.0


@pytest.fixture
def own_spark() -> Iterator[list[EmbeddedSparkConnect]]:
    """The Spark Connect servers of this test (the last one runs), stopped at the end."""
    servers = [start_spark_connect(LOG_DIR / "spark-fault")]
    yield servers
    for server in servers:
        server.stop()


@pytest.mark.timeout(1200)
def test_spark_connect_killed_and_restarted_every_task_recovers_by_itself(
    control_plane_factory: Callable[..., ControlPlaneProcess],
    own_spark: list[EmbeddedSparkConnect],
    broker: EmbeddedBroker,
    spark: SparkSession,
    unique: str,
    tmp_path: Path,
) -> None:
    plane = control_plane_factory(
        **{"executor.heartbeat.interval.ms": "500", "executor.session.timeout.ms": "10000"}
    )
    first = own_spark[0]
    executors: list[ManagedProcess] = []
    try:
        for role in ("a", "b"):
            argv = executor_argv(plane.address, first.remote, "--id", f"{role}-{unique}")
            executors.append(spawn(f"executor-{role}-{unique}", argv, LOG_DIR))

        def logs() -> str:
            return "\n".join(e.tail() for e in executors)

        wait_for(lambda: len(executor_tasks(plane.address)) == 2, 90, "two executors attached", logs)
        out = tmp_path / "lake"
        topic = f"sparkfault-{unique}"
        create_lake_pipeline(
            plane.address, unique, out, topic=topic, tasks=TASKS, per_task=PER_TASK, batch=BATCH, rate=2500
        )
        wait_for(lambda: published_rows(out) >= 10_000, 180, "records in the lake", logs)

        before = published_rows(out)
        first.managed.kill()
        killed_at = time.monotonic()
        time.sleep(DOWN_S)
        own_spark.append(start_spark_connect(LOG_DIR / "spark-fault", port=first.port))
        back_at = time.monotonic()
        print(f"Spark Connect down for {back_at - killed_at:.1f}s")

        # The tasks resume by themselves soon after Spark's return (what the docs promise); how fast
        # they then catch up depends on the machine (a cold JVM on 2 shared cores), which is for
        # bench/ to measure, not for a test to assert.
        wait_for(
            lambda: published_rows(out) > before,
            150,
            "the lake to grow again after Spark's return",
            logs,
        )
        resumed_at = time.monotonic()
        # Slow machines catch up slowly: the wait lasts while the lake grows, and fails if it stalls.
        wait_while_growing(lambda: published_rows(out), EXPECTED, 180, "every record in the lake", logs)
        # The source may redo a batch: rows can count EXPECTED before every record is in.
        wait_for(lambda: parquet_counts(spark, out)[1] >= EXPECTED, 60, "every distinct record", logs)
        done_at = time.monotonic()
        time.sleep(3)  # anything written twice would land now
        rows, distinct = parquet_counts(spark, out)
        produced = topic_records(broker.bootstrap_servers, topic)
        print(
            f"growing again {resumed_at - back_at:.1f}s and complete {done_at - back_at:.1f}s after "
            f"Spark's return; lake rows {rows}, distinct "
            f"{distinct}, topic records {produced}, generated {EXPECTED}"
        )
        # lost = generated - delivered; written twice by the sink = lake rows - topic records; the
        # source may redo the batch each of its tasks had in flight.
        assert distinct == EXPECTED, f"{EXPECTED - distinct} record(s) lost"
        assert rows == produced, f"the sink wrote {rows - produced} row(s) twice"
        assert EXPECTED <= produced <= EXPECTED + TASKS * BATCH, produced
        assert failed_statuses(broker.bootstrap_servers, plane.topics["status"], unique) == []
        assert all(e.process.poll() is None for e in executors), logs()
    finally:
        for executor in executors:
            if executor.process.poll() is None:
                executor.stop(timeout=60)
