"""The Python values of Kafka Connect schemas, checking them, and the logical types' encodings.

What a value of each type is:

- INT8, INT16, INT32, INT64: ``int`` within the type's range (not ``bool``);
- FLOAT32, FLOAT64: ``float`` (an ``int`` is accepted too); BOOLEAN: ``bool``; STRING: ``str``;
- BYTES: ``bytes`` (``bytearray`` and ``memoryview`` are accepted);
- ARRAY: ``list`` (or ``tuple``); MAP: a ``Mapping`` (keys must be hashable, so a key whose schema
  is a struct, map or array cannot be held in a ``dict``);
- STRUCT: a ``Mapping`` from field name to value; a field left out counts as null, and a key that
  is not a field is refused;
- Decimal: ``decimal.Decimal`` (or ``int``) whose digits fit the scale without rounding, and the
  precision when the schema declares one;
- Date: ``datetime.date``; Time: ``datetime.time`` without a zone or in UTC;
- Timestamp: ``datetime.datetime``; one without a zone is read as UTC.

Null (``None``) is allowed where the schema is optional or has a default.
"""

from __future__ import annotations

import datetime as dt
import decimal
from collections.abc import Mapping
from typing import Any, Final

from sluiceway.connect.data import schema as _schema_module
from sluiceway.connect.data.schema import (
    DATE_NAME,
    DECIMAL_NAME,
    TIME_NAME,
    TIMESTAMP_NAME,
    DataException,
    Schema,
    Type,
    decimal_precision,
    decimal_scale,
)

__all__ = [
    "date_from_days",
    "date_to_days",
    "decimal_from_unscaled_bytes",
    "decimal_to_unscaled_bytes",
    "rescale_decimal",
    "time_from_millis",
    "time_to_millis",
    "timestamp_from_millis",
    "timestamp_to_millis",
    "validate_value",
]

INT_RANGES: Final[Mapping[Type, tuple[int, int]]] = {
    Type.INT8: (-(2**7), 2**7 - 1),
    Type.INT16: (-(2**15), 2**15 - 1),
    Type.INT32: (-(2**31), 2**31 - 1),
    Type.INT64: (-(2**63), 2**63 - 1),
}
MILLIS_PER_DAY: Final = 86_400_000
_EPOCH_DATE: Final = dt.date(1970, 1, 1)
_EPOCH: Final = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)
_MILLI: Final = dt.timedelta(milliseconds=1)


def _where(path: str) -> str:
    return f" at {path}" if path else ""


def _describe(value: Any) -> str:
    text = repr(value)
    return f"{type(value).__name__} {text[:80]}{'...' if len(text) > 80 else ''}"


def validate_value(schema: Schema, value: Any, path: str = "") -> None:
    """Check that ``value`` is a value of ``schema``; the error names the field path."""
    if value is None:
        if schema.optional or schema.default is not None:
            return
        raise DataException(
            f"null{_where(path)}, but the {_label(schema)} schema is required and has no default"
        )
    logical = schema.logical_name
    if logical is not None:
        _validate_logical(schema, logical, value, path)
        return
    kind = schema.type
    if kind in INT_RANGES:
        if not isinstance(value, int) or isinstance(value, bool):
            raise DataException(f"{kind.value} expected{_where(path)}, got {_describe(value)}")
        low, high = INT_RANGES[kind]
        if not low <= value <= high:
            raise DataException(f"{value} is out of range for {kind.value}{_where(path)}")
    elif kind in (Type.FLOAT32, Type.FLOAT64):
        if not isinstance(value, (int, float)) or isinstance(value, bool):
            raise DataException(f"{kind.value} expected{_where(path)}, got {_describe(value)}")
    elif kind is Type.BOOLEAN:
        if not isinstance(value, bool):
            raise DataException(f"boolean expected{_where(path)}, got {_describe(value)}")
    elif kind is Type.STRING:
        if not isinstance(value, str):
            raise DataException(f"string expected{_where(path)}, got {_describe(value)}")
    elif kind is Type.BYTES:
        if not isinstance(value, (bytes, bytearray, memoryview)):
            raise DataException(f"bytes expected{_where(path)}, got {_describe(value)}")
    elif kind is Type.ARRAY:
        if not isinstance(value, (list, tuple)):
            raise DataException(f"array (list) expected{_where(path)}, got {_describe(value)}")
        assert schema.value_schema is not None
        for position, element in enumerate(value):
            validate_value(schema.value_schema, element, f"{path}[{position}]")
    elif kind is Type.MAP:
        if not isinstance(value, Mapping):
            raise DataException(f"map (Mapping) expected{_where(path)}, got {_describe(value)}")
        assert schema.key_schema is not None and schema.value_schema is not None
        for key, element in value.items():
            validate_value(schema.key_schema, key, f"{path}<key {key!r}>")
            validate_value(schema.value_schema, element, f"{path}[{key!r}]")
    else:
        _validate_struct(schema, value, path)


_schema_module._default_check = validate_value


def _validate_struct(schema: Schema, value: Any, path: str) -> None:
    if not isinstance(value, Mapping):
        raise DataException(f"struct (Mapping of field names) expected{_where(path)}, got {_describe(value)}")
    names = {item.name for item in schema.fields}
    unknown = [key for key in value if key not in names]
    if unknown:
        raise DataException(f"struct{_where(path)} has keys that are not fields of its schema: {unknown!r}")
    for item in schema.fields:
        validate_value(item.schema, value.get(item.name), f"{path}.{item.name}" if path else item.name)


def _label(schema: Schema) -> str:
    return schema.name or schema.type.value


def _validate_logical(schema: Schema, logical: str, value: Any, path: str) -> None:
    if logical == DECIMAL_NAME:
        rescale_decimal(schema, value, path)
    elif logical == DATE_NAME:
        if not isinstance(value, dt.date) or isinstance(value, dt.datetime):
            raise DataException(f"Date (datetime.date) expected{_where(path)}, got {_describe(value)}")
    elif logical == TIME_NAME:
        if not isinstance(value, dt.time):
            raise DataException(f"Time (datetime.time) expected{_where(path)}, got {_describe(value)}")
        _check_utc_time(value, path)
    elif logical == TIMESTAMP_NAME:
        if not isinstance(value, dt.datetime):
            raise DataException(
                f"Timestamp (datetime.datetime) expected{_where(path)}, got {_describe(value)}"
            )
        timestamp_to_millis(value)


def _check_utc_time(value: dt.time, path: str) -> None:
    offset = value.utcoffset()
    if offset is not None and offset != dt.timedelta(0):
        raise DataException(f"Time{_where(path)} must be in UTC or have no zone, got {value.isoformat()}")


# -- Decimal --


def rescale_decimal(schema: Schema, value: Any, path: str = "") -> decimal.Decimal:
    """``value`` as a Decimal with exactly the schema's scale; refused when that would round, or
    when its digits exceed the declared precision."""
    if isinstance(value, bool) or not isinstance(value, (decimal.Decimal, int)):
        raise DataException(f"Decimal (decimal.Decimal) expected{_where(path)}, got {_describe(value)}")
    number = decimal.Decimal(value)
    if not number.is_finite():
        raise DataException(f"decimal{_where(path)} must be finite, got {number}")
    scale = decimal_scale(schema)
    with decimal.localcontext(_exact_context(number, scale)) as context:
        context.traps[decimal.Inexact] = True
        try:
            exact = number.quantize(decimal.Decimal(1).scaleb(-scale))
        except (decimal.Inexact, decimal.InvalidOperation):
            raise DataException(
                f"decimal {number}{_where(path)} does not fit scale {scale} without rounding"
            ) from None
    if exact.is_zero():
        exact = exact.copy_abs()
    precision = decimal_precision(schema)
    if precision is not None and len(exact.as_tuple().digits) > precision and not exact.is_zero():
        raise DataException(f"decimal {number}{_where(path)} has more than the schema's {precision} digits")
    return exact


def _exact_context(number: decimal.Decimal, scale: int) -> decimal.Context:
    # Enough digits that moving the point by `scale` never rounds.
    exponent = number.as_tuple().exponent
    assert isinstance(exponent, int)
    return decimal.Context(prec=len(number.as_tuple().digits) + abs(exponent) + abs(scale) + 2)


def _shift(number: decimal.Decimal, places: int) -> decimal.Decimal:
    return number.scaleb(places, context=_exact_context(number, places))


def decimal_to_unscaled_bytes(schema: Schema, value: Any, path: str = "") -> bytes:
    """Kafka's encoding of a decimal: the unscaled integer as big-endian two's complement, in the
    fewest bytes that hold its sign (as Java's BigInteger writes it)."""
    exact = rescale_decimal(schema, value, path)
    unscaled = int(_shift(exact, decimal_scale(schema)))
    length = (unscaled + (unscaled < 0)).bit_length() // 8 + 1
    return unscaled.to_bytes(length, "big", signed=True)


def decimal_from_unscaled_bytes(schema: Schema, data: bytes) -> decimal.Decimal:
    """The decimal that ``decimal_to_unscaled_bytes`` encoded."""
    if not data:
        raise DataException("a decimal's bytes cannot be empty")
    unscaled = int.from_bytes(data, "big", signed=True)
    return _shift(decimal.Decimal(unscaled), -decimal_scale(schema))


# -- Date, Time, Timestamp --


def date_to_days(value: dt.date) -> int:
    return (value - _EPOCH_DATE).days


def date_from_days(days: int) -> dt.date:
    try:
        return _EPOCH_DATE + dt.timedelta(days=days)
    except OverflowError:
        raise DataException(f"{days} days from 1970-01-01 is outside Python's dates") from None


def time_to_millis(value: dt.time) -> int:
    """Milliseconds since midnight; a part below a millisecond is dropped."""
    _check_utc_time(value, "")
    return ((value.hour * 60 + value.minute) * 60 + value.second) * 1000 + value.microsecond // 1000


def time_from_millis(millis: int) -> dt.time:
    if not 0 <= millis < MILLIS_PER_DAY:
        raise DataException(f"a Time must be 0 <= milliseconds < {MILLIS_PER_DAY}, got {millis}")
    seconds, rest = divmod(millis, 1000)
    minutes, second = divmod(seconds, 60)
    return dt.time(minutes // 60, minutes % 60, second, rest * 1000)


def timestamp_to_millis(value: dt.datetime) -> int:
    """Milliseconds since the epoch (a datetime without a zone is read as UTC); a part below a
    millisecond is dropped, rounding towards the past."""
    aware = value if value.tzinfo is not None else value.replace(tzinfo=dt.UTC)
    return (aware - _EPOCH) // _MILLI


def timestamp_from_millis(millis: int) -> dt.datetime:
    """The UTC datetime ``millis`` milliseconds after the epoch."""
    try:
        return _EPOCH + dt.timedelta(milliseconds=millis)
    except OverflowError:
        raise DataException(f"{millis} ms from the epoch is outside Python's datetimes") from None
