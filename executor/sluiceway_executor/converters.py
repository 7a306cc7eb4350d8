"""Kafka Connect's converters (JSON with and without the `schemas.enable` envelope, String, ByteArray)
for record keys and values, in two forms:

- Spark column expressions for DataFrame pipelines: `to_connect(col)` turns the Kafka bytes of a read
  into the value a sink sees, `from_connect(col)` turns what a source produced into Kafka bytes.
  Invalid data fails the Spark job with a message naming the converter (errors.tolerance is not applied).
- Record-level functions for record-level tasks, `to_connect_value` / `from_connect_value`, which follow
  Kafka's JsonConverter byte for byte where Python values allow (compact JSON, UTF-8, byte arrays as
  base64, maps with non-string keys as arrays of [key, value] pairs, the schema/payload envelope).

In DataFrame form the JSON converter works on JSON *text*: the sink gets the record's JSON text (for
the envelope, the text of its payload) as a string, and a string or binary column a source produces is
taken as JSON text, checked, and written as it is (wrapped in the envelope when enabled); struct, map
and array columns are serialised with `to_json`.

Converter names are resolved as Kafka Connect resolves plugin aliases: the full Kafka class name, the
simple class name, the simple name without `Converter`, and our own `sluiceway.converters.*` names.
"""

from __future__ import annotations

import abc
import base64
import codecs
import datetime as dt
import decimal
import json
from collections.abc import Mapping
from typing import Any, ClassVar, Final, Literal

from pyspark.sql import Column
from pyspark.sql import functions as F  # noqa: N812 - Spark's usual alias
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    BooleanType,
    ByteType,
    DataType,
    DecimalType,
    DoubleType,
    FloatType,
    IntegerType,
    LongType,
    MapType,
    NullType,
    ShortType,
    StringType,
    StructType,
)

Role = Literal["key", "value"]

JSON_CONVERTER: Final = "org.apache.kafka.connect.json.JsonConverter"
STRING_CONVERTER: Final = "org.apache.kafka.connect.storage.StringConverter"
BYTE_ARRAY_CONVERTER: Final = "org.apache.kafka.connect.converters.ByteArrayConverter"

DEFAULT_KEY_CONVERTER: Final = STRING_CONVERTER
DEFAULT_VALUE_CONVERTER: Final = JSON_CONVERTER
WORKER_CONVERTER_DEFAULTS: Final[Mapping[str, str]] = {
    "key.converter": DEFAULT_KEY_CONVERTER,
    "value.converter": DEFAULT_VALUE_CONVERTER,
    "value.converter.schemas.enable": "false",
}
"""The worker's converters when its config names none: keys as strings, values as plain JSON."""

# Kafka's logical types (org.apache.kafka.connect.data.*).
DECIMAL_LOGICAL: Final = "org.apache.kafka.connect.data.Decimal"
DATE_LOGICAL: Final = "org.apache.kafka.connect.data.Date"
TIME_LOGICAL: Final = "org.apache.kafka.connect.data.Time"
TIMESTAMP_LOGICAL: Final = "org.apache.kafka.connect.data.Timestamp"

# Error messages are cut to this many characters of the offending data.
_SNIPPET = 200

_ENVELOPE_ERROR = (
    'not an envelope: with schemas.enable=true every record must be a JSON object with exactly "schema" '
    'and "payload" fields; for plain JSON records set this converter\'s schemas.enable=false.'
)

_INT_RANGES: Final[Mapping[str, tuple[int, int]]] = {
    "int8": (-(2**7), 2**7 - 1),
    "int16": (-(2**15), 2**15 - 1),
    "int32": (-(2**31), 2**31 - 1),
    "int64": (-(2**63), 2**63 - 1),
}
_EPOCH_DATE = dt.date(1970, 1, 1)
_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)


class ConverterError(ValueError):
    """Data a converter cannot convert, or a converter configuration it cannot use."""


def _parse_bool(name: str, raw: str) -> bool:
    text = str(raw).strip().lower()
    if text in ("true", "false"):
        return text == "true"
    raise ConverterError(f"invalid value {raw!r} for {name}: expected true or false")


class Converter(abc.ABC):
    """A configured converter for a record key or value (`role`)."""

    class_name: ClassVar[str]

    def __init__(self, role: Role, settings: Mapping[str, str] | None = None) -> None:
        if role not in ("key", "value"):
            raise ConverterError(f"converter role must be 'key' or 'value', got {role!r}")
        self.role: Role = role
        self.settings: dict[str, str] = dict(settings or {})

    @property
    def label(self) -> str:
        """How error messages name this converter, e.g. "value.converter JsonConverter"."""
        return f"{self.role}.converter {self.class_name.rsplit('.', 1)[-1]}"

    @property
    @abc.abstractmethod
    def connect_type(self) -> DataType:
        """The Spark type of `to_connect`'s result."""

    # -- Spark expressions --

    @abc.abstractmethod
    def to_connect(self, col: Column) -> Column:
        """Kafka bytes (a binary column; a string column is taken as its UTF-8 bytes) → the value a sink
        sees. Null (a tombstone) stays null."""

    @abc.abstractmethod
    def from_connect(self, col: Column, data_type: DataType | None = None) -> Column:
        """What a source produced → Kafka bytes (binary). `data_type` is the column's Spark type when
        known; without it the column must be a string or binary. Null stays null (a tombstone)."""

    # -- record level --

    @abc.abstractmethod
    def to_connect_value(self, data: bytes | None) -> Any:
        """Kafka bytes → the value a record-level sink task sees."""

    @abc.abstractmethod
    def from_connect_value(self, value: Any, schema: Mapping[str, Any] | None = None) -> bytes | None:
        """A record-level source task's value (with its optional Connect schema) → Kafka bytes."""

    def __repr__(self) -> str:
        return f"{type(self).__name__}(role={self.role!r}, settings={self.settings!r})"


# -- ByteArray ------------------------------------------------------------------------------------


class ByteArrayConverter(Converter):
    """Passes bytes through unchanged (Kafka's ByteArrayConverter)."""

    class_name = BYTE_ARRAY_CONVERTER

    @property
    def connect_type(self) -> DataType:
        return BinaryType()

    def to_connect(self, col: Column) -> Column:
        return col.cast("binary")

    def from_connect(self, col: Column, data_type: DataType | None = None) -> Column:
        if data_type is not None and not isinstance(data_type, (BinaryType, StringType, NullType)):
            raise ConverterError(
                f"{self.label} takes binary or string columns, not {data_type.simpleString()}"
            )
        # A string becomes its UTF-8 bytes; binary is unchanged.
        return col.cast("binary")

    def to_connect_value(self, data: bytes | None) -> Any:
        return None if data is None else bytes(data)

    def from_connect_value(self, value: Any, schema: Mapping[str, Any] | None = None) -> bytes | None:
        if schema is not None and schema.get("type") != "bytes":
            raise ConverterError(
                f"{self.label} writes only values whose schema type is bytes, not {schema.get('type')}"
            )
        if value is None:
            return None
        if isinstance(value, (bytes, bytearray, memoryview)):
            return bytes(value)
        raise ConverterError(f"{self.label} takes bytes, not a {type(value).__name__}")


# -- String ---------------------------------------------------------------------------------------


class StringConverter(Converter):
    """Text in the configured encoding (`converter.encoding`, default UTF-8), as Kafka's StringConverter."""

    class_name = STRING_CONVERTER

    def __init__(self, role: Role, settings: Mapping[str, str] | None = None) -> None:
        super().__init__(role, settings)
        raw = self.settings.get("converter.encoding") or self.settings.get("encoding") or "UTF-8"
        self.encoding = raw.strip()
        try:
            self._codec = codecs.lookup(self.encoding).name
        except LookupError:
            raise ConverterError(f"{self.label}: unknown encoding {raw!r}") from None
        self._utf8 = self._codec == "utf-8"

    @property
    def connect_type(self) -> DataType:
        return StringType()

    def to_connect(self, col: Column) -> Column:
        if self._utf8:
            # Invalid UTF-8 decodes with replacement characters, as Java's String(bytes, UTF_8) does; a
            # plain cast would keep the invalid bytes in the string.
            return F.make_valid_utf8(col.cast("string"))
        return F.decode(col.cast("binary"), self.encoding)

    def from_connect(self, col: Column, data_type: DataType | None = None) -> Column:
        if isinstance(data_type, BinaryType):
            return col
        if isinstance(data_type, (StructType, MapType, ArrayType)):
            text = F.to_json(col)
        elif data_type is None or isinstance(data_type, (StringType, NullType)):
            # A binary column also casts to itself here.
            text = col if self._utf8 else col.cast("string")
        else:
            text = col.cast("string")
        return text.cast("binary") if self._utf8 else F.encode(text, self.encoding)

    def to_connect_value(self, data: bytes | None) -> Any:
        return None if data is None else bytes(data).decode(self._codec, errors="replace")

    def from_connect_value(self, value: Any, schema: Mapping[str, Any] | None = None) -> bytes | None:
        if value is None:
            return None
        if isinstance(value, (bytes, bytearray, memoryview)):
            return bytes(value)
        # bool as Java's Boolean.toString prints it.
        text = ("true" if value else "false") if isinstance(value, bool) else str(value)
        return text.encode(self._codec)


# -- JSON -----------------------------------------------------------------------------------------


def _dumps(value: Any) -> bytes:
    # Jackson's output: compact, UTF-8, non-ASCII unescaped; NaN and infinities are not JSON.
    try:
        return json.dumps(value, separators=(",", ":"), ensure_ascii=False, allow_nan=False).encode("utf-8")
    except ValueError as exc:
        raise ConverterError(f"cannot serialise as JSON: {exc}") from None


def _reject_constant(token: str) -> Any:
    raise ValueError(f"{token} is not valid JSON")


def _schema_type(schema: Mapping[str, Any]) -> str:
    kind = schema.get("type")
    if not isinstance(kind, str):
        raise ConverterError(f"invalid Connect schema (no type): {schema!r}")
    return kind


def _primitive_schema(kind: str, optional: bool = False) -> dict[str, Any]:
    return {"type": kind, "optional": optional}


def infer_schema(value: Any) -> dict[str, Any] | None:
    """The Connect schema Kafka's `Values.inferSchema` would give a Python value, as envelope JSON;
    None when it cannot (null, empty or mixed collections, big integers, other types)."""
    if isinstance(value, bool):
        return _primitive_schema("boolean")
    if isinstance(value, int):
        low, high = _INT_RANGES["int64"]
        return _primitive_schema("int64") if low <= value <= high else None
    if isinstance(value, float):
        return _primitive_schema("float64")
    if isinstance(value, str):
        return _primitive_schema("string")
    if isinstance(value, (bytes, bytearray, memoryview)):
        return _primitive_schema("bytes")
    if isinstance(value, (list, tuple)):
        items = _common_schema(value)
        return None if items is None else {"type": "array", "items": items, "optional": False}
    if isinstance(value, dict):
        keys = _common_schema(list(value.keys()))
        values = _common_schema(list(value.values()))
        if keys is None or values is None:
            return None
        return {"type": "map", "keys": keys, "values": values, "optional": False}
    return None


def _common_schema(elements: list[Any] | tuple[Any, ...]) -> dict[str, Any] | None:
    # Kafka's SchemaDetector: every non-null element has the same schema; a null makes it optional.
    found: dict[str, Any] | None = None
    optional = False
    for element in elements:
        if element is None:
            optional = True
            continue
        schema = infer_schema(element)
        if schema is None or (found is not None and schema != found):
            return None
        found = schema
    if found is None:
        return None
    return {**found, "optional": optional} if optional else found


def _to_json(schema: Mapping[str, Any] | None, value: Any, path: str) -> Any:
    """Kafka's JsonConverter.convertToJson: a Connect value → a JSON-ready Python value."""
    where = f" at {path}" if path else ""
    if value is None:
        if schema is None:
            return None
        if schema.get("default") is not None:
            return schema["default"]
        if schema.get("optional", False):
            return None
        raise ConverterError(f"got null{where}, but the schema requires a value and defines no default")
    if schema is None:
        return _schemaless_to_json(value, path)
    kind = _schema_type(schema)
    name = schema.get("name")
    if name == DECIMAL_LOGICAL:
        return _decimal_to_json(schema, value, where)
    if name == DATE_LOGICAL and isinstance(value, dt.date) and not isinstance(value, dt.datetime):
        return (value - _EPOCH_DATE).days
    if name == TIME_LOGICAL and isinstance(value, dt.time):
        return ((value.hour * 60 + value.minute) * 60 + value.second) * 1000 + value.microsecond // 1000
    if name == TIMESTAMP_LOGICAL and isinstance(value, dt.datetime):
        aware = value if value.tzinfo is not None else value.replace(tzinfo=dt.UTC)
        return (aware - _EPOCH) // dt.timedelta(milliseconds=1)
    if kind in _INT_RANGES:
        if not isinstance(value, int) or isinstance(value, bool):
            raise ConverterError(f"invalid value for {kind}{where}: {value!r}")
        low, high = _INT_RANGES[kind]
        if not low <= value <= high:
            raise ConverterError(f"value {value} out of range for {kind}{where}")
        return value
    if kind in ("float32", "float64"):
        if not isinstance(value, (int, float)) or isinstance(value, bool):
            raise ConverterError(f"invalid value for {kind}{where}: {value!r}")
        return float(value)
    if kind == "boolean":
        if not isinstance(value, bool):
            raise ConverterError(f"invalid value for boolean{where}: {value!r}")
        return value
    if kind == "string":
        if not isinstance(value, str):
            raise ConverterError(f"invalid value for string{where}: {value!r}")
        return value
    if kind == "bytes":
        if not isinstance(value, (bytes, bytearray, memoryview)):
            raise ConverterError(f"invalid value for bytes{where}: {type(value).__name__}")
        return base64.b64encode(bytes(value)).decode("ascii")
    if kind == "array":
        if not isinstance(value, (list, tuple)):
            raise ConverterError(f"invalid value for array{where}: {type(value).__name__}")
        items = schema.get("items")
        return [_to_json(items, v, f"{path}[{i}]") for i, v in enumerate(value)]
    if kind == "map":
        if not isinstance(value, Mapping):
            raise ConverterError(f"invalid value for map{where}: {type(value).__name__}")
        keys, values = schema.get("keys"), schema.get("values")
        if keys is not None and keys.get("type") == "string":
            return {_to_json(keys, k, path): _to_json(values, v, f"{path}.{k}") for k, v in value.items()}
        return [[_to_json(keys, k, path), _to_json(values, v, f"{path}.{k}")] for k, v in value.items()]
    if kind == "struct":
        if not isinstance(value, Mapping):
            raise ConverterError(f"invalid value for struct{where}: {type(value).__name__}")
        fields = schema.get("fields") or []
        names = {f.get("field") for f in fields}
        unknown = [k for k in value if k not in names]
        if unknown:
            raise ConverterError(f"struct{where} has fields its schema does not define: {unknown}")
        return {f["field"]: _to_json(f, value.get(f["field"]), f"{path}.{f['field']}") for f in fields}
    raise ConverterError(f"unknown Connect schema type {kind!r}{where}")


def _schemaless_to_json(value: Any, path: str) -> Any:
    if isinstance(value, (bool, int, str)):
        return value
    if isinstance(value, float):
        return value
    if isinstance(value, (bytes, bytearray, memoryview)):
        # Jackson writes byte arrays as base64 text.
        return base64.b64encode(bytes(value)).decode("ascii")
    if isinstance(value, (list, tuple)):
        return [_to_json(None, v, f"{path}[{i}]") for i, v in enumerate(value)]
    if isinstance(value, Mapping):
        if all(isinstance(k, str) for k in value):
            return {k: _to_json(None, v, f"{path}.{k}") for k, v in value.items()}
        # Kafka writes maps with non-string keys as arrays of [key, value] pairs.
        return [[_to_json(None, k, path), _to_json(None, v, f"{path}.{k}")] for k, v in value.items()]
    where = f" at {path}" if path else ""
    raise ConverterError(
        f"Python type {type(value).__name__}{where} has no corresponding Connect schema type without a "
        "schema; give the record a schema (e.g. a Connect logical type) or convert the value"
    )


def _decimal_to_json(schema: Mapping[str, Any], value: Any, where: str) -> Any:
    if not isinstance(value, (decimal.Decimal, int)) or isinstance(value, bool):
        raise ConverterError(f"invalid value for {DECIMAL_LOGICAL}{where}: {value!r}")
    if schema.get("type") != "bytes":
        raise ConverterError(f"{DECIMAL_LOGICAL}{where} must have type bytes, got {schema.get('type')!r}")
    scale = int((schema.get("parameters") or {}).get("scale", 0))
    # Kafka's default decimal.format=BASE64 (NUMERIC is not supported here).
    unscaled = decimal.Decimal(value).scaleb(scale)
    if unscaled != unscaled.to_integral_value():
        raise ConverterError(f"decimal {value}{where} does not fit scale {scale}")
    number = int(unscaled)
    # Java's BigInteger.toByteArray: minimal big-endian two's complement.
    length = max(1, (number + (number < 0)).bit_length() // 8 + 1)
    return base64.b64encode(number.to_bytes(length, "big", signed=True)).decode("ascii")


def _to_connect(schema: Mapping[str, Any] | None, value: Any, path: str) -> Any:
    """Kafka's JsonConverter.convertToConnect: a parsed payload → the Connect value, by its schema."""
    where = f" at {path}" if path else ""
    if value is None:
        if schema is None:
            return None
        if schema.get("default") is not None:
            return _to_connect(schema, schema["default"], path)
        if schema.get("optional", False):
            return None
        raise ConverterError(f"got null{where}, but the schema's {schema.get('type')} is not optional")
    if schema is None:
        return value
    kind = _schema_type(schema)
    name = schema.get("name")
    try:
        if name == DECIMAL_LOGICAL:
            scale = int((schema.get("parameters") or {}).get("scale", 0))
            if isinstance(value, str):
                unscaled = int.from_bytes(base64.b64decode(value, validate=True), "big", signed=True)
                return decimal.Decimal(unscaled).scaleb(-scale)
            if isinstance(value, (int, float)) and not isinstance(value, bool):
                return decimal.Decimal(str(value))
            raise ConverterError(f"invalid value for {DECIMAL_LOGICAL}{where}: {value!r}")
        if name == DATE_LOGICAL and isinstance(value, int):
            return _EPOCH_DATE + dt.timedelta(days=value)
        if name == TIME_LOGICAL and isinstance(value, int):
            return (dt.datetime.min + dt.timedelta(milliseconds=value)).time()
        if name == TIMESTAMP_LOGICAL and isinstance(value, int):
            return _EPOCH + dt.timedelta(milliseconds=value)
    except (ValueError, OverflowError) as exc:
        raise ConverterError(f"invalid value for {name}{where}: {value!r} ({exc})") from None
    if kind in _INT_RANGES:
        if not isinstance(value, int) or isinstance(value, bool):
            raise ConverterError(f"invalid value for {kind}{where}: {value!r}")
        return value
    if kind in ("float32", "float64"):
        if not isinstance(value, (int, float)) or isinstance(value, bool):
            raise ConverterError(f"invalid value for {kind}{where}: {value!r}")
        return float(value)
    if kind == "boolean":
        if not isinstance(value, bool):
            raise ConverterError(f"invalid value for boolean{where}: {value!r}")
        return value
    if kind == "string":
        if not isinstance(value, str):
            raise ConverterError(f"invalid value for string{where}: {value!r}")
        return value
    if kind == "bytes":
        if not isinstance(value, str):
            raise ConverterError(f"invalid value for bytes{where}: {value!r}")
        try:
            return base64.b64decode(value, validate=True)
        except ValueError:
            raise ConverterError(f"invalid base64 for bytes{where}") from None
    if kind == "array":
        if not isinstance(value, list):
            raise ConverterError(f"invalid value for array{where}: {value!r}")
        items = schema.get("items")
        return [_to_connect(items, v, f"{path}[{i}]") for i, v in enumerate(value)]
    if kind == "map":
        keys, values = schema.get("keys"), schema.get("values")
        if keys is not None and keys.get("type") == "string":
            if not isinstance(value, dict):
                raise ConverterError(f"a map with string keys must be a JSON object{where}")
            return {k: _to_connect(values, v, f"{path}.{k}") for k, v in value.items()}
        if not isinstance(value, list) or not all(isinstance(e, list) and len(e) == 2 for e in value):
            raise ConverterError(
                f"a map with non-string keys must be a JSON array of [key, value] pairs{where}"
            )
        result: dict[Any, Any] = {}
        for k, v in value:
            key = _to_connect(keys, k, path)
            try:
                result[key] = _to_connect(values, v, f"{path}.{k}")
            except TypeError:
                raise ConverterError(f"map key {key!r}{where} cannot be a Python dict key") from None
        return result
    if kind == "struct":
        if not isinstance(value, dict):
            raise ConverterError(f"a struct must be a JSON object{where}")
        fields = schema.get("fields") or []
        return {f["field"]: _to_connect(f, value.get(f["field"]), f"{path}.{f['field']}") for f in fields}
    raise ConverterError(f"unknown Connect schema type {kind!r}{where}")


class JsonConverter(Converter):
    """Kafka's JsonConverter: plain JSON, or with `schemas.enable` (Kafka's default: true) the
    {"schema": ..., "payload": ...} envelope."""

    class_name = JSON_CONVERTER

    def __init__(self, role: Role, settings: Mapping[str, str] | None = None) -> None:
        super().__init__(role, settings)
        raw = self.settings.get("schemas.enable")
        self.schemas_enable = True if raw is None else _parse_bool(f"{role}.converter.schemas.enable", raw)

    @property
    def label(self) -> str:
        mode = "schemas.enable=true" if self.schemas_enable else "schemas.enable=false"
        return f"{self.role}.converter JsonConverter ({mode})"

    @property
    def connect_type(self) -> DataType:
        return StringType()

    # -- Spark expressions --

    def _fail(self, problem: str, text: Column) -> Column:
        return F.raise_error(
            F.concat(F.lit(f"{self.label}: {problem} Data: "), F.substring(text, 1, _SNIPPET))
        )

    def to_connect(self, col: Column) -> Column:
        text = col.cast("string")
        parsed = F.try_parse_json(text)
        null = F.lit(None).cast("string")
        if not self.schemas_enable:
            return (
                F.when(col.isNull(), null)
                .when(parsed.isNull(), self._fail("invalid JSON.", text))
                .when(~F.is_valid_utf8(text), self._fail("invalid UTF-8 in JSON.", text))
                # JSON null is a null value, as in Kafka.
                .when(F.is_variant_null(parsed), null)
                .otherwise(text)
            )
        top = F.try_variant_get(parsed, "$", "map<string,variant>")
        is_envelope = (
            top.isNotNull()
            & (F.size(top) == 2)
            & F.map_contains_key(top, "schema")
            & F.map_contains_key(top, "payload")
        )
        payload = top.getItem("payload")
        return (
            F.when(col.isNull(), null)
            .when(parsed.isNull(), self._fail("invalid JSON.", text))
            .when(~F.is_valid_utf8(text), self._fail("invalid UTF-8 in JSON.", text))
            .when(~is_envelope, self._fail(_ENVELOPE_ERROR, text))
            .when(F.is_variant_null(payload), null)
            # get_json_object keeps the payload's own key order but unquotes a string payload, whose
            # JSON text comes from the variant instead.
            .when(F.schema_of_variant(payload) == "STRING", F.to_json(payload))
            .otherwise(F.get_json_object(text, "$.payload"))
        )

    def from_connect(self, col: Column, data_type: DataType | None = None) -> Column:
        if isinstance(data_type, (StructType, MapType, ArrayType)):
            # Valid JSON by construction.
            text = F.to_json(col)
            checked = text
        elif data_type is None or isinstance(
            data_type,
            (
                StringType,
                BinaryType,
                NullType,
                BooleanType,
                ByteType,
                ShortType,
                IntegerType,
                LongType,
                FloatType,
                DoubleType,
                DecimalType,
            ),
        ):
            # Strings and bytes are JSON text; numbers and booleans print as JSON (NaN does not: checked).
            text = col.cast("string")
            checked = (
                F.when(F.try_parse_json(text).isNull(), self._fail("invalid JSON.", text))
                .when(~F.is_valid_utf8(text), self._fail("invalid UTF-8 in JSON.", text))
                .otherwise(text)
            )
        else:
            raise ConverterError(
                f"{self.label} cannot convert columns of type {data_type.simpleString()}; "
                "convert them to a string or struct first"
            )
        if self.schemas_enable:
            checked = F.concat(F.lit('{"schema":null,"payload":'), checked, F.lit("}"))
        return F.when(col.isNull(), F.lit(None).cast("binary")).otherwise(checked.cast("binary"))

    # -- record level --

    def _loads(self, data: bytes) -> Any:
        try:
            return json.loads(bytes(data), parse_constant=_reject_constant)
        except (ValueError, UnicodeDecodeError) as exc:
            snippet = bytes(data[:_SNIPPET]).decode("utf-8", errors="replace")
            raise ConverterError(f"{self.label}: the record is not valid JSON ({exc}): {snippet!r}") from None

    def to_connect_value(self, data: bytes | None) -> Any:
        if data is None:
            return None
        parsed = self._loads(data)
        if not self.schemas_enable:
            return parsed
        if not (isinstance(parsed, dict) and len(parsed) == 2 and "schema" in parsed and "payload" in parsed):
            raise ConverterError(f"{self.label}: {_ENVELOPE_ERROR}")
        schema = parsed["schema"]
        if schema is not None and not isinstance(schema, dict):
            raise ConverterError(
                f"{self.label}: the envelope's schema must be an object or null, got {schema!r}"
            )
        try:
            return _to_connect(schema, parsed["payload"], "")
        except ConverterError as exc:
            raise ConverterError(f"{self.label}: {exc}") from None

    def from_connect_value(self, value: Any, schema: Mapping[str, Any] | None = None) -> bytes | None:
        if schema is None and value is None:
            # A tombstone stays one, with or without the envelope (as in Kafka).
            return None
        try:
            if not self.schemas_enable:
                return _dumps(_to_json(schema, value, ""))
            if schema is None:
                schema = infer_schema(value)
            return _dumps(
                {"schema": None if schema is None else dict(schema), "payload": _to_json(schema, value, "")}
            )
        except ConverterError as exc:
            raise ConverterError(f"{self.label}: {exc}") from None


# -- resolution -----------------------------------------------------------------------------------

_CONVERTERS: Final[tuple[type[Converter], ...]] = (JsonConverter, StringConverter, ByteArrayConverter)


def _aliases(cls: type[Converter]) -> list[str]:
    simple = cls.class_name.rsplit(".", 1)[-1]
    return [
        cls.class_name,
        simple,
        simple.removesuffix("Converter"),
        f"sluiceway.converters.{simple}",
        f"{__name__}.{simple}",
    ]


CONVERTER_ALIASES: Final[Mapping[str, type[Converter]]] = {
    alias: cls for cls in _CONVERTERS for alias in _aliases(cls)
}
"""Every accepted converter name (case-sensitive, as Java class names are) → its converter."""


def converter_class(name: str) -> type[Converter]:
    cls = CONVERTER_ALIASES.get(name.strip())
    if cls is None:
        known = ", ".join(c.class_name for c in _CONVERTERS)
        raise ConverterError(f"unknown converter {name!r}; available: {known} (or their simple names)")
    return cls


def converter_for(
    connector_config: Mapping[str, str], role: Role, worker_defaults: Mapping[str, str] | None = None
) -> Converter:
    """The `role` converter of a connector, resolved as Kafka Connect's Worker does: the connector's
    `{role}.converter` with the connector's `{role}.converter.*` settings when it names one, else the
    worker's converter with the worker's settings. `worker_defaults` is the worker config; where it
    names no converter, WORKER_CONVERTER_DEFAULTS applies (the worker's own prefixed settings still
    override those defaults, e.g. `value.converter.schemas.enable=true`)."""
    if role not in ("key", "value"):
        raise ConverterError(f"converter role must be 'key' or 'value', got {role!r}")
    class_key = f"{role}.converter"
    prefix = f"{class_key}."
    source: Mapping[str, str]
    if str(connector_config.get(class_key) or "").strip():
        source = connector_config
    else:
        worker = dict(worker_defaults or {})
        if not str(worker.get(class_key) or "").strip():
            defaults = {
                k: v for k, v in WORKER_CONVERTER_DEFAULTS.items() if k == class_key or k.startswith(prefix)
            }
            worker = {**defaults, **{k: v for k, v in worker.items() if k != class_key}}
        source = worker
    settings = {k[len(prefix) :]: str(v) for k, v in source.items() if k.startswith(prefix)}
    return converter_class(str(source[class_key]))(role, settings)


__all__ = [
    "BYTE_ARRAY_CONVERTER",
    "CONVERTER_ALIASES",
    "DEFAULT_KEY_CONVERTER",
    "DEFAULT_VALUE_CONVERTER",
    "JSON_CONVERTER",
    "STRING_CONVERTER",
    "WORKER_CONVERTER_DEFAULTS",
    "ByteArrayConverter",
    "Converter",
    "ConverterError",
    "JsonConverter",
    "StringConverter",
    "converter_class",
    "converter_for",
    "infer_schema",
]
