"""SparkFileSink's typed lake on the real Spark Connect server: typed batches (a ``value`` struct
whose fields carry their Kafka Connect schemas) written through ``SparkFileSinkTask.write_batch``
become one column per field beside the ``kafka_*`` coordinates; optional fields added later are
Parquet schema evolution; a change that cannot merge fails before anything is written; the lake's
schema is read back by a new task; untyped batches are written as before."""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Mapping, Sequence
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.types import (
    BinaryType,
    StructType,
)

from sluiceway.connect import BatchContext, ConnectException, OffsetRange
from sluiceway.connect.data import (
    INT32_SCHEMA,
    INT64_SCHEMA,
    OPTIONAL_STRING_SCHEMA,
    STRING_SCHEMA,
    Schema,
    date_schema,
    decimal_schema,
    struct_schema,
    time_schema,
    timestamp_schema,
)
from sluiceway.connect.data.spark import from_spark_field, from_spark_value
from sluiceway_executor.connectors.lake_commits import MANIFEST, newest_rows
from sluiceway_executor.connectors.lake_schema import lake_state
from sluiceway_executor.connectors.spark_file import SparkFileSinkTask
from tests.typed_batches import WHEN, sink_batch

pytestmark = pytest.mark.integration

TOPIC = "orders"
COORDINATES = [
    "kafka_topic",
    "kafka_partition",
    "kafka_offset",
    "kafka_timestamp",
    "kafka_key",
    "kafka_headers",
]

CUSTOMER = struct_schema({"name": STRING_SCHEMA, "city": STRING_SCHEMA})
ORDER_V1 = struct_schema(
    {
        "id": INT64_SCHEMA,
        "quantity": INT32_SCHEMA,
        "price": decimal_schema(2, 10),
        "ordered_at": timestamp_schema(),
        "ship_date": date_schema(optional=True),
        "cutoff": time_schema(optional=True),
        "note": OPTIONAL_STRING_SCHEMA,
        "customer": CUSTOMER,
    },
    name="shop.Order",
    version=1,
)
# Version 2 adds an optional field at the top and one inside the customer.
CUSTOMER_V2 = struct_schema({"name": STRING_SCHEMA, "city": STRING_SCHEMA, "zip": OPTIONAL_STRING_SCHEMA})
ORDER_V2 = struct_schema(
    [
        *((f.name, CUSTOMER_V2 if f.name == "customer" else f.schema) for f in ORDER_V1.fields),
        ("coupon", OPTIONAL_STRING_SCHEMA),
    ],
    name="shop.Order",
    version=2,
)


def order(n: int, schema: Schema = ORDER_V1) -> dict[str, Any]:
    value: dict[str, Any] = {
        "id": n,
        "quantity": n % 7 + 1,
        "price": Decimal(n * 125) / 100,
        "ordered_at": WHEN + dt.timedelta(seconds=n),
        "ship_date": None if n % 3 == 0 else dt.date(2024, 5, 6) + dt.timedelta(days=n),
        "cutoff": dt.time(17, 30, n % 60),
        "note": None if n % 2 else f"note {n}",
        "customer": {"name": f"c{n}", "city": ["Utrecht", "Gent"][n % 2]},
    }
    if schema is ORDER_V2:
        value["customer"]["zip"] = f"{1000 + n}"
        value["coupon"] = f"C{n}"
    return value


def typed_batch(
    spark: SparkSession, schema: Schema, values: Sequence[Mapping[str, Any] | None], first_offset: int = 0
) -> DataFrame:
    """A sink batch of ``values`` (None: a tombstone) in partition 0 of TOPIC from ``first_offset``,
    keyed k<offset> (bytes), each record with one header."""
    records = [
        (TOPIC, 0, first_offset + i, f"k{first_offset + i}".encode(), value) for i, value in enumerate(values)
    ]
    return sink_batch(spark, schema, records, key_type=BinaryType(), headers=[("h", b"v")])


def context(first: int, count: int, task: int = 0) -> BatchContext:
    return BatchContext("lake", task, 0, (OffsetRange(TOPIC, 0, first, first + count),))


def sink(path: Path, fmt: str = "parquet", **props: str) -> SparkFileSinkTask:
    task = SparkFileSinkTask()
    task.start({"path": str(path), "format": fmt, **props})
    return task


def published(path: Path) -> list[Path]:
    return sorted(path.glob("task=*/batch=*"))


def read_values(spark: SparkSession, path: Path, schema: Schema) -> dict[int, dict[str, Any]]:
    """The lake's rows as Connect values of ``schema``, by id."""
    frame = spark.read.option("mergeSchema", "true").parquet(str(path))
    names = [f.name for f in schema.fields]
    out: dict[int, dict[str, Any]] = {}
    for row in frame.select(*names).collect():
        value = from_spark_value(schema, tuple(row[name] for name in names))
        out[value["id"]] = value
    return out


def test_typed_values_become_columns_of_their_own_types(spark: SparkSession, tmp_path: Path) -> None:
    lake = tmp_path / "lake"
    task = sink(lake)
    values = [order(n) for n in range(5)]
    task.write_batch(typed_batch(spark, ORDER_V1, [*values[:2], None, *values[2:]]), context(0, 6))

    frame = spark.read.parquet(str(lake))
    assert frame.columns == [*COORDINATES, *(f.name for f in ORDER_V1.fields), "task", "batch"]
    spark_types = {f.name: f.dataType.simpleString() for f in frame.schema.fields}
    assert spark_types["price"] == "decimal(10,2)"
    assert spark_types["ordered_at"] == "timestamp"
    assert spark_types["ship_date"] == "date"
    assert spark_types["cutoff"] == "int"
    assert spark_types["customer"] == "struct<name:string,city:string>"
    # The Connect metadata the converter put on each field is in the files too.
    assert from_spark_field(frame.schema["cutoff"]) == time_schema(optional=True)
    # The tombstone (offset 2) is left out; everything else reads back equal.
    assert read_values(spark, lake, ORDER_V1) == {v["id"]: v for v in values}
    coordinates = {r.kafka_offset: r for r in frame.select(*COORDINATES).collect()}
    assert sorted(coordinates) == [0, 1, 3, 4, 5]
    first = coordinates[3]
    assert (first.kafka_topic, first.kafka_partition, first.kafka_key) == (TOPIC, 0, b"k3")
    assert first.kafka_timestamp.astimezone(dt.UTC) == WHEN
    assert [tuple(h) for h in first.kafka_headers] == [("h", b"v")]
    # The lake's schema went into the batch's offsets file.
    (batch,) = published(lake)
    content = json.loads((batch / MANIFEST).read_text())
    assert StructType.fromJson(json.loads(content["schema"])).fieldNames() == [
        *COORDINATES,
        *(f.name for f in ORDER_V1.fields),
    ]


def test_a_batch_of_tombstones_only_is_published_empty(spark: SparkSession, tmp_path: Path) -> None:
    lake = tmp_path / "lake"
    task = sink(lake)
    task.write_batch(typed_batch(spark, ORDER_V1, [None, None]), context(0, 2))
    (batch,) = published(lake)
    assert json.loads((batch / MANIFEST).read_text())["ranges"][0]["end"] == 2
    assert spark.read.parquet(str(lake)).count() == 0
    task.write_batch(typed_batch(spark, ORDER_V1, [order(2)], 2), context(2, 1))
    assert read_values(spark, lake, ORDER_V1) == {2: order(2)}


def test_an_optional_field_added_later_is_schema_evolution(spark: SparkSession, tmp_path: Path) -> None:
    lake = tmp_path / "lake"
    task = sink(lake)
    task.write_batch(typed_batch(spark, ORDER_V1, [order(n) for n in range(3)]), context(0, 3))
    task.write_batch(
        typed_batch(spark, ORDER_V2, [order(n, ORDER_V2) for n in range(3, 6)], 3), context(3, 3)
    )

    frame = spark.read.option("mergeSchema", "true").parquet(str(lake))
    assert frame.columns[-4:] == ["note", "customer", "coupon", "task", "batch"][-4:]
    assert frame.schema["customer"].dataType.simpleString() == "struct<name:string,city:string,zip:string>"
    back = read_values(spark, lake, ORDER_V2)
    for n in range(3):  # the older rows have nulls in the new fields
        assert back[n] == {**order(n), "coupon": None, "customer": {**order(n)["customer"], "zip": None}}
    for n in range(3, 6):
        assert back[n] == order(n, ORDER_V2)
    # The newer files carry the new column; the older ones do not.
    older, newer = published(lake)
    assert "coupon" not in spark.read.parquet(str(older)).columns
    assert "coupon" in spark.read.parquet(str(newer)).columns
    # A batch of the older version still fits (the new fields are optional).
    task.write_batch(typed_batch(spark, ORDER_V1, [order(6)], 6), context(6, 1))
    assert read_values(spark, lake, ORDER_V2)[6]["coupon"] is None


def test_a_change_that_cannot_merge_fails_naming_both_schemas_and_writes_nothing(
    spark: SparkSession, tmp_path: Path
) -> None:
    lake = tmp_path / "lake"
    task = sink(lake)
    task.write_batch(typed_batch(spark, ORDER_V1, [order(0)]), context(0, 1))
    before = published(lake)
    changed = struct_schema(
        [(f.name, STRING_SCHEMA if f.name == "quantity" else f.schema) for f in ORDER_V1.fields]
    )
    value = {**order(1), "quantity": "two"}
    with pytest.raises(ConnectException) as caught:
        task.write_batch(typed_batch(spark, changed, [value], 1), context(1, 1))
    message = str(caught.value)
    assert "quantity is int in the lake and string in the batch" in message
    assert "The lake's schema: struct<kafka_topic:string" in message and "quantity:int" in message
    assert "The batch's schema: struct<kafka_topic:string" in message and "quantity:string" in message
    assert published(lake) == before
    assert not list((lake / "_staging").glob("task=0/*"))
    assert spark.read.parquet(str(lake)).count() == 1
    # A new required field fails the same way.
    required = struct_schema([*((f.name, f.schema) for f in ORDER_V1.fields), ("tax", INT32_SCHEMA)])
    with pytest.raises(ConnectException, match=r"new field tax \(int\) is required"):
        task.write_batch(typed_batch(spark, required, [{**order(1), "tax": 3}], 1), context(1, 1))
    assert published(lake) == before


@pytest.mark.parametrize("reads_offsets_first", [True, False], ids=["written_offsets", "first-write"])
def test_a_new_task_keeps_the_lake_schema(
    spark: SparkSession, tmp_path: Path, reads_offsets_first: bool
) -> None:
    lake = tmp_path / "lake"
    sink(lake).write_batch(typed_batch(spark, ORDER_V2, [order(0, ORDER_V2)]), context(0, 1))
    # Another process later: a new task instance knows the lake only from its files.
    task = sink(lake)
    if reads_offsets_first:
        held = task.written_offsets(spark, 0)
        assert held[next(iter(held))] == OffsetRange(TOPIC, 0, 0, 1)
    changed = struct_schema(
        [(f.name, INT64_SCHEMA if f.name == "coupon" else f.schema) for f in ORDER_V2.fields]
    )
    with pytest.raises(ConnectException, match="coupon is string in the lake and bigint in the batch"):
        task.write_batch(typed_batch(spark, changed, [{**order(1, ORDER_V2), "coupon": 5}], 1), context(1, 1))
    # Leaving out the optional fields still fits, and the lake's schema stays the union.
    task.write_batch(typed_batch(spark, ORDER_V1, [order(1)], 1), context(1, 1))
    newest = json.loads((published(lake)[-1] / MANIFEST).read_text())
    assert "coupon" in StructType.fromJson(json.loads(newest["schema"])).fieldNames()


def test_other_tasks_schema_changes_are_seen_before_a_change(spark: SparkSession, tmp_path: Path) -> None:
    lake = tmp_path / "lake"
    first, second = sink(lake), sink(lake)
    first.write_batch(typed_batch(spark, ORDER_V1, [order(0)]), context(0, 1, task=0))
    second.write_batch(typed_batch(spark, ORDER_V1, [order(1)], 1), context(1, 1, task=1))
    first.write_batch(typed_batch(spark, ORDER_V2, [order(2, ORDER_V2)], 2), context(2, 1, task=0))
    # Task 1 changes the schema too, in a way task 0's change rules out.
    clash = struct_schema(
        [*((f.name, f.schema) for f in ORDER_V1.fields), ("coupon", decimal_schema(2, 10, optional=True))]
    )
    with pytest.raises(ConnectException, match=r"coupon is string in the lake and decimal\(10,2\)"):
        second.write_batch(
            typed_batch(spark, clash, [{**order(3), "coupon": Decimal("1.50")}], 3), context(3, 1, task=1)
        )


def test_untyped_batches_are_written_as_before(spark: SparkSession, tmp_path: Path) -> None:
    lake = tmp_path / "lake"
    task = sink(lake)
    task.written_offsets(spark, 0)
    rows = [(TOPIC, 0, n, WHEN, f"k{n}", json.dumps({"n": n}), None) for n in range(3)]
    columns = "topic string, partition int, offset long, timestamp timestamp, key string, value string, " + (
        "headers array<struct<key:string,value:binary>>"
    )
    task.write_batch(spark.createDataFrame(rows, columns), context(0, 3))
    frame = spark.read.parquet(str(lake))
    assert frame.columns == [
        "topic",
        "partition",
        "offset",
        "timestamp",
        "key",
        "value",
        "headers",
        "task",
        "batch",
    ]
    assert sorted(r.value for r in frame.collect()) == [json.dumps({"n": n}) for n in range(3)]
    (batch,) = published(lake)
    assert "schema" not in json.loads((batch / MANIFEST).read_text())
    # One lake holds one kind of record: a typed batch into it fails, writing nothing.
    with pytest.raises(ConnectException, match="holds untyped records"):
        sink(lake).write_batch(typed_batch(spark, ORDER_V1, [order(3)], 3), context(3, 1))
    assert published(lake) == [batch]


def test_an_untyped_batch_into_a_typed_lake_fails(spark: SparkSession, tmp_path: Path) -> None:
    lake = tmp_path / "lake"
    sink(lake).write_batch(typed_batch(spark, ORDER_V1, [order(0)]), context(0, 1))
    task = sink(lake)
    task.written_offsets(spark, 0)
    raw = spark.createDataFrame(
        [(TOPIC, 0, 1, "x")], "topic string, partition int, offset long, value string"
    )
    with pytest.raises(ConnectException, match="holds typed records"):
        task.write_batch(raw, context(1, 1))


def test_partition_by_topic_names_the_kafka_topic_column(spark: SparkSession, tmp_path: Path) -> None:
    lake = tmp_path / "lake"
    sink(lake, **{"partition.by": "topic,quantity"}).write_batch(
        typed_batch(spark, ORDER_V1, [order(n) for n in range(3)]), context(0, 3)
    )
    assert {p.name for p in lake.rglob("kafka_topic=*")} == {f"kafka_topic={TOPIC}"}
    assert {p.name for p in lake.rglob("quantity=*")} == {"quantity=1", "quantity=2", "quantity=3"}
    assert read_values(spark, lake, ORDER_V1) == {n: order(n) for n in range(3)}


def test_json_and_csv_lakes(spark: SparkSession, tmp_path: Path) -> None:
    values = [order(n) for n in range(2)]
    sink(tmp_path / "json", "json").write_batch(typed_batch(spark, ORDER_V1, values), context(0, 2))
    back = {r.id: r for r in spark.read.json(str(tmp_path / "json")).collect()}
    assert back[1].customer.city == "Gent" and back[1].price == pytest.approx(1.25)

    csv = sink(tmp_path / "csv", "csv")
    csv.write_batch(typed_batch(spark, ORDER_V1, values), context(0, 2))
    rows = {r.id: r for r in spark.read.option("header", "true").csv(str(tmp_path / "csv")).collect()}
    assert json.loads(rows["1"].customer) == {"name": "c1", "city": "Gent"}
    assert rows["1"].price == "1.25"
    # A CSV lake cannot take a new column.
    with pytest.raises(ConnectException, match="CSV lake keeps its columns"):
        csv.write_batch(typed_batch(spark, ORDER_V2, [order(2, ORDER_V2)], 2), context(2, 1))


def test_a_spark_worker_reads_the_lake_schema_back_too(spark: SparkSession, tmp_path: Path) -> None:
    lake = tmp_path / "lake"
    sink(lake).write_batch(typed_batch(spark, ORDER_V1, [order(0)]), context(0, 1))
    # As when the executor cannot see the lake's directory: the start-up read runs on a worker.
    rows = newest_rows(spark, f"file://{lake}", 0, here=False)
    state = lake_state(rows)
    assert state.schema is not None and not state.raw
    assert state.schema.fieldNames() == [*COORDINATES, *(f.name for f in ORDER_V1.fields)]
    assert from_spark_field(state.schema["price"]) == decimal_schema(2, 10)
