"""Kafka's JsonConverter value mapping, record by record: a Connect value (with its optional Connect
schema, as envelope JSON) to JSON and back, Kafka's logical types, and the schema Kafka infers for a
value that has none. Pure Python; `json_converter.JsonConverter` uses it for record-level tasks."""

from __future__ import annotations

import base64
import datetime as dt
import decimal
import json
from collections.abc import Mapping
from typing import Any, Final

from sluiceway_executor.converters.base import ConverterError

# Kafka's logical types (org.apache.kafka.connect.data.*).
DECIMAL_LOGICAL: Final = "org.apache.kafka.connect.data.Decimal"
DATE_LOGICAL: Final = "org.apache.kafka.connect.data.Date"
TIME_LOGICAL: Final = "org.apache.kafka.connect.data.Time"
TIMESTAMP_LOGICAL: Final = "org.apache.kafka.connect.data.Timestamp"

# Kafka's names of FLOAT32 and FLOAT64 in the JSON envelope, and the ones this converter wrote
# before it followed them (still read, so records already in topics stay readable).
_FLOAT_NAMES = frozenset({"float", "double", "float32", "float64"})
_INT_RANGES: Final[Mapping[str, tuple[int, int]]] = {
    "int8": (-(2**7), 2**7 - 1),
    "int16": (-(2**15), 2**15 - 1),
    "int32": (-(2**31), 2**31 - 1),
    "int64": (-(2**63), 2**63 - 1),
}
_EPOCH_DATE = dt.date(1970, 1, 1)
_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)


def dumps_json(value: Any) -> bytes:
    # Jackson's output: compact, UTF-8, non-ASCII unescaped; NaN and infinities are not JSON.
    try:
        return json.dumps(value, separators=(",", ":"), ensure_ascii=False, allow_nan=False).encode("utf-8")
    except ValueError as exc:
        raise ConverterError(f"cannot serialise as JSON: {exc}") from None


def reject_constant(token: str) -> Any:
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
        # Kafka's JSON names FLOAT64 "double" (and FLOAT32 "float").
        return _primitive_schema("double")
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


def connect_to_json(schema: Mapping[str, Any] | None, value: Any, path: str) -> Any:
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
    if kind in _FLOAT_NAMES:
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
        return [connect_to_json(items, v, f"{path}[{i}]") for i, v in enumerate(value)]
    if kind == "map":
        if not isinstance(value, Mapping):
            raise ConverterError(f"invalid value for map{where}: {type(value).__name__}")
        keys, values = schema.get("keys"), schema.get("values")
        if keys is not None and keys.get("type") == "string":
            return {
                connect_to_json(keys, k, path): connect_to_json(values, v, f"{path}.{k}")
                for k, v in value.items()
            }
        return [
            [connect_to_json(keys, k, path), connect_to_json(values, v, f"{path}.{k}")]
            for k, v in value.items()
        ]
    if kind == "struct":
        if not isinstance(value, Mapping):
            raise ConverterError(f"invalid value for struct{where}: {type(value).__name__}")
        fields = schema.get("fields") or []
        names = {f.get("field") for f in fields}
        unknown = [k for k in value if k not in names]
        if unknown:
            raise ConverterError(f"struct{where} has fields its schema does not define: {unknown}")
        return {f["field"]: connect_to_json(f, value.get(f["field"]), f"{path}.{f['field']}") for f in fields}
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
        return [connect_to_json(None, v, f"{path}[{i}]") for i, v in enumerate(value)]
    if isinstance(value, Mapping):
        if all(isinstance(k, str) for k in value):
            return {k: connect_to_json(None, v, f"{path}.{k}") for k, v in value.items()}
        # Kafka writes maps with non-string keys as arrays of [key, value] pairs.
        return [
            [connect_to_json(None, k, path), connect_to_json(None, v, f"{path}.{k}")]
            for k, v in value.items()
        ]
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


def json_to_connect(schema: Mapping[str, Any] | None, value: Any, path: str) -> Any:
    """Kafka's JsonConverter.convertToConnect: a parsed payload → the Connect value, by its schema."""
    where = f" at {path}" if path else ""
    if value is None:
        if schema is None:
            return None
        if schema.get("default") is not None:
            return json_to_connect(schema, schema["default"], path)
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
    if kind in _FLOAT_NAMES:
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
        return [json_to_connect(items, v, f"{path}[{i}]") for i, v in enumerate(value)]
    if kind == "map":
        keys, values = schema.get("keys"), schema.get("values")
        if keys is not None and keys.get("type") == "string":
            if not isinstance(value, dict):
                raise ConverterError(f"a map with string keys must be a JSON object{where}")
            return {k: json_to_connect(values, v, f"{path}.{k}") for k, v in value.items()}
        if not isinstance(value, list) or not all(isinstance(e, list) and len(e) == 2 for e in value):
            raise ConverterError(
                f"a map with non-string keys must be a JSON array of [key, value] pairs{where}"
            )
        result: dict[Any, Any] = {}
        for k, v in value:
            key = json_to_connect(keys, k, path)
            try:
                result[key] = json_to_connect(values, v, f"{path}.{k}")
            except TypeError:
                raise ConverterError(f"map key {key!r}{where} cannot be a Python dict key") from None
        return result
    if kind == "struct":
        if not isinstance(value, dict):
            raise ConverterError(f"a struct must be a JSON object{where}")
        fields = schema.get("fields") or []
        return {f["field"]: json_to_connect(f, value.get(f["field"]), f"{path}.{f['field']}") for f in fields}
    raise ConverterError(f"unknown Connect schema type {kind!r}{where}")
