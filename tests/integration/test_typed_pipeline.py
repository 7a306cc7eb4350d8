"""Typed records end to end, through a control plane and an executor of the test's own: DataGen's
typed orders go to Kafka as the envelopes Kafka's JsonConverter writes (byte for byte, against the
record-level format pinned to Kafka's), and SparkFileSink reads them back into a typed Parquet lake
whose columns and values equal what was generated."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from confluent_kafka import Consumer, TopicPartition
from pyspark.sql import SparkSession

from sluiceway.connect.data import envelope_to_bytes
from sluiceway.connect.data.spark import from_spark_field, from_spark_value, to_spark
from sluiceway_executor.datagen_records import ORDER_SCHEMA, typed_value
from sluiceway_server.embedded import EmbeddedBroker, EmbeddedSparkConnect
from tests.conftest import ControlPlaneProcess
from tests.integration.pipeline_helpers import FAST_EXECUTOR_SESSION, attach_executor, committed_offsets

pytestmark = pytest.mark.integration

RECORDS = 240
ENVELOPES = {"value.converter": "JsonConverter", "value.converter.schemas.enable": "true"}


def _raw_values(bootstrap: str, topic: str, expected: int) -> dict[str, bytes]:
    """Each record's value bytes by its key, read with a plain consumer."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"raw-{topic}", "fetch.wait.max.ms": 50})
    try:
        partitions = consumer.list_topics(topic, timeout=15).topics[topic].partitions
        consumer.assign([TopicPartition(topic, p, 0) for p in partitions])
        out: dict[str, bytes] = {}
        for _ in range(400):
            for message in consumer.consume(500, 0.5):
                if message.error() is None:
                    out[(message.key() or b"").decode()] = message.value() or b""
            if len(out) >= expected:
                break
        return out
    finally:
        consumer.close()


def test_typed_orders_reach_kafka_as_kafkas_envelopes_and_the_lake_as_typed_columns(
    control_plane_factory: Callable[..., ControlPlaneProcess],
    spark_connect: EmbeddedSparkConnect,
    broker: EmbeddedBroker,
    spark: SparkSession,
    tmp_path: Path,
    unique: str,
) -> None:
    topic, lake = f"orders-{unique}", tmp_path / "lake"
    stack = attach_executor(control_plane_factory(**FAST_EXECUTOR_SESSION), spark_connect, "typed")
    try:
        stack.client.create_connector(
            f"orders-{unique}",
            {
                "connector.class": "DataGenSource",
                "topic": topic,
                "tasks.max": 1,
                "max.records": RECORDS,
                "value.type": "struct",
                "batch.max.records": 100,
                **ENVELOPES,
            },
        )
        stack.wait_for(
            lambda: (
                committed_offsets(stack.client, f"orders-{unique}") == [({"task": 0}, {"seq": RECORDS - 1})]
            ),
            "every order to be generated",
        )
        # Byte for byte what Kafka's JsonConverter writes for the same schema and value.
        values = _raw_values(broker.bootstrap_servers, topic, RECORDS)
        assert len(values) == RECORDS
        for seq in (0, 1, 3, 57, RECORDS - 1):
            assert values[f"0-{seq}"] == envelope_to_bytes(ORDER_SCHEMA, typed_value(seq))

        stack.client.create_connector(
            f"lake-{unique}",
            {
                "connector.class": "SparkFileSink",
                "topics": topic,
                "path": str(lake),
                "format": "parquet",
                "batch.max.records": 100,
                **ENVELOPES,
            },
        )

        def lake_rows() -> int:
            if not any(lake.glob("task=*/batch=*")):
                return 0
            return spark.read.parquet(str(lake)).count()

        stack.wait_for(lambda: lake_rows() == RECORDS, "every order to reach the lake")
    finally:
        stack.close()

    frame = spark.read.option("mergeSchema", "true").parquet(str(lake))
    fields = {f.name: f for f in frame.schema.fields}
    # Spark reads every Parquet column as nullable; types, logical types and parameters stay.
    for item in ORDER_SCHEMA.fields:
        assert fields[item.name].dataType.simpleString() == to_spark(item.schema).simpleString(), item.name
        read = from_spark_field(fields[item.name])
        assert (read.name, read.version, read.parameters) == (
            item.schema.name,
            item.schema.version,
            item.schema.parameters,
        ), item.name
    assert {"kafka_topic", "kafka_partition", "kafka_offset", "kafka_timestamp", "kafka_key"} <= set(fields)
    names = [item.name for item in ORDER_SCHEMA.fields]
    rows = frame.select("kafka_key", *names).collect()
    assert len(rows) == RECORDS
    for row in rows:
        seq = int(row["kafka_key"].split("-")[1])
        value = {name: row[name] for name in names}
        assert from_spark_value(ORDER_SCHEMA, value) == typed_value(seq)
