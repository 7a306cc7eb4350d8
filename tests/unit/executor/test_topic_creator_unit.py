"""TopicCreator without a broker: when it is active, and what it refuses before asking Kafka
anything. Its work against a real broker is in tests/integration/test_topic_creation.py."""

from __future__ import annotations

import time

import pytest

from sluiceway.connect import ConnectException
from sluiceway.connect.kafka_clients import connection_settings
from sluiceway_executor.topic_creation import TopicCreator, topic_creation_enabled

# Nothing listens there: a creator that tried to reach it would fail or wait, not pass.
WORKER = {"bootstrap.servers": "127.0.0.1:9", "group.id": "cluster"}
CONNECTOR = {
    "topic": "t",
    "topic.creation.default.replication.factor": "-1",
    "topic.creation.default.partitions": "2",
    "topic.creation.groups": "logs",
    "topic.creation.logs.include": "logs-.*",
}


def test_active_only_with_the_worker_switch_and_topic_creation_keys() -> None:
    assert TopicCreator(WORKER, CONNECTOR).active  # the switch defaults to true
    assert TopicCreator({**WORKER, "topic.creation.enable": "TRUE"}, CONNECTOR).active
    assert not TopicCreator({**WORKER, "topic.creation.enable": "false"}, CONNECTOR).active
    assert not TopicCreator(WORKER, {"topic": "t"}).active


def test_an_inactive_creator_asks_kafka_nothing() -> None:
    for creator in (
        TopicCreator({**WORKER, "topic.creation.enable": "false"}, CONNECTOR, timeout=1),
        TopicCreator(WORKER, {"topic": "t"}, timeout=1),
    ):
        started = time.monotonic()
        creator.ensure(["t", "not a legal name"])
        assert time.monotonic() - started < 0.5


def test_an_illegal_topic_name_is_refused_before_asking_kafka() -> None:
    creator = TopicCreator(WORKER, CONNECTOR, task="task 0 of src", timeout=1)
    started = time.monotonic()
    with pytest.raises(ConnectException) as caught:
        creator.ensure(["logs-a/b"])
    assert time.monotonic() - started < 0.5
    message = str(caught.value)
    assert "task 0 of src" in message
    assert "'logs-a/b'" in message
    assert "group 'logs'" in message
    assert "partitions=2, replication.factor=-1" in message
    assert "not a legal Kafka topic name" in message


def test_the_groups_follow_the_connector_config() -> None:
    creator = TopicCreator(WORKER, CONNECTOR)
    assert [g.name for g in creator.groups] == ["logs", "default"]
    assert creator.group_for("logs-app").name == "logs"
    assert creator.group_for("metrics").name == "default"


def test_invalid_settings_fail_the_task_at_start() -> None:
    with pytest.raises(ConnectException, match=r"topic\.creation\.default\.partitions"):
        TopicCreator(WORKER, {"topic.creation.default.replication.factor": "1"})
    with pytest.raises(ConnectException, match=r"topic\.creation\.enable"):
        topic_creation_enabled({"topic.creation.enable": "maybe"})


def test_connection_settings_keep_what_reaches_the_cluster() -> None:
    producer = {
        "bootstrap.servers": "k:9092",
        "client.dns.lookup": "use_all_dns_ips",
        "security.protocol": "SASL_SSL",
        "sasl.mechanism": "PLAIN",
        "ssl.ca.location": "/ca.pem",
        "linger.ms": "5",
        "enable.idempotence": "true",
    }
    assert connection_settings(producer) == {
        "bootstrap.servers": "k:9092",
        "client.dns.lookup": "use_all_dns_ips",
        "security.protocol": "SASL_SSL",
        "sasl.mechanism": "PLAIN",
        "ssl.ca.location": "/ca.pem",
    }
