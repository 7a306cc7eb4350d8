"""JSON encoding shared by the stores: byte-compatible with Kafka Connect's internal JsonConverter
(schemas disabled), so Kafka Connect tools can read our records and we can read theirs. Also the
record keys the stores share: the key as text, and the `{prefix}{connector}-{task}` key of a task's
record in the config and status topics."""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from typing import Any, TypeGuard

Primitive = str | int | float | bool | None


def dumps(value: Any, *, sort_keys: bool = False) -> bytes:
    """Compact JSON as Jackson writes it: no whitespace, non-ASCII kept as UTF-8, no NaN."""
    return json.dumps(
        value, separators=(",", ":"), ensure_ascii=False, allow_nan=False, sort_keys=sort_keys
    ).encode("utf-8")


def loads(data: bytes) -> Any:
    """Parse a JSON value; raises ValueError (bad UTF-8 or bad JSON)."""
    return json.loads(data.decode("utf-8"))


def decode_key(key: bytes | None) -> str | None:
    """A record key as the UTF-8 string Kafka Connect writes, or None if it is missing or not UTF-8."""
    if key is None:
        return None
    try:
        return key.decode("utf-8")
    except UnicodeDecodeError:
        return None


def task_record_key(prefix: str, connector: str, task: int) -> bytes:
    """The key of task ``task``'s record: ``{prefix}{connector}-{task}`` (``task-`` in the config
    topic, ``status-task-`` in the status topic)."""
    return f"{prefix}{connector}-{task}".encode()


def parse_task_record_key(key: str, prefix: str) -> tuple[str, int] | None:
    """The connector and task number of a ``task_record_key`` that starts with ``prefix``, or None
    when the rest is not a connector name, a '-' and ASCII digits. The connector name may contain
    '-' itself, so the number is what follows the last one."""
    connector, sep, number = key[len(prefix) :].rpartition("-")
    if not sep or not connector or not number.isascii() or not number.isdigit():
        return None
    return connector, int(number)


def check_string_map(what: str, values: Mapping[str, str]) -> None:
    """Reject maps that Kafka Connect's Map<String, String> cannot hold, before anything is written."""
    for key, value in values.items():
        if not isinstance(key, str):
            raise ValueError(f"{what}: key {key!r} is not a string")
        if not isinstance(value, str):
            raise ValueError(f"{what}: value of {key!r} is not a string")


def parse_string_map(value: object) -> dict[str, str] | None:
    """A JSON object of strings; null values are dropped (Kafka allows them in `properties`, we treat a
    null as absent). None when the shape is wrong."""
    if not isinstance(value, dict):
        return None
    result: dict[str, str] = {}
    for key, item in value.items():
        if item is None:
            continue
        if not isinstance(item, str):
            return None
        result[key] = item
    return result


def check_primitive_map(what: str, values: Mapping[str, Any]) -> None:
    """Source partitions and offsets are maps of primitives (Kafka's OffsetUtils.validateFormat)."""
    if not isinstance(values, Mapping):
        raise ValueError(f"{what} must be a map, not {type(values).__name__}")
    for key, value in values.items():
        if not isinstance(key, str):
            raise ValueError(f"{what}: key {key!r} is not a string")
        if value is None or isinstance(value, str | bool | int):
            continue
        if isinstance(value, float):
            if not math.isfinite(value):
                raise ValueError(f"{what}: value of {key!r} is not a finite number")
            continue
        raise ValueError(
            f"{what}: value of {key!r} must be a primitive (str, int, float, bool or null), "
            f"not a {type(value).__name__}"
        )


def is_int(value: object) -> TypeGuard[int]:
    """A JSON integer (bool is an int in Python but not in JSON)."""
    return isinstance(value, int) and not isinstance(value, bool)
