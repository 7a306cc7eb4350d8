"""Sink batches of typed records built in the tests, laid out as the executor hands a batch to a
DataFrame-level sink task: Kafka's coordinates, the key, a ``value`` struct whose field carries its
Kafka Connect schema in the metadata (null for a tombstone), the headers."""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping, Sequence
from typing import Any

from pyspark.sql import DataFrame, Row, SparkSession
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    DataType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from sluiceway.connect.data import Schema
from sluiceway.connect.data.spark import to_spark_field, to_spark_value

__all__ = ["HEADERS", "WHEN", "SinkRecord", "sink_batch"]

HEADERS = ArrayType(StructType([StructField("key", StringType()), StructField("value", BinaryType())]))
WHEN = dt.datetime(2024, 5, 6, 7, 8, 9, 123000, tzinfo=dt.UTC)

# (topic, partition, offset, key, value); a value of None is a tombstone.
SinkRecord = tuple[str, int, int, Any, Mapping[str, Any] | None]


def sink_batch(
    spark: SparkSession,
    value_schema: Schema,
    records: Sequence[SinkRecord],
    key_schema: Schema | None = None,
    key_type: DataType | None = None,
    headers: Sequence[tuple[str, bytes]] = (),
    timestamp: dt.datetime = WHEN,
) -> DataFrame:
    """A batch of ``records``: values of ``value_schema``; keys of ``key_schema`` (a typed key) or
    as they are, of ``key_type`` (a string by default); every record with ``headers``."""
    key_field = (
        to_spark_field("key", key_schema.as_optional())
        if key_schema is not None
        else StructField("key", key_type or StringType(), True)
    )
    schema = StructType(
        [
            StructField("topic", StringType(), False),
            StructField("partition", IntegerType(), False),
            StructField("offset", LongType(), False),
            StructField("timestamp", TimestampType(), True),
            key_field,
            to_spark_field("value", value_schema.as_optional()),
            StructField("headers", HEADERS, True),
        ]
    )
    header_rows = [Row(key=k, value=v) for k, v in headers]
    rows = [
        (
            topic,
            partition,
            offset,
            timestamp,
            to_spark_value(key_schema, key) if key_schema is not None and key is not None else key,
            None if value is None else to_spark_value(value_schema, value),
            header_rows,
        )
        for topic, partition, offset, key, value in records
    ]
    return spark.createDataFrame(rows, schema)
