"""Typed records end to end, through a control plane and an executor of the test's own: DataGen's
typed orders go to Kafka as the envelopes Kafka's JsonConverter writes (byte for byte, against the
record-level format pinned to Kafka's), and SparkFileSink reads them back into a typed Parquet lake
whose columns and values equal what was generated; a batch whose records change schema part-way
is read again on its own schemas, and nothing is lost or written twice."""

from __future__ import annotations

import decimal
from collections.abc import Callable
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]
from pyspark.sql import SparkSession

from sluiceway.client import State
from sluiceway.connect.data import (
    INT64_SCHEMA,
    OPTIONAL_STRING_SCHEMA,
    STRING_SCHEMA,
    decimal_schema,
    envelope_to_bytes,
    struct_schema,
)
from sluiceway.connect.data.spark import from_spark_field, from_spark_value, to_spark
from sluiceway_executor.datagen_records import ORDER_SCHEMA, typed_value
from sluiceway_server.embedded import EmbeddedBroker, EmbeddedSparkConnect
from tests.conftest import ControlPlaneProcess
from tests.integration.pipeline_helpers import (
    FAST_EXECUTOR_SESSION,
    attach_executor,
    committed_offsets,
    published_rows,
)

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

        stack.wait_for(lambda: published_rows(lake) >= RECORDS, "every order to reach the lake")
        assert spark.read.parquet(str(lake)).count() == RECORDS
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


CUSTOMER_V1 = struct_schema({"id": INT64_SCHEMA, "name": STRING_SCHEMA}, name="shop.Customer", version=1)
CUSTOMER_V2 = struct_schema(
    {"id": INT64_SCHEMA, "name": STRING_SCHEMA, "email": OPTIONAL_STRING_SCHEMA},
    name="shop.Customer",
    version=2,
)
PRICED = struct_schema({"id": INT64_SCHEMA, "price": decimal_schema(2, 10)}, name="shop.Priced", version=1)


def _sink_one_batch_read_twice(
    records: list[bytes],
    control_plane_factory: Callable[..., ControlPlaneProcess],
    spark_connect: EmbeddedSparkConnect,
    broker: EmbeddedBroker,
    topic: str,
    lake: Path,
) -> None:
    """Produces ``records`` (keyed by their index) to a new one-partition topic, sinks it into a
    Parquet lake with SparkFileSink, and checks that every record was committed, that the task
    never failed, and that the executor read the batch again on its own schemas."""
    admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(timeout=30)
    producer = Producer({"bootstrap.servers": broker.bootstrap_servers})
    for i, record in enumerate(records):
        producer.produce(topic, record, key=str(i))
    assert producer.flush(30) == 0

    stack = attach_executor(control_plane_factory(**FAST_EXECUTOR_SESSION), spark_connect, "typed-reread")
    name = f"{topic}-lake"
    try:
        stack.client.create_connector(
            name,
            {
                "connector.class": "SparkFileSink",
                "topics": topic,
                "path": str(lake),
                "format": "parquet",
                **ENVELOPES,
            },
        )
        stack.wait_for(
            lambda: (
                committed_offsets(stack.client, name)
                == [({"kafka_topic": topic, "kafka_partition": 0}, {"kafka_offset": len(records)})]
            ),
            "every record to be committed",
        )
        # The batch was read again inside the task's run: the task never failed.
        tasks = stack.client.connector_status(name).tasks
        assert [(t.state, t.status.recent_errors, t.status.restart_attempt) for t in tasks] == [
            (State.RUNNING, (), 0)
        ]
    finally:
        stack.close()
    log = stack.executor.log_path.read_text(errors="replace")
    assert "failed when read on the expected schemas; reading its own" in log


def test_a_batch_whose_schema_changes_part_way_is_read_again_on_its_own_schemas(
    control_plane_factory: Callable[..., ControlPlaneProcess],
    spark_connect: EmbeddedSparkConnect,
    broker: EmbeddedBroker,
    spark: SparkSession,
    tmp_path: Path,
    unique: str,
) -> None:
    # 80 records of version 1, then 40 of version 2 (an optional field more): one batch holds them
    # all, and the converter expects the last record's schema (sampled while planning), which the
    # first 80 do not carry.
    produced: dict[int, dict[str, object]] = {}
    records: list[bytes] = []
    for i in range(120):
        if i < 80:
            value: dict[str, object] = {"id": i, "name": f"c{i}"}
            record = envelope_to_bytes(CUSTOMER_V1, value)
            produced[i] = {**value, "email": None}
        else:
            value = {"id": i, "name": f"c{i}", "email": f"c{i}@example.com"}
            record = envelope_to_bytes(CUSTOMER_V2, value)
            produced[i] = value
        assert record is not None
        records.append(record)

    lake = tmp_path / "lake"
    _sink_one_batch_read_twice(
        records, control_plane_factory, spark_connect, broker, f"customers-{unique}", lake
    )
    frame = spark.read.option("mergeSchema", "true").parquet(str(lake))
    rows = frame.select("kafka_key", "id", "name", "email").collect()
    # Nothing lost, nothing written twice, each value as produced.
    assert len(rows) == 120
    assert {
        int(r["kafka_key"]): {"id": r["id"], "name": r["name"], "email": r["email"]} for r in rows
    } == produced


def test_a_batch_expected_with_base64_decimals_holding_numeric_ones_is_read_again_whole(
    control_plane_factory: Callable[..., ControlPlaneProcess],
    spark_connect: EmbeddedSparkConnect,
    broker: EmbeddedBroker,
    spark: SparkSession,
    tmp_path: Path,
    unique: str,
) -> None:
    # 80 records whose decimal is a JSON number (decimal.format=NUMERIC), then 40 as base64 (the
    # default): one batch, expected like its last record, so read first with base64 decimals.
    produced: dict[int, decimal.Decimal] = {}
    records: list[bytes] = []
    for i in range(120):
        price = decimal.Decimal(i * 37 - 1000).scaleb(-2)
        record = envelope_to_bytes(PRICED, {"id": i, "price": price})
        assert record is not None
        if i < 80:
            head, _, _ = record.decode().partition('"price":')
            record = f'{head}"price":{price}}}}}'.encode()
        records.append(record)
        produced[i] = price

    lake = tmp_path / "lake"
    _sink_one_batch_read_twice(
        records, control_plane_factory, spark_connect, broker, f"priced-{unique}", lake
    )
    rows = spark.read.parquet(str(lake)).select("kafka_key", "price").collect()
    assert len(rows) == 120
    assert {int(r["kafka_key"]): r["price"] for r in rows} == produced
