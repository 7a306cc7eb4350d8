"""What the `sluiceway-kafka` reader and writer share: the data source's name and row layout, its
error, and the parsing of its options into the librdkafka settings each side runs with (see
`sluiceway_executor.datasources.kafka` for the options themselves)."""

from __future__ import annotations

import json
import logging
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from sluiceway_executor.kafka_ranges import PartitionRange

log = logging.getLogger(__name__)

SHORT_NAME = "sluiceway-kafka"

HEADER_STRUCT = StructType([StructField("key", StringType()), StructField("value", BinaryType())])
SCHEMA = StructType(
    [
        StructField("topic", StringType()),
        StructField("partition", IntegerType()),
        StructField("offset", LongType()),
        StructField("timestamp", TimestampType()),
        StructField("key", BinaryType()),
        StructField("value", BinaryType()),
        StructField("headers", ArrayType(HEADER_STRUCT)),
    ]
)
# Must equal what Spark derives from SCHEMA (it rejects batches whose Arrow schema differs).
HEADERS_ARROW = pa.list_(pa.field("element", pa.struct([("key", pa.string()), ("value", pa.binary())])))
ARROW_SCHEMA = pa.schema(
    [
        ("topic", pa.string()),
        ("partition", pa.int32()),
        ("offset", pa.int64()),
        ("timestamp", pa.timestamp("us", tz="UTC")),
        ("key", pa.binary()),
        ("value", pa.binary()),
        ("headers", HEADERS_ARROW),
    ]
)

DEFAULT_READ_TIMEOUT_MS = 60_000
DEFAULT_MAX_ROWS_PER_SPLIT = 500_000
# Each Spark task of a read costs tens of milliseconds before its first record, so small ranges of
# several partitions share one task up to about this many rows.
DEFAULT_MIN_ROWS_PER_SPLIT = 100_000

# Settings the reader and writer need for correctness; the user's config cannot change them.
_FORCED_CONSUMER_CONFIG: Mapping[str, str] = {
    "enable.auto.commit": "false",
    "enable.auto.offset.store": "false",
    # A planned start that no longer exists (records deleted) must fail the read, not skip records.
    "auto.offset.reset": "error",
    # Recognises the end of a partition, to stop at gaps (compaction, transaction markers) before `end`.
    "enable.partition.eof": "true",
    # The planned ends are read_committed ends, and aborted records must never reach a sink.
    "isolation.level": "read_committed",
}
_DEFAULT_CONSUMER_CONFIG: Mapping[str, str] = {
    # Brokers that do not wake a waiting fetch (Tansu) hold a fetch at the end this long; only reads
    # that end in a gap wait for such a fetch.
    "fetch.wait.max.ms": "100",
    # Bigger fetches: fewer round trips for the large, bounded reads a batch does.
    "max.partition.fetch.bytes": str(8 * 1024 * 1024),
    "fetch.max.bytes": str(64 * 1024 * 1024),
}
_FORCED_PRODUCER_CONFIG: Mapping[str, Any] = {
    # No duplicates or reordering from internal retries; acks=all so a delivered record is durable.
    "enable.idempotence": "true",
    "acks": "all",
    # Only failures are reported: success needs no Python callback per record. flush() returning 0
    # with no failure reported means every record was acknowledged.
    "delivery.report.only.error": True,
}
_DEFAULT_PRODUCER_CONFIG: Mapping[str, str] = {
    # The Java client's default partitioner, so keys land where Kafka Connect would put them.
    "partitioner": "murmur2_random",
    "linger.ms": "10",
    "batch.num.messages": "10000",
    "batch.size": str(1024 * 1024),
    "compression.type": "lz4",
    "queue.buffering.max.messages": "500000",
    # The Java producer's delivery.timeout.ms: after this a record counts as failed and the job fails.
    "message.timeout.ms": "120000",
}


class KafkaDataSourceError(RuntimeError):
    """A read or write could not be completed as planned (the Spark task, and so the job, fails)."""


# -- options ----------------------------------------------------------------------------------


def _required(options: Mapping[str, str], key: str) -> str:
    raw = options.get(key)
    if raw is None or not str(raw).strip():
        raise ValueError(f"{SHORT_NAME}: option '{key}' is required")
    return str(raw).strip()


def _int_option(options: Mapping[str, str], key: str, default: int, minimum: int) -> int:
    raw = options.get(key)
    if raw is None:
        return default
    try:
        value = int(str(raw).strip())
    except ValueError:
        raise ValueError(f"{SHORT_NAME}: option '{key}' must be an integer, got {raw!r}") from None
    if value < minimum:
        raise ValueError(f"{SHORT_NAME}: option '{key}' must be >= {minimum}, got {value}")
    return value


def _client_config(options: Mapping[str, str], key: str) -> dict[str, str]:
    raw = options.get(key)
    if raw is None or not str(raw).strip():
        return {}
    try:
        parsed = json.loads(str(raw))
    except json.JSONDecodeError as exc:
        raise ValueError(f"{SHORT_NAME}: option '{key}' must be a JSON object: {exc}") from None
    if not isinstance(parsed, dict):
        raise ValueError(f"{SHORT_NAME}: option '{key}' must be a JSON object, got {type(parsed).__name__}")
    config: dict[str, str] = {}
    for name, value in parsed.items():
        if isinstance(value, (dict, list)) or value is None:
            raise ValueError(
                f"{SHORT_NAME}: option '{key}': setting {name!r} must be a scalar, got {value!r}"
            )
        # librdkafka takes every setting as a string; JSON true must become "true", not "True".
        config[str(name)] = json.dumps(value) if isinstance(value, bool) else str(value)
    return config


def _parse_ranges(raw: str) -> list[PartitionRange]:
    try:
        parsed = json.loads(raw)
    except json.JSONDecodeError as exc:
        raise ValueError(f"{SHORT_NAME}: option 'ranges' must be a JSON list: {exc}") from None
    if not isinstance(parsed, list):
        raise ValueError(f"{SHORT_NAME}: option 'ranges' must be a JSON list, got {type(parsed).__name__}")
    ranges: list[PartitionRange] = []
    for item in parsed:
        if not isinstance(item, dict) or set(item) != {"topic", "partition", "start", "end"}:
            raise ValueError(
                f"{SHORT_NAME}: each range must be an object with exactly topic, partition, start and "
                f"end, got {item!r}"
            )
        topic, partition, start, end = item["topic"], item["partition"], item["start"], item["end"]
        ints = (partition, start, end)
        if not isinstance(topic, str) or not topic or not all(type(v) is int for v in ints):
            raise ValueError(f"{SHORT_NAME}: range {item!r}: topic must be a string, the others integers")
        if partition < 0 or start < 0 or end < start:
            raise ValueError(f"{SHORT_NAME}: range {item!r}: need partition >= 0 and 0 <= start <= end")
        ranges.append(PartitionRange(topic, partition, start, end))
    return ranges


@dataclass(frozen=True)
class ReaderOptions:
    bootstrap_servers: str
    ranges: list[PartitionRange]
    consumer_config: dict[str, str]
    read_timeout_ms: int
    max_rows_per_split: int
    min_rows_per_split: int = DEFAULT_MIN_ROWS_PER_SPLIT

    @classmethod
    def parse(cls, options: Mapping[str, str]) -> ReaderOptions:
        return cls(
            bootstrap_servers=_required(options, "bootstrap.servers"),
            ranges=_parse_ranges(_required(options, "ranges")),
            consumer_config=_client_config(options, "consumer.config"),
            read_timeout_ms=_int_option(options, "read.timeout.ms", DEFAULT_READ_TIMEOUT_MS, 1),
            max_rows_per_split=_int_option(options, "max.rows.per.split", DEFAULT_MAX_ROWS_PER_SPLIT, 1),
            min_rows_per_split=_int_option(options, "min.rows.per.split", DEFAULT_MIN_ROWS_PER_SPLIT, 1),
        )

    def consumer_settings(self) -> dict[str, Any]:
        return {
            "bootstrap.servers": self.bootstrap_servers,
            "client.id": "sluiceway-kafka-reader",
            **_DEFAULT_CONSUMER_CONFIG,
            **self.consumer_config,
            # confluent-kafka insists on a group id even for assign(); the reader never joins or commits.
            "group.id": self.consumer_config.get("group.id") or f"sluiceway-reader-{uuid.uuid4().hex}",
            **_FORCED_CONSUMER_CONFIG,
            "logger": log,
        }


@dataclass(frozen=True)
class WriterOptions:
    bootstrap_servers: str
    topic: str | None
    producer_config: dict[str, str]

    @classmethod
    def parse(cls, options: Mapping[str, str]) -> WriterOptions:
        topic = str(options.get("topic") or "").strip()
        return cls(
            bootstrap_servers=_required(options, "bootstrap.servers"),
            topic=topic or None,
            producer_config=_client_config(options, "producer.config"),
        )

    def producer_settings(self) -> dict[str, Any]:
        return {
            "bootstrap.servers": self.bootstrap_servers,
            "client.id": "sluiceway-kafka-writer",
            **_DEFAULT_PRODUCER_CONFIG,
            **self.producer_config,
            **_FORCED_PRODUCER_CONFIG,
            "logger": log,
        }
