"""Connect schemas and values through a real Spark DataFrame: the StructType ``to_spark`` makes
and the values ``to_spark_value`` makes are accepted by Spark Connect, collected back, and read
as the same Connect values, their metadata included."""

from __future__ import annotations

import datetime as dt
import decimal
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pyspark.sql import SparkSession
from pyspark.sql.types import StructType

from sluiceway.connect.data import (
    BYTES_SCHEMA,
    FLOAT32_SCHEMA,
    INT8_SCHEMA,
    INT16_SCHEMA,
    OPTIONAL_INT32_SCHEMA,
    OPTIONAL_STRING_SCHEMA,
    STRING_SCHEMA,
    Schema,
    array_schema,
    date_schema,
    decimal_schema,
    map_schema,
    struct_schema,
    time_schema,
    timestamp_schema,
)
from sluiceway.connect.data.spark import from_spark, from_spark_value, to_spark, to_spark_value
from tests.unit.connect.connect_data_strategies import struct_schemas, values, with_defaults

ROW = struct_schema(
    {
        "id": INT16_SCHEMA,
        "small": INT8_SCHEMA.as_optional(),
        "amount": decimal_schema(2, precision=12),
        "wide": decimal_schema(4, optional=True),
        "day": date_schema(),
        "at": time_schema(optional=True),
        "created": timestamp_schema(),
        "ratio": FLOAT32_SCHEMA,
        "raw": BYTES_SCHEMA,
        "tags": array_schema(OPTIONAL_STRING_SCHEMA),
        "counts": map_schema(STRING_SCHEMA, OPTIONAL_INT32_SCHEMA.with_options(default=0), name="m"),
        "parent": struct_schema(
            {"id": OPTIONAL_INT32_SCHEMA}, optional=True, name="com.example.Ref", version=3
        ),
    },
    name="com.example.Row",
)
ROWS: list[dict[str, Any]] = [
    {
        "id": 1,
        "small": -3,
        "amount": decimal.Decimal("1234567890.12"),
        "wide": decimal.Decimal("-0.0001"),
        "day": dt.date(1969, 7, 20),
        "at": dt.time(23, 59, 59, 999000),
        "created": dt.datetime(2024, 2, 29, 12, 30, 0, 123456, tzinfo=dt.UTC),
        "ratio": 0.5,
        "raw": b"\x00\x01",
        "tags": ["a", None],
        "counts": {"x": 1, "y": None},
        "parent": {"id": 9},
    },
    {
        "id": 2,
        "small": None,
        "amount": decimal.Decimal("0.00"),
        "wide": None,
        "day": dt.date(2024, 1, 1),
        "at": None,
        "created": dt.datetime(1960, 1, 1, tzinfo=dt.UTC),
        "ratio": -2.25,
        "raw": b"",
        "tags": [],
        "counts": {},
        "parent": None,
    },
]


def _round_trip(spark: SparkSession, schema: Schema, rows: list[Any]) -> tuple[Schema, list[Any]]:
    spark_schema = to_spark(schema)
    assert isinstance(spark_schema, StructType)
    frame = spark.createDataFrame([to_spark_value(schema, row) for row in rows], spark_schema)
    collected = frame.collect()
    read_schema = from_spark(frame.schema, nullable=False)
    return read_schema, [from_spark_value(read_schema, row) for row in collected]


def test_typed_rows_survive_a_dataframe(spark: SparkSession) -> None:
    read_schema, read_rows = _round_trip(spark, ROW, ROWS)
    # The outermost struct's own name is not in a StructType; everything inside is.
    assert read_schema == ROW.with_options(name=None)
    assert read_rows == [with_defaults(ROW, row) for row in ROWS]


@settings(max_examples=10, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.data())
def test_random_rows_survive_a_dataframe(spark: SparkSession, data: st.DataObject) -> None:
    schema: Schema = data.draw(struct_schemas())
    rows = data.draw(
        st.lists(values(schema, with_nulls=True).filter(lambda v: v is not None), min_size=1, max_size=3)
    )
    read_schema, read_rows = _round_trip(spark, schema, rows)
    assert read_schema == schema
    assert read_rows == [with_defaults(schema, row) for row in rows]
