"""KIP-158 end to end: a source connector's topics are created by the executor, before the first
record reaches them, with the settings of their topic creation group; existing topics are left as
they are; a topic that cannot be created fails the task; a worker with `topic.creation.enable=false`
creates nothing; an invalid `topic.creation.*` setting is refused over gRPC, and so are keys of
the rule syntax a draft of KIP-158 had (`topic.creation`, `topic.creation.{rule}.regex`) and keys of
groups `topic.creation.groups` does not list, which Kafka would ignore.

Real broker (Tansu), Spark Connect, control plane and executor. The source is
`testing_connectors.TopicRoutingSourceConnector`: one batch in which each record names its own
topic. Every topic is read back with the Admin API (partitions from DescribeTopics, settings from
DescribeConfigs; Tansu reports only the settings a topic was created with)."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from typing import Any

import grpc
import pytest
from confluent_kafka import TopicCollection
from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic  # type: ignore[attr-defined]

from sluiceway.client import State
from sluiceway.common.offsets import OffsetPair
from sluiceway.errors import SluicewayError
from sluiceway_server.embedded import (
    EmbeddedBroker,
    EmbeddedSparkConnect,
)
from tests.conftest import ControlPlaneProcess
from tests.integration.api_helpers import read_topic
from tests.integration.pipeline_helpers import (
    FAST_EXECUTOR_SESSION,
    PipelineStack,
    attach_executor,
    committed_offsets,
    topic_exists,
)

pytestmark = pytest.mark.integration

ROUTING = "testing_connectors.TopicRoutingSourceConnector"
DONE: OffsetPair = ({"routing": "once"}, {"routed": True})
PER_TOPIC = 2


@pytest.fixture(scope="module")
def stack(broker: EmbeddedBroker, spark_connect: EmbeddedSparkConnect) -> Iterator[PipelineStack]:
    """A plane with the worker default, topic.creation.enable=true, shared by this module's tests."""
    plane = ControlPlaneProcess(broker, uuid.uuid4().hex[:8], settings=dict(FAST_EXECUTOR_SESSION)).start()
    try:
        started = attach_executor(plane, spark_connect, "topic-creation")
        yield started
        started.close()
    finally:
        plane.stop()


@pytest.fixture
def admin(broker: EmbeddedBroker) -> AdminClient:
    return AdminClient({"bootstrap.servers": broker.bootstrap_servers})


def routing(topics: list[str], **topic_creation: str) -> dict[str, Any]:
    return {
        "connector.class": ROUTING,
        "tasks.max": 1,
        "routing.topics": ",".join(topics),
        "routing.records.per.topic": PER_TOPIC,
        **topic_creation,
    }


def partitions(admin: AdminClient, topic: str) -> int:
    description = admin.describe_topics(TopicCollection([topic]), request_timeout=15)[topic].result(
        timeout=20
    )
    return len(description.partitions)


def settings(admin: AdminClient, topic: str) -> dict[str, str]:
    future = admin.describe_configs([ConfigResource("topic", topic)], request_timeout=15)
    (entries,) = [f.result(timeout=20) for f in future.values()]
    return {key: entry.value for key, entry in entries.items() if entry.value is not None}


def test_topics_are_created_with_the_settings_of_their_group_and_existing_ones_are_kept(
    stack: PipelineStack, admin: AdminClient, broker: EmbeddedBroker
) -> None:
    u = uuid.uuid4().hex[:10]
    plain, compacted, skipped, kept = (
        f"tc-{u}-plain",
        f"tc-{u}-compact-a",
        f"tc-{u}-compact-skip",
        f"tc-{u}-compact-kept",
    )
    # Made beforehand with other partitions and settings than its group's: it must stay that way.
    admin.create_topics([NewTopic(kept, 1, 1, config={"retention.ms": "4242"})])[kept].result(timeout=30)
    name = f"routes-{u}"
    stack.client.create_connector(
        name,
        routing(
            [plain, compacted, skipped, kept],
            **{
                "topic.creation.default.replication.factor": "-1",
                "topic.creation.default.partitions": "2",
                "topic.creation.default.retention.ms": "3600000",
                "topic.creation.groups": "compacted",
                "topic.creation.compacted.include": r"tc-.*-compact-.*",
                "topic.creation.compacted.exclude": r".*-skip",
                "topic.creation.compacted.partitions": "3",
                "topic.creation.compacted.cleanup.policy": "compact",
                "topic.creation.compacted.min.insync.replicas": "1",
            },
        ),
    )
    stack.wait_for(lambda: committed_offsets(stack.client, name) == [DONE], "the batch to be committed")

    # Default group: its partitions and its own settings.
    assert partitions(admin, plain) == 2
    assert settings(admin, plain) == {"retention.ms": "3600000"}
    # A listed group: its partitions and settings; the default group's settings are not inherited.
    assert partitions(admin, compacted) == 3
    assert settings(admin, compacted) == {"cleanup.policy": "compact", "min.insync.replicas": "1"}
    # Excluded from the listed group: the default group decides.
    assert partitions(admin, skipped) == 2
    assert settings(admin, skipped) == {"retention.ms": "3600000"}
    # Existing: untouched, although its name matches the listed group.
    assert partitions(admin, kept) == 1
    assert settings(admin, kept) == {"retention.ms": "4242"}
    # Every record reached its topic.
    for topic in (plain, compacted, skipped, kept):
        assert len(read_topic(broker.bootstrap_servers, topic)) == PER_TOPIC, topic
    assert stack.client.task_status(name, 0).status.state == State.RUNNING
    stack.client.delete_connector(name)


def test_a_topic_that_cannot_be_created_fails_the_task_before_anything_is_written(
    stack: PipelineStack, admin: AdminClient
) -> None:
    u = uuid.uuid4().hex[:10]
    fine, illegal = f"tc-{u}-fine", f"tc-{u}-not$legal"
    name = f"illegal-{u}"
    stack.client.create_connector(
        name,
        routing(
            [fine, illegal],
            **{
                "topic.creation.default.replication.factor": "-1",
                "topic.creation.default.partitions": "1",
                "topic.creation.groups": "named",
                "topic.creation.named.include": r"tc-.*",
                "topic.creation.named.partitions": "4",
                # Off: the test reads the failure the task is left in.
                "task.restart.enable": "false",
            },
        ),
    )
    stack.wait_for(lambda: stack.client.task_status(name, 0).status.state == State.FAILED, "the task to fail")
    failed = stack.client.task_status(name, 0).status
    assert f"'{illegal}'" in failed.trace
    assert "topic creation group 'named'" in failed.trace
    assert "partitions=4" in failed.trace
    assert "not a legal Kafka topic name" in failed.trace
    # Nothing was created or written, not even the legal topic of the same batch.
    assert not topic_exists(admin, fine)
    assert committed_offsets(stack.client, name) == []
    stack.client.delete_connector(name)


def test_topics_a_task_declares_are_created_and_a_record_for_another_fails_the_batch(
    stack: PipelineStack, admin: AdminClient, broker: EmbeddedBroker
) -> None:
    u = uuid.uuid4().hex[:10]
    first, second = f"tc-{u}-said-a", f"tc-{u}-said-b"
    creation = {"topic.creation.default.replication.factor": "-1", "topic.creation.default.partitions": "1"}
    # Declared in full: no job looks for the topics, both are created and written.
    said = f"declared-{u}"
    stack.client.create_connector(
        said, routing([first, second], **creation, **{"routing.declared.topics": f"{first},{second}"})
    )
    stack.wait_for(lambda: committed_offsets(stack.client, said) == [DONE], "the batch to be committed")
    assert sorted(len(read_topic(broker.bootstrap_servers, t)) for t in (first, second)) == [PER_TOPIC] * 2
    stack.client.delete_connector(said)

    # A record for a topic the batch did not declare: the batch fails and nothing is committed.
    third, undeclared = f"tc-{u}-said-c", f"tc-{u}-unsaid"
    wrong = f"undeclared-{u}"
    config = routing(
        [third, undeclared], **creation, **{"routing.declared.topics": third, "task.restart.enable": "false"}
    )
    stack.client.create_connector(wrong, config)
    stack.wait_for(
        lambda: stack.client.task_status(wrong, 0).status.state == State.FAILED, "the task to fail"
    )
    trace = stack.client.task_status(wrong, 0).status.trace
    assert f"said its batch writes to [{third}] only; a record goes to {undeclared}" in trace
    assert not topic_exists(admin, undeclared)
    assert committed_offsets(stack.client, wrong) == []
    stack.client.delete_connector(wrong)


def test_an_invalid_topic_creation_setting_is_refused_over_grpc(
    stack: PipelineStack, admin: AdminClient
) -> None:
    u = uuid.uuid4().hex[:10]
    topic, name = f"tc-{u}-never", f"refused-{u}"
    config = routing(
        [topic],
        **{
            "topic.creation.default.replication.factor": "-1",
            "topic.creation.default.partitions": "0",
        },
    )
    with pytest.raises(SluicewayError) as caught:
        stack.client.create_connector(name, config)
    error = caught.value
    assert error.code == grpc.StatusCode.INVALID_ARGUMENT
    assert "topic.creation.default.partitions" in error.message
    assert any("topic.creation.default.partitions" in v.field for v in error.field_violations)
    with pytest.raises(SluicewayError) as missing:
        stack.client.get_connector(name)
    assert missing.value.code == grpc.StatusCode.NOT_FOUND
    assert not topic_exists(admin, topic)


DRAFT_RULES = {
    "topic.creation": "firstRule,defaultRule",
    "topic.creation.firstRule.regex": "MyPrefix.*",
    "topic.creation.firstRule.partitions": "5",
    "topic.creation.defaultRule.regex": ".*",
}


def test_draft_rule_syntax_is_refused_naming_each_key_and_nothing_is_stored(
    stack: PipelineStack, broker: EmbeddedBroker, admin: AdminClient
) -> None:
    u = uuid.uuid4().hex[:10]
    topic, name = f"tc-{u}-draft", f"draft-{u}"
    valid = {"topic.creation.default.replication.factor": "-1", "topic.creation.default.partitions": "2"}
    config = routing([topic], **valid, **DRAFT_RULES)
    with pytest.raises(SluicewayError) as caught:
        stack.client.create_connector(name, config)
    error = caught.value
    assert (error.code, error.reason) == (grpc.StatusCode.INVALID_ARGUMENT, "INVALID_CONFIG")
    fields = {v.field: v.description for v in error.field_violations}
    assert set(fields) == {f'connector.config["{key}"]' for key in DRAFT_RULES}
    assert "draft of KIP-158" in fields['connector.config["topic.creation"]']
    assert (
        "'firstRule' is not listed in topic.creation.groups"
        in (fields['connector.config["topic.creation.firstRule.partitions"]'])
    )
    assert set(error.metadata["config_keys"].split(",")) == set(DRAFT_RULES)
    # Nothing stored, nothing created.
    with pytest.raises(SluicewayError) as missing:
        stack.client.get_connector(name)
    assert missing.value.code == grpc.StatusCode.NOT_FOUND
    config_keys = [key for key, _ in read_topic(broker.bootstrap_servers, stack.plane.topics["config"])]
    assert not [key for key in config_keys if key and key.endswith(name)]
    assert not topic_exists(admin, topic)
    # Validation answers the same, key by key.
    answer = stack.client.validate_config({**config, "name": name})
    assert {c.value.name for c in answer.configs if c.value.errors} == set(DRAFT_RULES)

    # A running connector keeps its config when an update brings such a key.
    stack.client.create_connector(name, routing([topic], **valid), initial_state="PAUSED")
    try:
        stored = dict(stack.client.get_connector(name).config)
        with pytest.raises(SluicewayError) as refused:
            stack.client.patch_connector_config(name, {"topic.creation.firstRule.regex": ".*"})
        assert refused.value.code == grpc.StatusCode.INVALID_ARGUMENT
        # The field of PatchConnectorConfigRequest that holds the key.
        assert [v.field for v in refused.value.field_violations] == ['set["topic.creation.firstRule.regex"]']
        assert dict(stack.client.get_connector(name).config) == stored
    finally:
        stack.client.delete_connector(name)


def test_a_worker_with_topic_creation_disabled_creates_nothing(
    control_plane_factory: Callable[..., ControlPlaneProcess],
    spark_connect: EmbeddedSparkConnect,
    admin: AdminClient,
) -> None:
    plane = control_plane_factory(**FAST_EXECUTOR_SESSION, **{"topic.creation.enable": "false"})
    stack = attach_executor(plane, spark_connect, "topic-creation")
    try:
        u = uuid.uuid4().hex[:10]
        topic, name = f"tc-{u}-off", f"off-{u}"
        stack.client.create_connector(
            name,
            routing(
                [topic],
                **{
                    # Not even validated on this worker: the executor must not act on them either.
                    "topic.creation.default.replication.factor": "-1",
                    "topic.creation.default.partitions": "7",
                    "topic.creation.default.cleanup.policy": "compact",
                    # Refused by a worker that creates topics; ignored by this one.
                    "topic.creation.groups": "g",
                    "topic.creation.g.partitions": "0",
                },
            ),
        )
        stack.wait_for(lambda: committed_offsets(stack.client, name) == [DONE], "the batch to be committed")
        # The broker made the topic when the records came (its auto-creation defaults).
        assert partitions(admin, topic) != 7
        assert settings(admin, topic).get("cleanup.policy") != "compact"
        # The draft's rule keys are wrong on every worker, this one included.
        with pytest.raises(SluicewayError) as caught:
            stack.client.create_connector(f"draft-{u}", routing([topic], **DRAFT_RULES))
        assert caught.value.code == grpc.StatusCode.INVALID_ARGUMENT
        assert {v.field for v in caught.value.field_violations} == {
            f'connector.config["{key}"]' for key in DRAFT_RULES
        }
    finally:
        stack.close()
