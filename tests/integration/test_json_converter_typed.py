"""JsonConverter's typed columns on real Spark: a batch of envelopes becomes one typed column by
the schemas it holds (merged when they can be, refused naming both when not), plain JSON becomes
typed by a declared schema (Connect JSON or Spark DDL), and a source's typed column is written as
the envelope Kafka writes."""

from __future__ import annotations

import datetime as dt
import decimal

import pytest
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F  # noqa: N812 - Spark's usual alias
from pyspark.sql.types import StructType

from sluiceway.connect.data import (
    INT64_SCHEMA,
    OPTIONAL_STRING_SCHEMA,
    STRING_SCHEMA,
    Schema,
    array_schema,
    decimal_schema,
    envelope_from_bytes,
    envelope_to_bytes,
    map_schema,
    schema_to_json,
    struct_schema,
    timestamp_schema,
)
from sluiceway.connect.data.json_text import dumps
from sluiceway.connect.data.spark import from_spark_field, from_spark_value, to_spark_field
from sluiceway_executor.converters.base import Converter, ConverterError
from sluiceway_executor.converters.connect_spark_json import with_connect_schemas
from sluiceway_executor.converters.json_converter import JsonConverter, envelope_prefix
from sluiceway_executor.converters.registry import converter_for

pytestmark = pytest.mark.integration

V1 = struct_schema({"id": INT64_SCHEMA, "name": STRING_SCHEMA}, name="shop.Customer", version=1)
V2 = struct_schema(
    {"id": INT64_SCHEMA, "name": STRING_SCHEMA, "email": OPTIONAL_STRING_SCHEMA},
    name="shop.Customer",
    version=2,
)


def _envelopes() -> JsonConverter:
    # A converter keeps the schema it expects from batch to batch: each test starts afresh.
    return JsonConverter("value", {"schemas.enable": "true"})


def _batch(spark: SparkSession, values: list[bytes | None]) -> DataFrame:
    return spark.createDataFrame([(v,) for v in values], "value binary")


def _typed(converter: Converter, batch: DataFrame) -> tuple[DataFrame, Schema | None]:
    frame, schema = converter.connect_frame(batch, "value")
    return (with_connect_schemas(frame, {"value": schema}) if schema else frame), schema


def test_one_schema_in_a_batch_gives_a_typed_column(spark: SparkSession) -> None:
    values = [envelope_to_bytes(V1, {"id": i, "name": f"n{i}"}) for i in range(3)] + [None]
    frame, schema = _typed(_envelopes(), _batch(spark, values))
    assert schema == V1
    # The column says the schema is required; a tombstone is still a null in it.
    assert from_spark_field(frame.schema["value"]) == V1
    assert [None if r[0] is None else r[0].asDict() for r in frame.collect()] == [
        {"id": 0, "name": "n0"},
        {"id": 1, "name": "n1"},
        {"id": 2, "name": "n2"},
        None,
    ]


def test_an_added_optional_field_merges_and_older_records_read_it_as_null(spark: SparkSession) -> None:
    values = [
        envelope_to_bytes(V1, {"id": 1, "name": "a"}),
        envelope_to_bytes(V2, {"id": 2, "name": "b", "email": "e"}),
    ]
    frame, schema = _typed(_envelopes(), _batch(spark, values))
    assert schema == V2
    rows = sorted((r[0].asDict() for r in frame.collect()), key=lambda d: d["id"])
    assert rows == [{"id": 1, "name": "a", "email": None}, {"id": 2, "name": "b", "email": "e"}]


def test_schemas_that_do_not_merge_fail_naming_both(spark: SparkSession) -> None:
    changed = struct_schema({"id": STRING_SCHEMA, "name": STRING_SCHEMA}, name="shop.Customer", version=3)
    values = [
        envelope_to_bytes(V1, {"id": 1, "name": "a"}),
        envelope_to_bytes(changed, {"id": "x", "name": "b"}),
    ]
    with pytest.raises(ConverterError, match="field 'id' differs") as caught:
        _envelopes().connect_frame(_batch(spark, values), "value")
    message = str(caught.value)
    assert '"type":"int64"' in message and '"type":"string"' in message


def test_records_without_a_schema_stay_text_and_a_mix_is_refused(spark: SparkSession) -> None:
    schemaless = [b'{"schema":null,"payload":{"a":1}}', None]
    frame, schema = _typed(_envelopes(), _batch(spark, schemaless))
    assert schema is None
    assert [r[0] for r in frame.collect()] == ['{"a":1}', None]
    mixed = [*schemaless, envelope_to_bytes(V1, {"id": 1, "name": "a"})]
    with pytest.raises(ConverterError, match="mixes records with a schema and records without one"):
        _envelopes().connect_frame(_batch(spark, mixed), "value")


def test_plain_json_is_typed_by_a_declared_connect_schema(spark: SparkSession) -> None:
    declared = struct_schema(
        {"id": INT64_SCHEMA, "amount": decimal_schema(2, precision=9), "at": timestamp_schema(optional=True)}
    )
    config = {
        "value.converter": "JsonConverter",
        "value.converter.schemas.enable": "false",
        "value.schema": dumps(schema_to_json(declared)).decode(),
    }
    converter = converter_for(config, "value")
    assert isinstance(converter, JsonConverter)
    batch = _batch(spark, [b'{"id":7,"amount":"MDk=","at":86400000}', b'{"id":8,"amount":1.5,"at":null}'])
    frame, schema = _typed(converter, batch)
    assert schema == declared
    assert [from_spark_value(declared, r[0]) for r in frame.collect()] == [
        {"id": 7, "amount": decimal.Decimal("123.45"), "at": dt.datetime(1970, 1, 2, tzinfo=dt.UTC)},
        {"id": 8, "amount": decimal.Decimal("1.50"), "at": None},
    ]


def test_plain_json_is_typed_by_declared_spark_ddl(spark: SparkSession) -> None:
    converter = converter_for(
        {
            "value.converter.schemas.enable": "false",
            "value.schema": "id BIGINT, tags ARRAY<STRING>, ok BOOLEAN",
        },
        "value",
    )
    frame, schema = _typed(converter, _batch(spark, [b'{"id":1,"tags":["a"],"ok":true}', b"null"]))
    assert schema is not None and [f.name for f in schema.fields] == ["id", "tags", "ok"]
    assert [None if r[0] is None else r[0].asDict() for r in frame.collect()] == [
        {"id": 1, "tags": ["a"], "ok": True},
        None,
    ]
    bad = converter_for({"value.converter.schemas.enable": "false", "value.schema": "id BIGNUMBER"}, "value")
    with pytest.raises(ConverterError, match=r"value\.schema is not Spark DDL"):
        bad.connect_frame(_batch(spark, [b"{}"]), "value")


def test_a_declared_schema_with_envelopes_is_refused() -> None:
    with pytest.raises(ConverterError, match=r"value\.schema declares the schema of plain JSON"):
        converter_for(
            {
                "value.converter": "JsonConverter",
                "value.converter.schemas.enable": "true",
                "value.schema": "id BIGINT",
            },
            "value",
        )


def test_a_sources_typed_column_is_written_as_kafkas_envelope(spark: SparkSession) -> None:
    field = to_spark_field("value", V2)
    rows = [{"id": 1, "name": "a", "email": None}, {"id": 2, "name": "b", "email": "e@x"}]
    frame = spark.createDataFrame([(r,) for r in rows], StructType([field]))
    written = [
        r[0]
        for r in frame.select(
            _envelopes().from_connect_field(F.col("value"), frame.schema["value"])
        ).collect()
    ]
    assert written == [envelope_to_bytes(V2, r) for r in rows]
    assert [envelope_from_bytes(w)[1] for w in written] == rows
    plain = JsonConverter("value", {"schemas.enable": "false"})
    texts = [
        r[0] for r in frame.select(plain.from_connect_field(F.col("value"), frame.schema["value"])).collect()
    ]
    assert texts == [b'{"id":1,"name":"a","email":null}', b'{"id":2,"name":"b","email":"e@x"}']


# -- the expected schema: no scan while the records keep it --

RICH = struct_schema(
    {
        "id": INT64_SCHEMA,
        "prix_€": decimal_schema(2, 10),
        "at": timestamp_schema(optional=True),
        "tags": array_schema(STRING_SCHEMA, optional=True),
        "attrs": map_schema(STRING_SCHEMA, OPTIONAL_STRING_SCHEMA, optional=True),
        "address": struct_schema({"city": STRING_SCHEMA}, name="shop.Address", optional=True, doc="where"),
    },
    name="shop.Order",
    version=3,
    doc='an "order" / commande',
)


def _rich(i: int) -> bytes:
    value = {
        "id": i,
        "prix_€": decimal.Decimal(f"{i}.25"),
        "at": dt.datetime(2026, 11, 27, 3, 0, i % 60, tzinfo=dt.UTC),
        "tags": ["a", "é"],
        "attrs": {"k": None},
        "address": {"city": "Zürich"},
    }
    encoded = envelope_to_bytes(RICH, value)
    assert encoded is not None
    return encoded


def test_a_sampled_records_schema_is_read_without_a_scan(spark: SparkSession) -> None:
    converter = _envelopes()
    converter.expect(_rich(99))
    assert converter.expecting() and not converter.scans_batch()
    frame, schema = _typed(converter, _batch(spark, [_rich(i) for i in range(3)] + [None]))
    assert schema == RICH
    # Every record passed the check: each begins with the sample's text up to its payload.
    rows = [r[0] for r in frame.collect()]
    assert [None if r is None else (r["id"], r["prix_€"], r["address"]["city"]) for r in rows] == [
        (0, decimal.Decimal("0.25"), "Zürich"),
        (1, decimal.Decimal("1.25"), "Zürich"),
        (2, decimal.Decimal("2.25"), "Zürich"),
        None,
    ]


def test_a_scanned_batch_of_one_schema_leaves_it_expected(spark: SparkSession) -> None:
    converter = _envelopes()
    assert converter.scans_batch()
    _typed(converter, _batch(spark, [_rich(1), _rich(2)]))
    assert converter.expecting() and not converter.scans_batch()
    # Read on the expected schema: the next batch, of the same schema, needs no scan.
    frame, schema = _typed(converter, _batch(spark, [_rich(3)]))
    assert schema == RICH and frame.collect()[0][0]["id"] == 3
    # A batch of two schemas (merged) leaves nothing expected: the next one is scanned.
    converter.forget_expected()
    v1 = envelope_to_bytes(V1, {"id": 1, "name": "a"})
    v2 = envelope_to_bytes(V2, {"id": 2, "name": "b", "email": "e"})
    _typed(converter, _batch(spark, [v1, v2]))
    assert not converter.expecting() and converter.scans_batch()


def test_a_record_of_another_schema_fails_the_expected_read_then_the_batch_reads_on_its_own(
    spark: SparkSession,
) -> None:
    converter = _envelopes()
    v1 = envelope_to_bytes(V1, {"id": 1, "name": "a"})
    v2 = envelope_to_bytes(V2, {"id": 2, "name": "b", "email": "e"})
    schemaless = b'{"schema":null,"payload":{"id":3,"name":"c"}}'
    assert v1 is not None
    for other in (v2, schemaless):
        converter.expect(v1)
        frame, schema = _typed(converter, _batch(spark, [v1, other]))
        assert schema == V1
        with pytest.raises(Exception, match="a record's schema is not the one its batch was read with"):
            frame.collect()
        converter.forget_expected()
    # What the sink pipeline does next: the batch read on its own schemas.
    frame, schema = _typed(converter, _batch(spark, [v1, v2]))
    assert schema == V2
    assert sorted((r[0]["id"], r[0]["email"]) for r in frame.collect()) == [(1, None), (2, "e")]


def _numeric_decimal(record: bytes) -> bytes:
    """``record`` (one of ``_rich``) with its decimal written as a JSON number, as Kafka's
    JsonConverter writes it with decimal.format=NUMERIC."""
    value = envelope_from_bytes(record)[1]
    assert value is not None
    head, _, tail = record.decode().partition('"prix_€":')
    _, _, rest = tail.partition(",")
    return f'{head}"prix_€":{value["prix_€"]},{rest}'.encode()


def test_decimals_expected_as_base64_read_as_the_variant_path_does_and_a_number_fails_the_read(
    spark: SparkSession,
) -> None:
    # Expected from a sample whose decimal is base64 (Kafka's default): the batch's decimals are
    # decoded by the parser, the values those read through a variant give.
    converter = _envelopes()
    records: list[bytes | None] = [_rich(i) for i in (0, 1, 127, 128, 32767, 32768, -1, -129)]
    converter.expect(_rich(5))
    fast, _ = _typed(converter, _batch(spark, records))
    converter.forget_expected()
    scanned, _ = _typed(converter, _batch(spark, records))  # a scan reads either form
    assert fast.collect() == scanned.collect()
    assert [r[0]["prix_€"] for r in fast.collect()][-3:] == [
        decimal.Decimal(t) for t in ("32768.25", "-1.25", "-129.25")
    ]
    # A record whose decimal is a number fails the read expected as base64...
    numeric = _numeric_decimal(_rich(7))
    converter.expect(_rich(5))
    frame, _ = _typed(converter, _batch(spark, [_rich(6), numeric]))
    with pytest.raises(Exception, match=r"(?i)parse|binary"):
        frame.collect()
    # ...and the batch read on its own schemas (what the sink pipeline does next) reads both.
    converter.forget_expected()
    frame, _ = _typed(converter, _batch(spark, [_rich(6), numeric]))
    assert [r[0]["prix_€"] for r in frame.collect()] == [decimal.Decimal("6.25"), decimal.Decimal("7.25")]


def test_a_sample_with_a_numeric_decimal_expects_either_form(spark: SparkSession) -> None:
    converter = _envelopes()
    converter.expect(_numeric_decimal(_rich(5)))
    assert converter.expecting()
    frame, schema = _typed(converter, _batch(spark, [_numeric_decimal(_rich(1)), _rich(2)]))
    assert schema == RICH
    assert [r[0]["prix_€"] for r in frame.collect()] == [decimal.Decimal("1.25"), decimal.Decimal("2.25")]


def test_samples_that_are_not_envelopes_laid_out_as_kafkas_are_not_expected() -> None:
    converter = _envelopes()
    schema = dumps(schema_to_json(V1)).decode()
    others = (
        None,
        b"not json",
        b'{"payload": 1}',
        b'{"schema":null,"payload":1}',
        b"[1]",
        b"\xff",
        f'{{"schema": {schema}, "payload": 1}}'.encode(),  # spaces
        f'{{"payload":1,"schema":{schema}}}'.encode(),  # payload first
        f'{{"schema":{schema}}}'.encode(),
    )
    for sample in others:
        converter.expect(sample)
        assert not converter.expecting(), sample
    plain = JsonConverter("value", {"schemas.enable": "false"})
    plain.expect(envelope_to_bytes(V1, {"id": 1, "name": "a"}))
    assert not plain.expecting()


def test_an_envelopes_prefix_ends_where_its_schema_object_does() -> None:
    # A parameter whose text looks like the end of the schema does not cut it short.
    schema = '{"type":"bytes","parameters":{"x":"}","y":",\\"payload\\":"},"optional":false}'
    text = '{"schema":' + schema + ',"payload":"AQ=="}'
    assert envelope_prefix(text) == ('{"schema":' + schema + ',"payload":', schema)
    assert envelope_prefix('{"schema":{"type":"int32"} ,"payload":1}') is None
