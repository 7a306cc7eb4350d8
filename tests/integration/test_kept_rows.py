"""Keeping records of a typed batch (transforms/filtering.py) on real Spark: the records where the
test holds, with their Connect schemas, and the value's JSON parsed once however the test reads it."""

from __future__ import annotations

import pytest
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F  # noqa: N812 - Spark's usual alias
from pyspark.sql.connect.dataframe import DataFrame as ConnectDataFrame

from sluiceway.connect.data import INT64_SCHEMA, STRING_SCHEMA, envelope_to_bytes, struct_schema
from sluiceway.connect.data.spark import from_spark_field
from sluiceway_executor.converters.connect_spark_json import with_connect_schemas
from sluiceway_executor.converters.json_converter import JsonConverter
from sluiceway_executor.transforms import built_in_plugins
from sluiceway_executor.transforms.chain import TransformChain
from sluiceway_executor.transforms.filtering import kept_rows, kept_where

pytestmark = pytest.mark.integration

ORDER = struct_schema({"id": INT64_SCHEMA, "name": STRING_SCHEMA}, name="shop.Order", version=1)


def _typed(spark: SparkSession) -> DataFrame:
    """Six records: ids 0..4, and a tombstone at offset 2; converted as the sink pipeline does when
    it expects the schema."""
    values: list[bytes | None] = [envelope_to_bytes(ORDER, {"id": i, "name": f"n{i}"}) for i in range(5)]
    values.insert(2, None)
    # From a range, not local rows: Spark would evaluate a plan over local rows while optimizing it.
    held = F.array(*[F.lit(v).cast("binary") for v in values])
    batch = spark.range(len(values)).select(
        F.col("id").alias("offset"), F.element_at(held, F.col("id").cast("int") + 1).alias("value")
    )
    converter = JsonConverter("value", {"schemas.enable": "true"})
    converter.expect(values[0])
    frame, schema = converter.connect_frame(batch, "value")
    assert schema is not None
    return with_connect_schemas(frame, {"value": schema})


def _optimized_plan(frame: DataFrame) -> str:
    assert isinstance(frame, ConnectDataFrame)
    text: str = frame._explain_string(extended=True)
    return text.split("== Optimized Logical Plan ==")[1].split("== Physical Plan ==", maxsplit=1)[0]


def test_kept_where_keeps_the_records_the_test_holds_for_with_their_schemas(spark: SparkSession) -> None:
    frame = _typed(spark)
    # A null outcome (the tombstone's id) leaves the record out, as SQL's WHERE does.
    kept = kept_where(frame, F.col("value.id") % 2 == 0)

    assert kept.columns == frame.columns
    assert sorted((r.offset, r.value.id, r.value.name) for r in kept.collect()) == [
        (0, 0, "n0"),
        (3, 2, "n2"),
        (5, 4, "n4"),
    ]
    assert from_spark_field(kept.schema["value"]) == ORDER


def test_kept_rows_projects_the_columns_asked_for(spark: SparkSession) -> None:
    kept = kept_rows(
        _typed(spark),
        F.col("value").isNotNull(),
        [F.col("offset").alias("position"), F.col("value.name").alias("name")],
    )

    assert kept.columns == ["position", "name"]
    assert sorted(tuple(r) for r in kept.collect()) == [(0, "n0"), (1, "n1"), (3, "n2"), (4, "n3"), (5, "n4")]


def test_a_kept_test_reads_the_parsed_value_instead_of_parsing_it_again(spark: SparkSession) -> None:
    frame = _typed(spark)
    columns = [F.col("value.id").alias("id"), F.col("value.name").alias("name")]
    # Spark's own filter, pushed below the conversion, parses each value twice: what is avoided.
    assert _optimized_plan(frame.where(F.col("value").isNotNull()).select(*columns)).count("from_json(") == 2

    assert _optimized_plan(kept_rows(frame, F.col("value").isNotNull(), columns)).count("from_json(") == 1
    assert _optimized_plan(kept_where(frame, F.col("value.id") > 1)).count("from_json(") == 1


def test_a_sql_where_on_the_typed_value_parses_it_once(spark: SparkSession) -> None:
    frame = _typed(spark).select(
        F.lit("orders").alias("topic"),
        F.lit(0).alias("partition"),
        "offset",
        F.current_timestamp().alias("timestamp"),
        F.lit(None).cast("string").alias("key"),
        "value",
        F.lit(None).cast("array<struct<key:string,value:binary>>").alias("headers"),
    )
    props = {
        "transforms": "sql",
        "transforms.sql.type": "Sql",
        "transforms.sql.where": "value.id > 1 AND value.name <> 'n3'",
    }
    out = TransformChain.from_config(props, built_in_plugins()).apply(frame, is_sink=True)

    assert sorted(r.value.id for r in out.collect()) == [2, 4]
    # Both references read the value parsed once, not a parse of their own.
    assert _optimized_plan(out).count("from_json(") == 1
