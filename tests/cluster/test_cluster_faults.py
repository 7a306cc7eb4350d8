"""Faults of the Spark cluster under a running DataGenSource → SparkFileSink pipeline (issue 36): a
Spark worker killed with SIGKILL (with the executor it ran: Spark reruns that executor's tasks on the
other worker), a replacement worker started, then the standalone master killed (the pipeline runs
on without it) and started again on its recovery directory, where it lists the Spark Connect
application RUNNING again and the pipeline goes on. The source has no end, so records are on their
way through every fault however slow the machine; the test stops it afterwards. Nobody else touches
Sluiceway: no record is lost (lost = generated - distinct in the lake), the sink writes no row twice
(lake rows = topic records), the source redoes at most one batch per task, no task status says
FAILED, and the time each fault took to heal is printed.

The test leaves the session's cluster as it found it: a master and two live workers."""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from sluiceway.client import SluicewayClient, State
from sluiceway_server.embedded import EmbeddedBroker, EmbeddedSparkConnect
from sluiceway_server.spark_cluster import EmbeddedSparkCluster
from tests.conftest import ControlPlaneProcess
from tests.fault.fault_helpers import create_lake_pipeline, failed_statuses, generated_records
from tests.integration.pipeline_helpers import attach_executor, parquet_counts, published_rows

pytestmark = [pytest.mark.cluster, pytest.mark.fault]

TASKS = 2
# Records per second of each source task, until the test stops the source.
RATE = 200
BATCH = 5_000


def source_stopped(client: SluicewayClient, name: str) -> bool:
    status = client.connector_status(name)
    return status.state == State.STOPPED and not status.tasks


@pytest.mark.timeout(900)
def test_a_worker_killed_and_the_master_restarted_lose_nothing_and_write_nothing_twice(
    control_plane_factory: Callable[..., ControlPlaneProcess],
    cluster_spark_connect: EmbeddedSparkConnect,
    spark_cluster: EmbeddedSparkCluster,
    cluster_spark: SparkSession,
    broker: EmbeddedBroker,
    tmp_path: Path,
) -> None:
    unique = uuid.uuid4().hex[:10]
    plane = control_plane_factory(
        **{"executor.heartbeat.interval.ms": "500", "executor.session.timeout.ms": "10000"}
    )
    stack = attach_executor(plane, cluster_spark_connect, "cluster-fault")
    out, topic = tmp_path / "lake", f"clfault-{unique}"

    def in_lake() -> int:
        # From the files' footers: a Spark read every half second would slow the pipeline it watches.
        return published_rows(out) if out.exists() else 0

    def grows_past(count: int, what: str, timeout: float = 240) -> float:
        """Waits until the lake holds more than ``count`` rows; returns when it did."""
        stack.wait_for(lambda: in_lake() > count, what, timeout)
        return time.monotonic()

    try:
        create_lake_pipeline(
            plane.address, unique, out, topic=topic, tasks=TASKS, per_task=None, batch=BATCH, rate=RATE
        )
        started = time.monotonic()
        grows_past(4_000, "the first records in the lake")
        print(f"4,000 records in the lake {time.monotonic() - started:.1f}s after the create calls")

        # 1. A worker dies with its executor, mid-pipeline.
        victim = next(w for w in spark_cluster.workers if w.process.poll() is None)
        before = in_lake()
        victim.kill()
        killed_at = time.monotonic()
        worker_healed = grows_past(before, "the lake to grow after the worker's death") - killed_at
        spark_cluster.start_worker()  # what an operator's supervisor does

        # 2. The master dies: the pipeline runs on without it (the driver talks to its executors
        # directly), and a master started again on the recovery directory takes the workers and the
        # Spark Connect application back.
        grows_past(in_lake() + 2_000, "more records before the master's death")
        spark_cluster.kill_master()
        master_killed_at = time.monotonic()
        without_master = grows_past(in_lake(), "the lake to grow while the master is down") - master_killed_at
        spark_cluster.restart_master()
        master_back = time.monotonic() - master_killed_at
        assert spark_cluster.running_applications(), "the restarted master lost the Spark Connect application"
        grows_past(in_lake() + 2_000, "more records after the master's return")

        # 3. The source stops; everything it generated must reach the lake once.
        stack.client.stop_connector(f"gen-{unique}")
        stack.wait_for(lambda: source_stopped(stack.client, f"gen-{unique}"), "the source to stop")
        # A task may still be finishing its last batch as the status changes: read until two reads agree.
        reads = [generated_records(broker.bootstrap_servers, topic)]

        def settled() -> bool:
            time.sleep(3)
            reads.append(generated_records(broker.bootstrap_servers, topic))
            return reads[-1] == reads[-2]

        stack.wait_for(settled, "the topic to stop growing", 120)
        produced, in_topic, generated = reads[-1]
        assert in_topic == generated, f"the source skipped {generated - in_topic} seq(s)"
        # The sink writes each record of the topic once: rows reach `produced` once all are in.
        stack.wait_for(lambda: in_lake() >= produced, "every generated record in the lake", 360)
        time.sleep(3)  # anything written twice would land now
        rows, distinct = parquet_counts(cluster_spark, out)
        print(
            f"worker killed: the lake grew again {worker_healed:.1f}s later; master killed: the lake grew "
            f"{without_master:.1f}s later without it, a new master was ALIVE (recovered) {master_back:.1f}s "
            f"after the kill; lake rows {rows}, distinct {distinct}, topic records {produced}, "
            f"generated {generated}"
        )
        # lost = generated - delivered; written twice by the sink = lake rows - topic records; the
        # source may redo the batch each of its tasks had in flight.
        assert distinct == generated, f"{generated - distinct} record(s) lost"
        assert rows == produced, f"the sink wrote {rows - produced} row(s) twice"
        assert generated <= produced <= generated + TASKS * BATCH, produced
        assert failed_statuses(broker.bootstrap_servers, plane.topics["status"], unique) == []
        assert spark_cluster.alive_workers() == 2
    finally:
        stack.close()
