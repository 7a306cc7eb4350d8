"""Connect schemas and values as Spark types and values: the mapping table, what metadata keeps,
and property tests that Connect -> Spark -> Connect is the identity."""

from __future__ import annotations

import datetime as dt
import decimal
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pyspark.sql import Row
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    ByteType,
    DataType,
    DateType,
    DayTimeIntervalType,
    DecimalType,
    FloatType,
    IntegerType,
    MapType,
    ShortType,
    StringType,
    StructField,
    StructType,
    TimestampNTZType,
    TimestampType,
    VarcharType,
)

from sluiceway.connect.data import (
    BYTES_SCHEMA,
    FLOAT32_SCHEMA,
    INT8_SCHEMA,
    INT16_SCHEMA,
    OPTIONAL_INT32_SCHEMA,
    STRING_SCHEMA,
    TIME_NAME,
    DataException,
    Schema,
    array_schema,
    date_schema,
    decimal_schema,
    map_schema,
    struct_schema,
    time_schema,
    timestamp_schema,
)
from sluiceway.connect.data.spark import (
    METADATA_KEY,
    from_spark,
    from_spark_field,
    from_spark_value,
    to_spark,
    to_spark_field,
    to_spark_value,
)
from tests.unit.connect.connect_data_strategies import schemas, values, with_defaults

FAST = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@pytest.mark.parametrize(
    ("schema", "spark"),
    [
        (INT8_SCHEMA, ByteType()),
        (INT16_SCHEMA, ShortType()),
        (FLOAT32_SCHEMA, FloatType()),
        (BYTES_SCHEMA, BinaryType()),
        (decimal_schema(2), DecimalType(38, 2)),
        (decimal_schema(2, precision=10), DecimalType(10, 2)),
        (date_schema(), DateType()),
        (timestamp_schema(), TimestampType()),
        (time_schema(), IntegerType()),
        (array_schema(STRING_SCHEMA.as_optional()), ArrayType(StringType(), containsNull=True)),
        (map_schema(STRING_SCHEMA, INT8_SCHEMA), MapType(StringType(), ByteType(), valueContainsNull=False)),
        (struct_schema({"a": OPTIONAL_INT32_SCHEMA}), StructType([StructField("a", IntegerType(), True)])),
    ],
)
def test_mapping_table(schema: Schema, spark: DataType) -> None:
    assert to_spark(schema) == spark


def test_metadata_keeps_what_spark_cannot_say() -> None:
    schema = struct_schema(
        {
            "at": time_schema(),
            "amount": decimal_schema(2),
            "day": date_schema(),
            "tags": map_schema(STRING_SCHEMA.as_optional(), STRING_SCHEMA, name="m", doc="d"),
        }
    )
    fields = {f.name: f for f in to_spark(schema).fields}  # type: ignore[attr-defined]
    assert fields["at"].metadata == {
        METADATA_KEY: {"name": "org.apache.kafka.connect.data.Time", "version": 1}
    }
    assert fields["amount"].metadata == {METADATA_KEY: {"parameters": {"scale": "2"}}}
    assert fields["day"].metadata == {}
    assert fields["tags"].metadata == {METADATA_KEY: {"name": "m", "doc": "d", "keys": {"optional": True}}}
    assert from_spark(to_spark(schema), nullable=False) == schema


def test_spark_types_without_metadata() -> None:
    spark = StructType([StructField("n", VarcharType(5)), StructField("d", DecimalType(10, 2), False)])
    assert from_spark(spark, nullable=False) == struct_schema(
        {"n": STRING_SCHEMA.as_optional(), "d": decimal_schema(2, precision=10)}
    )


@pytest.mark.parametrize("spark", [TimestampNTZType(), DayTimeIntervalType()])
def test_spark_types_with_no_connect_schema(spark: DataType) -> None:
    with pytest.raises(DataException, match=r"has no Kafka Connect schema"):
        from_spark(StructType([StructField("x", ArrayType(spark))]))


@pytest.mark.parametrize("schema", [decimal_schema(40), decimal_schema(5, precision=3), decimal_schema(-1)])
def test_decimals_spark_cannot_hold(schema: Schema) -> None:
    with pytest.raises(DataException, match=r"at x has no Spark type"):
        to_spark(struct_schema({"x": schema}))


def test_values_both_ways() -> None:
    schema = struct_schema(
        {
            "at": time_schema(),
            "ts": timestamp_schema(),
            "amount": decimal_schema(2, precision=5),
            "retries": OPTIONAL_INT32_SCHEMA.with_options(default=3),
        }
    )
    value = {
        "at": dt.time(0, 0, 1, 5000),
        "ts": dt.datetime(2024, 1, 1, 12, tzinfo=dt.timezone(dt.timedelta(hours=2))),
        "amount": decimal.Decimal("1.5"),
    }
    spark_value = to_spark_value(schema, value)
    assert spark_value == Row(
        at=1005, ts=dt.datetime(2024, 1, 1, 10, tzinfo=dt.UTC), amount=decimal.Decimal("1.50"), retries=3
    )
    assert from_spark_value(schema, spark_value) == {
        "at": dt.time(0, 0, 1, 5000),
        "ts": dt.datetime(2024, 1, 1, 10, tzinfo=dt.UTC),
        "amount": decimal.Decimal("1.50"),
        "retries": 3,
    }
    with pytest.raises(DataException, match=r"amount does not fit scale 2"):
        to_spark_value(schema, {**value, "amount": decimal.Decimal("1.555")})
    with pytest.raises(DataException, match=r"more than the schema's 5 digits"):
        to_spark_value(schema, {**value, "amount": decimal.Decimal("1234.5")})


@FAST
@given(schemas())
def test_schema_survives_spark_through_a_field(schema: Schema) -> None:
    assert from_spark_field(to_spark_field("f", schema)) == schema


@FAST
@given(schemas())
def test_schema_survives_a_bare_spark_type(schema: Schema) -> None:
    # A bare type has no metadata of its own: a struct's fields keep everything (their
    # StructFields carry it), anything else keeps its type, optionality and logical type.
    derived = from_spark(to_spark(schema), schema.optional)
    assert derived.fields == schema.fields
    # Time is an IntegerType marked in metadata; bare, it is an int32.
    logical = None if schema.logical_name == TIME_NAME else schema.logical_name
    assert (derived.type, derived.optional, derived.logical_name) == (schema.type, schema.optional, logical)


@FAST
@given(st.data())
def test_value_survives_spark(data: st.DataObject) -> None:
    schema: Schema = data.draw(schemas())
    value: Any = data.draw(values(schema))
    back = from_spark_value(schema, to_spark_value(schema, value))
    assert back == with_defaults(schema, value)
