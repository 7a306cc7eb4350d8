"""Connector offsets (KIP-875's partition → offset maps) as they travel in protos: a
`google.protobuf.Struct` per partition and per offset, an unset offset meaning null (reset).
Shared by the control plane and the executors."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from google.protobuf import json_format, struct_pb2

from sluiceway.api.v1 import common_pb2

OffsetPair = tuple[dict[str, Any], dict[str, Any] | None]
"""A source partition and its offset (None resets it), or a sink partition and its Kafka offset."""


def struct_to_dict(message: struct_pb2.Struct) -> dict[str, Any]:
    """A Struct as a dict; Struct numbers are doubles, so integral ones come back as ints (offsets)."""

    def fix(value: Any) -> Any:
        if isinstance(value, float) and value.is_integer() and abs(value) <= 2**53:
            return int(value)
        if isinstance(value, dict):
            return {key: fix(item) for key, item in value.items()}
        if isinstance(value, list):
            return [fix(item) for item in value]
        return value

    result: dict[str, Any] = fix(json_format.MessageToDict(message))
    return result


def dict_to_struct(values: Mapping[str, Any]) -> struct_pb2.Struct:
    message = struct_pb2.Struct()
    message.update(dict(values))
    return message


def offsets_from_proto(offsets: Iterable[common_pb2.PartitionOffset]) -> list[OffsetPair]:
    return [
        (struct_to_dict(item.partition), struct_to_dict(item.offset) if item.HasField("offset") else None)
        for item in offsets
    ]


def offsets_to_proto(offsets: Iterable[OffsetPair]) -> list[common_pb2.PartitionOffset]:
    result = []
    for partition, offset in offsets:
        item = common_pb2.PartitionOffset(partition=dict_to_struct(partition))
        if offset is not None:
            item.offset.CopyFrom(dict_to_struct(offset))
        result.append(item)
    return result
