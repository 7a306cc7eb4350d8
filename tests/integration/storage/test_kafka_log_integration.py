"""KafkaLog and topic creation against the real (Tansu) broker."""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator
from typing import Protocol

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient
from confluent_kafka.admin._config import ConfigResource

from sluiceway_server.storage import (
    KafkaLog,
    LogRecord,
    LogStoppedError,
    TopicSpec,
    compacted,
    ensure_topic,
)
from sluiceway_server.storage.topics import partition_count

pytestmark = pytest.mark.integration

TIMEOUT = 20.0


class Broker(Protocol):
    """What these tests use of the session's broker fixture (tests/conftest.py)."""

    @property
    def bootstrap_servers(self) -> str: ...


class Collector:
    """A record callback that keeps what it saw (called from the log's consumer thread)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.records: list[LogRecord] = []

    def __call__(self, record: LogRecord) -> None:
        with self.lock:
            self.records.append(record)

    def count(self) -> int:
        with self.lock:
            return len(self.records)


@pytest.fixture
def admin(broker: Broker) -> AdminClient:
    return AdminClient(
        {"bootstrap.servers": broker.bootstrap_servers}, logger=logging.getLogger("test-admin")
    )


def started_log(broker: Broker, topic: str, partitions: int, collector: Collector) -> KafkaLog:
    kafka_log = KafkaLog(
        topic, broker.bootstrap_servers, collector, compacted(partitions), name=f"test-{topic}"
    )
    kafka_log.start(TIMEOUT)
    return kafka_log


@pytest.fixture
def logs() -> Iterator[list[KafkaLog]]:
    """Logs to stop at the end of the test, whatever happens."""
    created: list[KafkaLog] = []
    yield created
    for kafka_log in created:
        kafka_log.stop()


def test_ensure_topic_creates_a_compacted_topic_once(admin: AdminClient, unique: str) -> None:
    name = f"ensure-{unique}"
    spec = compacted(3, configs={"cleanup.policy": "delete", "min.compaction.lag.ms": "0"})
    assert ensure_topic(admin, name, spec, TIMEOUT) is True
    assert ensure_topic(admin, name, TopicSpec(7, -1, {}), TIMEOUT) is False
    assert partition_count(admin, name, TIMEOUT) == 3  # existing topics are left alone
    [future] = admin.describe_configs([ConfigResource("topic", name)], request_timeout=TIMEOUT).values()
    assert future.result(TIMEOUT)["cleanup.policy"].value == "compact"


def test_invalid_topic_specs_are_refused_before_the_broker(admin: AdminClient, unique: str) -> None:
    # Tansu would accept these; real Kafka would not.
    with pytest.raises(ValueError, match="partitions"):
        ensure_topic(admin, f"bad-{unique}", TopicSpec(0, -1, {}), TIMEOUT)
    with pytest.raises(ValueError, match="replication factor"):
        ensure_topic(admin, f"bad-{unique}", TopicSpec(1, 0, {}), TIMEOUT)


def test_log_creates_its_topic_and_reads_its_writes(
    broker: Broker, admin: AdminClient, unique: str, logs: list[KafkaLog]
) -> None:
    topic = f"log-{unique}"
    collector = Collector()
    kafka_log = started_log(broker, topic, 2, collector)
    logs.append(kafka_log)
    assert partition_count(admin, topic, TIMEOUT) == 2
    first = kafka_log.send(b"k", b"v1", partition=1).result(TIMEOUT)
    tombstone = kafka_log.send(b"k", None, partition=1).result(TIMEOUT)
    assert (first.partition, tombstone.partition) == (1, 1)
    assert tombstone.offset == first.offset + 1
    kafka_log.wait_for(tombstone, TIMEOUT)
    assert [(r.partition, r.offset, r.key, r.value) for r in collector.records] == [
        (1, first.offset, b"k", b"v1"),
        (1, tombstone.offset, b"k", None),
    ]
    assert collector.records[0].timestamp_ms > 0


def test_read_to_end_is_exact_when_producers_batch(broker: Broker, unique: str, logs: list[KafkaLog]) -> None:
    """Tansu's ListOffsets answers the last batch's base offset + 1; read_to_end must still see all."""
    topic = f"batched-{unique}"
    collector = Collector()
    kafka_log = started_log(broker, topic, 3, collector)
    logs.append(kafka_log)
    producer = Producer(
        {
            "bootstrap.servers": broker.bootstrap_servers,
            "linger.ms": 100,
            "batch.num.messages": 10000,
            "logger": logging.getLogger("test-producer"),
        }
    )
    total = 0
    for round_number in range(5):
        for i in range(2000):
            producer.produce(topic, key=f"key-{i % 50}".encode(), value=f"{round_number}-{i}".encode())
            producer.poll(0)
        assert producer.flush(TIMEOUT) == 0
        total += 2000
        kafka_log.read_to_end(TIMEOUT)
        assert collector.count() == total
    # A log started afterwards has everything once start() returns.
    late = Collector()
    logs.append(started_log(broker, topic, 3, late))
    assert late.count() == total
    assert sorted((r.partition, r.offset) for r in late.records) == sorted(
        (r.partition, r.offset) for r in collector.records
    )


def test_failing_callback_does_not_stop_the_log(broker: Broker, unique: str, logs: list[KafkaLog]) -> None:
    seen: list[bytes | None] = []

    def on_record(record: LogRecord) -> None:
        if record.value == b"poison":
            raise ValueError("cannot handle this record")
        seen.append(record.value)

    kafka_log = KafkaLog(f"poison-{unique}", broker.bootstrap_servers, on_record, compacted(1))
    logs.append(kafka_log)
    kafka_log.start(TIMEOUT)
    kafka_log.send(b"a", b"poison")
    kafka_log.wait_for(kafka_log.send(b"b", b"fine").result(TIMEOUT), TIMEOUT)
    assert seen == [b"fine"]


def test_stopped_log_refuses_work(broker: Broker, unique: str) -> None:
    kafka_log = started_log(broker, f"stopped-{unique}", 1, Collector())
    position = kafka_log.send(b"k", b"v").result(TIMEOUT)
    kafka_log.stop()
    with pytest.raises(LogStoppedError):
        kafka_log.send(b"k", b"v")
    with pytest.raises(LogStoppedError):
        kafka_log.read_to_end(1)
    with pytest.raises(LogStoppedError):
        kafka_log.wait_for(position, 1)
    kafka_log.stop()  # idempotent
