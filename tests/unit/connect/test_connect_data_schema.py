"""Connect schemas: building them, what they refuse, and checking values with errors that name
the field path."""

from __future__ import annotations

import datetime as dt
import decimal

import pytest

from sluiceway.connect.data import (
    INT8_SCHEMA,
    INT32_SCHEMA,
    OPTIONAL_STRING_SCHEMA,
    PRECISION_PARAMETER,
    STRING_SCHEMA,
    DataException,
    Field,
    Schema,
    Type,
    array_schema,
    decimal_schema,
    map_schema,
    struct_schema,
    time_schema,
    timestamp_schema,
    validate_value,
)
from sluiceway.connect.data.values import decimal_to_unscaled_bytes, timestamp_to_millis

PERSON = struct_schema(
    {"name": STRING_SCHEMA, "age": INT8_SCHEMA.as_optional(), "tags": array_schema(STRING_SCHEMA)},
    name="com.example.Person",
)


def test_builders_and_logical_types() -> None:
    amount = decimal_schema(2, precision=9)
    assert (amount.type, amount.version, dict(amount.parameters or {})) == (
        Type.BYTES,
        1,
        {"scale": "2", PRECISION_PARAMETER: "9"},
    )
    assert amount.logical_name == "org.apache.kafka.connect.data.Decimal"
    # A logical name over another type is just that type.
    assert Schema(Type.STRING, name="org.apache.kafka.connect.data.Date").logical_name is None
    assert PERSON.field("age") == Field("age", 1, INT8_SCHEMA.as_optional())
    assert PERSON.field("nope") is None
    assert hash(PERSON) == hash(PERSON.with_options(doc="other"))
    assert PERSON.with_options(doc="other") != PERSON


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda: Schema(Type.ARRAY), "have a value schema"),
        (lambda: Schema(Type.INT32, fields=(Field("a", 0, INT32_SCHEMA),)), "only a struct has fields"),
        (lambda: struct_schema([("a", INT32_SCHEMA), ("a", INT32_SCHEMA)]), "appears twice"),
        (lambda: INT32_SCHEMA.with_options(default="x"), r"int32 expected at <default of int32>"),
        (lambda: decimal_schema(2, precision=0), "precision"),
        (lambda: STRING_SCHEMA.with_options(parameters={"a": 1}), "text to text"),
    ],
)
def test_malformed_schemas_are_refused(make: object, message: str) -> None:
    with pytest.raises(DataException, match=message):
        make()  # type: ignore[operator]


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ({"name": "a", "tags": ["x", 3]}, r"string expected at tags\[1\], got int 3"),
        ({"name": "a", "tags": [], "age": 300}, "300 is out of range for int8 at age"),
        ({"name": None, "tags": []}, "null at name, but the string schema is required"),
        ({"name": "a", "tags": [], "extra": 1}, r"not fields of its schema: \['extra'\]"),
        ({"name": True, "tags": []}, "string expected at name, got bool"),
        ("text", "struct"),
    ],
)
def test_value_errors_name_the_field(value: object, message: str) -> None:
    with pytest.raises(DataException, match=message):
        validate_value(PERSON, value)


def test_values_of_logical_types() -> None:
    nested = map_schema(STRING_SCHEMA, struct_schema({"at": time_schema(), "price": decimal_schema(2)}))
    validate_value(nested, {"k": {"at": dt.time(1, 2), "price": decimal.Decimal("1.2")}})
    with pytest.raises(DataException, match=r"does not fit scale 2 without rounding"):
        validate_value(nested, {"k": {"at": dt.time(1, 2), "price": decimal.Decimal("1.234")}})
    with pytest.raises(DataException, match=r"Time \(datetime.time\) expected at \['k'\].at"):
        validate_value(nested, {"k": {"at": dt.datetime(2020, 1, 1), "price": 1}})
    with pytest.raises(DataException, match="must be in UTC"):
        validate_value(time_schema(), dt.time(1, tzinfo=dt.timezone(dt.timedelta(hours=1))))
    validate_value(OPTIONAL_STRING_SCHEMA, None)
    # Java's BigInteger bytes: the fewest that keep the sign.
    assert decimal_to_unscaled_bytes(decimal_schema(0), 128) == b"\x00\x80"
    assert decimal_to_unscaled_bytes(decimal_schema(0), -128) == b"\x80"
    assert decimal_to_unscaled_bytes(decimal_schema(1), decimal.Decimal("0")) == b"\x00"
    # A naive timestamp is UTC; below a millisecond rounds towards the past.
    assert timestamp_to_millis(dt.datetime(1969, 12, 31, 23, 59, 59, 999999)) == -1
    validate_value(timestamp_schema(), dt.datetime(2020, 1, 1))
