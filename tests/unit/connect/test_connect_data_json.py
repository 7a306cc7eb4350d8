"""Kafka's JsonConverter format: golden records, the Java number text, and reading back.

The golden bytes were written by hand from Kafka's JsonConverter.asJsonSchema and convertToJson
(apache/kafka trunk): a schema object is type, then items / keys, values / fields, then optional,
name, version, doc, parameters, default; a struct field is its schema's object with "field"
appended; the envelope is schema then payload; Jackson writes compactly. Their number, text and
base64 parts were checked by rewriting them with Jackson 2.21 on JDK 17.
"""

from __future__ import annotations

import datetime as dt
import decimal
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sluiceway.connect.data import (
    BOOLEAN_SCHEMA,
    BYTES_SCHEMA,
    FLOAT32_SCHEMA,
    FLOAT64_SCHEMA,
    INT8_SCHEMA,
    INT16_SCHEMA,
    INT32_SCHEMA,
    INT64_SCHEMA,
    OPTIONAL_INT32_SCHEMA,
    OPTIONAL_STRING_SCHEMA,
    STRING_SCHEMA,
    DataException,
    Schema,
    Type,
    array_schema,
    date_schema,
    decimal_schema,
    envelope_from_bytes,
    envelope_to_bytes,
    map_schema,
    schema_from_json,
    schema_to_json,
    struct_schema,
    time_schema,
    timestamp_schema,
    value_from_json,
    value_to_json,
)
from sluiceway.connect.data.json_text import dumps, java_double_text, java_float_text, loads
from tests.unit.connect.connect_data_strategies import schemas, values, with_defaults

ORDER = struct_schema(
    [
        ("id", INT64_SCHEMA),
        ("amount", decimal_schema(2)),
        ("created", timestamp_schema()),
        ("day", date_schema()),
        ("at", time_schema()),
        ("note", OPTIONAL_STRING_SCHEMA),
        ("tags", array_schema(STRING_SCHEMA)),
        ("counts", map_schema(STRING_SCHEMA, INT32_SCHEMA)),
        ("ratio", FLOAT32_SCHEMA),
        ("score", FLOAT64_SCHEMA),
        ("ok", BOOLEAN_SCHEMA),
        ("raw", BYTES_SCHEMA),
        ("small", INT8_SCHEMA),
        ("medium", INT16_SCHEMA),
        ("retries", OPTIONAL_INT32_SCHEMA.with_options(default=7)),
        ("parent", struct_schema([("id", INT32_SCHEMA)], optional=True, name="com.example.Ref")),
    ],
    name="com.example.Order",
    version=2,
    doc="an order",
)
ORDER_VALUE: dict[str, Any] = {
    "id": 42,
    "amount": decimal.Decimal("12.34"),
    "created": dt.datetime(2023, 11, 14, 22, 13, 20, 123000, tzinfo=dt.UTC),
    "day": dt.date(2023, 11, 14),
    "at": dt.time(1, 2, 3, 456000),
    "note": 'Zo\u00eb "q"\n\x01',
    "tags": ["a", "b"],
    "counts": {"x": 1},
    "ratio": 12.34,
    "score": 1e-4,
    "ok": True,
    "raw": b"\x00\xff",
    "small": -5,
    "medium": 300,
    "retries": None,
    "parent": None,
}
ORDER_BYTES = (
    '{"schema":{"type":"struct","fields":['
    '{"type":"int64","optional":false,"field":"id"},'
    '{"type":"bytes","optional":false,"name":"org.apache.kafka.connect.data.Decimal","version":1,'
    '"parameters":{"scale":"2"},"field":"amount"},'
    '{"type":"int64","optional":false,"name":"org.apache.kafka.connect.data.Timestamp","version":1,'
    '"field":"created"},'
    '{"type":"int32","optional":false,"name":"org.apache.kafka.connect.data.Date","version":1,"field":"day"},'
    '{"type":"int32","optional":false,"name":"org.apache.kafka.connect.data.Time","version":1,"field":"at"},'
    '{"type":"string","optional":true,"field":"note"},'
    '{"type":"array","items":{"type":"string","optional":false},"optional":false,"field":"tags"},'
    '{"type":"map","keys":{"type":"string","optional":false},"values":{"type":"int32","optional":false},'
    '"optional":false,"field":"counts"},'
    '{"type":"float","optional":false,"field":"ratio"},'
    '{"type":"double","optional":false,"field":"score"},'
    '{"type":"boolean","optional":false,"field":"ok"},'
    '{"type":"bytes","optional":false,"field":"raw"},'
    '{"type":"int8","optional":false,"field":"small"},'
    '{"type":"int16","optional":false,"field":"medium"},'
    '{"type":"int32","optional":true,"default":7,"field":"retries"},'
    '{"type":"struct","fields":[{"type":"int32","optional":false,"field":"id"}],"optional":true,'
    '"name":"com.example.Ref","field":"parent"}],'
    '"optional":false,"name":"com.example.Order","version":2,"doc":"an order"},'
    '"payload":{"id":42,"amount":"BNI=","created":1700000000123,"day":19675,"at":3723456,'
    '"note":"Zo\u00eb \\"q\\"\\n\\u0001","tags":["a","b"],"counts":{"x":1},"ratio":12.34,"score":1.0E-4,'
    '"ok":true,"raw":"AP8=","small":-5,"medium":300,"retries":7,"parent":null}}'
).encode()

INT_KEYS = map_schema(INT32_SCHEMA, OPTIONAL_STRING_SCHEMA, optional=True)
INT_KEYS_BYTES = (
    b'{"schema":{"type":"map","keys":{"type":"int32","optional":false},'
    b'"values":{"type":"string","optional":true},"optional":true},"payload":[[1,"a"],[2,null]]}'
)
FLAGGED = BOOLEAN_SCHEMA.with_options(name="flag", version=3, doc="d", parameters={"b": "2", "a": "1"})
FLAGGED_BYTES = (
    b'{"schema":{"type":"boolean","optional":false,"name":"flag","version":3,"doc":"d",'
    b'"parameters":{"b":"2","a":"1"}},"payload":false}'
)


@pytest.mark.parametrize(
    ("schema", "value", "expected"),
    [
        (ORDER, ORDER_VALUE, ORDER_BYTES),
        (INT_KEYS, {1: "a", 2: None}, INT_KEYS_BYTES),
        (FLAGGED, False, FLAGGED_BYTES),
        (
            decimal_schema(0),
            decimal.Decimal(-1),
            b'{"schema":{"type":"bytes","optional":false,'
            b'"name":"org.apache.kafka.connect.data.Decimal","version":1,"parameters":{"scale":"0"}},'
            b'"payload":"/w=="}',
        ),
        (None, {"a": 1, "b": [1.5, "x"]}, b'{"schema":null,"payload":{"a":1,"b":[1.5,"x"]}}'),
        (OPTIONAL_STRING_SCHEMA, None, b'{"schema":{"type":"string","optional":true},"payload":null}'),
    ],
    ids=["struct", "int-keyed-map", "parameters", "negative-decimal", "schemaless", "null"],
)
def test_golden_envelopes(schema: Schema | None, value: Any, expected: bytes) -> None:
    assert envelope_to_bytes(schema, value) == expected
    read_schema, read_value = envelope_from_bytes(expected)
    assert read_schema == schema
    if schema is ORDER:
        assert read_value == {**ORDER_VALUE, "ratio": pytest.approx(12.34), "retries": 7}
    elif schema is not None:
        assert read_value == value


def test_tombstone_and_envelope_shape() -> None:
    assert envelope_to_bytes(None, None) is None
    assert envelope_from_bytes(None) == (None, None)
    with pytest.raises(DataException, match='"schema" and "payload"'):
        envelope_from_bytes(b'{"payload":1}')


def test_numeric_decimals_are_numbers() -> None:
    schema = decimal_schema(4, precision=6, optional=True, default=decimal.Decimal("1.5"))
    assert dumps(schema_to_json(schema, "NUMERIC")) == (
        b'{"type":"bytes","optional":true,"name":"org.apache.kafka.connect.data.Decimal","version":1,'
        b'"parameters":{"scale":"4","connect.decimal.precision":"6"},"default":1.5000}'
    )
    assert dumps(value_to_json(schema, decimal.Decimal("1.56"), "NUMERIC")) == b"1.5600"
    assert dumps(value_to_json(schema, decimal.Decimal("1.56"))) == b'"PPA="'
    # Read as written, whichever form.
    assert value_from_json(schema, loads(b"1.5600")) == decimal.Decimal("1.5600")
    assert value_from_json(schema, "PPA=") == decimal.Decimal("1.5600")
    assert value_from_json(schema, None) == decimal.Decimal("1.5")
    assert value_from_json(schema, None, replace_null_with_default=False) is None


@pytest.mark.parametrize(
    ("number", "text"),
    [
        (0.0, "0.0"),
        (-0.0, "-0.0"),
        (100.0, "100.0"),
        (1e7, "1.0E7"),
        (1234567.0, "1234567.0"),
        (0.001, "0.001"),
        (0.0001, "1.0E-4"),
        (-1.5e-10, "-1.5E-10"),
        (5e-324, "4.9E-324"),
        (0.1 + 0.2, "0.30000000000000004"),
        (1.7976931348623157e308, "1.7976931348623157E308"),
    ],
)
def test_doubles_as_java_writes_them(number: float, text: str) -> None:
    assert java_double_text(number) == text


@pytest.mark.parametrize(
    ("number", "text"),
    [
        (12.34, "12.34"),
        (0.1, "0.1"),
        (1e10, "1.0E10"),
        (3.4028235e38, "3.4028235E38"),
        (16777216.0, "1.6777216E7"),
        (1.4e-45, "1.4E-45"),
        (-2.5, "-2.5"),
    ],
)
def test_floats_as_java_writes_them(number: float, text: str) -> None:
    assert java_float_text(number) == text


def test_schema_from_json_reads_as_kafka_does() -> None:
    # A missing optional means required; ill-typed name and version are ignored.
    assert schema_from_json({"type": "int32", "name": 5, "version": "x"}) == INT32_SCHEMA
    assert schema_from_json({"type": "float"}) == FLOAT32_SCHEMA
    assert schema_from_json({"type": "double", "optional": True}).type is Type.FLOAT64
    with pytest.raises(DataException, match="unknown schema type 'float64'"):
        schema_from_json({"type": "float64"})
    with pytest.raises(DataException, match="text values"):
        schema_from_json({"type": "string", "parameters": {"a": 1}})
    with pytest.raises(DataException, match="field 0 of a struct schema"):
        schema_from_json({"type": "struct", "fields": [{"type": "string"}]})


def test_value_errors_name_the_path() -> None:
    with pytest.raises(DataException, match=r"string expected at parent\.id|int32 expected at parent\.id"):
        value_to_json(ORDER, {**ORDER_VALUE, "parent": {"id": "7"}})
    with pytest.raises(DataException, match=r"null at tags\[1\]"):
        value_to_json(ORDER, {**ORDER_VALUE, "tags": ["a", None]})
    with pytest.raises(DataException, match="base64"):
        value_from_json(BYTES_SCHEMA, "not base64!")
    with pytest.raises(DataException, match="JSON array of"):
        value_from_json(INT_KEYS, {"1": "a"})


def test_text_escapes_as_jackson() -> None:
    assert (
        dumps('Zo\u00eb "q"\n\x01\t\x1f/\u2028') == '"Zo\u00eb \\"q\\"\\n\\u0001\\t\\u001F/\u2028"'.encode()
    )
    with pytest.raises(DataException):
        dumps(float("nan"))
    assert loads(b"[1.50, 2]") == [decimal.Decimal("1.50"), 2]


FAST = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@FAST
@given(schemas())
def test_schema_json_is_a_fixed_point(schema: Schema) -> None:
    written = schema_to_json(schema)
    again = schema_to_json(schema_from_json(loads(dumps(written))))
    assert dumps(again) == dumps(written)


@FAST
@given(st.data())
def test_value_survives_json(data: st.DataObject) -> None:
    schema: Schema = data.draw(schemas())
    value: Any = data.draw(values(schema))
    for decimal_format in ("BASE64", "NUMERIC"):
        text = dumps(value_to_json(schema, value, decimal_format))
        assert value_from_json(schema, loads(text)) == with_defaults(schema, value)
