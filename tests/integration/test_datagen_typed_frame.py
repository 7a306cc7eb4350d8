"""DataGen's typed records (``value.type=struct``) built by Spark SQL (``typed_frame``) on the real
Spark Connect server: the value column has ORDER_SCHEMA's Spark type with its Connect metadata, and
every row equals ``typed_value`` of its seq; the batch task returns that frame."""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from typing import Any

import pytest
from pyspark.sql import Row, SparkSession

from sluiceway.connect import BatchContext
from sluiceway.connect.data.spark import from_spark_field, from_spark_value, to_spark, to_spark_value
from sluiceway_executor.connectors.datagen import DataGenBatchTask
from sluiceway_executor.datagen_records import ORDER_SCHEMA, typed_frame, typed_value
from sluiceway_server.embedded import EmbeddedSparkConnect

pytestmark = pytest.mark.integration


def spark_row(seq: int) -> dict[str, Any]:
    """``typed_value(seq)`` as the Spark value (``to_spark_value``), as a plain dict."""
    value = to_spark_value(ORDER_SCHEMA, typed_value(seq))
    assert isinstance(value, Row)
    return value.asDict(recursive=True)


def as_read(value: Row) -> dict[str, Any]:
    """A value Spark gave back: PySpark gives a timestamp as a naive local time; made aware (UTC)."""
    out = value.asDict(recursive=True)
    out["ordered_at"] = out["ordered_at"].astimezone(dt.UTC)
    return out


class Offsets:
    def __init__(self, committed: Mapping[str, Any] | None = None) -> None:
        self._committed = committed

    def offset(self, partition: Mapping[str, Any]) -> Mapping[str, Any] | None:
        return self._committed

    def offsets(self, partitions: Any) -> dict[Any, Any]:
        return {}


def test_the_value_column_has_the_declared_schema(spark: SparkSession) -> None:
    frame = typed_frame(spark, 4, 0, 3)
    value = frame.schema["value"]
    assert value.dataType == to_spark(ORDER_SCHEMA)
    assert not value.nullable
    # The nested fields' metadata and the column's own (name, version, doc) give the schema back.
    assert from_spark_field(value) == ORDER_SCHEMA
    assert frame.columns == ["key", "value", "task", "seq"]


@pytest.mark.parametrize(("start", "count"), [(0, 1_205), (9_999_999_990, 20), (2**63 - 6, 5)])
def test_every_row_equals_typed_value_of_its_seq(spark: SparkSession, start: int, count: int) -> None:
    rows = typed_frame(spark, 7, start, count, partitions=3).collect()
    assert sorted(row.seq for row in rows) == list(range(start, start + count))
    for row in rows:
        assert (row.key, row.task) == (f"7-{row.seq}", 7)
        assert as_read(row.value) == spark_row(row.seq), row.seq
        assert from_spark_value(ORDER_SCHEMA, row.value) == typed_value(row.seq), row.seq


def test_the_batch_task_returns_typed_values_after_the_committed_seq(spark: SparkSession) -> None:
    task = DataGenBatchTask()
    task.start({"topic": "orders", "task.id": "2", "value.type": "struct", "max.records": "50"})
    batch = task.read_batch(spark, Offsets({"seq": 9}), BatchContext("gen", 2, 0, max_records=25))  # type: ignore[arg-type]
    assert batch.data is not None
    assert batch.offsets == [({"task": 2}, {"seq": 34})]
    assert batch.data.columns == ["key", "value"]
    assert from_spark_field(batch.data.schema["value"]) == ORDER_SCHEMA
    rows = batch.data.collect()
    assert sorted(row.key for row in rows) == sorted(f"2-{seq}" for seq in range(10, 35))
    for row in rows:
        seq = int(row.key.split("-")[1])
        assert as_read(row.value) == spark_row(seq)


def test_string_mode_is_unchanged(spark: SparkSession) -> None:
    task = DataGenBatchTask()
    task.start({"topic": "t", "task.id": "0"})
    batch = task.read_batch(spark, Offsets(), BatchContext("gen", 0, 0, max_records=3))  # type: ignore[arg-type]
    assert batch.data is not None
    assert batch.data.schema.simpleString() == "struct<key:string,value:string>"


def test_batches_of_one_task_reuse_the_compiled_code(
    spark: SparkSession, spark_connect: EmbeddedSparkConnect
) -> None:
    log = spark_connect.managed.log_path
    for seq in range(3):  # the first batches compile
        typed_frame(spark, 5, seq * 1_000, 900 + seq, 2).selectExpr("count(value)").collect()
    before = log.read_text(errors="replace").count("Code generated")
    for seq in range(3, 8):
        typed_frame(spark, 5, seq * 1_000, 900 + seq, 2).selectExpr("count(value)").collect()
    assert log.read_text(errors="replace").count("Code generated") == before
