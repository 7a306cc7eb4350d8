"""KIP-158 on a cluster that will not let the task create its topic: the source task warns once and
writes anyway, so the broker's own auto-creation makes the topic.

Tansu has no ACLs and creates whatever it is asked to, so no genuine refusal can be had from it
(DescribeTopics with authorized operations, CreateTopics with odd settings or names, and a client
that believes the broker is old all succeed or time out). The refusal is therefore the one thing not
real here: the task's admin client is a real AdminClient on the real broker whose CreateTopics
answers TOPIC_AUTHORIZATION_FAILED without reaching the broker. Everything else is real: the
DataFrame-level DataGen task runs in a SourcePipeline on the Spark Connect server, DescribeTopics
asks the broker, and the records go through the `sluiceway-kafka` writer's producer."""

from __future__ import annotations

import functools
import logging
from concurrent.futures import Future
from typing import Any

import pytest
from confluent_kafka import KafkaError, KafkaException, TopicCollection
from confluent_kafka.admin import AdminClient
from confluent_kafka.cimpl import NewTopic
from pyspark.sql import SparkSession

from sluiceway_executor import topic_creation
from sluiceway_executor.pipelines import source
from sluiceway_executor.pipelines.factory import SparkPipelineFactory
from sluiceway_executor.pipelines.spec import TaskSpec
from sluiceway_server.embedded import EmbeddedBroker
from tests.integration.api_helpers import read_topic
from tests.integration.pipeline_helpers import topic_exists

pytestmark = pytest.mark.integration

RECORDS = 6
PER_BATCH = 3


class CreateRefused:
    """A real AdminClient whose CreateTopics is refused as a broker with ACLs refuses a principal
    without Create; DescribeTopics goes to the broker."""

    def __init__(self, bootstrap: str) -> None:
        self.admin = AdminClient({"bootstrap.servers": bootstrap})
        self.described: list[list[str]] = []
        self.refused: list[list[str]] = []

    def describe_topics(self, topics: TopicCollection, **kwargs: Any) -> dict[str, Future[Any]]:
        self.described.append(list(topics.topic_names))
        return self.admin.describe_topics(topics, **kwargs)

    def create_topics(self, new_topics: list[NewTopic], **kwargs: Any) -> dict[str, Future[Any]]:
        self.refused.append([t.topic for t in new_topics])
        answers: dict[str, Future[Any]] = {}
        for topic in new_topics:
            answer: Future[Any] = Future()
            answer.set_exception(KafkaException(KafkaError(KafkaError.TOPIC_AUTHORIZATION_FAILED)))
            answers[topic.topic] = answer
        return answers


def test_a_task_refused_create_warns_once_and_its_records_land_by_auto_creation(
    spark_with_sources: SparkSession,
    broker: EmbeddedBroker,
    unique: str,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    topic, connector = f"refused-{unique}", f"refused-{unique}"
    config = {
        "connector.class": "DataGenSource",
        "topic": topic,
        "max.records": str(RECORDS),
        "batch.max.records": str(PER_BATCH),
        # A group the creator would create the topic with: 7 partitions, which the broker's own
        # auto-creation does not give.
        "topic.creation.default.replication.factor": "-1",
        "topic.creation.default.partitions": "7",
    }
    spec = TaskSpec(
        name=f"connectors/{connector}/tasks/0",
        connector=connector,
        task_index=0,
        generation=1,
        connector_config=config,
        task_config={
            **config,
            "task.id": "0",
            "task.class": "sluiceway_executor.connectors.datagen.DataGenBatchTask",
        },
        paused=False,
        task_count=1,
    )
    refusing = CreateRefused(broker.bootstrap_servers)
    # The pipeline makes its creator itself; this one is given the refusing admin client.
    monkeypatch.setattr(
        source, "TopicCreator", functools.partial(topic_creation.TopicCreator, admin=refusing)
    )
    assert not topic_exists(refusing.admin, topic)

    pipeline = SparkPipelineFactory(spark_with_sources)(spec, {"bootstrap.servers": broker.bootstrap_servers})
    pipeline.start()
    batches = 0
    try:
        with caplog.at_level(logging.WARNING, logger=topic_creation.__name__):
            # Batch by batch until the last record is written: each batch goes through ensure().
            reached: object = None
            while reached != [({"task": 0}, {"seq": RECORDS - 1})]:
                assert batches < 10, reached
                outcome = pipeline.run_batch(batches)
                reached = outcome.offsets
                assert outcome.topics == {topic}
                pipeline.committed(outcome)
                batches += 1
    finally:
        pipeline.stop()

    # At least two batches, yet one lookup, one refused creation and one warning.
    assert batches >= 2
    assert refusing.described == [[topic]]
    assert refusing.refused == [[topic]]
    warnings = [r.getMessage() for r in caplog.records if r.name == topic_creation.__name__]
    assert len(warnings) == 1, warnings
    assert f"'{topic}'" in warnings[0]
    assert "needs Create on topic" in warnings[0] and "TOPIC_AUTHORIZATION_FAILED" in warnings[0]
    # The broker made the topic when the records came, with its own defaults, and every record landed.
    assert topic_exists(refusing.admin, topic)
    description = refusing.admin.describe_topics(TopicCollection([topic]), request_timeout=15)[topic]
    assert len(description.result(timeout=20).partitions) != 7
    records = read_topic(broker.bootstrap_servers, topic)
    assert sorted(value["seq"] for _, value in records) == list(range(RECORDS))
