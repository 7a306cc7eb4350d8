"""metrics.task.counts.enable=false on a real broker and a real Spark Connect server (issue 35): a
SparkFileSink still delivers every record; its batches carry no Spark-side counts (run in this
process, against the same batch with counting on); and through a real executor, whose /metrics
and status fall back to the counts its offset ranges give: every record read and written, no
bytes, a rate above zero."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]
from pyspark.sql import SparkSession

from sluiceway.connect.worker_settings import METRICS_TASK_COUNTS_ENABLE_CONFIG
from sluiceway_executor.pipelines.factory import SparkPipelineFactory
from sluiceway_server.embedded import EmbeddedBroker, EmbeddedSparkConnect
from tests.conftest import ControlPlaneProcess
from tests.integration.pipeline_helpers import (
    FAST_EXECUTOR_SESSION,
    PipelineStack,
    attach_executor,
    parquet_counts,
    published_rows,
    task_spec,
)
from tests.integration.test_control_plane_metrics import Samples, scrape

pytestmark = pytest.mark.integration

PARTITIONS = 2
RECORDS = 3_000
SINK_TASK = "sluiceway_executor.connectors.spark_file.SparkFileSinkTask"


@pytest.fixture(scope="module")
def topic(broker: EmbeddedBroker) -> str:
    """A topic of RECORDS records over PARTITIONS partitions, values as the lake helpers read them."""
    name = f"counts-off-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
    for future in admin.create_topics([NewTopic(name, PARTITIONS, 1)]).values():
        future.result(30)
    producer = Producer({"bootstrap.servers": broker.bootstrap_servers, "linger.ms": 5})
    for seq in range(RECORDS):
        value = json.dumps({"task": 0, "seq": seq}).encode()
        producer.produce(name, key=str(seq).encode(), value=value, partition=seq % PARTITIONS)
    assert producer.flush(30) == 0
    return name


def _sink_config(topic: str, lake: Path, tasks: int) -> dict[str, str]:
    return {
        "connector.class": "SparkFileSink",
        "topics": topic,
        "path": str(lake),
        "format": "parquet",
        "tasks.max": str(tasks),
        "value.converter": "StringConverter",
    }


def test_a_batch_carries_spark_counts_only_with_counting_on(
    spark_with_sources: SparkSession, broker: EmbeddedBroker, topic: str, tmp_path: Path
) -> None:
    for counting in ("false", "true"):
        name = f"counts-{counting}-{uuid.uuid4().hex[:8]}"
        lake = tmp_path / name
        worker = {
            "bootstrap.servers": broker.bootstrap_servers,
            "group.id": name,
            METRICS_TASK_COUNTS_ENABLE_CONFIG: counting,
        }
        spec = task_spec(name, _sink_config(topic, lake, 1), SINK_TASK)
        pipeline = SparkPipelineFactory(spark_with_sources)(spec, worker)
        pipeline.start()
        try:
            outcome = pipeline.run_batch(0)
        finally:
            pipeline.stop()
        assert outcome.records == RECORDS
        assert parquet_counts(spark_with_sources, lake) == (RECORDS, RECORDS)
        if counting == "false":
            # No observation was in the job, so none came back.
            assert outcome.read is None and outcome.written is None, outcome
        else:
            assert outcome.read is not None and outcome.written is not None, outcome
            assert outcome.read.records == outcome.written.records == RECORDS
            assert (outcome.read.bytes or 0) > RECORDS * 10


@pytest.fixture
def stack(
    broker: EmbeddedBroker, spark_connect: EmbeddedSparkConnect, tmp_path: Path
) -> Iterator[PipelineStack]:
    plane = ControlPlaneProcess(broker, uuid.uuid4().hex[:8], settings=dict(FAST_EXECUTOR_SESSION)).start()
    own = tmp_path / "executor.properties"
    own.write_text(f"metrics.listeners=http://127.0.0.1:0\n{METRICS_TASK_COUNTS_ENABLE_CONFIG}=false\n")
    try:
        started = attach_executor(plane, spark_connect, "uncounted", "--config", str(own))
    except BaseException:
        plane.stop()
        raise
    try:
        yield started
    finally:
        started.close()
        plane.stop()


def _task_sum(samples: Samples, name: str, connector: str) -> float:
    return sum(
        v for (metric, labels), v in samples.items() if metric == name and ("connector", connector) in labels
    )


def test_an_executor_without_counts_delivers_everything_and_counts_from_offsets(
    stack: PipelineStack, spark: SparkSession, topic: str, tmp_path: Path, unique: str
) -> None:
    client, sink, lake = stack.client, f"uncounted-{unique}", tmp_path / "lake"
    url = client.server_info().executors[0].metrics_url
    # Small batches: several per task, each counted by its offset ranges.
    client.create_connector(sink, {**_sink_config(topic, lake, PARTITIONS), "batch.max.records": "500"})
    stack.wait_for(lambda: published_rows(lake) >= RECORDS, "every record in the lake")
    assert parquet_counts(spark, lake) == (RECORDS, RECORDS)

    stack.wait_for(
        lambda: _task_sum(scrape(url), "sluiceway_task_records_read_total", sink) == RECORDS,
        "every record counted as read",
    )
    samples = scrape(url)
    assert _task_sum(samples, "sluiceway_task_records_written_total", sink) == RECORDS
    assert _task_sum(samples, "sluiceway_task_bytes_read_total", sink) == 0
    assert _task_sum(samples, "sluiceway_task_batches_total", sink) >= RECORDS / 500
    # The rate in the status comes from the same counts.
    stack.wait_for(
        lambda: all(t.progress.records_per_second > 0 for t in client.connector_status(sink).raw.tasks),
        "a rate above zero for every task in the status",
    )
    client.delete_connector(sink)
