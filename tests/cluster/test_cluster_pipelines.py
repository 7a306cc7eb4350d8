"""Every built-in connector on Spark's standalone cluster (issue 36): a Spark Connect server submitting
to a master with two workers, so each pipeline's Spark tasks run in the workers' executors, other
JVMs than the Spark Connect server's, with Python workers of their own. Set up as deploy/README.md's
"What a remote Spark cluster needs" says: the project's Python named by `spark.pyspark.python`, the
JDBC driver shipped with --jars, plugin.path at the same path on every worker.

DataGenSource → SparkFileSink (DataFrame-level tasks), FileStreamSource and FileStreamSink with a
record-level transform from plugin.path (record-level tasks, run inside Spark), JdbcSource and
JdbcSink on the session's PostgreSQL; afterwards both workers' executors have run Spark tasks."""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from sluiceway_server.embedded import EmbeddedBroker, EmbeddedSparkConnect, jdbc_jars
from sluiceway_server.spark_cluster import EmbeddedSparkCluster
from tests.conftest import ControlPlaneProcess
from tests.integration.api_helpers import read_topic
from tests.integration.pipeline_helpers import (
    FAST_EXECUTOR_SESSION,
    PipelineStack,
    attach_executor,
    parquet_counts,
    published_rows,
)
from tests.jdbc_pipeline_helpers import create_source_table, rows, sink_config, source_config
from tests.plugins.record_transforms import fingerprint
from tests.postgres_server import PostgresServer

pytestmark = pytest.mark.cluster

JSON_SCHEMALESS = {
    "value.converter": "org.apache.kafka.connect.json.JsonConverter",
    "value.converter.schemas.enable": "false",
}


@pytest.fixture(scope="module")
def stack(broker: EmbeddedBroker, cluster_spark_connect: EmbeddedSparkConnect) -> Iterator[PipelineStack]:
    """A control plane of the module's own and one executor whose jobs go to the cluster."""
    plane = ControlPlaneProcess(broker, uuid.uuid4().hex[:8], settings=dict(FAST_EXECUTOR_SESSION)).start()
    try:
        started = attach_executor(plane, cluster_spark_connect, "cluster")
        yield started
        started.close()
    finally:
        plane.stop()


def test_datagen_into_a_lake_runs_in_the_workers_executors(
    stack: PipelineStack,
    spark_cluster: EmbeddedSparkCluster,
    cluster_spark: SparkSession,
    unique: str,
    tmp_path: Path,
) -> None:
    before = spark_cluster.tasks_run()
    topic, lake = f"cl-gen-{unique}", tmp_path / "lake"
    stack.client.create_connector(
        f"cl-gen-{unique}",
        {"connector.class": "DataGenSource", "topic": topic, "tasks.max": "2", "max.records": "5000"},
    )
    stack.client.create_connector(
        f"cl-lake-{unique}",
        {"connector.class": "SparkFileSink", "topics": topic, "path": str(lake), "format": "parquet"},
    )
    stack.wait_for(lambda: lake.exists() and published_rows(lake) >= 10_000, "every record in the lake")
    assert parquet_counts(cluster_spark, lake) == (10_000, 10_000)
    after = spark_cluster.tasks_run()
    # Each worker's executor took part: the pipeline's Spark tasks ran outside the Spark Connect JVM.
    assert all(after[worker] > before.get(worker, 0) for worker in after), (before, after)


def test_record_level_file_connectors_with_a_plugin_transform(
    stack: PipelineStack, broker: EmbeddedBroker, unique: str, tmp_path: Path
) -> None:
    """A file of JSON lines → FileStreamSource → topic → FileStreamSink with the record-level
    Fingerprint transform (loaded from plugin.path inside the workers' Python processes) → a file."""
    source_file, topic, out = tmp_path / "people.txt", f"cl-people-{unique}", tmp_path / "out.txt"
    names = [f"person-{n}" for n in range(200)]
    source_file.write_text("".join(json.dumps({"name": name}) + "\n" for name in names))
    stack.client.create_connector(
        f"cl-fsrc-{unique}",
        {
            "connector.class": "FileStreamSource",
            "file": str(source_file),
            "topic": topic,
            "value.converter": "org.apache.kafka.connect.storage.StringConverter",
        },
    )
    stack.client.create_connector(
        f"cl-fsink-{unique}",
        {
            "connector.class": "FileStreamSink",
            "topics": topic,
            "file": str(out),
            "transforms": "fp",
            "transforms.fp.type": "record_transforms.Fingerprint",
            **JSON_SCHEMALESS,
        },
    )

    def written() -> list[dict[str, str]]:
        if not out.exists():
            return []
        return [json.loads(line) for line in out.read_text().splitlines() if line]

    stack.wait_for(lambda: len(written()) >= len(names), "every line in the sink's file")
    # In the file's order within each of the topic's partitions, so compared sorted.
    in_topic = sorted(value["name"] for _, value in read_topic(broker.bootstrap_servers, topic))
    assert in_topic == sorted(names)
    assert sorted((v["name"], v["fingerprint"]) for v in written()) == sorted(
        (n, fingerprint(n)) for n in names
    )


@pytest.mark.skipif(not jdbc_jars(), reason="no JDBC driver jar for Spark Connect (bootstrap.sh --tests)")
def test_a_table_copied_through_kafka_into_another(
    stack: PipelineStack, postgres: PostgresServer, unique: str
) -> None:
    source, target, prefix = f"cl_src_{unique}", f"cl_dst_{unique}", f"cl-{unique}-"
    create_source_table(postgres, source, 300)
    stack.client.create_connector(f"cl-jsrc-{unique}", source_config(postgres, source, prefix, 100))
    stack.client.create_connector(f"cl-jsink-{unique}", sink_config(postgres, prefix + source, target))

    def copied() -> bool:
        exists = postgres.execute("SELECT to_regclass(%s) IS NOT NULL", [target])[0][0]
        return bool(exists) and rows(postgres, target) == rows(postgres, source)

    started = time.monotonic()
    stack.wait_for(copied, "the table copied")
    print(f"300 rows copied through the cluster in {time.monotonic() - started:.1f}s")
