"""Converters at record level (Kafka's JsonConverter, StringConverter, ByteArrayConverter behaviour) and
their resolution from connector and worker configs. The Spark-expression forms run against the real
Spark Connect server in tests/integration/test_kafka_datasource.py."""

from __future__ import annotations

import base64
import datetime as dt
import decimal
import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sluiceway_executor.converters.base import (
    BYTE_ARRAY_CONVERTER,
    JSON_CONVERTER,
    STRING_CONVERTER,
    ConverterError,
)
from sluiceway_executor.converters.connect_json import infer_schema
from sluiceway_executor.converters.json_converter import JsonConverter
from sluiceway_executor.converters.registry import WORKER_CONVERTER_DEFAULTS, converter_class, converter_for
from sluiceway_executor.converters.simple import ByteArrayConverter, StringConverter

PLAIN = JsonConverter("value", {"schemas.enable": "false"})
ENVELOPE = JsonConverter("value", {"schemas.enable": "true"})

# JSON values as Python's json module round-trips them (finite floats; ints within int64 so the
# inferred envelope schema is exact).
json_scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**63), max_value=2**63 - 1)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text()
)
json_values = st.recursive(
    json_scalars,
    lambda children: st.lists(children, max_size=5) | st.dictionaries(st.text(), children, max_size=5),
    max_leaves=20,
)


# -- resolution -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        (JSON_CONVERTER, JsonConverter),
        ("JsonConverter", JsonConverter),
        ("Json", JsonConverter),
        ("sluiceway.converters.JsonConverter", JsonConverter),
        ("sluiceway_executor.converters.JsonConverter", JsonConverter),
        (STRING_CONVERTER, StringConverter),
        ("StringConverter", StringConverter),
        ("sluiceway.converters.StringConverter", StringConverter),
        (BYTE_ARRAY_CONVERTER, ByteArrayConverter),
        ("ByteArrayConverter", ByteArrayConverter),
        ("sluiceway.converters.ByteArrayConverter", ByteArrayConverter),
        (f"  {BYTE_ARRAY_CONVERTER} ", ByteArrayConverter),
    ],
)
def test_aliases_resolve(name: str, expected: type) -> None:
    assert converter_class(name) is expected


@pytest.mark.parametrize("name", ["jsonconverter", "org.apache.kafka.connect.avro.AvroConverter", ""])
def test_unknown_converter_is_a_clear_error(name: str) -> None:
    with pytest.raises(ConverterError, match="unknown converter"):
        converter_class(name)


def test_worker_defaults_string_keys_plain_json_values() -> None:
    key = converter_for({}, "key", None)
    value = converter_for({}, "value", None)
    assert isinstance(key, StringConverter)
    assert isinstance(value, JsonConverter)
    assert value.schemas_enable is False
    assert WORKER_CONVERTER_DEFAULTS["value.converter.schemas.enable"] == "false"


def test_connector_converter_uses_only_its_own_settings() -> None:
    # As in Kafka: the connector names the class, so the worker's prefixed settings do not apply and
    # JsonConverter's own default (schemas.enable=true) does.
    worker = {"value.converter": JSON_CONVERTER, "value.converter.schemas.enable": "false"}
    value = converter_for({"value.converter": "JsonConverter"}, "value", worker)
    assert isinstance(value, JsonConverter)
    assert value.schemas_enable is True
    value = converter_for(
        {"value.converter": "JsonConverter", "value.converter.schemas.enable": "FALSE"}, "value", worker
    )
    assert isinstance(value, JsonConverter)
    assert value.schemas_enable is False


def test_worker_converter_and_settings_apply_when_the_connector_names_none() -> None:
    worker = {"value.converter": JSON_CONVERTER, "key.converter": BYTE_ARRAY_CONVERTER}
    value = converter_for({"value.converter.schemas.enable": "false"}, "value", worker)
    assert isinstance(value, JsonConverter)
    # The connector's prefixed setting without its own class is ignored; Kafka's default applies.
    assert value.schemas_enable is True
    assert isinstance(converter_for({"key.converter": ""}, "key", worker), ByteArrayConverter)


def test_worker_settings_override_the_default_converter_settings() -> None:
    value = converter_for({}, "value", {"value.converter.schemas.enable": "true"})
    assert isinstance(value, JsonConverter)
    assert value.schemas_enable is True


def test_bad_settings_fail_clearly() -> None:
    with pytest.raises(ConverterError, match=r"value\.converter\.schemas\.enable"):
        converter_for({"value.converter": "JsonConverter", "value.converter.schemas.enable": "yes"}, "value")
    with pytest.raises(ConverterError, match="unknown encoding"):
        converter_for({"key.converter": "StringConverter", "key.converter.encoding": "nope-9"}, "key")
    with pytest.raises(ConverterError, match="role"):
        converter_for({}, "header", None)  # type: ignore[arg-type]


# -- ByteArray and String ---------------------------------------------------------------------


@given(st.binary() | st.none())
def test_byte_array_round_trip(data: bytes | None) -> None:
    converter = ByteArrayConverter("key")
    assert converter.from_connect_value(converter.to_connect_value(data)) == data


def test_byte_array_refuses_other_types() -> None:
    with pytest.raises(ConverterError, match="takes bytes, not a str"):
        ByteArrayConverter("value").from_connect_value("text")


@given(st.text() | st.none())
def test_string_round_trip(text: str | None) -> None:
    converter = StringConverter("key")
    data = converter.from_connect_value(text)
    assert data == (None if text is None else text.encode("utf-8"))
    assert converter.to_connect_value(data) == text


def test_string_converter_encoding_and_java_like_to_string() -> None:
    converter = converter_for({"key.converter": "StringConverter", "key.converter.encoding": "UTF-16"}, "key")
    assert isinstance(converter, StringConverter)
    assert converter.to_connect_value(converter.from_connect_value("héllo")) == "héllo"
    utf8 = StringConverter("value")
    assert utf8.from_connect_value(True) == b"true"
    assert utf8.from_connect_value(42) == b"42"
    assert utf8.from_connect_value(b"\x00raw") == b"\x00raw"
    # Invalid UTF-8 decodes with replacement characters, as Java does.
    assert utf8.to_connect_value(b"a\xffb") == "a\ufffdb"


# -- JSON without the envelope ----------------------------------------------------------------


@given(json_values)
def test_plain_json_round_trip(value: Any) -> None:
    data = PLAIN.from_connect_value(value)
    if value is None:
        assert data is None  # a tombstone stays one
        return
    assert data is not None
    assert json.loads(data) == value
    assert PLAIN.to_connect_value(data) == value


def test_plain_json_is_compact_utf8_like_jackson() -> None:
    assert PLAIN.from_connect_value({"a": [1, 2.5, True, None], "é": "ü"}) == (
        '{"a":[1,2.5,true,null],"é":"ü"}'.encode()
    )
    assert PLAIN.from_connect_value("text") == b'"text"'
    # byte arrays as base64 text; maps with non-string keys as [key, value] pairs
    assert PLAIN.from_connect_value({"b": b"\x00\xff"}) == b'{"b":"AP8="}'
    assert PLAIN.from_connect_value({1: "a", 2: "b"}) == b'[[1,"a"],[2,"b"]]'


def test_plain_json_reads_json_null_as_null() -> None:
    assert PLAIN.to_connect_value(b"null") is None
    assert PLAIN.to_connect_value(None) is None


@pytest.mark.parametrize("data", [b"not json", b"", b"{", b'{"a":1} x', b"NaN", b"\xff\xfe\xfa"])
def test_invalid_json_is_a_converter_error(data: bytes) -> None:
    with pytest.raises(ConverterError, match=r"value.converter JsonConverter .*not valid JSON"):
        PLAIN.to_connect_value(data)


@pytest.mark.parametrize("value", [float("nan"), dt.datetime(2024, 1, 1), object(), {"a": {1, 2}}])
def test_values_json_cannot_hold_fail_clearly(value: Any) -> None:
    with pytest.raises(ConverterError):
        PLAIN.from_connect_value(value)


# -- JSON with the envelope -------------------------------------------------------------------


@given(json_values)
def test_envelope_round_trip(value: Any) -> None:
    data = ENVELOPE.from_connect_value(value)
    if value is None:
        assert data is None
        return
    assert data is not None
    envelope = json.loads(data)
    assert list(envelope) == ["schema", "payload"]
    assert envelope["payload"] == value
    assert envelope["schema"] == infer_schema(value)
    assert ENVELOPE.to_connect_value(data) == value


@pytest.mark.parametrize(
    ("value", "schema"),
    [
        ("x", {"type": "string", "optional": False}),
        (True, {"type": "boolean", "optional": False}),
        (7, {"type": "int64", "optional": False}),
        (1.5, {"type": "double", "optional": False}),
        (b"ab", {"type": "bytes", "optional": False}),
        (
            {"a": 1, "b": 2},
            {
                "type": "map",
                "keys": {"type": "string", "optional": False},
                "values": {"type": "int64", "optional": False},
                "optional": False,
            },
        ),
        (
            ["a", None],
            {"type": "array", "items": {"type": "string", "optional": True}, "optional": False},
        ),
        # Not inferable, as with Kafka's Values.inferSchema: mixed, empty, or too big.
        ({"task": 1, "payload": "x"}, None),
        ([], None),
        ({}, None),
        ([1, "a"], None),
        (2**64, None),
    ],
)
def test_envelope_infers_simple_schemas(value: Any, schema: dict[str, Any] | None) -> None:
    data = ENVELOPE.from_connect_value(value)
    assert data is not None
    assert json.loads(data)["schema"] == schema
    assert ENVELOPE.to_connect_value(data) == value


def test_envelope_key_order_matches_kafka() -> None:
    assert ENVELOPE.from_connect_value("x") == b'{"schema":{"type":"string","optional":false},"payload":"x"}'
    assert ENVELOPE.from_connect_value({"a": 1, "s": "x"}) == b'{"schema":null,"payload":{"a":1,"s":"x"}}'


def test_envelope_with_explicit_schema_and_logical_types() -> None:
    struct = {
        "type": "struct",
        "fields": [
            {"type": "int32", "optional": False, "field": "id"},
            {"type": "bytes", "optional": True, "field": "blob"},
            {
                "type": "bytes",
                "optional": False,
                "name": "org.apache.kafka.connect.data.Decimal",
                "version": 1,
                "parameters": {"scale": "2"},
                "field": "price",
            },
            {
                "type": "int64",
                "optional": False,
                "name": "org.apache.kafka.connect.data.Timestamp",
                "version": 1,
                "field": "at",
            },
            {
                "type": "int32",
                "optional": False,
                "name": "org.apache.kafka.connect.data.Date",
                "version": 1,
                "field": "day",
            },
            {
                "type": "map",
                "keys": {"type": "int32", "optional": False},
                "values": {"type": "string", "optional": False},
                "optional": False,
                "field": "names",
            },
        ],
        "optional": False,
        "name": "Row",
    }
    value = {
        "id": 7,
        "blob": None,
        "price": decimal.Decimal("-123.45"),
        "at": dt.datetime(2024, 1, 2, 3, 4, 5, 678000, tzinfo=dt.UTC),
        "day": dt.date(2024, 1, 2),
        "names": {1: "one"},
    }
    data = ENVELOPE.from_connect_value(value, struct)
    assert data is not None
    envelope = json.loads(data)
    assert envelope["schema"] == struct
    payload = envelope["payload"]
    # Java's BigInteger(-12345).toByteArray() is CF C7.
    assert payload["price"] == base64.b64encode(b"\xcf\xc7").decode()
    assert payload["at"] == 1_704_164_645_678
    assert payload["day"] == 19_724
    assert payload["names"] == [[1, "one"]]
    assert ENVELOPE.to_connect_value(data) == value
    # Without the envelope, the schema still shapes the payload.
    assert json.loads(PLAIN.from_connect_value(value, struct) or b"") == payload


def test_envelope_reads_what_kafka_writes() -> None:
    written_by_kafka = (
        b'{"schema":{"type":"struct","fields":[{"type":"string","optional":false,"field":"name"},'
        b'{"type":"int64","optional":true,"field":"age"}],"optional":false,"name":"person"},'
        b'"payload":{"name":"ada","age":null}}'
    )
    assert ENVELOPE.to_connect_value(written_by_kafka) == {"name": "ada", "age": None}
    assert ENVELOPE.to_connect_value(b'{"schema":null,"payload":null}') is None
    assert (
        ENVELOPE.to_connect_value(b'{"schema":{"type":"int32","optional":true,"default":5},"payload":null}')
        == 5
    )


@pytest.mark.parametrize(
    "data", [b'{"a":1}', b'{"schema":null}', b'{"schema":null,"payload":1,"extra":2}', b"null", b"[1]"]
)
def test_envelope_required(data: bytes) -> None:
    with pytest.raises(ConverterError, match='exactly "schema" and "payload"'):
        ENVELOPE.to_connect_value(data)


@pytest.mark.parametrize(
    "data",
    [
        b'{"schema":{"type":"int32","optional":false},"payload":null}',
        b'{"schema":{"type":"int32","optional":false},"payload":"x"}',
        b'{"schema":{"type":"bytes","optional":false},"payload":"not base64!"}',
        b'{"schema":{"type":"warp","optional":false},"payload":1}',
    ],
)
def test_envelope_payload_must_fit_its_schema(data: bytes) -> None:
    with pytest.raises(ConverterError):
        ENVELOPE.to_connect_value(data)


def test_explicit_schema_is_checked_on_write() -> None:
    with pytest.raises(ConverterError, match="out of range for int8"):
        ENVELOPE.from_connect_value(300, {"type": "int8", "optional": False})
    with pytest.raises(ConverterError, match="requires a value"):
        ENVELOPE.from_connect_value(None, {"type": "string", "optional": False})
    assert ENVELOPE.from_connect_value(None, {"type": "string", "optional": True}) == (
        b'{"schema":{"type":"string","optional":true},"payload":null}'
    )


def test_envelope_floats_carry_kafkas_type_names() -> None:
    # Kafka's JsonConverter names FLOAT32 "float" and FLOAT64 "double"; it reads nothing else.
    assert ENVELOPE.from_connect_value(1.5) == b'{"schema":{"type":"double","optional":false},"payload":1.5}'
    for name in ("float", "double", "float64"):  # float64: what this converter wrote before
        data = b'{"schema":{"type":"%s","optional":false},"payload":2.25}' % name.encode()
        assert ENVELOPE.to_connect_value(data) == 2.25
