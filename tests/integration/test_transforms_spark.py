"""Kafka Connect's transforms and predicates as Spark expressions, on real Spark Connect: a sink
batch laid out as the sink pipeline hands it over (typed value with its Connect schema, headers)
goes through chains configured with Kafka's class names, and each output is what Kafka's
documentation gives for the same records."""

from __future__ import annotations

import datetime as dt
import decimal
from collections.abc import Mapping
from typing import Any

import pytest
from pyspark.sql import DataFrame, Row, SparkSession
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

from sluiceway.connect import ConfigException, ConnectException
from sluiceway.connect.data import (
    FLOAT64_SCHEMA,
    INT32_SCHEMA,
    INT64_SCHEMA,
    OPTIONAL_INT32_SCHEMA,
    OPTIONAL_INT64_SCHEMA,
    OPTIONAL_STRING_SCHEMA,
    STRING_SCHEMA,
    Schema,
    array_schema,
    date_schema,
    decimal_schema,
    struct_schema,
    time_schema,
    timestamp_schema,
)
from sluiceway.connect.data.spark import from_spark_field, to_spark_value
from sluiceway_executor.converters.connect_spark_json import column_field
from sluiceway_executor.transforms import built_in_plugins
from sluiceway_executor.transforms.chain import TransformChain

pytestmark = pytest.mark.integration

ADDRESS = struct_schema({"city": STRING_SCHEMA, "zip": OPTIONAL_STRING_SCHEMA}, optional=True)
ORDER = struct_schema(
    {"id": INT64_SCHEMA, "name": STRING_SCHEMA, "amount": decimal_schema(2, 10), "address": ADDRESS},
    name="shop.Order",
    version=3,
)
HEADER = StructType([StructField("key", StringType()), StructField("value", BinaryType())])
T0 = dt.datetime(2026, 3, 4, 5, 6, 7, 123000, tzinfo=dt.UTC)


def _batch(spark: SparkSession) -> DataFrame:
    """Three records of topic orders-eu (one a tombstone) and one of topic audit."""
    schema = StructType(
        [
            StructField("topic", StringType()),
            StructField("partition", IntegerType()),
            StructField("offset", LongType()),
            StructField("timestamp", TimestampType()),
            StructField("key", StringType()),
            column_field("value", ORDER),
            StructField("headers", ArrayType(HEADER)),
        ]
    )

    def order(i: int, city: str | None) -> Row:
        address = None if city is None else Row(city=city, zip=None if i % 2 else f"{i}000")
        return Row(id=i, name=f"n{i}", amount=decimal.Decimal(f"{i}.25"), address=address)

    rows = [
        ("orders-eu", 0, 10, T0, "k1", order(1, "Oslo"), [Row(key="trace", value=b"t1")]),
        ("orders-eu", 1, 11, T0 + dt.timedelta(days=1), "k2", order(2, None), []),
        ("orders-eu", 1, 12, T0, "k3", None, [Row(key="trace", value=b"t3"), Row(key="x", value=b"y")]),
        ("audit", 0, 5, T0, "k4", order(4, "Lima"), None),
    ]
    return spark.createDataFrame(rows, schema)


def _run(spark: SparkSession, props: Mapping[str, str]) -> tuple[list[Row], DataFrame]:
    chain = TransformChain.from_config(props, built_in_plugins())
    out = chain.apply(_batch(spark), is_sink=True)
    return sorted(out.collect(), key=lambda r: r["offset"]), out


def _value_schema(out: DataFrame) -> Schema:
    return from_spark_field(out.schema["value"])


def _one(alias: str, kind: str, **keys: str) -> dict[str, str]:
    return {
        "transforms": alias,
        f"transforms.{alias}.type": kind,
        **{f"transforms.{alias}.{k.replace('_', '.')}": v for k, v in keys.items()},
    }


def test_insert_field_adds_the_records_topic_partition_offset_timestamp_and_a_static_text(
    spark: SparkSession,
) -> None:
    props = _one(
        "meta",
        "org.apache.kafka.connect.transforms.InsertField$Value",
        topic_field="src_topic!",
        partition_field="src_partition",
        offset_field="src_offset?",
        timestamp_field="src_time",
        static_field="origin",
        static_value="eu-west",
    )
    rows, out = _run(spark, props)
    expected = struct_schema(
        [
            *((f.name, f.schema) for f in ORDER.fields),
            ("src_topic", STRING_SCHEMA),
            ("src_partition", OPTIONAL_INT32_SCHEMA),
            ("src_offset", OPTIONAL_INT64_SCHEMA),
            ("src_time", timestamp_schema(optional=True)),
            ("origin", OPTIONAL_STRING_SCHEMA),
        ],
        name="shop.Order",
        version=3,
    )
    assert _value_schema(out) == expected
    second = rows[2]["value"]
    assert (second.src_topic, second.src_partition, second.src_offset, second.origin) == (
        "orders-eu",
        1,
        11,
        "eu-west",
    )
    assert second.src_time == (T0 + dt.timedelta(days=1)).astimezone().replace(tzinfo=None)
    assert second.id == 2 and second.address is None
    # A tombstone stays a tombstone.
    assert rows[3]["value"] is None


def test_replace_field_excludes_includes_and_renames(spark: SparkSession) -> None:
    props = {
        "transforms": "drop,keep",
        "transforms.drop.type": "org.apache.kafka.connect.transforms.ReplaceField$Value",
        "transforms.drop.exclude": "address",
        "transforms.drop.renames": "id:order_id,name:customer",
        "transforms.keep.type": "ReplaceField$Value",
        "transforms.keep.include": "order_id,amount",
    }
    rows, out = _run(spark, props)
    assert _value_schema(out) == struct_schema(
        {"order_id": INT64_SCHEMA, "amount": decimal_schema(2, 10)},
        name="shop.Order",
        version=3,
    )
    assert [r["value"] and (r["value"].order_id, r["value"].amount) for r in rows] == [
        (4, decimal.Decimal("4.25")),
        (1, decimal.Decimal("1.25")),
        (2, decimal.Decimal("2.25")),
        None,
    ]


def test_mask_field_gives_empty_values_or_the_replacement(spark: SparkSession) -> None:
    props = {
        "transforms": "hide,stars",
        "transforms.hide.type": "org.apache.kafka.connect.transforms.MaskField$Value",
        "transforms.hide.fields": "name,amount",
        "transforms.stars.type": "MaskField$Value",
        "transforms.stars.fields": "id",
        "transforms.stars.replacement": "-1",
    }
    rows, out = _run(spark, props)
    assert _value_schema(out) == ORDER
    value = rows[1]["value"]
    assert (value.id, value.name, value.amount) == (-1, "", decimal.Decimal("0.00"))
    assert value.address == Row(city="Oslo", zip=None) and rows[1]["key"] == "k1"
    assert rows[3]["value"] is None


def test_cast_fields_and_a_whole_extracted_value(spark: SparkSession) -> None:
    rows, out = _run(
        spark, _one("c", "org.apache.kafka.connect.transforms.Cast$Value", spec="id:string,amount:float64")
    )
    schema = _value_schema(out)
    assert schema.field("id").schema == STRING_SCHEMA  # type: ignore[union-attr]
    assert schema.field("amount").schema == FLOAT64_SCHEMA  # type: ignore[union-attr]
    assert (rows[1]["value"].id, rows[1]["value"].amount) == ("1", 1.25)
    props = {
        "transforms": "pick,narrow",
        "transforms.pick.type": "org.apache.kafka.connect.transforms.ExtractField$Value",
        "transforms.pick.field": "id",
        "transforms.narrow.type": "Cast$Value",
        "transforms.narrow.spec": "int32",
    }
    rows, out = _run(spark, props)
    assert _value_schema(out) == INT32_SCHEMA
    assert [r["value"] for r in rows] == [4, 1, 2, None]


def test_value_to_key_flatten_extract_and_hoist(spark: SparkSession) -> None:
    props = {
        "transforms": "key,flat",
        "transforms.key.type": "org.apache.kafka.connect.transforms.ValueToKey",
        "transforms.key.fields": "id,name",
        "transforms.flat.type": "org.apache.kafka.connect.transforms.Flatten$Value",
        "transforms.flat.delimiter": "_",
    }
    rows, out = _run(spark, props)
    key_schema = from_spark_field(out.schema["key"])
    assert key_schema == struct_schema({"id": INT64_SCHEMA, "name": STRING_SCHEMA})
    assert rows[1]["key"].id == 1 and rows[1]["key"].name == "n1"
    # A tombstone's key: Kafka fails the record, this one leaves it null.
    assert rows[3]["key"] is None
    assert _value_schema(out) == struct_schema(
        [
            ("id", INT64_SCHEMA),
            ("name", STRING_SCHEMA),
            ("amount", decimal_schema(2, 10)),
            ("address_city", OPTIONAL_STRING_SCHEMA),
            ("address_zip", OPTIONAL_STRING_SCHEMA),
        ],
        name="shop.Order",
        version=3,
    )
    assert (rows[1]["value"].address_city, rows[1]["value"].address_zip) == ("Oslo", None)
    assert rows[0]["value"].address_zip == "4000"
    assert rows[3]["value"] is None
    props = {
        "transforms": "pick,wrap",
        "transforms.pick.type": "ExtractField$Value",
        "transforms.pick.field": "address",
        "transforms.wrap.type": "org.apache.kafka.connect.transforms.HoistField$Value",
        "transforms.wrap.field": "where",
    }
    rows, out = _run(spark, props)
    assert _value_schema(out) == struct_schema([("where", ADDRESS)])
    assert [r["value"].where for r in rows] == [
        Row(city="Lima", zip="4000"),
        Row(city="Oslo", zip=None),
        None,
        None,
    ]


def test_set_schema_metadata_changes_the_name_and_version_only(spark: SparkSession) -> None:
    rows, out = _run(
        spark,
        _one(
            "meta",
            "org.apache.kafka.connect.transforms.SetSchemaMetadata$Value",
            schema_name="shop.OrderV4",
            schema_version="4",
        ),
    )
    assert _value_schema(out) == ORDER.with_options(name="shop.OrderV4", version=4)
    assert rows[1]["value"].name == "n1"


def test_routers_rename_topics(spark: SparkSession) -> None:
    rows, _ = _run(
        spark,
        _one(
            "route",
            "org.apache.kafka.connect.transforms.RegexRouter",
            regex="orders-(.*)",
            replacement="shop.$1.orders",
        ),
    )
    assert [r["topic"] for r in rows] == ["audit", "shop.eu.orders", "shop.eu.orders", "shop.eu.orders"]
    rows, _ = _run(spark, _one("day", "org.apache.kafka.connect.transforms.TimestampRouter"))
    assert [r["topic"] for r in rows] == [
        "audit-20260304",
        "orders-eu-20260304",
        "orders-eu-20260305",
        "orders-eu-20260304",
    ]
    rows, _ = _run(
        spark,
        _one(
            "hour", "TimestampRouter", topic_format="${timestamp}/${topic}", timestamp_format="yyyy-MM-dd_HH"
        ),
    )
    assert rows[0]["topic"] == "2026-03-04_05/audit"


def test_filter_with_predicates_and_negate(spark: SparkSession) -> None:
    props = {
        "predicates": "isAudit,tombstone",
        "predicates.isAudit.type": "org.apache.kafka.connect.transforms.predicates.TopicNameMatches",
        "predicates.isAudit.pattern": "aud.*",
        "predicates.tombstone.type": "org.apache.kafka.connect.transforms.predicates.RecordIsTombstone",
        "transforms": "dropAudit,dropTombstones",
        "transforms.dropAudit.type": "org.apache.kafka.connect.transforms.Filter",
        "transforms.dropAudit.predicate": "isAudit",
        "transforms.dropTombstones.type": "Filter",
        "transforms.dropTombstones.predicate": "tombstone",
    }
    rows, _ = _run(spark, props)
    assert [r["offset"] for r in rows] == [10, 11]
    # negate: keep only the audit records.
    props["transforms"] = "dropAudit"
    props["transforms.dropAudit.negate"] = "true"
    rows, _ = _run(spark, props)
    assert [r["offset"] for r in rows] == [5]
    # The pattern must match the whole topic.
    props["predicates.isAudit.pattern"] = "aud"
    rows, _ = _run(spark, props)
    assert rows == []


def test_headers_inserted_dropped_and_tested(spark: SparkSession) -> None:
    props = {
        "predicates": "traced",
        "predicates.traced.type": "org.apache.kafka.connect.transforms.predicates.HasHeaderKey",
        "predicates.traced.name": "trace",
        "transforms": "drop,mark",
        "transforms.drop.type": "org.apache.kafka.connect.transforms.DropHeaders",
        "transforms.drop.headers": "x",
        "transforms.mark.type": "org.apache.kafka.connect.transforms.InsertHeader",
        "transforms.mark.header": "seen",
        "transforms.mark.value.literal": "yes",
        "transforms.mark.predicate": "traced",
    }
    rows, _ = _run(spark, props)
    headers = {r["offset"]: [(h.key, bytes(h.value)) for h in r["headers"] or []] for r in rows}
    assert headers == {
        5: [],
        10: [("trace", b"t1"), ("seen", b"yes")],
        11: [],
        12: [("trace", b"t3"), ("seen", b"yes")],
    }


def test_a_transform_that_changes_the_schema_under_a_predicate_is_refused(spark: SparkSession) -> None:
    props = {
        "predicates": "isAudit",
        "predicates.isAudit.type": "TopicNameMatches",
        "predicates.isAudit.pattern": "audit",
        **_one("add", "InsertField$Value", static_field="origin", static_value="x"),
        "transforms.add.predicate": "isAudit",
    }
    chain = TransformChain.from_config(props, built_in_plugins())
    with pytest.raises(ConnectException, match="'add' applies only where predicate 'isAudit' holds"):
        chain.apply(_batch(spark), is_sink=True)


def test_a_transform_on_a_key_that_is_no_json_object_fails_the_batch_saying_why(spark: SparkSession) -> None:
    # The batch's keys are plain text without a schema (test_transforms_schemaless.py has JSON ones).
    chain = TransformChain.from_config(
        _one("add", "InsertField$Key", static_field="f", static_value="v"), built_in_plugins()
    )
    with pytest.raises(Exception, match="a record key without a schema must be a JSON object"):
        chain.apply(_batch(spark), is_sink=True).collect()


@pytest.mark.parametrize(
    ("props", "key", "message"),
    [
        (_one("a", "NoSuchTransform"), "transforms.a.type", "no transform is named NoSuchTransform"),
        ({"transforms": "a"}, "transforms.a.type", "missing"),
        (_one("a", "Filter", predicate="p"), "transforms.a.predicate", "no predicate of that alias"),
        (_one("a", "Filter", negate="true"), "transforms.a.negate", "needs a predicate"),
        (_one("a", "Cast$Value", spec="id:decimal"), "transforms.a.spec", "not a type to cast to"),
        (_one("a", "ReplaceField$Value", renames="a-b"), "transforms.a.renames", "old:new"),
        (_one("a", "InsertField$Value"), "transforms.a.topic.field", "at least one field"),
        ({"transforms": "a,a"}, "transforms", "more than once"),
    ],
)
def test_bad_chain_configs_name_the_key(props: dict[str, Any], key: str, message: str) -> None:
    with pytest.raises(ConfigException, match=message) as caught:
        TransformChain.from_config(props, built_in_plugins())
    assert caught.value.name == key


def test_timestamp_converter_between_every_form(spark: SparkSession) -> None:
    at = {
        "transforms.at.type": "InsertField$Value",
        "transforms.at.timestamp.field": "at!",
    }

    def converted(*steps: tuple[str, dict[str, str]]) -> list[Any]:
        props = {"transforms": ",".join(["at", *(alias for alias, _ in steps)]), **at}
        for alias, keys in steps:
            props[f"transforms.{alias}.type"] = "org.apache.kafka.connect.transforms.TimestampConverter$Value"
            props.update({f"transforms.{alias}.{k}": v for k, v in {"field": "at", **keys}.items()})
        rows, _ = _run(spark, props)
        return [r["value"] and r["value"].at for r in rows]

    text = {"target.type": "string", "format": "yyyy-MM-dd HH:mm:ss.SSS"}
    assert converted(("text", text)) == [
        "2026-03-04 05:06:07.123",
        "2026-03-04 05:06:07.123",
        "2026-03-05 05:06:07.123",
        None,
    ]
    millis = int(T0.timestamp() * 1000)
    assert converted(("unix", {"target.type": "unix"})) == [millis, millis, millis + 86_400_000, None]
    seconds = {"target.type": "unix", "unix.precision": "seconds"}
    assert converted(("unix", seconds))[0] == millis // 1000
    assert converted(("day", {"target.type": "Date"}))[:3] == [
        dt.date(2026, 3, 4),
        dt.date(2026, 3, 4),
        dt.date(2026, 3, 5),
    ]
    assert converted(("time", {"target.type": "Time"}))[0] == ((5 * 60 + 6) * 60 + 7) * 1000 + 123
    # Text back to a Timestamp, then to a Unix number: the same instant, in UTC.
    back = ("back", {"target.type": "Timestamp", "format": "yyyy-MM-dd HH:mm:ss.SSS"})
    assert converted(("text", text), back, ("unix", {"target.type": "unix"}))[0] == millis
    # A Date back to a Timestamp is its midnight, UTC.
    midnight = int(dt.datetime(2026, 3, 4, tzinfo=dt.UTC).timestamp() * 1000)
    assert converted(("day", {"target.type": "Date"}), ("ts", {"target.type": "unix"}))[0] == midnight


def test_header_from_moves_or_copies_fields_into_headers(spark: SparkSession) -> None:
    props = _one(
        "lift",
        "org.apache.kafka.connect.transforms.HeaderFrom$Value",
        fields="id,name",
        headers="order_id,order_name",
        operation="move",
    )
    rows, out = _run(spark, props)
    assert [f.name for f in _value_schema(out).fields] == ["amount", "address"]
    headers = {r["offset"]: [(h.key, h.value and bytes(h.value)) for h in r["headers"] or []] for r in rows}
    assert headers[5] == [("order_id", b"4"), ("order_name", b"n4")]
    assert headers[10] == [("trace", b"t1"), ("order_id", b"1"), ("order_name", b"n1")]
    assert headers[12][-2:] == [("order_id", None), ("order_name", None)]
    props["transforms.lift.operation"] = "copy"
    _, out = _run(spark, props)
    assert _value_schema(out) == ORDER


def test_header_from_writes_structs_as_json_and_times_in_iso_8601(spark: SparkSession) -> None:
    event = struct_schema(
        {
            "at": timestamp_schema(),
            "day": date_schema(),
            "time": time_schema(),
            "place": ADDRESS,
            "tags": array_schema(STRING_SCHEMA),
        },
        name="event",
    )
    value = Row(
        at=T0,
        day=dt.date(2026, 3, 4),
        time=dt.time(5, 6, 7, 123000),
        place=Row(city="Oslo", zip=None),
        tags=["a", "b"],
    )
    schema = StructType(
        [
            StructField("topic", StringType()),
            StructField("offset", LongType()),
            column_field("value", event),
            StructField("headers", ArrayType(HEADER)),
        ]
    )
    frame = spark.createDataFrame(
        [("events", 1, to_spark_value(event, value.asDict(recursive=True)), [])], schema
    )
    props = _one(
        "lift",
        "org.apache.kafka.connect.transforms.HeaderFrom$Value",
        fields="at,day,time,place,tags",
        headers="at,day,time,place,tags",
        operation="copy",
    )
    (row,) = TransformChain.from_config(props, built_in_plugins()).apply(frame, is_sink=True).collect()
    assert {h.key: bytes(h.value).decode() for h in row["headers"]} == {
        "at": "2026-03-04T05:06:07.123Z",
        "day": "2026-03-04",
        "time": "05:06:07.123Z",
        # Kafka's struct text is compact JSON that keeps its nulls.
        "place": '{"city":"Oslo","zip":null}',
        "tags": '["a","b"]',
    }


def test_sql_sets_record_parts_and_keeps_what_where_holds_for(spark: SparkSession) -> None:
    props = _one(
        "sql",
        "Sql",
        select=(
            "named_struct('id', value.id, 'who', upper(value.name)) AS value, concat(topic, '-eu') AS topic"
        ),
        where="value.id > 1 AND topic = 'orders-eu'",
    )
    rows, out = _run(spark, props)
    # Record 1 has id 1, record 4 another topic, record 3 is a tombstone (the condition is null).
    assert [(r["offset"], r["topic"], r["value"].id, r["value"].who) for r in rows] == [
        (11, "orders-eu-eu", 2, "N2")
    ]
    assert [f.name for f in _value_schema(out).fields] == ["id", "who"]
    assert rows[0]["key"] == "k2" and rows[0]["partition"] == 1
    # where alone keeps every part, schema included.
    rows, out = _run(spark, _one("sql", "Sql", where="topic = 'audit'"))
    assert [r["offset"] for r in rows] == [5] and _value_schema(out) == ORDER


def test_sql_a_field_the_value_lacks_fails_the_batch_by_name(spark: SparkSession) -> None:
    chain = TransformChain.from_config(_one("sql", "Sql", where="value.nope > 1"), built_in_plugins())
    with pytest.raises(ConnectException, match=r"transform 'sql' \(Sql\): .*nope"):
        chain.apply(_batch(spark), is_sink=True)


@pytest.mark.parametrize(
    ("keys", "key", "message"),
    [
        (
            {"select": "upper(value.name AS value"},
            "transforms.s.select",
            "Expecting \\) at line 1, column 19",
        ),
        (
            {"where": "nope > 1"},
            "transforms.s.where",
            "'nope' at line 1, column 1 is not a part of the record",
        ),
        ({"select": "upper(value.name) AS name"}, "transforms.s.select", "sets no record part"),
        ({"select": "value AS value, key AS value"}, "transforms.s.select", "value is set twice"),
        ({}, "transforms.s.select", "set select, where or both"),
        (
            {"where": "topic = 'a'", "predicate": "p"},
            "transforms.s.predicate",
            "takes no predicate",
        ),
    ],
)
def test_sql_is_checked_before_any_batch(keys: dict[str, str], key: str, message: str) -> None:
    props = {
        "transforms": "s",
        "transforms.s.type": "Sql",
        "predicates": "p",
        "predicates.p.type": "RecordIsTombstone",
        **{f"transforms.s.{k}": v for k, v in keys.items()},
    }
    with pytest.raises(ConfigException, match=message) as caught:
        TransformChain.from_config(props, built_in_plugins())
    assert caught.value.name == key
