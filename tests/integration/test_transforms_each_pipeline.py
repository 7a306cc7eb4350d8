"""Every transform and predicate through a real sink pipeline (the session's broker and Spark
Connect, the executor's SparkFileSink pipeline run in this process), once on records with schemas
(JsonConverter envelopes, a typed lake) and once without (plain JSON objects, the lake holds the
text), configured with Kafka's class names. Each output is what Kafka's documentation gives for the
same records; SetSchemaMetadata, which only a schema can show, is in the source chain of
``test_transforms_pipeline``.

The input: five orders and a tombstone on one partition, one day apart; the even orders carry a
``trace`` header."""

from __future__ import annotations

import datetime as dt
import json
import uuid
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient
from confluent_kafka.cimpl import NewTopic
from pyspark.sql import Row, SparkSession

from sluiceway.connect.data import (
    FLOAT64_SCHEMA,
    INT64_SCHEMA,
    OPTIONAL_STRING_SCHEMA,
    STRING_SCHEMA,
    envelope_to_bytes,
    struct_schema,
    timestamp_schema,
)
from sluiceway_executor.pipelines.factory import SparkPipelineFactory
from sluiceway_server.embedded import EmbeddedBroker
from tests.integration.pipeline_helpers import task_spec

pytestmark = pytest.mark.integration

KAFKA = "org.apache.kafka.connect.transforms"
SINK_TASK = "sluiceway_executor.connectors.spark_file.SparkFileSinkTask"
ORDERS = 5
T0 = dt.datetime(2026, 3, 4, 12, 0, tzinfo=dt.UTC)
ADDRESS = struct_schema({"city": STRING_SCHEMA, "zip": OPTIONAL_STRING_SCHEMA}, optional=True)
ORDER = struct_schema(
    {
        "id": INT64_SCHEMA,
        "name": STRING_SCHEMA,
        "amount": FLOAT64_SCHEMA,
        "address": ADDRESS,
        "ts": timestamp_schema(),
    },
    name="shop.Order",
    version=1,
)
KEY = struct_schema({"id": INT64_SCHEMA})
# Filters the tombstone out first, for the transforms Kafka documents on values that are there.
NO_TOMBSTONES = {
    "predicates.tombstone.type": f"{KAFKA}.predicates.RecordIsTombstone",
    "transforms.dropTombstones.type": f"{KAFKA}.Filter",
    "transforms.dropTombstones.predicate": "tombstone",
}


def _order(i: int) -> dict[str, Any]:
    address = {"city": "Oslo" if i % 2 else "Lima", "zip": None if i % 2 else f"{i}000"}
    return {"id": i, "name": f"n{i}", "amount": i * 1.5, "address": address, "ts": T0 + dt.timedelta(hours=i)}


def _plain(i: int) -> dict[str, Any]:
    """The order as the schemaless JSON object (its timestamp as epoch milliseconds)."""
    order = _order(i)
    return {**order, "ts": int(order["ts"].timestamp() * 1000)}


@dataclass(frozen=True)
class Inputs:
    typed: str  # JSON envelopes, key and value
    plain: str  # JSON objects without schemas
    worker: dict[str, str]


@pytest.fixture(scope="module")
def inputs(broker: EmbeddedBroker) -> Inputs:
    suffix = uuid.uuid4().hex[:8]
    typed, plain = f"each-{suffix}-typed", f"each-{suffix}-plain"
    admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
    for future in admin.create_topics([NewTopic(typed, 1, 1), NewTopic(plain, 1, 1)]).values():
        future.result(30)
    producer = Producer({"bootstrap.servers": broker.bootstrap_servers})
    for i in range(ORDERS + 1):
        stamp = int((T0 + dt.timedelta(days=i)).timestamp() * 1000)
        headers: list[tuple[str, str | bytes | None]] = (
            [("trace", f"t{i}".encode())] if i % 2 == 0 and i < ORDERS else []
        )
        tombstone = i == ORDERS
        producer.produce(
            typed,
            key=envelope_to_bytes(KEY, {"id": i}),
            value=None if tombstone else envelope_to_bytes(ORDER, _order(i)),
            timestamp=stamp,
            headers=headers,
        )
        producer.produce(
            plain,
            key=json.dumps({"id": i}).encode(),
            value=None if tombstone else json.dumps(_plain(i)).encode(),
            timestamp=stamp,
            headers=headers,
        )
    assert producer.flush(30) == 0
    return Inputs(typed, plain, {"bootstrap.servers": broker.bootstrap_servers, "group.id": f"each-{suffix}"})


@dataclass(frozen=True)
class Lake:
    """The lake's rows by offset, each as the value (a dict, None for a tombstone), the key (as the
    lake holds it: JSON text without schemas), the topic and the headers."""

    rows: dict[int, tuple[Any, Any, str, list[tuple[str, bytes | None]]]]
    columns: list[str]


def _column(part: str, schemas: bool) -> str:
    """The lake's column of a record part: kafka_* in a typed lake, the part's name in a text one."""
    return f"kafka_{part}" if schemas else part


def _value_of(row: Row, schemas: bool, columns: list[str]) -> Any:
    if not schemas:
        return None if row["value"] is None else json.loads(row["value"])
    # Besides the value's fields: the kafka_* columns and the lake's task=/batch= directories.
    fields = [c for c in columns if not c.startswith("kafka_") and c not in ("task", "batch")]
    values = {c: row[c] for c in fields}
    return None if all(v is None for v in values.values()) else values


@pytest.fixture(params=[True, False], ids=["schemas", "schemaless"])
def schemas(request: pytest.FixtureRequest) -> bool:
    return bool(request.param)


@pytest.fixture
def run(spark_with_sources: SparkSession, inputs: Inputs, tmp_path: Path, schemas: bool) -> Iterator[Any]:
    """Runs one batch of a sink pipeline with the given transforms over the input topic (with or
    without schemas) into a lake of its own, and returns the lake."""
    started: list[Any] = []

    def _run(props: Mapping[str, str]) -> Lake:
        name = f"each-{uuid.uuid4().hex[:8]}"
        lake = tmp_path / name
        config = {
            "connector.class": "SparkFileSink",
            "topics": inputs.typed if schemas else inputs.plain,
            "path": str(lake),
            "format": "parquet",
            "key.converter": "org.apache.kafka.connect.json.JsonConverter",
            "key.converter.schemas.enable": str(schemas).lower(),
            "value.converter": "org.apache.kafka.connect.json.JsonConverter",
            "value.converter.schemas.enable": str(schemas).lower(),
            **props,
        }
        pipeline = SparkPipelineFactory(spark_with_sources)(task_spec(name, config, SINK_TASK), inputs.worker)
        started.append(pipeline)
        pipeline.start()
        outcome = pipeline.run_batch(0)
        assert outcome.records == ORDERS + 1
        frame = spark_with_sources.read.parquet(str(lake))
        rows = {}
        for row in frame.collect():
            pairs = row[_column("headers", schemas)] or []
            headers = [(h["key"], None if h["value"] is None else bytes(h["value"])) for h in pairs]
            rows[row[_column("offset", schemas)]] = (
                _value_of(row, schemas, frame.columns),
                row[_column("key", schemas)],
                row[_column("topic", schemas)],
                headers,
            )
        return Lake(rows, frame.columns)

    yield _run
    for pipeline in started:
        pipeline.stop()


def test_insert_mask_cast_and_replace_field_on_values(run: Any, inputs: Inputs, schemas: bool) -> None:
    lake = run(
        {
            **NO_TOMBSTONES,
            "predicates": "tombstone",
            "transforms": "dropTombstones,where,mask,cast,slim",
            "transforms.where.type": f"{KAFKA}.InsertField$Value",
            "transforms.where.topic.field": "src_topic",
            "transforms.where.offset.field": "src_offset",
            "transforms.where.static.field": "origin",
            "transforms.where.static.value": "test",
            "transforms.mask.type": f"{KAFKA}.MaskField$Value",
            "transforms.mask.fields": "name",
            "transforms.cast.type": f"{KAFKA}.Cast$Value",
            "transforms.cast.spec": "id:string,amount:int32",
            "transforms.slim.type": f"{KAFKA}.ReplaceField$Value",
            "transforms.slim.exclude": "address,ts",
            "transforms.slim.renames": "amount:total",
        }
    )
    topic = inputs.typed if schemas else inputs.plain
    # The tombstone is filtered out; each order has its coordinates and the static field, a masked
    # name (a string's empty value), its id as text and its amount cut to an integer, renamed.
    assert set(lake.rows) == set(range(ORDERS))
    for i, (value, *_) in lake.rows.items():
        expected = {"id": str(i), "name": "", "total": int(i * 1.5), "src_topic": topic, "src_offset": i}
        assert value == {**expected, "origin": "test"}, value


def test_value_to_key_extract_hoist_and_flatten(run: Any, schemas: bool) -> None:
    lake = run(
        {
            **NO_TOMBSTONES,
            "predicates": "tombstone",
            "transforms": "dropTombstones,rekey,keyId,wrap,flat",
            "transforms.rekey.type": f"{KAFKA}.ValueToKey",
            "transforms.rekey.fields": "id,name",
            "transforms.keyId.type": f"{KAFKA}.ExtractField$Key",
            "transforms.keyId.field": "name",
            "transforms.wrap.type": f"{KAFKA}.HoistField$Value",
            "transforms.wrap.field": "order",
            "transforms.flat.type": f"{KAFKA}.Flatten$Value",
            "transforms.flat.delimiter": "_",
        }
    )
    for i in range(ORDERS):
        value, key, _, _ = lake.rows[i]
        order = _order(i) if schemas else _plain(i)
        # The key is the name the value held; the value is the order nested under one field, then
        # flattened with the delimiter.
        assert (key if schemas else json.loads(key)) == f"n{i}"
        assert value == {
            "order_id": i,
            "order_name": f"n{i}",
            "order_amount": i * 1.5,
            "order_address_city": order["address"]["city"],
            "order_address_zip": order["address"]["zip"],
            "order_ts": order["ts"].replace(tzinfo=None) if schemas else order["ts"],
        }, (i, value)
    assert set(lake.rows) == set(range(ORDERS))


def test_headers_and_timestamp_converter(run: Any, schemas: bool) -> None:
    lake = run(
        {
            **NO_TOMBSTONES,
            "predicates": "tombstone",
            "transforms": "dropTombstones,mark,dropTrace,lift,day",
            "transforms.mark.type": f"{KAFKA}.InsertHeader",
            "transforms.mark.header": "source",
            "transforms.mark.value.literal": "lake",
            "transforms.dropTrace.type": f"{KAFKA}.DropHeaders",
            "transforms.dropTrace.headers": "trace",
            "transforms.lift.type": f"{KAFKA}.HeaderFrom$Value",
            "transforms.lift.fields": "name",
            "transforms.lift.headers": "who",
            "transforms.lift.operation": "move",
            "transforms.day.type": f"{KAFKA}.TimestampConverter$Value",
            "transforms.day.field": "ts",
            "transforms.day.target.type": "string",
            "transforms.day.format": "yyyy-MM-dd HH:mm",
        }
    )
    for i in range(ORDERS):
        value, _, _, headers = lake.rows[i]
        # trace dropped, source added, the name moved into a header of its own.
        assert headers == [("source", b"lake"), ("who", f"n{i}".encode())]
        assert "name" not in value
        assert value["ts"] == f"2026-03-04 {12 + i}:00"
    assert set(lake.rows) == set(range(ORDERS))


def test_routers_under_header_and_topic_predicates(run: Any, inputs: Inputs, schemas: bool) -> None:
    topic = inputs.typed if schemas else inputs.plain
    lake = run(
        {
            "predicates": "traced,fifth",
            "predicates.traced.type": f"{KAFKA}.predicates.HasHeaderKey",
            "predicates.traced.name": "trace",
            "predicates.fifth.type": f"{KAFKA}.predicates.TopicNameMatches",
            "predicates.fifth.pattern": ".*-20260305",
            "transforms": "traced,dated,drop",
            "transforms.traced.type": f"{KAFKA}.RegexRouter",
            "transforms.traced.predicate": "traced",
            "transforms.traced.regex": "(.*)-(typed|plain)",
            "transforms.traced.replacement": "$1-traced",
            "transforms.dated.type": f"{KAFKA}.TimestampRouter",
            "transforms.dated.predicate": "traced",
            "transforms.dated.negate": "true",
            "transforms.dated.topic.format": "${topic}-${timestamp}",
            "transforms.dated.timestamp.format": "yyyyMMdd",
            "transforms.drop.type": f"{KAFKA}.Filter",
            "transforms.drop.predicate": "fifth",
        }
    )
    stem = topic.rsplit("-", 1)[0]
    # Traced orders (0, 2, 4) are renamed by the regex; the others get their day (the record's
    # timestamp), and the one routed to the 5th of March is filtered out. The tombstone has no
    # header, so it is dated too (a typed lake leaves tombstones out; a text one holds them).
    expected = {0: f"{stem}-traced", 2: f"{stem}-traced", 3: f"{topic}-20260307", 4: f"{stem}-traced"}
    if not schemas:
        expected[5] = f"{topic}-20260309"
        assert lake.rows[5][0] is None
    assert {offset: t for offset, (_, _, t, _) in lake.rows.items()} == expected


def test_sql_sets_parts_and_filters(run: Any, schemas: bool) -> None:
    name = "value.name" if schemas else "get_json_object(value, '$.name')"
    amount = "value.amount" if schemas else "CAST(get_json_object(value, '$.amount') AS DOUBLE)"
    lake = run(
        {
            "transforms": "q",
            "transforms.q.type": "Sql",
            "transforms.q.select": f"upper({name}) AS key, concat(topic, '-sql') AS topic",
            "transforms.q.where": f"{amount} > 2",
        }
    )
    # Orders 2..4 have an amount over 2; the tombstone's condition is null, so it goes too.
    assert {offset: (key, topic.endswith("-sql")) for offset, (_, key, topic, _) in lake.rows.items()} == {
        i: (f"N{i}", True) for i in (2, 3, 4)
    }
