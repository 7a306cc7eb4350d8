"""Kafka Connect schemas and values as Spark types and values, both ways: the one place that
answers "what type is this field".

=====================  =========================================================================
Connect                Spark
=====================  =========================================================================
INT8, INT16            ByteType, ShortType
INT32, INT64           IntegerType, LongType
FLOAT32, FLOAT64       FloatType, DoubleType
BOOLEAN, STRING        BooleanType, StringType (CharType and VarcharType read as STRING)
BYTES                  BinaryType
ARRAY                  ArrayType, ``containsNull`` = the element schema is optional
MAP                    MapType, ``valueContainsNull`` = the value schema is optional
STRUCT                 StructType, each field ``nullable`` = its schema is optional
Decimal(scale)         DecimalType(precision, scale): the ``connect.decimal.precision``
                       parameter, else 38; 0 <= scale <= precision <= 38, or no Spark type
Date                   DateType
Timestamp              TimestampType (an instant, like Connect's epoch milliseconds)
Time                   IntegerType holding milliseconds since midnight, marked as Time in the
                       field's metadata (Spark 4.3 has TIME only behind a flag that is off)
=====================  =========================================================================

What Spark cannot say is kept in the ``connect`` entry of each StructField's metadata, as a JSON
object holding only what differs from what the Spark type implies: ``name``, ``version``,
``doc``, ``parameters``, ``default`` (Kafka's JSON form as text, since Spark's metadata
cannot hold every JSON value; decimals as base64, nulls inside it kept as nulls), ``optional``
(for a map's key, which Spark never lets be null) and the same for nested elements under
``items``, ``keys`` and ``values``. Hence ``from_spark_field(to_spark_field(n, s)) == s`` for
every schema with a Spark type. A bare DataType has no metadata of its own, so
``from_spark(to_spark(s))`` keeps a struct's fields whole (their StructFields carry it) but not
what the outermost schema, or an array's elements or a map's keys and values outside any struct,
keep there; types, optionality and the logical types come from the Spark type itself.

Values: a Spark value is what PySpark gives and takes for the type: a struct is a ``Row`` (a
Mapping or a tuple in field order is read too), Time is its ``int`` milliseconds, Timestamp an
aware UTC ``datetime`` (a naive one coming from Spark is local time, as PySpark means it).
Where a Connect null meets a schema with a default, the default is written (as Kafka's Struct
reads it). Losses: Spark keeps microseconds while Connect's JSON keeps milliseconds; a decimal
without a declared precision must fit 38 digits.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from typing import Any, Final

from pyspark.sql import Row
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    BooleanType,
    ByteType,
    CharType,
    DataType,
    DateType,
    DecimalType,
    DoubleType,
    FloatType,
    IntegerType,
    LongType,
    MapType,
    ShortType,
    StringType,
    StructField,
    StructType,
    TimestampType,
    VarcharType,
)

from sluiceway.connect.data import json_text
from sluiceway.connect.data.json_format import value_from_json, value_to_json
from sluiceway.connect.data.schema import (
    DATE_NAME,
    DECIMAL_NAME,
    TIME_NAME,
    TIMESTAMP_NAME,
    DataException,
    Field,
    Schema,
    Type,
    date_schema,
    decimal_precision,
    decimal_scale,
    decimal_schema,
    timestamp_schema,
)
from sluiceway.connect.data.values import rescale_decimal, time_from_millis, time_to_millis, validate_value

__all__ = [
    "METADATA_KEY",
    "from_spark",
    "from_spark_field",
    "from_spark_value",
    "to_spark",
    "to_spark_field",
    "to_spark_value",
]

METADATA_KEY: Final = "connect"
MAX_PRECISION: Final = 38

_PRIMITIVES: Final[Mapping[Type, DataType]] = {
    Type.INT8: ByteType(),
    Type.INT16: ShortType(),
    Type.INT32: IntegerType(),
    Type.INT64: LongType(),
    Type.FLOAT32: FloatType(),
    Type.FLOAT64: DoubleType(),
    Type.BOOLEAN: BooleanType(),
    Type.STRING: StringType(),
    Type.BYTES: BinaryType(),
}
_FROM_PRIMITIVE: Final[Mapping[type[DataType], Type]] = {type(v): k for k, v in _PRIMITIVES.items()}


# -- types --


def to_spark(schema: Schema, path: str = "") -> DataType:
    """The Spark type of ``schema``'s values."""
    logical = schema.logical_name
    if logical == DECIMAL_NAME:
        return _decimal_type(schema, path)
    if logical == DATE_NAME:
        return DateType()
    if logical == TIMESTAMP_NAME:
        return TimestampType()
    if schema.type is Type.ARRAY:
        assert schema.value_schema is not None
        items = schema.value_schema
        return ArrayType(to_spark(items, f"{path}[]"), containsNull=items.optional)
    if schema.type is Type.MAP:
        assert schema.key_schema is not None and schema.value_schema is not None
        values = schema.value_schema
        return MapType(
            to_spark(schema.key_schema, f"{path}<keys>"),
            to_spark(values, f"{path}<values>"),
            valueContainsNull=values.optional,
        )
    if schema.type is Type.STRUCT:
        return StructType(
            [
                to_spark_field(item.name, item.schema, f"{path}.{item.name}" if path else item.name)
                for item in schema.fields
            ]
        )
    return _PRIMITIVES[schema.type]


def _decimal_type(schema: Schema, path: str) -> DecimalType:
    scale = decimal_scale(schema)
    precision = decimal_precision(schema) or MAX_PRECISION
    if not 0 <= scale <= precision <= MAX_PRECISION:
        where = f" at {path}" if path else ""
        raise DataException(
            f"Decimal(precision {precision}, scale {scale}){where} has no Spark type: Spark needs "
            f"0 <= scale <= precision <= {MAX_PRECISION}"
        )
    return DecimalType(precision, scale)


def to_spark_field(name: str, schema: Schema, path: str = "") -> StructField:
    """A StructField for ``schema``, with what Spark cannot say in its metadata."""
    datatype = to_spark(schema, path or name)
    extras = _extras(schema, _derive(datatype, schema.optional, path or name))
    return StructField(name, datatype, schema.optional, {METADATA_KEY: extras} if extras else {})


def from_spark(datatype: DataType, nullable: bool = True, path: str = "") -> Schema:
    """The Connect schema for a Spark type (its nested StructFields' metadata included)."""
    return _derive(datatype, nullable, path)


def from_spark_field(spark_field: StructField, path: str = "") -> Schema:
    """The Connect schema of a StructField, with what its metadata keeps."""
    where = path or spark_field.name
    schema = _derive(spark_field.dataType, spark_field.nullable, where)
    extras = (spark_field.metadata or {}).get(METADATA_KEY)
    if extras is None:
        return schema
    if not isinstance(extras, dict):
        raise DataException(f"field {where}: metadata {METADATA_KEY!r} must be a JSON object")
    return _apply(schema, extras, where)


def _derive(datatype: DataType, nullable: bool, path: str) -> Schema:
    if isinstance(datatype, DecimalType):
        return decimal_schema(datatype.scale, datatype.precision, optional=nullable)
    if isinstance(datatype, DateType):
        return date_schema(optional=nullable)
    if isinstance(datatype, TimestampType):
        return timestamp_schema(optional=nullable)
    if isinstance(datatype, (CharType, VarcharType)):
        return Schema(Type.STRING, optional=nullable)
    if isinstance(datatype, ArrayType):
        items = _derive(datatype.elementType, datatype.containsNull, f"{path}[]")
        return Schema(Type.ARRAY, optional=nullable, value_schema=items)
    if isinstance(datatype, MapType):
        keys = _derive(datatype.keyType, False, f"{path}<keys>")
        values = _derive(datatype.valueType, datatype.valueContainsNull, f"{path}<values>")
        return Schema(Type.MAP, optional=nullable, key_schema=keys, value_schema=values)
    if isinstance(datatype, StructType):
        fields = tuple(
            Field(item.name, index, from_spark_field(item, f"{path}.{item.name}" if path else item.name))
            for index, item in enumerate(datatype.fields)
        )
        return Schema(Type.STRUCT, optional=nullable, fields=fields)
    kind = _FROM_PRIMITIVE.get(type(datatype))
    if kind is None:
        where = f" at {path}" if path else ""
        raise DataException(f"Spark type {datatype.simpleString()}{where} has no Kafka Connect schema")
    return Schema(kind, optional=nullable)


def _parameter_items(schema: Schema) -> list[tuple[str, str]] | None:
    return None if schema.parameters is None else list(schema.parameters.items())


def _extras(schema: Schema, derived: Schema) -> dict[str, Any]:
    # What `schema` has that the schema derived from its Spark type does not (in order).
    out: dict[str, Any] = {}
    for key in ("name", "version", "doc"):
        if getattr(schema, key) != getattr(derived, key):
            out[key] = getattr(schema, key)
    if _parameter_items(schema) != _parameter_items(derived):
        out["parameters"] = None if schema.parameters is None else dict(schema.parameters)
    if schema.optional != derived.optional:
        out["optional"] = schema.optional
    if schema.default is not None:
        out["default"] = json_text.dumps(
            value_to_json(schema, schema.default, replace_null_with_default=False)
        ).decode()
    for key, mine, theirs in (
        ("keys", schema.key_schema, derived.key_schema),
        ("items" if schema.type is Type.ARRAY else "values", schema.value_schema, derived.value_schema),
    ):
        if mine is not None and theirs is not None:
            nested = _extras(mine, theirs)
            if nested:
                out[key] = nested
    return out


def _apply(schema: Schema, extras: Mapping[str, Any], path: str) -> Schema:
    changes: dict[str, Any] = {}
    for key, attribute in (("keys", "key_schema"), ("items", "value_schema"), ("values", "value_schema")):
        nested = extras.get(key)
        current = getattr(schema, attribute)
        if isinstance(nested, dict) and current is not None:
            changes[attribute] = _apply(current, nested, f"{path}<{key}>")
    for key in ("name", "version", "doc", "parameters", "optional"):
        if key in extras:
            changes[key] = extras[key]
    try:
        result = schema.with_options(**changes) if changes else schema
        if extras.get("default") is not None:
            result = result.with_options(
                default=value_from_json(
                    result, json_text.loads(extras["default"]), replace_null_with_default=False, path=path
                )
            )
    except (TypeError, ValueError) as exc:
        raise DataException(f"field {path}: metadata {METADATA_KEY!r} is not valid: {exc}") from None
    return result


# -- values --


def to_spark_value(schema: Schema, value: Any, path: str = "") -> Any:
    """The Python value Spark takes for a Connect value of ``schema`` (checked first)."""
    validate_value(schema, value, path)
    return _to_spark(schema, value, path)


def _to_spark(schema: Schema, value: Any, path: str) -> Any:
    if value is None:
        value = schema.default
        if value is None:
            return None
    logical = schema.logical_name
    if logical == DECIMAL_NAME:
        exact = rescale_decimal(schema, value, path)
        precision = decimal_precision(schema) or MAX_PRECISION
        if len(exact.as_tuple().digits) > precision and not exact.is_zero():
            raise DataException(
                f"decimal {exact} at {path or 'the value'} has more than Spark's {precision} digits"
            )
        return exact
    if logical == TIME_NAME:
        return time_to_millis(value)
    if logical == TIMESTAMP_NAME:
        return value.astimezone(dt.UTC) if value.tzinfo is not None else value.replace(tzinfo=dt.UTC)
    kind = schema.type
    if kind is Type.FLOAT32 or kind is Type.FLOAT64:
        return float(value)
    if kind is Type.BYTES:
        return bytes(value)
    if kind is Type.ARRAY:
        assert schema.value_schema is not None
        return [_to_spark(schema.value_schema, v, f"{path}[{i}]") for i, v in enumerate(value)]
    if kind is Type.MAP:
        assert schema.key_schema is not None and schema.value_schema is not None
        return {
            _to_spark(schema.key_schema, k, path): _to_spark(schema.value_schema, v, f"{path}[{k!r}]")
            for k, v in value.items()
        }
    if kind is Type.STRUCT:
        return Row(
            **{
                item.name: _to_spark(
                    item.schema, value.get(item.name), f"{path}.{item.name}" if path else item.name
                )
                for item in schema.fields
            }
        )
    return value


def from_spark_value(schema: Schema, value: Any, path: str = "") -> Any:
    """The Connect value of ``schema`` for a Python value Spark gave (a Row for a struct)."""
    where = f" at {path}" if path else ""
    if value is None:
        return None
    logical = schema.logical_name
    if logical == DECIMAL_NAME:
        return rescale_decimal(schema, value, path)
    if logical == TIME_NAME:
        return time_from_millis(value)
    if logical == TIMESTAMP_NAME:
        if not isinstance(value, dt.datetime):
            raise DataException(f"a datetime expected{where}, got {type(value).__name__}")
        return value.astimezone(dt.UTC)
    kind = schema.type
    if kind is Type.BYTES:
        return bytes(value)
    if kind is Type.ARRAY:
        assert schema.value_schema is not None
        return [from_spark_value(schema.value_schema, v, f"{path}[{i}]") for i, v in enumerate(value)]
    if kind is Type.MAP:
        assert schema.key_schema is not None and schema.value_schema is not None
        return {
            from_spark_value(schema.key_schema, k, path): from_spark_value(
                schema.value_schema, v, f"{path}[{k!r}]"
            )
            for k, v in value.items()
        }
    if kind is Type.STRUCT:
        return _struct_from_spark(schema, value, path)
    return value


def _struct_from_spark(schema: Schema, value: Any, path: str) -> dict[str, Any]:
    if isinstance(value, Mapping):
        get = value.get
    elif isinstance(value, tuple) and len(value) == len(schema.fields):
        positional = {item.name: value[item.index] for item in schema.fields}
        get = positional.get
    else:
        where = f" at {path}" if path else ""
        raise DataException(f"a struct (Row) of {len(schema.fields)} fields expected{where}, got {value!r}")
    return {
        item.name: from_spark_value(item.schema, get(item.name), f"{path}.{item.name}" if path else item.name)
        for item in schema.fields
    }
