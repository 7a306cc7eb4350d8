"""Offset commits for real: `KafkaOffsetCommitter` against the session's broker (Tansu). A source
task's commits are read back from the offsets topic with a raw read_committed consumer, a sink
task's from its consumer group with the Admin API; a second committer of the same task fences the
first, whose later commits are then FENCED and leave nothing behind."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator, Mapping
from typing import Any

import pytest
from confluent_kafka import Consumer, ConsumerGroupTopicPartitions, KafkaError, TopicPartition
from confluent_kafka.admin import AdminClient
from confluent_kafka.cimpl import NewTopic

from sluiceway.common.offsets import source_offset_key
from sluiceway_executor.offset_commits import CommitStatus, KafkaOffsetCommitter
from sluiceway_executor.pipelines.spec import TaskSpec
from sluiceway_server.embedded import EmbeddedBroker

pytestmark = pytest.mark.integration

TIMEOUT = 30.0


@pytest.fixture(scope="module")
def admin(broker: EmbeddedBroker) -> AdminClient:
    return AdminClient({"bootstrap.servers": broker.bootstrap_servers})


@pytest.fixture
def worker(broker: EmbeddedBroker, unique: str) -> dict[str, str]:
    """The worker config an executor gets in Welcome (the parts the committer uses)."""
    return {
        "bootstrap.servers": broker.bootstrap_servers,
        "group.id": f"cluster-{unique}",
        "offset.storage.topic": f"offsets-{unique}",
    }


@pytest.fixture
def committers() -> Iterator[list[KafkaOffsetCommitter]]:
    """Committers a test opened; closed afterwards."""
    opened: list[KafkaOffsetCommitter] = []
    yield opened
    for committer in opened:
        committer.close()


def create_topic(admin: AdminClient, topic: str, partitions: int) -> None:
    for created in admin.create_topics([NewTopic(topic, partitions, 1)]).values():
        created.result(timeout=TIMEOUT)


def task_spec(connector: str, task: int = 0, config: Mapping[str, str] | None = None) -> TaskSpec:
    return TaskSpec(
        name=f"connectors/{connector}/tasks/{task}",
        connector=connector,
        task_index=task,
        generation=1,
        connector_config=dict(config or {}),
        task_config={},
        paused=False,
        task_count=task + 1,
    )


def open_committer(
    committers: list[KafkaOffsetCommitter], spec: TaskSpec, worker: Mapping[str, str], *, source: bool
) -> KafkaOffsetCommitter:
    committer = KafkaOffsetCommitter(spec, worker, source=source)
    committers.append(committer)
    committer.open(TIMEOUT)
    return committer


def read_committed(
    bootstrap: str, topic: str, partitions: int
) -> list[tuple[int, bytes | None, bytes | None]]:
    """Every committed record of the topic, as (partition, key, value), in each partition's order."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "unused",
            "isolation.level": "read_committed",
            "enable.auto.commit": "false",
            "enable.partition.eof": "true",
        }
    )
    try:
        consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
        records: list[tuple[int, bytes | None, bytes | None]] = []
        at_end: set[int] = set()
        deadline = time.monotonic() + TIMEOUT
        while len(at_end) < partitions:
            assert time.monotonic() < deadline, f"did not reach the end of {topic}"
            message = consumer.poll(0.2)
            if message is None:
                continue
            error, partition = message.error(), message.partition()
            assert partition is not None
            if error is not None:
                assert error.code() == KafkaError._PARTITION_EOF, error
                at_end.add(partition)
                continue
            records.append((partition, message.key(), message.value()))
        return records
    finally:
        consumer.close()


def group_offsets(admin: AdminClient, group: str, topic: str, partitions: int) -> dict[int, int]:
    """The group's committed offsets of the topic's partitions (those it has)."""
    request = ConsumerGroupTopicPartitions(group, [TopicPartition(topic, p) for p in range(partitions)])
    (future,) = admin.list_consumer_group_offsets([request]).values()
    result: Any = future.result(timeout=TIMEOUT)
    return {tp.partition: tp.offset for tp in result.topic_partitions if tp.offset >= 0}


def sink_offset(topic: str, partition: int, offset: int) -> tuple[dict[str, Any], dict[str, Any]]:
    return {"kafka_topic": topic, "kafka_partition": partition}, {"kafka_offset": offset}


def test_a_source_committer_writes_one_record_per_partition_to_the_offsets_topic(
    broker: EmbeddedBroker,
    admin: AdminClient,
    worker: dict[str, str],
    committers: list[KafkaOffsetCommitter],
    unique: str,
) -> None:
    topic = worker["offset.storage.topic"]
    create_topic(admin, topic, 5)
    connector = f"files-{unique}"
    committer = open_committer(committers, task_spec(connector), worker, source=True)
    assert committer.topic == topic
    assert committer.transactional_id == f"cluster-{unique}-{connector}-0"

    first = committer.commit(
        [({"file": "a.txt"}, {"position": 5}), ({"file": "b.txt", "n": 1}, None)], TIMEOUT
    )
    assert first.status is CommitStatus.OK, first
    second = committer.commit([({"file": "a.txt"}, {"position": 9, "line": "ünï"})], TIMEOUT)
    assert second.status is CommitStatus.OK, second

    records = read_committed(broker.bootstrap_servers, topic, 5)
    key_a = f'["{connector}",{{"file":"a.txt"}}]'.encode()
    key_b = f'["{connector}",{{"file":"b.txt","n":1}}]'.encode()
    assert key_a == source_offset_key(connector, {"file": "a.txt"})
    assert sorted((key, value) for _, key, value in records) == sorted(
        [
            (key_a, b'{"position":5}'),
            (key_b, None),
            (key_a, '{"position":9,"line":"ünï"}'.encode()),
        ]
    )
    # The same partition key always lands on the same partition, in commit order.
    on_a = [(partition, value) for partition, key, value in records if key == key_a]
    assert len({partition for partition, _ in on_a}) == 1
    assert [value for _, value in on_a] == [b'{"position":5}', '{"position":9,"line":"ünï"}'.encode()]


def test_a_source_connector_with_its_own_offsets_topic_commits_there(
    broker: EmbeddedBroker,
    admin: AdminClient,
    worker: dict[str, str],
    committers: list[KafkaOffsetCommitter],
    unique: str,
) -> None:
    own = f"own-offsets-{unique}"
    create_topic(admin, worker["offset.storage.topic"], 1)
    create_topic(admin, own, 1)
    connector = f"own-{unique}"
    spec = task_spec(connector, 2, {"offsets.storage.topic": own})
    committer = open_committer(committers, spec, worker, source=True)
    assert committer.commit([({"p": 1}, {"o": 2})], TIMEOUT).status is CommitStatus.OK
    assert read_committed(broker.bootstrap_servers, own, 1) == [
        (0, source_offset_key(connector, {"p": 1}), b'{"o":2}')
    ]
    assert read_committed(broker.bootstrap_servers, worker["offset.storage.topic"], 1) == []


def test_a_sink_committer_commits_to_the_connectors_consumer_group(
    admin: AdminClient, worker: dict[str, str], committers: list[KafkaOffsetCommitter], unique: str
) -> None:
    data = f"data-{unique}"
    create_topic(admin, data, 2)
    connector = f"sink-{unique}"
    committer = open_committer(committers, task_spec(connector), worker, source=False)
    outcome = committer.commit([sink_offset(data, 0, 5), sink_offset(data, 1, 7)], TIMEOUT)
    assert outcome.status is CommitStatus.OK, outcome
    assert group_offsets(admin, f"connect-{connector}", data, 2) == {0: 5, 1: 7}

    # consumer.override.group.id names the group instead; a malformed offset is refused.
    group = f"custom-{unique}"
    spec = task_spec(f"other-{unique}", 0, {"consumer.override.group.id": group})
    custom = open_committer(committers, spec, worker, source=False)
    assert custom.commit([sink_offset(data, 1, 3)], TIMEOUT).status is CommitStatus.OK
    assert group_offsets(admin, group, data, 2) == {1: 3}
    refused = custom.commit([({"kafka_topic": data}, {"kafka_offset": 1})], TIMEOUT)
    assert refused.status is CommitStatus.REJECTED and "kafka_partition" in refused.error


# Tansu 0.6.0 moves a transaction to its Begin state only on AddPartitionsToTxn (a produced record);
# AddOffsetsToTxn leaves it as the previous transaction ended (Committed), and EndTxn then drops the
# offsets of a transaction in that state. The committer's tombstone in the offsets topic makes every
# sink transaction hold a record, so every commit reaches the group.
def test_every_commit_of_a_sink_committer_reaches_the_group(
    admin: AdminClient, worker: dict[str, str], committers: list[KafkaOffsetCommitter], unique: str
) -> None:
    data = f"data-{unique}"
    create_topic(admin, data, 2)
    create_topic(admin, worker["offset.storage.topic"], 1)
    connector = f"sink-{unique}"
    committer = open_committer(committers, task_spec(connector), worker, source=False)
    for offset in (5, 9, 11):
        assert committer.commit([sink_offset(data, 0, offset)], TIMEOUT).status is CommitStatus.OK
    assert group_offsets(admin, f"connect-{connector}", data, 2) == {0: 11}


@pytest.mark.parametrize("source", [True, False], ids=["source", "sink"])
def test_a_second_committer_of_the_same_task_fences_the_first(
    broker: EmbeddedBroker,
    admin: AdminClient,
    worker: dict[str, str],
    committers: list[KafkaOffsetCommitter],
    unique: str,
    source: bool,
) -> None:
    offsets_topic, data = worker["offset.storage.topic"], f"data-{unique}"
    create_topic(admin, offsets_topic, 1)
    create_topic(admin, data, 2)
    connector = f"fenced-{unique}"

    def offset(value: int, task: int = 0) -> tuple[dict[str, Any], dict[str, Any]]:
        """Task 0 commits source partition {"task": 0} or sink partition 0; task 1 its own."""
        return ({"task": task}, {"position": value}) if source else sink_offset(data, task, value)

    def committed(task: int = 0) -> list[int]:
        """Source: every committed position of the task's partition; sink: the group's offset."""
        if source:
            key = source_offset_key(connector, {"task": task})
            records = read_committed(broker.bootstrap_servers, offsets_topic, 1)
            return [json.loads(value)["position"] for _, k, value in records if k == key and value]
        return [o for p, o in group_offsets(admin, f"connect-{connector}", data, 2).items() if p == task]

    zombie = open_committer(committers, task_spec(connector), worker, source=source)
    assert zombie.commit([offset(1)], TIMEOUT).status is CommitStatus.OK
    # Another executor takes the task over: its committer's open() fences the first one.
    successor = open_committer(committers, task_spec(connector), worker, source=source)

    fenced = zombie.commit([offset(99)], TIMEOUT)
    assert fenced.status is CommitStatus.FENCED, fenced
    assert "fenced" in fenced.error.lower()
    # It refuses anything more, at once.
    started = time.monotonic()
    assert zombie.commit([offset(98)], TIMEOUT).status is CommitStatus.FENCED
    assert time.monotonic() - started < 1.0
    assert committed() == [1], "nothing of the fenced commit is visible"

    assert successor.commit([offset(2)], TIMEOUT).status is CommitStatus.OK
    assert committed() == ([1, 2] if source else [2])
    # Another task of the connector has an id of its own: the takeover did not touch it.
    neighbour = open_committer(committers, task_spec(connector, 1), worker, source=source)
    assert neighbour.commit([offset(7, task=1)], TIMEOUT).status is CommitStatus.OK
    assert committed(task=1) == [7]

    # Closing the fenced committer does not wait on the transaction the broker refused.
    started = time.monotonic()
    zombie.close()
    assert time.monotonic() - started < 5.0
