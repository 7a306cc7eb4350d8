"""JSON text as Kafka's JsonConverter writes it (Jackson's defaults) and reads it.

The writer is compact (no spaces), keeps key order, writes UTF-8 without escaping non-ASCII, and
escapes other control characters as ``\\u00XX`` with upper-case hex digits. Numbers follow Java:
a ``float`` as ``Double.toString`` writes it, a :class:`Float32` as ``Float.toString`` does (both
the shortest digits that read back to the same number: plain between 10^-3 and 10^7, otherwise
``d.dddE±n``), and a ``decimal.Decimal`` as ``BigDecimal.toString`` (which Python's ``str`` of a
Decimal matches). The reader keeps numbers with a fraction or exponent as exact Decimals, as
Kafka's reader keeps them as BigDecimal, and refuses NaN and the infinities.
"""

from __future__ import annotations

import decimal
import json
import math
import struct
from collections.abc import Callable
from typing import Any, Final

from sluiceway.connect.data.schema import DataException

__all__ = ["Float32", "dumps", "java_double_text", "java_float_text", "loads", "round_to_float32"]

_SHORT_ESCAPES: Final = {
    '"': '\\"',
    "\\": "\\\\",
    "\b": "\\b",
    "\t": "\\t",
    "\n": "\\n",
    "\f": "\\f",
    "\r": "\\r",
}


class Float32(float):
    """A float that is written with the digits of a 32-bit float, as Java writes a ``Float``."""


def _digits(text: str) -> tuple[str, int]:
    # The significant digits of a positive decimal text and the exponent of its first digit.
    number = decimal.Decimal(text)
    _, digits, exponent = number.as_tuple()
    assert isinstance(exponent, int)
    joined = "".join(map(str, digits)).rstrip("0") or "0"
    return joined, len(digits) - 1 + exponent


def _java_layout(negative: bool, digits: str, point: int) -> str:
    sign = "-" if negative else ""
    if digits == "0":
        return f"{sign}0.0"
    if -3 <= point < 7:
        if point < 0:
            return f"{sign}0.{'0' * (-point - 1)}{digits}"
        whole = digits[: point + 1].ljust(point + 1, "0")
        fraction = digits[point + 1 :] or "0"
        return f"{sign}{whole}.{fraction}"
    return f"{sign}{digits[0]}.{digits[1:] or '0'}E{point}"


def _shortest(magnitude: float, reads_back: Callable[[str], bool], most: int) -> str:
    # Java's choice: the fewest digits that read back to the number, the closest such decimal;
    # when one digit is enough, the closest decimal of at most two digits (which may be closer).
    for count in range(1, most + 1):
        text = f"{magnitude:.{count - 1}e}"
        if reads_back(text):
            if count == 1:
                two = f"{magnitude:.1e}"
                return two if reads_back(two) else text
            return text
    return repr(magnitude)


def java_double_text(value: float) -> str:
    """``value`` as Java's ``Double.toString`` writes it (JDK 19 and later)."""
    if not math.isfinite(value):
        raise DataException(f"{value} cannot be written as JSON")
    magnitude = abs(value)
    text = _shortest(magnitude, lambda t: float(t) == magnitude, 17) if magnitude else "0"
    digits, point = _digits(text)
    return _java_layout(math.copysign(1.0, value) < 0, digits, point)


def round_to_float32(value: float) -> float:
    """The nearest 32-bit float (OverflowError beyond its range)."""
    result: float = struct.unpack("<f", struct.pack("<f", value))[0]
    return result


def _reads_back_as_float32(text: str, single: float) -> bool:
    try:
        return round_to_float32(float(text)) == single
    except OverflowError:
        return False


def java_float_text(value: float) -> str:
    """``value``, rounded to a 32-bit float, as Java's ``Float.toString`` writes it."""
    if not math.isfinite(value):
        raise DataException(f"{value} cannot be written as JSON")
    try:
        single = abs(round_to_float32(value))
    except OverflowError:
        raise DataException(f"{value} is beyond the range of a 32-bit float") from None
    text = _shortest(single, lambda t: _reads_back_as_float32(t, single), 9) if single else "0"
    digits, point = _digits(text)
    return _java_layout(math.copysign(1.0, value) < 0, digits, point)


def _string(text: str) -> str:
    out = ['"']
    for char in text:
        if char in _SHORT_ESCAPES:
            out.append(_SHORT_ESCAPES[char])
        elif char < " ":
            out.append(f"\\u{ord(char):04X}")
        else:
            out.append(char)
    out.append('"')
    return "".join(out)


def _write(value: Any, out: list[str]) -> None:
    if value is None:
        out.append("null")
    elif value is True:
        out.append("true")
    elif value is False:
        out.append("false")
    elif isinstance(value, str):
        out.append(_string(value))
    elif isinstance(value, int):
        out.append(str(int(value)))
    elif isinstance(value, Float32):
        out.append(java_float_text(value))
    elif isinstance(value, float):
        out.append(java_double_text(value))
    elif isinstance(value, decimal.Decimal):
        if not value.is_finite():
            raise DataException(f"{value} cannot be written as JSON")
        out.append(str(value.copy_abs() if value.is_zero() else value))
    elif isinstance(value, dict):
        out.append("{")
        for position, (key, element) in enumerate(value.items()):
            if not isinstance(key, str):
                raise DataException(f"a JSON object's keys are text, got {key!r}")
            out.append("," if position else "")
            out.append(_string(key))
            out.append(":")
            _write(element, out)
        out.append("}")
    elif isinstance(value, (list, tuple)):
        out.append("[")
        for position, element in enumerate(value):
            out.append("," if position else "")
            _write(element, out)
        out.append("]")
    else:
        raise DataException(f"{type(value).__name__} cannot be written as JSON")


def dumps(value: Any) -> bytes:
    """The UTF-8 JSON text Kafka's JsonConverter would write for this JSON tree."""
    out: list[str] = []
    _write(value, out)
    try:
        return "".join(out).encode("utf-8")
    except UnicodeEncodeError as exc:
        raise DataException(f"text that is not valid Unicode cannot be written as JSON: {exc}") from None


def _refuse_constant(token: str) -> Any:
    raise DataException(f"{token} is not JSON")


def loads(data: bytes | str) -> Any:
    """Parse JSON text; fractions and exponents become exact Decimals."""
    try:
        return json.loads(data, parse_float=decimal.Decimal, parse_constant=_refuse_constant)
    except (ValueError, UnicodeDecodeError) as exc:
        raise DataException(f"not valid JSON: {exc}") from None
