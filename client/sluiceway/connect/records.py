"""The records record-level tasks produce and receive (counterparts of Kafka's SourceRecord and
SinkRecord)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, NamedTuple

__all__ = ["Header", "RecordMetadata", "SinkRecord", "SourceRecord", "TopicPartition"]

Header = tuple[str, bytes | str | None]
"""One record header: key and value (bytes, text, or None)."""


class TopicPartition(NamedTuple):
    topic: str
    partition: int


class OffsetRange(NamedTuple):
    """The records of one Kafka partition with ``start <= offset < end``."""

    topic: str
    partition: int
    start: int
    end: int


class RecordMetadata(NamedTuple):
    """Where Kafka stored a source record (meant for ``SourceTask.commit_record``)."""

    topic: str
    partition: int
    offset: int
    timestamp_ms: int | None


@dataclass(frozen=True)
class SourceRecord:
    """A record a source task read, with the source partition and offset that locate it.

    ``source_partition`` and ``source_offset`` are maps of JSON primitives; they are stored in the
    offsets topic as Kafka Connect stores them. ``kafka_partition=None`` lets the producer's
    partitioner choose. ``key_schema``/``value_schema`` are optional Kafka Connect JSON schemas
    (the ``schema`` part of the JsonConverter envelope, e.g. ``{"type": "string", "optional": False}``).
    """

    source_partition: Mapping[str, Any]
    source_offset: Mapping[str, Any]
    topic: str
    kafka_partition: int | None = None
    key: Any = None
    value: Any = None
    timestamp_ms: int | None = None
    headers: list[Header] = field(default_factory=list)
    key_schema: Mapping[str, Any] | None = None
    value_schema: Mapping[str, Any] | None = None


@dataclass(frozen=True)
class SinkRecord:
    """A record read from Kafka for a sink task; key and value as the converters produced them."""

    topic: str
    kafka_partition: int
    kafka_offset: int
    key: Any = None
    value: Any = None
    timestamp_ms: int | None = None
    headers: list[Header] = field(default_factory=list)

    @property
    def topic_partition(self) -> TopicPartition:
        return TopicPartition(self.topic, self.kafka_partition)
