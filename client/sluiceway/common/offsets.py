"""Connector offsets (KIP-875's partition → offset maps) as they travel in protos: an `OffsetMap`
of typed primitives per partition and per offset, an unset offset meaning null (reset). Integers
are int64 on the wire, so every Java long arrives exactly. Shared by the control plane, the
executors and the client library."""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterable, Mapping
from typing import Any, Final

from google.protobuf import struct_pb2

from sluiceway.api.v1 import common_pb2

__all__ = [
    "SINK_OFFSETS_CHANGE",
    "OffsetPair",
    "OffsetValueError",
    "map_from_proto",
    "map_to_proto",
    "new_sink_offsets_change",
    "offsets_from_proto",
    "offsets_to_proto",
    "sink_offsets_change",
    "source_offset_key",
    "source_offset_value",
]

OffsetPair = tuple[dict[str, Any], dict[str, Any] | None]
"""A source partition and its offset (None resets it), or a sink partition and its Kafka offset."""

_INT64 = (-(2**63), 2**63 - 1)

SINK_OFFSETS_CHANGE: Final[Mapping[str, Any]] = {"sluiceway": "sink-offsets-change"}
"""Ours, not Kafka Connect's: the partition under which the control plane records, in the worker's
offsets topic, the latest KIP-875 change (alter or reset) of a sink connector's offsets, as
``{"id", "time_ms"}``. Sink task assignments carry it; a sink that keeps its offsets with its data
(SparkFileSink) records the id with each batch, so that a batch written before the latest change is
not taken for one written but never committed."""


class OffsetValueError(ValueError):
    """A partition or offset map holds something other than primitives (KIP-875 allows strings,
    numbers, booleans and null), or an integer outside int64."""


def map_to_proto(values: Mapping[str, Any]) -> common_pb2.OffsetMap:
    result = common_pb2.OffsetMap()
    for key, value in values.items():
        if not isinstance(key, str):
            raise OffsetValueError(f"keys must be strings, got {key!r}")
        field = result.fields[key]
        if value is None:
            field.null_value = struct_pb2.NULL_VALUE
        elif isinstance(value, bool):
            field.bool_value = value
        elif isinstance(value, int):
            if not _INT64[0] <= value <= _INT64[1]:
                raise OffsetValueError(f"{key}: {value} does not fit in a 64-bit integer")
            field.int_value = value
        elif isinstance(value, float):
            field.double_value = value
        elif isinstance(value, str):
            field.string_value = value
        else:
            raise OffsetValueError(f"{key}: expected a string, number, boolean or null, got {value!r}")
    return result


def map_from_proto(message: common_pb2.OffsetMap) -> dict[str, Any]:
    result: dict[str, Any] = {}
    for key, field in message.fields.items():
        kind = field.WhichOneof("kind")
        result[key] = None if kind in (None, "null_value") else getattr(field, kind)
    return result


def offsets_from_proto(offsets: Iterable[common_pb2.PartitionOffset]) -> list[OffsetPair]:
    return [
        (map_from_proto(item.partition), map_from_proto(item.offset) if item.HasField("offset") else None)
        for item in offsets
    ]


def offsets_to_proto(offsets: Iterable[OffsetPair]) -> list[common_pb2.PartitionOffset]:
    result = []
    for partition, offset in offsets:
        item = common_pb2.PartitionOffset(partition=map_to_proto(partition))
        if offset is not None:
            item.offset.CopyFrom(map_to_proto(offset))
        result.append(item)
    return result


def _json(value: Any, *, sort_keys: bool) -> bytes:
    # Compact, UTF-8, no NaN: the bytes Kafka Connect's JsonConverter (schemas off) writes.
    return json.dumps(
        value, separators=(",", ":"), ensure_ascii=False, allow_nan=False, sort_keys=sort_keys
    ).encode("utf-8")


def source_offset_key(connector: str, partition: Mapping[str, Any]) -> bytes:
    """A source partition's record key in an offsets topic: `["{connector}", {partition}]` as
    compact JSON with sorted fields, so equal partitions always give equal bytes."""
    return _json([connector, dict(partition)], sort_keys=True)


def source_offset_value(offset: Mapping[str, Any] | None) -> bytes | None:
    """A source offset's record value (None: a tombstone, the partition reset)."""
    return None if offset is None else _json(dict(offset), sort_keys=False)


def new_sink_offsets_change() -> dict[str, Any]:
    """The offset of a new ``SINK_OFFSETS_CHANGE`` record: a fresh id and the time it was made."""
    return {"id": uuid.uuid4().hex, "time_ms": int(time.time() * 1000)}


def sink_offsets_change(offsets: Iterable[OffsetPair]) -> str:
    """The id of the ``SINK_OFFSETS_CHANGE`` record among ``offsets`` (a sink task assignment's),
    or "" when the connector's offsets were never changed through the control plane."""
    for partition, offset in offsets:
        if partition == SINK_OFFSETS_CHANGE and offset is not None:
            return str(offset.get("id") or "")
    return ""
