"""Kafka's JsonConverter format: Connect schemas and values as JSON, and the envelope
``{"schema": ..., "payload": ...}`` that ``schemas.enable=true`` writes.

The JSON trees keep the key order Kafka writes, so ``json_text.dumps`` of them gives the same
bytes. A schema is written as: ``type``; then ``items`` (array), ``keys`` and ``values`` (map) or
``fields`` (struct); then ``optional``, and, when set, ``name``, ``version``, ``doc``,
``parameters`` and ``default``. Each struct field is its schema's object with ``field`` (the
name) added last. Type names differ from ``Type`` for floats: FLOAT32 is ``float`` and FLOAT64 is
``double``.

Values: bytes as base64 text; a map whose key schema is STRING as an object, any other map as an
array of ``[key, value]`` pairs; Date, Time and Timestamp as their integers; Decimal as base64 of
the unscaled two's-complement bytes (``decimal_format="BASE64"``, Kafka's default) or as a number
(``"NUMERIC"``). A null replaced by the schema's default follows ``replace_null_with_default``
(Kafka's ``replace.null.with.default``, true by default).
"""

from __future__ import annotations

import base64
import binascii
import decimal
from collections.abc import Mapping
from typing import Any, Final, Literal

from sluiceway.connect.data import json_text
from sluiceway.connect.data.schema import (
    DATE_NAME,
    DECIMAL_NAME,
    TIME_NAME,
    TIMESTAMP_NAME,
    DataException,
    Field,
    Schema,
    Type,
)
from sluiceway.connect.data.values import (
    INT_RANGES,
    date_from_days,
    date_to_days,
    decimal_from_unscaled_bytes,
    decimal_to_unscaled_bytes,
    rescale_decimal,
    time_from_millis,
    time_to_millis,
    timestamp_from_millis,
    timestamp_to_millis,
    validate_value,
)

__all__ = [
    "DecimalFormat",
    "envelope_from_bytes",
    "envelope_to_bytes",
    "schema_from_json",
    "schema_to_json",
    "value_from_json",
    "value_to_json",
]

DecimalFormat = Literal["BASE64", "NUMERIC"]

_JSON_NAMES: Final[Mapping[Type, str]] = {
    **{kind: kind.value for kind in Type},
    Type.FLOAT32: "float",
    Type.FLOAT64: "double",
}
_TYPES_BY_JSON_NAME: Final[Mapping[str, Type]] = {name: kind for kind, name in _JSON_NAMES.items()}


def schema_to_json(schema: Schema, decimal_format: DecimalFormat = "BASE64") -> dict[str, Any]:
    """The JSON object Kafka's JsonConverter writes for ``schema``."""
    out: dict[str, Any] = {"type": _JSON_NAMES[schema.type]}
    if schema.type is Type.ARRAY:
        assert schema.value_schema is not None
        out["items"] = schema_to_json(schema.value_schema, decimal_format)
    elif schema.type is Type.MAP:
        assert schema.key_schema is not None and schema.value_schema is not None
        out["keys"] = schema_to_json(schema.key_schema, decimal_format)
        out["values"] = schema_to_json(schema.value_schema, decimal_format)
    elif schema.type is Type.STRUCT:
        out["fields"] = [
            {**schema_to_json(item.schema, decimal_format), "field": item.name} for item in schema.fields
        ]
    out["optional"] = schema.optional
    if schema.name is not None:
        out["name"] = schema.name
    if schema.version is not None:
        out["version"] = schema.version
    if schema.doc is not None:
        out["doc"] = schema.doc
    if schema.parameters is not None:
        out["parameters"] = dict(schema.parameters)
    if schema.default is not None:
        out["default"] = value_to_json(schema, schema.default, decimal_format)
    return out


def schema_from_json(node: Any, path: str = "") -> Schema:
    """The schema a JSON object of Kafka's format describes (read as Kafka reads it: a missing
    ``optional`` means required, and attributes of the wrong JSON type are ignored, except
    parameters, which must be text)."""
    where = f" at {path}" if path else ""
    if not isinstance(node, dict):
        raise DataException(f"a schema must be a JSON object{where}, got {type(node).__name__}")
    kind_name = node.get("type")
    if not isinstance(kind_name, str):
        raise DataException(f"a schema needs a text 'type'{where}")
    kind = _TYPES_BY_JSON_NAME.get(kind_name)
    if kind is None:
        raise DataException(f"unknown schema type {kind_name!r}{where}")
    parts: dict[str, Any] = {}
    if kind is Type.ARRAY:
        if node.get("items") is None:
            raise DataException(f"an array schema needs 'items'{where}")
        parts["value_schema"] = schema_from_json(node["items"], f"{path}[]")
    elif kind is Type.MAP:
        for key, attribute in (("keys", "key_schema"), ("values", "value_schema")):
            if key not in node:
                raise DataException(f"a map schema needs {key!r}{where}")
            parts[attribute] = schema_from_json(node[key], f"{path}<{key}>")
    elif kind is Type.STRUCT:
        parts["fields"] = _fields_from_json(node.get("fields"), path)
    version = node.get("version")
    if isinstance(version, int) and not isinstance(version, bool):
        parts["version"] = version
    for key in ("name", "doc"):
        if isinstance(node.get(key), str):
            parts[key] = node[key]
    parameters = node.get("parameters")
    if isinstance(parameters, dict):
        if not all(isinstance(value, str) for value in parameters.values()):
            raise DataException(f"schema parameters must have text values{where}")
        parts["parameters"] = parameters
    schema = Schema(kind, optional=node.get("optional") is True, **parts)
    if node.get("default") is not None:
        default = value_from_json(schema, node["default"], path=f"<default{where}>")
        schema = schema.with_options(default=default)
    return schema


def _fields_from_json(fields: Any, path: str) -> tuple[Field, ...]:
    if not isinstance(fields, list):
        raise DataException(f"a struct schema's 'fields' must be an array{' at ' + path if path else ''}")
    made: list[Field] = []
    for position, item in enumerate(fields):
        name = item.get("field") if isinstance(item, dict) else None
        if not isinstance(name, str):
            raise DataException(
                f"field {position} of a struct schema{' at ' + path if path else ''} has no name"
            )
        made.append(Field(name, position, schema_from_json(item, f"{path}.{name}" if path else name)))
    return tuple(made)


def value_to_json(
    schema: Schema | None,
    value: Any,
    decimal_format: DecimalFormat = "BASE64",
    replace_null_with_default: bool = True,
    path: str = "",
) -> Any:
    """``value`` as the JSON tree Kafka writes for it (checked against ``schema``); without a
    schema the value's own Python type decides, as in Kafka's schemaless mode."""
    if schema is None:
        return _schemaless_to_json(value, path)
    validate_value(schema, value, path)
    return _to_json(schema, value, decimal_format, replace_null_with_default, path)


def _to_json(schema: Schema, value: Any, decimal_format: DecimalFormat, replace: bool, path: str) -> Any:
    if value is None:
        if schema.default is not None and replace:
            value = schema.default
        else:
            return None
    logical = schema.logical_name
    if logical == DECIMAL_NAME:
        if decimal_format == "NUMERIC":
            return rescale_decimal(schema, value, path)
        return base64.b64encode(decimal_to_unscaled_bytes(schema, value, path)).decode("ascii")
    if logical == DATE_NAME:
        return date_to_days(value)
    if logical == TIME_NAME:
        return time_to_millis(value)
    if logical == TIMESTAMP_NAME:
        return timestamp_to_millis(value)
    kind = schema.type
    if kind is Type.FLOAT32:
        return json_text.Float32(value)
    if kind is Type.FLOAT64:
        return float(value)
    if kind is Type.BYTES:
        return base64.b64encode(bytes(value)).decode("ascii")
    if kind is Type.ARRAY:
        items = schema.value_schema
        assert items is not None
        return [_to_json(items, v, decimal_format, replace, f"{path}[{i}]") for i, v in enumerate(value)]
    if kind is Type.MAP:
        keys, values = schema.key_schema, schema.value_schema
        assert keys is not None and values is not None
        pairs = [
            (
                _to_json(keys, k, decimal_format, replace, path),
                _to_json(values, v, decimal_format, replace, f"{path}[{k!r}]"),
            )
            for k, v in value.items()
        ]
        if keys.type is Type.STRING:
            return dict(pairs)
        return [[k, v] for k, v in pairs]
    if kind is Type.STRUCT:
        return {
            item.name: _to_json(
                item.schema,
                value.get(item.name),
                decimal_format,
                replace,
                f"{path}.{item.name}" if path else item.name,
            )
            for item in schema.fields
        }
    return value


def _schemaless_to_json(value: Any, path: str) -> Any:
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, (bytes, bytearray, memoryview)):
        return base64.b64encode(bytes(value)).decode("ascii")
    if isinstance(value, (list, tuple)):
        return [_schemaless_to_json(v, f"{path}[{i}]") for i, v in enumerate(value)]
    if isinstance(value, Mapping):
        if all(isinstance(k, str) for k in value):
            return {k: _schemaless_to_json(v, f"{path}[{k!r}]") for k, v in value.items()}
        return [
            [_schemaless_to_json(k, path), _schemaless_to_json(v, f"{path}[{k!r}]")] for k, v in value.items()
        ]
    where = f" at {path}" if path else ""
    raise DataException(
        f"{type(value).__name__}{where} has no Connect type without a schema; give the record one"
    )


def value_from_json(
    schema: Schema | None, node: Any, replace_null_with_default: bool = True, path: str = ""
) -> Any:
    """The Connect value a parsed JSON payload holds under ``schema`` (Kafka's reading rules)."""
    where = f" at {path}" if path else ""
    if schema is None:
        return _schemaless_from_json(node)
    if node is None:
        if schema.default is not None and replace_null_with_default:
            return schema.default
        if schema.optional or schema.default is not None:
            # With a default but no replacement, null stays null (Kafka would refuse it).
            return None
        raise DataException(f"null{where} for a required {schema.type.value} with no default")
    logical = schema.logical_name
    if logical is not None:
        return _logical_from_json(schema, logical, node, where)
    kind = schema.type
    if kind in INT_RANGES:
        if not isinstance(node, int) or isinstance(node, bool):
            raise DataException(f"{kind.value} expected{where}, got {node!r}")
        low, high = INT_RANGES[kind]
        if not low <= node <= high:
            raise DataException(f"{node} is out of range for {kind.value}{where}")
        return node
    if kind in (Type.FLOAT32, Type.FLOAT64):
        if not isinstance(node, (int, float, decimal.Decimal)) or isinstance(node, bool):
            raise DataException(f"{kind.value} expected{where}, got {node!r}")
        return json_text.round_to_float32(float(node)) if kind is Type.FLOAT32 else float(node)
    if kind is Type.BOOLEAN:
        if not isinstance(node, bool):
            raise DataException(f"boolean expected{where}, got {node!r}")
        return node
    if kind is Type.STRING:
        if not isinstance(node, str):
            raise DataException(f"string expected{where}, got {node!r}")
        return node
    if kind is Type.BYTES:
        return _base64(node, where)
    if kind is Type.ARRAY:
        if not isinstance(node, list):
            raise DataException(f"a JSON array expected{where}, got {type(node).__name__}")
        items = schema.value_schema
        return [
            value_from_json(items, v, replace_null_with_default, f"{path}[{i}]") for i, v in enumerate(node)
        ]
    if kind is Type.MAP:
        return _map_from_json(schema, node, replace_null_with_default, path)
    if not isinstance(node, dict):
        raise DataException(f"a struct must be a JSON object{where}, got {type(node).__name__}")
    return {
        item.name: value_from_json(
            item.schema,
            node.get(item.name),
            replace_null_with_default,
            f"{path}.{item.name}" if path else item.name,
        )
        for item in schema.fields
    }


def _schemaless_from_json(node: Any) -> Any:
    # Without a schema Kafka reads a number with a fraction as a float64, an object as a map.
    if isinstance(node, decimal.Decimal):
        return float(node)
    if isinstance(node, list):
        return [_schemaless_from_json(v) for v in node]
    if isinstance(node, dict):
        return {k: _schemaless_from_json(v) for k, v in node.items()}
    return node


def _map_from_json(schema: Schema, node: Any, replace: bool, path: str) -> dict[Any, Any]:
    where = f" at {path}" if path else ""
    keys, values = schema.key_schema, schema.value_schema
    assert keys is not None and values is not None
    if keys.type is Type.STRING:
        if not isinstance(node, dict):
            raise DataException(f"a map with text keys must be a JSON object{where}")
        return {k: value_from_json(values, v, replace, f"{path}[{k!r}]") for k, v in node.items()}
    if not isinstance(node, list) or not all(isinstance(e, list) and len(e) == 2 for e in node):
        raise DataException(f"a map with non-text keys must be a JSON array of [key, value] pairs{where}")
    result: dict[Any, Any] = {}
    for key_node, value_node in node:
        key = value_from_json(keys, key_node, replace, path)
        try:
            result[key] = value_from_json(values, value_node, replace, f"{path}[{key!r}]")
        except TypeError:
            raise DataException(f"map key {key!r}{where} cannot be a Python dict key") from None
    return result


def _base64(node: Any, where: str) -> bytes:
    if not isinstance(node, str):
        raise DataException(f"base64 text expected{where}, got {node!r}")
    try:
        return base64.b64decode(node, validate=True)
    except (binascii.Error, ValueError):
        raise DataException(f"invalid base64{where}") from None


def _logical_from_json(schema: Schema, logical: str, node: Any, where: str) -> Any:
    if logical == DECIMAL_NAME:
        if isinstance(node, str):
            return decimal_from_unscaled_bytes(schema, _base64(node, where))
        if isinstance(node, (int, decimal.Decimal, float)) and not isinstance(node, bool):
            # A number is taken as written, as Kafka does (its scale need not be the schema's).
            return decimal.Decimal(str(node)) if isinstance(node, float) else decimal.Decimal(node)
        raise DataException(f"a Decimal must be base64 text or a number{where}, got {node!r}")
    if not isinstance(node, int) or isinstance(node, bool):
        raise DataException(f"{logical.rsplit('.', 1)[-1]} must be an integer{where}, got {node!r}")
    if logical == DATE_NAME:
        return date_from_days(node)
    if logical == TIME_NAME:
        return time_from_millis(node)
    return timestamp_from_millis(node)


def envelope_to_bytes(
    schema: Schema | None,
    value: Any,
    decimal_format: DecimalFormat = "BASE64",
    replace_null_with_default: bool = True,
) -> bytes | None:
    """The record bytes JsonConverter writes with ``schemas.enable=true``; None (a tombstone)
    when both schema and value are None."""
    if schema is None and value is None:
        return None
    envelope = {
        "schema": None if schema is None else schema_to_json(schema, decimal_format),
        "payload": value_to_json(schema, value, decimal_format, replace_null_with_default),
    }
    return json_text.dumps(envelope)


def envelope_from_bytes(
    data: bytes | None, replace_null_with_default: bool = True
) -> tuple[Schema | None, Any]:
    """The schema and value of an envelope record (None, None for a tombstone)."""
    if data is None:
        return None, None
    node = json_text.loads(data)
    if not isinstance(node, dict) or set(node) != {"schema", "payload"}:
        raise DataException('an envelope is a JSON object with exactly the keys "schema" and "payload"')
    schema = None if node["schema"] is None else schema_from_json(node["schema"])
    return schema, value_from_json(schema, node["payload"], replace_null_with_default)
