"""Kafka Connect's transforms and predicates on keys and values without a schema (JSON text, as
JsonConverter with schemas.enable=false gives them), on real Spark Connect: each output is what
Kafka's documentation gives for the same schemaless records (a Map for a JSON object)."""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Mapping
from typing import Any

import pytest
from pyspark.sql import DataFrame, Row, SparkSession
from pyspark.sql import functions as F  # noqa: N812 - Spark's usual alias
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from sluiceway.connect import ConnectException
from sluiceway_executor.record_errors import ERROR_COLUMN, with_error_column
from sluiceway_executor.transforms import built_in_plugins
from sluiceway_executor.transforms.chain import TransformChain

pytestmark = pytest.mark.integration

HEADER = StructType([StructField("key", StringType()), StructField("value", BinaryType())])
T0 = dt.datetime(2026, 3, 4, 5, 6, 7, 123000, tzinfo=dt.UTC)
FIRST = {"id": 1, "name": "n1", "amount": 1.25, "address": {"city": "Oslo"}, "vip": True, "tags": ["a"]}
SECOND = {"id": 2, "name": "n2", "amount": 2.75, "address": None, "vip": False, "tags": []}
AUDIT = {"id": 4, "name": "n4", "amount": 4.5, "address": {"city": "Lima"}, "vip": False, "tags": ["b"]}


def _batch(spark: SparkSession, values: list[str | None] | None = None) -> DataFrame:
    """Records as a sink sees them from JsonConverter without schemas: key and value JSON text."""
    schema = StructType(
        [
            StructField("topic", StringType()),
            StructField("partition", IntegerType()),
            StructField("offset", LongType()),
            StructField("timestamp", TimestampType()),
            StructField("key", StringType()),
            StructField("value", StringType()),
            StructField("headers", ArrayType(HEADER)),
        ]
    )
    texts = values or [json.dumps(FIRST), json.dumps(SECOND), None, json.dumps(AUDIT)]
    rows = [
        ("orders-eu", 0, 10, T0, '{"k":1}', texts[0], [Row(key="trace", value=b"t1")]),
        ("orders-eu", 1, 11, T0 + dt.timedelta(days=1), '{"k":2}', texts[1], []),
        ("orders-eu", 1, 12, T0, '{"k":3}', texts[2], [Row(key="trace", value=b"t3")]),
        ("audit", 0, 5, T0, '{"k":4}', texts[3], None),
    ]
    return spark.createDataFrame(rows, schema)


def _run(spark: SparkSession, props: Mapping[str, str], batch: DataFrame | None = None) -> list[Row]:
    chain = TransformChain.from_config(props, built_in_plugins())
    out = chain.apply(batch if batch is not None else _batch(spark), is_sink=True)
    return sorted(out.collect(), key=lambda r: r["offset"])


def _one(alias: str, kind: str, **keys: str) -> dict[str, str]:
    return {
        "transforms": alias,
        f"transforms.{alias}.type": kind,
        **{f"transforms.{alias}.{k.replace('_', '.')}": v for k, v in keys.items()},
    }


def _values(rows: list[Row]) -> dict[int, Any]:
    """Each record's value read back from its JSON text, by offset."""
    return {r["offset"]: None if r["value"] is None else json.loads(r["value"]) for r in rows}


def test_insert_field_puts_the_records_coordinates_into_the_object(spark: SparkSession) -> None:
    props = _one(
        "meta",
        "org.apache.kafka.connect.transforms.InsertField$Value",
        topic_field="src_topic",
        partition_field="src_partition",
        offset_field="src_offset",
        timestamp_field="src_time",
        static_field="id",  # a key the object has already: replaced, as Kafka's map put does
        static_value="fixed",
    )
    values = _values(_run(spark, props))
    millis = int(T0.timestamp() * 1000)
    assert values[10] == {
        **FIRST,
        "id": "fixed",
        "src_topic": "orders-eu",
        "src_partition": 0,
        "src_offset": 10,
        "src_time": millis,
    }
    assert values[11]["src_time"] == millis + 86_400_000
    assert values[12] is None  # a tombstone stays one
    assert values[5]["src_topic"] == "audit"


def test_replace_field_keeps_drops_and_renames_keys(spark: SparkSession) -> None:
    dropped = _values(_run(spark, _one("r", "ReplaceField$Value", exclude="tags,vip", renames="id:order_id")))
    assert dropped[10] == {"order_id": 1, "name": "n1", "amount": 1.25, "address": {"city": "Oslo"}}
    kept = _values(_run(spark, _one("r", "ReplaceField$Value", include="id,name,missing")))
    assert kept[11] == {"id": 2, "name": "n2"}
    assert kept[12] is None


def test_mask_field_empties_each_json_type_or_puts_the_replacement(spark: SparkSession) -> None:
    masked = _values(_run(spark, _one("m", "MaskField$Value", fields="id,name,amount,vip,tags,address")))
    assert masked[10] == {"id": 0, "name": "", "amount": 0, "vip": False, "tags": [], "address": {}}
    assert masked[11]["address"] is None  # a null stays null
    replaced = _values(_run(spark, _one("m", "MaskField$Value", fields="name,id", replacement="42")))
    assert replaced[5] == {**AUDIT, "name": "42", "id": 42}


def test_cast_reads_named_values_or_the_whole_value_as_other_types(spark: SparkSession) -> None:
    fields = _values(_run(spark, _one("c", "Cast$Value", spec="id:string,amount:int32,vip:int8")))
    assert fields[10] == {**FIRST, "id": "1", "amount": 1, "vip": 1}
    whole = _run(spark, _one("c", "Cast$Value", spec="int64"), _batch(spark, ["7", '"12"', None, "3.9"]))
    assert [r["value"] for r in whole] == ["3", "7", "12", None]


def test_extract_hoist_and_value_to_key(spark: SparkSession) -> None:
    extracted = _values(_run(spark, _one("e", "ExtractField$Value", field="address")))
    assert extracted == {5: {"city": "Lima"}, 10: {"city": "Oslo"}, 11: None, 12: None}
    hoisted = _run(
        spark, _one("h", "HoistField$Value", field="order"), _batch(spark, ['{"a":1}', "7", None, "plain"])
    )
    # A value that is not JSON (StringConverter's text) is hoisted as a string.
    assert [r["value"] for r in hoisted] == ['{"order":"plain"}', '{"order":{"a":1}}', '{"order":7}', None]
    keyed = _run(spark, _one("k", "ValueToKey", fields="id,name"))
    assert {r["offset"]: r["key"] for r in keyed} == {
        5: '{"id":4,"name":"n4"}',
        10: '{"id":1,"name":"n1"}',
        11: '{"id":2,"name":"n2"}',
        12: None,
    }


def test_routing_header_and_drop_transforms_with_every_predicate(spark: SparkSession) -> None:
    props = {
        "transforms": "route,day,mark,clean,drop",
        "transforms.route.type": "org.apache.kafka.connect.transforms.RegexRouter",
        "transforms.route.regex": "orders-(.*)",
        "transforms.route.replacement": "shop-$1",
        "transforms.day.type": "TimestampRouter",
        "transforms.day.topic.format": "${topic}-${timestamp}",
        "transforms.day.timestamp.format": "yyyyMMdd",
        "transforms.day.predicate": "isAudit",
        "transforms.mark.type": "InsertHeader",
        "transforms.mark.header": "seen",
        "transforms.mark.value.literal": "yes",
        "transforms.mark.predicate": "traced",
        "transforms.clean.type": "DropHeaders",
        "transforms.clean.headers": "trace",
        "transforms.drop.type": "Filter",
        "transforms.drop.predicate": "isTombstone",
        "predicates": "isAudit,traced,isTombstone",
        "predicates.isAudit.type": "org.apache.kafka.connect.transforms.predicates.TopicNameMatches",
        "predicates.isAudit.pattern": "audit",
        "predicates.traced.type": "HasHeaderKey",
        "predicates.traced.name": "trace",
        "predicates.isTombstone.type": "RecordIsTombstone",
    }
    rows = _run(spark, props)
    assert [r["offset"] for r in rows] == [5, 10, 11]
    assert {r["offset"]: r["topic"] for r in rows} == {5: "audit-20260304", 10: "shop-eu", 11: "shop-eu"}
    headers = {r["offset"]: [(h["key"], h["value"]) for h in r["headers"] or []] for r in rows}
    assert headers == {5: [], 10: [("seen", b"yes")], 11: []}
    assert _values(rows)[10] == FIRST  # values without a schema pass through untouched


def test_a_value_that_is_no_json_object_is_the_records_problem(spark: SparkSession) -> None:
    batch = _batch(spark, [json.dumps(FIRST), "plain text", None, "[1, 2]"])
    props = _one("r", "ReplaceField$Value", exclude="tags")
    # errors.tolerance=all: those records are marked, the others transformed.
    chain = TransformChain.from_config(props, built_in_plugins())
    rows = sorted(chain.apply(with_error_column(batch), is_sink=True).collect(), key=lambda r: r["offset"])
    errors = {r["offset"]: r[ERROR_COLUMN] for r in rows}
    assert errors[10] is None and errors[12] is None
    for offset in (5, 11):
        assert errors[offset]["stage"] == "TRANSFORMATION"
        assert errors[offset]["message"] == (
            "transform 'r' (ReplaceFieldValue): a record value without a schema must be a JSON object"
        )
    assert json.loads(rows[1]["value"]) == {k: v for k, v in FIRST.items() if k != "tags"}
    # errors.tolerance=none: the batch fails on them.
    with pytest.raises(Exception, match="a record value without a schema must be a JSON object"):
        chain.apply(batch, is_sink=True).select(F.count(F.col("value"))).collect()


def test_flatten_header_from_and_timestamp_converter(spark: SparkSession) -> None:
    nested = json.dumps({"id": 1, "a": {"b": {"c": 1, "d": [1, {"e": 2}]}, "f": None}, "g": {}})
    flat = _run(
        spark, _one("f", "Flatten$Value", delimiter="_"), _batch(spark, [nested, "{}", None, '{"x":1}'])
    )
    # Nested objects' keys joined by the delimiter; arrays (and what is in them) as they are.
    assert _values(flat) == {
        5: {"x": 1},
        10: {"id": 1, "a_b_c": 1, "a_b_d": [1, {"e": 2}], "a_f": None},
        11: {},
        12: None,
    }
    moved = _run(
        spark, _one("h", "HeaderFrom$Value", fields="id,address", headers="order_id,where", operation="move")
    )
    by_offset = {r["offset"]: r for r in moved}
    assert [(h["key"], h["value"]) for h in by_offset[10]["headers"]] == [
        ("trace", b"t1"),
        ("order_id", b"1"),
        ("where", b'{"city":"Oslo"}'),
    ]
    assert json.loads(by_offset[10]["value"]) == {
        k: v for k, v in FIRST.items() if k not in ("id", "address")
    }
    assert [(h["key"], h["value"]) for h in by_offset[11]["headers"]] == [("order_id", b"2"), ("where", None)]
    assert by_offset[12]["value"] is None and len(by_offset[12]["headers"]) == 1  # a tombstone passes
    stamps = _batch(spark, ['{"at":1772600767123}', '{"at":"2026-03-04"}', None, '{"at":"2026-01-01"}'])
    at = _one("t", "TimestampConverter$Value", field="at", target_type="string", format="yyyy-MM-dd")
    # A number is Unix time (milliseconds), a text is read with the format.
    assert _values(_run(spark, at, stamps)) == {
        5: {"at": "2026-01-01"},
        10: {"at": "2026-03-04"},
        11: {"at": "2026-03-04"},
        12: None,
    }
    whole = _one("t", "TimestampConverter$Value", target_type="unix", format="yyyy-MM-dd")
    chain = TransformChain.from_config(whole, built_in_plugins())
    batch = with_error_column(_batch(spark, ['"2026-03-04"', "86400000", None, '"soon"']))
    rows = sorted(chain.apply(batch, is_sink=True).collect(), key=lambda r: r["offset"])
    assert [r["value"] for r in rows] == [None, "1772582400000", "86400000", None]
    # A text the format does not read is the record's problem.
    assert [r["offset"] for r in rows if r[ERROR_COLUMN] is not None] == [5]


@pytest.mark.parametrize(
    ("kind", "keys", "message"),
    [
        ("SetSchemaMetadata$Value", {"schema_name": "x"}, "needs a record value with a schema"),
        (
            "TimestampConverter$Value",
            {"field": "id", "target_type": "Timestamp"},
            "JSON, which has no Timestamp",
        ),
    ],
)
def test_transforms_that_need_a_schema_say_so(
    spark: SparkSession, kind: str, keys: dict[str, str], message: str
) -> None:
    chain = TransformChain.from_config(_one("t", kind, **keys), built_in_plugins())
    with pytest.raises(ConnectException, match=message):
        chain.apply(_batch(spark), is_sink=True)
