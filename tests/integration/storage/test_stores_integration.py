"""The three stores on the real (Tansu) broker: restart brings state back, and the raw topics hold
exactly Kafka Connect's keys and JSON values."""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Protocol

import pytest
from confluent_kafka import Consumer, KafkaError, TopicPartition

from sluiceway_server.model import State, TargetState
from sluiceway_server.storage import (
    ConfigStore,
    ConnectorStatusRecord,
    ErrorEntry,
    KafkaLog,
    LogRecord,
    OffsetStore,
    RecordLog,
    StatusStore,
    TaskStatusRecord,
    TopicStatusRecord,
    compacted,
)

pytestmark = pytest.mark.integration

TIMEOUT = 20.0


class Broker(Protocol):
    """What these tests use of the session's broker fixture (tests/conftest.py)."""

    @property
    def bootstrap_servers(self) -> str: ...


@dataclass(frozen=True)
class Topics:
    configs: str
    status: str
    offsets: str


@pytest.fixture
def topics(unique: str) -> Topics:
    return Topics(f"configs-{unique}", f"status-{unique}", f"offsets-{unique}")


def factory(
    broker: Broker, topic: str, partitions: int
) -> Callable[[Callable[[LogRecord], None]], RecordLog]:
    def make(on_record: Callable[[LogRecord], None]) -> RecordLog:
        return KafkaLog(topic, broker.bootstrap_servers, on_record, compacted(partitions), name=topic)

    return make


@pytest.fixture
def stoppers() -> Iterator[list[Callable[[], None]]]:
    pending: list[Callable[[], None]] = []
    yield pending
    for stop in pending:
        stop()


def raw_records(broker: Broker, topic: str) -> list[tuple[int, int, bytes | None, bytes | None]]:
    """Everything in `topic`, read with a plain consumer up to the end of each partition."""
    consumer = Consumer(
        {
            "bootstrap.servers": broker.bootstrap_servers,
            "group.id": f"raw-reader-{topic}",
            "enable.auto.commit": False,
            "enable.partition.eof": True,
            "logger": logging.getLogger("raw-reader"),
        }
    )
    try:
        metadata = consumer.list_topics(topic, timeout=TIMEOUT)
        partitions = sorted(metadata.topics[topic].partitions)
        # Offset 0, not OFFSET_BEGINNING: skips an offset lookup that librdkafka delays by ~0.5 s.
        consumer.assign([TopicPartition(topic, p, 0) for p in partitions])
        at_end: set[int] = set()
        records: list[tuple[int, int, bytes | None, bytes | None]] = []
        deadline = time.monotonic() + TIMEOUT
        while len(at_end) < len(partitions):
            assert time.monotonic() < deadline, f"raw read of {topic} did not reach the end"
            for message in consumer.consume(500, 0.2):
                error = message.error()
                partition, offset = message.partition(), message.offset()
                assert partition is not None
                assert offset is not None
                if error is not None:
                    assert error.code() == KafkaError._PARTITION_EOF, error
                    at_end.add(partition)
                    continue
                at_end.discard(partition)
                records.append((partition, offset, message.key(), message.value()))
        return sorted(records)
    finally:
        consumer.close()


def latest_by_key(
    records: list[tuple[int, int, bytes | None, bytes | None]],
) -> dict[bytes | None, bytes | None]:
    """What compaction would keep: the last value of each key (keys stay in one partition)."""
    return {key: value for _, _, key, value in records}


def test_config_store_state_survives_a_restart(
    broker: Broker, topics: Topics, stoppers: list[Callable[[], None]]
) -> None:
    first = ConfigStore(factory(broker, topics.configs, 1))
    first.start(TIMEOUT)
    stoppers.append(first.stop)
    first.put_connector_config(
        "source-a", {"connector.class": "DataGen", "tasks.max": "2"}, TargetState.STOPPED
    )
    first.put_task_configs("source-a", [{"task": "0"}, {"task": "1"}])
    first.put_connector_config("sink-b", {"connector.class": "FileStreamSink"})
    first.put_task_configs("sink-b", [{"file": "/tmp/x"}])
    first.put_target_state("sink-b", TargetState.PAUSED)
    first.put_connector_config("gone", {"connector.class": "X"})
    first.put_task_configs("gone", [{}])
    last = first.remove_connector_config("gone")
    first.put_restart_request("sink-b", include_tasks=True, only_failed=True)

    second = ConfigStore(factory(broker, topics.configs, 1))
    second.start(TIMEOUT)
    stoppers.append(second.stop)
    snapshot = second.snapshot()
    assert snapshot == first.snapshot()
    assert snapshot.position > last
    assert snapshot.connectors() == ["sink-b", "source-a"]
    assert snapshot.target_state("source-a") is TargetState.STOPPED
    assert snapshot.target_state("sink-b") is TargetState.PAUSED
    assert snapshot.tasks("source-a") == ({"task": "0"}, {"task": "1"})
    assert snapshot.tasks("sink-b") == ({"file": "/tmp/x"},)
    assert snapshot.target_state("gone") is None


def test_status_store_state_survives_a_restart(
    broker: Broker, topics: Topics, stoppers: list[Callable[[], None]]
) -> None:
    first = StatusStore(factory(broker, topics.status, 5))
    first.start(TIMEOUT)
    stoppers.append(first.stop)
    error = ErrorEntry(1700000000000, "boom", "Traceback", "executor-1")
    first.put_connector(ConnectorStatusRecord("c-1", State.RUNNING, None, "executor-1", 3))
    for task in range(4):
        first.put_task(TaskStatusRecord("c-1", task, State.RUNNING, None, "executor-1", 3))
    first.put_task(TaskStatusRecord("c-1", 2, State.FAILED, "Traceback", "executor-2", 4, (error,)))
    first.remove_task("c-1", 3)
    first.put_connector(ConnectorStatusRecord("old", State.RUNNING, None, "executor-1", 1))
    first.put_task(TaskStatusRecord("old", 0, State.RUNNING, None, "executor-1", 1))
    first.remove_connector("old")
    first.put_topics([TopicStatusRecord("orders", "c-1", 0, 1700000000001)])
    first.put_topics([TopicStatusRecord("audit", "old", 0, 1700000000002)])
    first.remove_topics("old")

    second = StatusStore(factory(broker, topics.status, 5))
    second.start(TIMEOUT)
    stoppers.append(second.stop)
    assert second.connectors() == ["c-1"]
    assert second.get_connector("c-1") == first.get_connector("c-1")
    assert second.tasks("c-1") == first.tasks("c-1")
    assert [t.task for t in second.tasks("c-1")] == [0, 1, 2]
    assert second.get_task("c-1", 2) == TaskStatusRecord(
        "c-1", 2, State.FAILED, "Traceback", "executor-2", 4, (error,)
    )
    assert second.get_connector("old") is None
    assert second.tasks("old") == []
    assert second.topics("c-1") == [TopicStatusRecord("orders", "c-1", 0, 1700000000001)]
    assert second.topics("old") == []


def test_offset_store_state_survives_a_restart(
    broker: Broker, topics: Topics, stoppers: list[Callable[[], None]]
) -> None:
    first = OffsetStore(factory(broker, topics.offsets, 25))
    first.start(TIMEOUT)
    stoppers.append(first.stop)
    first.put("gen", [({"task": t}, {"seq": 100 * t}) for t in range(10)])
    first.put("gen", [({"task": 3}, None), ({"task": 4}, {"seq": 999})])
    first.put("file", [({"filename": "/data/in.txt"}, {"position": 4096})])
    first.put("file", [({"filename": "/data/in.txt"}, None)])

    second = OffsetStore(factory(broker, topics.offsets, 25))
    second.start(TIMEOUT)
    stoppers.append(second.stop)
    assert second.connectors() == ["gen"]
    assert second.offsets("gen") == first.offsets("gen")
    assert len(second.offsets("gen")) == 9
    assert second.get("gen", {"task": 4}) == {"seq": 999}
    assert second.get("gen", {"task": 3}) is None
    assert second.get("file", {"filename": "/data/in.txt"}) is None


def test_raw_topics_hold_kafka_connect_formats(
    broker: Broker, topics: Topics, stoppers: list[Callable[[], None]]
) -> None:
    configs = ConfigStore(factory(broker, topics.configs, 1))
    status = StatusStore(factory(broker, topics.status, 5))
    offsets = OffsetStore(factory(broker, topics.offsets, 25))
    for store in (configs, status, offsets):
        store.start(TIMEOUT)
        stoppers.append(store.stop)

    configs.put_connector_config("c", {"connector.class": "DataGen", "name": "c"}, TargetState.PAUSED)
    configs.put_task_configs("c", [{"task.id": "0"}])
    configs.put_target_state("c", TargetState.STOPPED)
    configs.put_restart_request("c", include_tasks=False, only_failed=True)
    configs.put_connector_config("d", {"x": "y"})
    configs.remove_connector_config("d")
    status.put_connector(ConnectorStatusRecord("c", State.RUNNING, None, "executor-1", 2))
    status.put_task(TaskStatusRecord("c", 0, State.FAILED, "trace", "executor-1", 2))
    status.put_topics([TopicStatusRecord("orders", "c", 0, 1700000000000)])
    offsets.put("c", [({"task": 0}, {"seq": 41}), ({"topic": "t", "partition": 1}, {"offset": 7})])

    config_records = raw_records(broker, topics.configs)
    assert {p for p, _, _, _ in config_records} == {0}
    # Keys and values in write order, exactly as Kafka Connect writes them.
    assert [(key, None if value is None else json.loads(value)) for _, _, key, value in config_records] == [
        (b"target-state-c", {"state": "PAUSED"}),
        (b"connector-c", {"properties": {"connector.class": "DataGen", "name": "c"}}),
        (b"task-c-0", {"properties": {"task.id": "0"}}),
        (b"commit-c", {"tasks": 1}),
        (b"target-state-c", {"state": "PAUSED", "state.v2": "STOPPED"}),
        (b"restart-connector-c", {"include-tasks": False, "only-failed": True}),
        (b"connector-d", {"properties": {"x": "y"}}),
        (b"connector-d", None),
        (b"target-state-d", None),
    ]
    # Compact JSON, as Kafka Connect's JsonConverter writes it.
    assert config_records[1][3] == b'{"properties":{"connector.class":"DataGen","name":"c"}}'
    assert config_records[4][3] == b'{"state":"PAUSED","state.v2":"STOPPED"}'

    status_latest = latest_by_key(raw_records(broker, topics.status))
    assert status_latest == {
        b"status-connector-c": b'{"state":"RUNNING","trace":null,"worker_id":"executor-1","generation":2}',
        b"status-task-c-0": b'{"state":"FAILED","trace":"trace","worker_id":"executor-1","generation":2}',
        b"status-topic-orders:connector-c": (
            b'{"topic":{"name":"orders","connector":"c","task":0,"discoverTimestamp":1700000000000}}'
        ),
    }

    offset_latest = latest_by_key(raw_records(broker, topics.offsets))
    assert offset_latest == {
        b'["c",{"task":0}]': b'{"seq":41}',
        b'["c",{"partition":1,"topic":"t"}]': b'{"offset":7}',
    }
    assert json.loads(b'["c",{"task":0}]') == ["c", {"task": 0}]
