"""Hypothesis strategies for Kafka Connect schemas and their values (shared by the unit and the
Spark integration tests of sluiceway.connect.data)."""

from __future__ import annotations

import datetime as dt
import decimal
from typing import Any

from hypothesis import strategies as st

from sluiceway.connect.data import (
    Field,
    Schema,
    Type,
    date_schema,
    decimal_schema,
    time_schema,
    timestamp_schema,
)
from sluiceway.connect.data.schema import decimal_precision, decimal_scale

_PLAIN = [
    Type.INT8,
    Type.INT16,
    Type.INT32,
    Type.INT64,
    Type.FLOAT32,
    Type.FLOAT64,
    Type.BOOLEAN,
    Type.STRING,
    Type.BYTES,
]
_INT_BITS = {Type.INT8: 8, Type.INT16: 16, Type.INT32: 32, Type.INT64: 64}
_NAMES = st.text(alphabet="abcXY_.", min_size=1, max_size=6)
# Field names Spark takes anywhere (its DDL parser, which Spark Connect may use, refuses some).
_FIELD_NAMES = st.text(alphabet="abcXY_", min_size=1, max_size=6)
_TEXT = st.text(max_size=6)


@st.composite
def _decimals(draw: st.DrawFn) -> Schema:
    scale = draw(st.integers(0, 12))
    precision = draw(st.one_of(st.none(), st.integers(max(scale, 1), 38)))
    return decimal_schema(scale, precision)


def _primitive_schemas() -> st.SearchStrategy[Schema]:
    plain = st.builds(Schema, st.sampled_from(_PLAIN))
    logical = st.one_of(
        _decimals(), st.just(date_schema()), st.just(time_schema()), st.just(timestamp_schema())
    )
    return st.one_of(plain, logical)


@st.composite
def _decorate(draw: st.DrawFn, base: Schema, key: bool = False) -> Schema:
    # Optional, and for a schema that is not a logical type: a name, version, doc and parameters.
    changes: dict[str, Any] = {"optional": draw(st.booleans())}
    if base.logical_name is None:
        changes["name"] = draw(st.one_of(st.none(), _NAMES))
        changes["version"] = draw(st.one_of(st.none(), st.integers(1, 9)))
        changes["parameters"] = draw(st.one_of(st.none(), st.dictionaries(_NAMES, _TEXT, max_size=2)))
    changes["doc"] = draw(st.one_of(st.none(), _TEXT))
    schema = base.with_options(**changes)
    if not key and draw(st.integers(0, 4)) == 0:
        schema = schema.with_options(default=draw(values(schema.as_required())))
    return schema


def _map_keys() -> st.SearchStrategy[Schema]:
    keys = st.one_of(
        st.builds(Schema, st.sampled_from([Type.STRING, Type.INT32, Type.INT64, Type.BOOLEAN])),
        st.just(date_schema()),
        _decimals(),
    )
    return keys.flatmap(lambda s: _decorate(s, key=True))


def schemas(max_leaves: int = 8) -> st.SearchStrategy[Schema]:
    """Random schemas: nested structs, arrays and maps over every primitive and logical type."""
    leaves = _primitive_schemas().flatmap(_decorate)

    def extend(children: st.SearchStrategy[Schema]) -> st.SearchStrategy[Schema]:
        arrays = children.map(lambda items: Schema(Type.ARRAY, value_schema=items))
        maps = st.tuples(_map_keys(), children).map(
            lambda kv: Schema(Type.MAP, key_schema=kv[0], value_schema=kv[1])
        )
        structs = st.lists(
            st.tuples(_FIELD_NAMES, children), min_size=1, max_size=4, unique_by=lambda p: p[0]
        ).map(
            lambda pairs: Schema(Type.STRUCT, fields=tuple(Field(n, i, s) for i, (n, s) in enumerate(pairs)))
        )
        return st.one_of(arrays, maps, structs).flatmap(_decorate)

    return st.recursive(leaves, extend, max_leaves=max_leaves)


def struct_schemas() -> st.SearchStrategy[Schema]:
    """Random top-level struct schemas (a row of a DataFrame)."""
    return st.lists(
        st.tuples(_FIELD_NAMES, schemas(6)), min_size=1, max_size=4, unique_by=lambda p: p[0]
    ).map(lambda pairs: Schema(Type.STRUCT, fields=tuple(Field(n, i, s) for i, (n, s) in enumerate(pairs))))


def values(schema: Schema, with_nulls: bool = True) -> st.SearchStrategy[Any]:
    """Values of ``schema`` that every form keeps exactly (milliseconds, 32-bit floats ...)."""
    strategy = _non_null(schema, with_nulls)
    if with_nulls and (schema.optional or schema.default is not None):
        return st.one_of(st.none(), strategy)
    return strategy


def _non_null(schema: Schema, with_nulls: bool) -> st.SearchStrategy[Any]:
    logical = schema.logical_name
    if logical is not None:
        return _logical_values(schema)
    kind = schema.type
    if kind in _INT_BITS:
        bits = _INT_BITS[kind]
        return st.integers(-(2 ** (bits - 1)), 2 ** (bits - 1) - 1)
    if kind is Type.FLOAT32:
        return st.floats(width=32, allow_nan=False, allow_infinity=False)
    if kind is Type.FLOAT64:
        return st.floats(allow_nan=False, allow_infinity=False)
    if kind is Type.BOOLEAN:
        return st.booleans()
    if kind is Type.STRING:
        return st.text(max_size=8)
    if kind is Type.BYTES:
        return st.binary(max_size=8)
    if kind is Type.ARRAY:
        assert schema.value_schema is not None
        return st.lists(values(schema.value_schema, with_nulls), max_size=3)
    if kind is Type.MAP:
        assert schema.key_schema is not None and schema.value_schema is not None
        return st.dictionaries(
            _non_null(schema.key_schema, with_nulls), values(schema.value_schema, with_nulls), max_size=3
        )
    return st.fixed_dictionaries({f.name: values(f.schema, with_nulls) for f in schema.fields})


def _logical_values(schema: Schema) -> st.SearchStrategy[Any]:
    logical = schema.logical_name
    if logical == "org.apache.kafka.connect.data.Decimal":
        scale = decimal_scale(schema)
        digits = min(decimal_precision(schema) or 38, 38)
        bound = 10**digits - 1
        return st.integers(-bound, bound).map(
            lambda n: decimal.Decimal(n).scaleb(-scale, decimal.Context(prec=60))
        )
    if logical == "org.apache.kafka.connect.data.Date":
        return st.dates(dt.date(1, 1, 1), dt.date(9999, 12, 31))
    if logical == "org.apache.kafka.connect.data.Time":
        return st.integers(0, 86_399_999).map(
            lambda ms: dt.time(ms // 3_600_000, ms // 60_000 % 60, ms // 1000 % 60, ms % 1000 * 1000)
        )
    return st.integers(-62_135_596_800_000 + 86_400_000, 253_402_214_400_000 - 86_400_000).map(
        lambda ms: dt.datetime(1970, 1, 1, tzinfo=dt.UTC) + dt.timedelta(milliseconds=ms)
    )


def with_defaults(schema: Schema, value: Any) -> Any:
    """``value`` with every null that has a default replaced by it (how the value reads back)."""
    if value is None:
        value = schema.default
        if value is None:
            return None
    if schema.type is Type.ARRAY:
        assert schema.value_schema is not None
        return [with_defaults(schema.value_schema, v) for v in value]
    if schema.type is Type.MAP:
        assert schema.value_schema is not None
        return {k: with_defaults(schema.value_schema, v) for k, v in value.items()}
    if schema.type is Type.STRUCT:
        return {f.name: with_defaults(f.schema, value.get(f.name)) for f in schema.fields}
    return value
