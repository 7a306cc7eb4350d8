"""Kafka Connect schemas: the types a record's key, value and fields may have.

A :class:`Schema` is immutable. Primitive schemas come as constants (``INT32_SCHEMA``,
``OPTIONAL_STRING_SCHEMA`` ...); composite and logical ones from the functions below
(``struct_schema``, ``array_schema``, ``map_schema``, ``decimal_schema``, ``date_schema``,
``time_schema``, ``timestamp_schema``). ``Schema.with_options`` derives a variant (optional, a
default, a name, a version, documentation, parameters). Values are plain Python objects, listed
in ``sluiceway.connect.data.values``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from types import MappingProxyType
from typing import Any, Final

from sluiceway.connect.connector import DataException

__all__ = [
    "BOOLEAN_SCHEMA",
    "BYTES_SCHEMA",
    "DATE_NAME",
    "DECIMAL_NAME",
    "FLOAT32_SCHEMA",
    "FLOAT64_SCHEMA",
    "INT8_SCHEMA",
    "INT16_SCHEMA",
    "INT32_SCHEMA",
    "INT64_SCHEMA",
    "OPTIONAL_BOOLEAN_SCHEMA",
    "OPTIONAL_BYTES_SCHEMA",
    "OPTIONAL_FLOAT32_SCHEMA",
    "OPTIONAL_FLOAT64_SCHEMA",
    "OPTIONAL_INT8_SCHEMA",
    "OPTIONAL_INT16_SCHEMA",
    "OPTIONAL_INT32_SCHEMA",
    "OPTIONAL_INT64_SCHEMA",
    "OPTIONAL_STRING_SCHEMA",
    "PRECISION_PARAMETER",
    "SCALE_PARAMETER",
    "STRING_SCHEMA",
    "TIMESTAMP_NAME",
    "TIME_NAME",
    "DataException",
    "Field",
    "Schema",
    "Type",
    "array_schema",
    "date_schema",
    "decimal_precision",
    "decimal_scale",
    "decimal_schema",
    "map_schema",
    "struct_schema",
    "time_schema",
    "timestamp_schema",
]

# The names Kafka gives its logical types, and the parameters of a decimal.
DECIMAL_NAME: Final = "org.apache.kafka.connect.data.Decimal"
DATE_NAME: Final = "org.apache.kafka.connect.data.Date"
TIME_NAME: Final = "org.apache.kafka.connect.data.Time"
TIMESTAMP_NAME: Final = "org.apache.kafka.connect.data.Timestamp"
SCALE_PARAMETER: Final = "scale"
# Set by Confluent's converters (and by ours when the precision is known); Kafka ignores it.
PRECISION_PARAMETER: Final = "connect.decimal.precision"


# How a schema checks its default: `values.validate_value`, which sets it when it loads (the
# package's __init__ loads it), so that this module need not import the module that imports it.
_default_check: Callable[[Schema, Any, str], None] | None = None


class Type(StrEnum):
    """Kafka Connect's schema types (``Schema.Type``), by their lower-case names."""

    INT8 = "int8"
    INT16 = "int16"
    INT32 = "int32"
    INT64 = "int64"
    FLOAT32 = "float32"
    FLOAT64 = "float64"
    BOOLEAN = "boolean"
    STRING = "string"
    BYTES = "bytes"
    ARRAY = "array"
    MAP = "map"
    STRUCT = "struct"

    @property
    def is_primitive(self) -> bool:
        return self not in (Type.ARRAY, Type.MAP, Type.STRUCT)


@dataclass(frozen=True)
class Field:
    """One field of a struct schema: its name, its position and its schema."""

    name: str
    index: int
    schema: Schema


@dataclass(frozen=True)
class Schema:
    """A Kafka Connect schema.

    ``fields`` belongs to STRUCT, ``value_schema`` to ARRAY (the elements) and MAP (the values),
    ``key_schema`` to MAP. ``default`` is a value of this schema, checked when the schema is made;
    ``None`` means there is none. ``parameters`` keeps its order (the JSON form writes it in
    order) but compares as a mapping. Schemas compare by every attribute, as Kafka's do; the hash
    leaves out the attributes that may hold unhashable values.
    """

    type: Type
    optional: bool = False
    default: Any = field(default=None, hash=False)
    name: str | None = None
    version: int | None = None
    doc: str | None = field(default=None, hash=False)
    parameters: Mapping[str, str] | None = field(default=None, hash=False)
    fields: tuple[Field, ...] = ()
    key_schema: Schema | None = None
    value_schema: Schema | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "type", Type(self.type))
        label = self.name or self.type.value
        if self.parameters is not None:
            params = dict(self.parameters)
            for key, value in params.items():
                if not isinstance(key, str) or not isinstance(value, str):
                    raise DataException(f"schema {label}: parameters must map text to text, got {key!r}")
            object.__setattr__(self, "parameters", MappingProxyType(params))
        if self.version is not None and (not isinstance(self.version, int) or isinstance(self.version, bool)):
            raise DataException(f"schema {label}: version must be an integer, got {self.version!r}")
        object.__setattr__(self, "fields", tuple(self.fields))
        self._check_shape(label)
        if self.logical_name == DECIMAL_NAME:
            decimal_scale(self)
            decimal_precision(self)
        if self.default is not None:
            assert _default_check is not None, "sluiceway.connect.data.values is not loaded"
            _default_check(self, self.default, f"<default of {label}>")

    def _check_shape(self, label: str) -> None:
        kind = self.type
        if kind is Type.STRUCT:
            seen: set[str] = set()
            for position, item in enumerate(self.fields):
                if not isinstance(item, Field) or item.index != position:
                    raise DataException(
                        f"schema {label}: field {position} must be a Field with index {position}"
                    )
                if item.name in seen:
                    raise DataException(f"schema {label}: field {item.name!r} appears twice")
                seen.add(item.name)
        elif self.fields:
            raise DataException(f"schema {label}: only a struct has fields")
        if (kind is Type.MAP) != (self.key_schema is not None):
            raise DataException(f"schema {label}: a map, and only a map, has a key schema")
        if (kind in (Type.ARRAY, Type.MAP)) != (self.value_schema is not None):
            raise DataException(f"schema {label}: an array or map, and only they, have a value schema")

    # -- reading --

    def field(self, name: str) -> Field | None:
        """The struct field called ``name``, or None."""
        for item in self.fields:
            if item.name == name:
                return item
        return None

    @property
    def logical_name(self) -> str | None:
        """The logical type this schema stands for (Decimal, Date, Time, Timestamp), else None.

        A schema counts as a logical type only when its name and its underlying type both match;
        a schema that borrows a logical name over another type is read as its plain type.
        """
        expected = _LOGICAL_BASES.get(self.name or "")
        return self.name if expected is not None and expected is self.type else None

    # -- deriving --

    def with_options(self, **changes: Any) -> Schema:
        """A copy with the given attributes changed (checked like a new schema)."""
        return dataclasses.replace(self, **changes)

    def as_optional(self) -> Schema:
        return self if self.optional else dataclasses.replace(self, optional=True)

    def as_required(self) -> Schema:
        return dataclasses.replace(self, optional=False) if self.optional else self

    def __repr__(self) -> str:
        parts = [self.type.value]
        if self.name:
            parts.append(f"name={self.name!r}")
        if self.optional:
            parts.append("optional")
        if self.type is Type.STRUCT:
            parts.append("fields=[" + ", ".join(f"{f.name}: {f.schema!r}" for f in self.fields) + "]")
        if self.key_schema is not None:
            parts.append(f"keys={self.key_schema!r}")
        if self.value_schema is not None:
            parts.append(f"values={self.value_schema!r}")
        return "Schema(" + ", ".join(parts) + ")"


_LOGICAL_BASES: Final[Mapping[str, Type]] = {
    DECIMAL_NAME: Type.BYTES,
    DATE_NAME: Type.INT32,
    TIME_NAME: Type.INT32,
    TIMESTAMP_NAME: Type.INT64,
}


def decimal_scale(schema: Schema) -> int:
    """The ``scale`` parameter of a decimal schema."""
    raw = (schema.parameters or {}).get(SCALE_PARAMETER)
    if raw is None:
        raise DataException(f"decimal schema {schema.name!r} has no {SCALE_PARAMETER!r} parameter")
    try:
        return int(raw)
    except ValueError:
        raise DataException(f"decimal schema has a scale that is not an integer: {raw!r}") from None


def decimal_precision(schema: Schema) -> int | None:
    """The precision a decimal schema declares (Confluent's parameter), or None."""
    raw = (schema.parameters or {}).get(PRECISION_PARAMETER)
    if raw is None:
        return None
    try:
        precision = int(raw)
    except ValueError:
        precision = 0
    if precision < 1:
        raise DataException(f"decimal schema has a precision that is not a positive integer: {raw!r}")
    return precision


def _primitive(kind: Type, optional: bool) -> Schema:
    return Schema(kind, optional=optional)


INT8_SCHEMA: Final = _primitive(Type.INT8, False)
INT16_SCHEMA: Final = _primitive(Type.INT16, False)
INT32_SCHEMA: Final = _primitive(Type.INT32, False)
INT64_SCHEMA: Final = _primitive(Type.INT64, False)
FLOAT32_SCHEMA: Final = _primitive(Type.FLOAT32, False)
FLOAT64_SCHEMA: Final = _primitive(Type.FLOAT64, False)
BOOLEAN_SCHEMA: Final = _primitive(Type.BOOLEAN, False)
STRING_SCHEMA: Final = _primitive(Type.STRING, False)
BYTES_SCHEMA: Final = _primitive(Type.BYTES, False)
OPTIONAL_INT8_SCHEMA: Final = _primitive(Type.INT8, True)
OPTIONAL_INT16_SCHEMA: Final = _primitive(Type.INT16, True)
OPTIONAL_INT32_SCHEMA: Final = _primitive(Type.INT32, True)
OPTIONAL_INT64_SCHEMA: Final = _primitive(Type.INT64, True)
OPTIONAL_FLOAT32_SCHEMA: Final = _primitive(Type.FLOAT32, True)
OPTIONAL_FLOAT64_SCHEMA: Final = _primitive(Type.FLOAT64, True)
OPTIONAL_BOOLEAN_SCHEMA: Final = _primitive(Type.BOOLEAN, True)
OPTIONAL_STRING_SCHEMA: Final = _primitive(Type.STRING, True)
OPTIONAL_BYTES_SCHEMA: Final = _primitive(Type.BYTES, True)


def struct_schema(fields: Mapping[str, Schema] | Iterable[tuple[str, Schema]], **options: Any) -> Schema:
    """A struct with the given fields in order; ``options`` are further Schema attributes."""
    pairs = list(fields.items()) if isinstance(fields, Mapping) else list(fields)
    made = tuple(Field(name, index, schema) for index, (name, schema) in enumerate(pairs))
    return Schema(Type.STRUCT, fields=made, **options)


def array_schema(items: Schema, **options: Any) -> Schema:
    """An array whose elements have schema ``items``."""
    return Schema(Type.ARRAY, value_schema=items, **options)


def map_schema(keys: Schema, values: Schema, **options: Any) -> Schema:
    """A map from ``keys`` to ``values``."""
    return Schema(Type.MAP, key_schema=keys, value_schema=values, **options)


def decimal_schema(scale: int, precision: int | None = None, **options: Any) -> Schema:
    """Kafka's Decimal: bytes holding the unscaled value, with the scale (and, when known, the
    precision) as parameters; version 1, as Kafka's builder sets it."""
    parameters = {SCALE_PARAMETER: str(scale)}
    if precision is not None:
        parameters[PRECISION_PARAMETER] = str(precision)
    options.setdefault("version", 1)
    return Schema(Type.BYTES, name=DECIMAL_NAME, parameters=parameters, **options)


def date_schema(**options: Any) -> Schema:
    """Kafka's Date: int32 days since 1970-01-01; the value is a ``datetime.date``."""
    options.setdefault("version", 1)
    return Schema(Type.INT32, name=DATE_NAME, **options)


def time_schema(**options: Any) -> Schema:
    """Kafka's Time: int32 milliseconds since midnight; the value is a ``datetime.time``."""
    options.setdefault("version", 1)
    return Schema(Type.INT32, name=TIME_NAME, **options)


def timestamp_schema(**options: Any) -> Schema:
    """Kafka's Timestamp: int64 milliseconds since the epoch; the value is a ``datetime.datetime``
    (one without a time zone is read as UTC)."""
    options.setdefault("version", 1)
    return Schema(Type.INT64, name=TIMESTAMP_NAME, **options)
