"""Transforms and predicates through real pipelines (a control plane and an executor of the test's
own, the session's broker and Spark Connect), configured with Kafka's class names: a source's
chain changes the records before the converter (the topic holds the envelopes Kafka would write
for the transformed records, at the routed topic, under the schema name and version
SetSchemaMetadata gave them), and a sink's after it (the lake holds the
transformed rows, tombstones filtered out by a predicate). Every record is counted."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient
from pyspark.sql import SparkSession

from sluiceway.connect.data import OPTIONAL_STRING_SCHEMA, envelope_to_bytes, struct_schema
from sluiceway_executor.datagen_records import ORDER_SCHEMA, typed_value
from sluiceway_server.embedded import EmbeddedBroker, EmbeddedSparkConnect
from tests.conftest import ControlPlaneProcess
from tests.integration.pipeline_helpers import (
    FAST_EXECUTOR_SESSION,
    attach_executor,
    committed_offsets,
    topic_exists,
)

pytestmark = pytest.mark.integration

KAFKA_PREDICATES = "org.apache.kafka.connect.transforms.predicates"
RECORDS = 150
TOMBSTONES = 7
ENVELOPES = {"value.converter": "JsonConverter", "value.converter.schemas.enable": "true"}
TRANSFORMED = struct_schema(
    [*((f.name, f.schema) for f in ORDER_SCHEMA.fields), ("origin", OPTIONAL_STRING_SCHEMA)],
    name="shop.Order",  # SetSchemaMetadata's, in the source's chain
    version=7,
    doc=ORDER_SCHEMA.doc,
)


def _values(bootstrap: str, topic: str, expected: int) -> dict[str, bytes | None]:
    """Each record's value by its key, read with a plain consumer."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"raw-{topic}", "fetch.wait.max.ms": 50})
    try:
        partitions = consumer.list_topics(topic, timeout=15).topics[topic].partitions
        consumer.assign([TopicPartition(topic, p, 0) for p in partitions])
        out: dict[str, bytes | None] = {}
        for _ in range(400):
            for message in consumer.consume(500, 0.5):
                if message.error() is None:
                    out[(message.key() or b"").decode()] = message.value()
            if len(out) >= expected:
                break
        return out
    finally:
        consumer.close()


def _transformed(seq: int) -> dict[str, object]:
    return {**typed_value(seq), "sku": "", "origin": "datagen"}


def test_source_and_sink_chains_with_kafkas_class_names(
    control_plane_factory: Callable[..., ControlPlaneProcess],
    spark_connect: EmbeddedSparkConnect,
    broker: EmbeddedBroker,
    spark: SparkSession,
    tmp_path: Path,
    unique: str,
) -> None:
    raw, routed, lake = f"orders-{unique}-raw", f"orders-{unique}-clean", tmp_path / "lake"
    stack = attach_executor(control_plane_factory(**FAST_EXECUTOR_SESSION), spark_connect, "smt")
    try:
        stack.client.create_connector(
            f"gen-{unique}",
            {
                "connector.class": "DataGenSource",
                "topic": raw,
                "max.records": RECORDS,
                "value.type": "struct",
                "batch.max.records": 60,
                **ENVELOPES,
                "transforms": "origin,mask,route,rename",
                "transforms.origin.type": "org.apache.kafka.connect.transforms.InsertField$Value",
                "transforms.origin.static.field": "origin",
                "transforms.origin.static.value": "datagen",
                "transforms.mask.type": "org.apache.kafka.connect.transforms.MaskField$Value",
                "transforms.mask.fields": "sku",
                "transforms.route.type": "org.apache.kafka.connect.transforms.RegexRouter",
                "transforms.route.regex": "(.*)-raw",
                "transforms.route.replacement": "$1-clean",
                "transforms.rename.type": "org.apache.kafka.connect.transforms.SetSchemaMetadata$Value",
                "transforms.rename.schema.name": "shop.Order",
                "transforms.rename.schema.version": "7",
            },
        )
        stack.wait_for(
            lambda: committed_offsets(stack.client, f"gen-{unique}") == [({"task": 0}, {"seq": RECORDS - 1})],
            "every order to be generated",
        )
        values = _values(broker.bootstrap_servers, routed, RECORDS)
        # Each record once, at the routed topic, as Kafka's JsonConverter writes the transformed one.
        assert len(values) == RECORDS
        for seq in range(RECORDS):
            assert values[f"0-{seq}"] == envelope_to_bytes(TRANSFORMED, _transformed(seq)), seq
        # Nothing was written to the topic the records were routed away from.
        admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
        assert not topic_exists(admin, raw)

        producer = Producer({"bootstrap.servers": broker.bootstrap_servers})
        for i in range(TOMBSTONES):
            producer.produce(routed, key=f"gone-{i}".encode(), value=None)
        assert producer.flush(15) == 0

        stack.client.create_connector(
            f"lake-{unique}",
            {
                "connector.class": "SparkFileSink",
                "topics": routed,
                "path": str(lake),
                "format": "parquet",
                **ENVELOPES,
                "predicates": "tombstone",
                "predicates.tombstone.type": f"{KAFKA_PREDICATES}.RecordIsTombstone",
                "transforms": "dropTombstones,slim",
                "transforms.dropTombstones.type": "org.apache.kafka.connect.transforms.Filter",
                "transforms.dropTombstones.predicate": "tombstone",
                "transforms.slim.type": "org.apache.kafka.connect.transforms.ReplaceField$Value",
                "transforms.slim.exclude": "note,customer",
                "transforms.slim.renames": "weight_kg:weight",
            },
        )
        total = RECORDS + TOMBSTONES

        def committed() -> int:
            pairs = committed_offsets(stack.client, f"lake-{unique}")
            return sum(int(offset["kafka_offset"]) for _, offset in pairs if offset is not None)

        stack.wait_for(lambda: committed() == total, "the sink to commit every record")
    finally:
        stack.close()

    frame = spark.read.parquet(str(lake))
    assert "note" not in frame.columns and "customer" not in frame.columns and "weight" in frame.columns
    rows = frame.select("kafka_key", "id", "sku", "weight", "origin").collect()
    # Tombstones filtered out; every order once.
    assert sorted(r["kafka_key"] for r in rows) == sorted(f"0-{seq}" for seq in range(RECORDS))
    for row in rows:
        seq = int(row["kafka_key"].split("-")[1])
        expected = typed_value(seq)
        assert (row["id"], row["sku"], row["weight"], row["origin"]) == (
            expected["id"],
            "",
            expected["weight_kg"],
            "datagen",
        )


def test_schemaless_json_through_source_and_sink_chains(
    control_plane_factory: Callable[..., ControlPlaneProcess],
    spark_connect: EmbeddedSparkConnect,
    broker: EmbeddedBroker,
    spark: SparkSession,
    tmp_path: Path,
    unique: str,
) -> None:
    """JSON without schemas (the worker's default converter): the source's chain adds a field to
    each DataGen object, the sink's drops one and casts another, and the lake holds the text."""
    topic, lake = f"plain-{unique}", tmp_path / "lake"
    plain = {"value.converter": "JsonConverter", "value.converter.schemas.enable": "false"}
    stack = attach_executor(control_plane_factory(**FAST_EXECUTOR_SESSION), spark_connect, "plain")
    try:
        stack.client.create_connector(
            f"gen-{unique}",
            {
                "connector.class": "DataGenSource",
                "topic": topic,
                "max.records": RECORDS,
                **plain,
                "transforms": "origin",
                "transforms.origin.type": "org.apache.kafka.connect.transforms.InsertField$Value",
                "transforms.origin.static.field": "origin",
                "transforms.origin.static.value": "datagen",
            },
        )
        stack.client.create_connector(
            f"lake-{unique}",
            {
                "connector.class": "SparkFileSink",
                "topics": topic,
                "path": str(lake),
                "format": "parquet",
                **plain,
                "transforms": "slim,text",
                "transforms.slim.type": "org.apache.kafka.connect.transforms.ReplaceField$Value",
                "transforms.slim.exclude": "payload",
                "transforms.text.type": "org.apache.kafka.connect.transforms.Cast$Value",
                "transforms.text.spec": "seq:string",
            },
        )

        def committed() -> int:
            pairs = committed_offsets(stack.client, f"lake-{unique}")
            return sum(int(offset["kafka_offset"]) for _, offset in pairs if offset is not None)

        stack.wait_for(lambda: committed() == RECORDS, "the sink to commit every record")
    finally:
        stack.close()

    values = [json.loads(row["value"]) for row in spark.read.parquet(str(lake)).select("value").collect()]
    assert sorted(int(v["seq"]) for v in values) == list(range(RECORDS))
    for value in values:
        # The source's field is there, the payload gone, seq a string, the rest as generated.
        assert set(value) == {"task", "seq", "ts", "origin"}
        assert value["origin"] == "datagen" and value["task"] == 0 and isinstance(value["seq"], str)
