"""KIP-558 active topics end to end: real control planes, real executors, the real broker and Spark
Connect, TopicService over the gRPC socket, and the status topic read back with a raw consumer.

A DataGenSource with two tasks and a SparkFileSink share one topic; each connector's set gets that
topic with exactly one status-topic record; restart and reconfigure keep it; a reset while running
tombstones it and the running tasks record it again; deletion tombstones it. A set left behind by
a deleted connector can be read and reset; resetting a deleted connector's set succeeds however
often it is repeated, as does resetting a name that never was a connector. With tracking disabled
nothing is recorded and the API answers PERMISSION_DENIED; with resets disabled only the reset is
refused."""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import grpc
import pytest
from confluent_kafka import Producer

from sluiceway.api.v1 import topics_pb2, topics_pb2_grpc
from sluiceway.client import SluicewayClient
from sluiceway.errors import InvalidArgumentError, NotFoundError, PermissionDeniedError
from sluiceway_server.embedded import (
    EmbeddedBroker,
    EmbeddedSparkConnect,
)
from tests.conftest import ControlPlaneProcess
from tests.integration.api_helpers import read_topic, wait_until
from tests.integration.pipeline_helpers import FAST_EXECUTOR_SESSION, TIMEOUT, PipelineStack, attach_executor

pytestmark = pytest.mark.integration


def topic_records(stack: PipelineStack, connector: str) -> dict[str, list[Any]]:
    """Every value the status topic holds for each active-topic key of `connector`, in order."""
    out: dict[str, list[Any]] = {}
    suffix = f":connector-{connector}"
    for key, value in read_topic(stack.plane.broker.bootstrap_servers, stack.plane.topics["status"]):
        if key is not None and key.startswith("status-topic-") and key.endswith(suffix):
            out.setdefault(key[len("status-topic-") : -len(suffix)], []).append(value)
    return out


def _stack(broker: EmbeddedBroker, spark_connect: EmbeddedSparkConnect, **settings: str) -> PipelineStack:
    plane = ControlPlaneProcess(
        broker, uuid.uuid4().hex[:8], settings={**FAST_EXECUTOR_SESSION, **settings}
    ).start()
    try:
        return attach_executor(plane, spark_connect, "topics")
    except BaseException:
        plane.stop()
        raise


def _close(stack: PipelineStack) -> None:
    stack.close()
    stack.plane.stop()


@pytest.fixture(scope="module")
def stack(broker: EmbeddedBroker, spark_connect: EmbeddedSparkConnect) -> Iterator[PipelineStack]:
    started = _stack(broker, spark_connect)
    yield started
    _close(started)


def _datagen(topic: str, **extra: str) -> dict[str, str]:
    return {
        "connector.class": "DataGenSource",
        "topic": topic,
        "tasks.max": "2",
        "records.per.sec": "200",
        "batch.max.records": "100",
        **extra,
    }


def _topics(client: SluicewayClient, name: str) -> set[str]:
    return set(client.active_topics(name).topics)


def _tasks_seen(bootstrap: str, topic: str) -> set[int]:
    return {int(value["task"]) for _, value in read_topic(bootstrap, topic) if value}


def test_sources_and_sinks_record_each_topic_once_and_keep_it_across_restart_and_reconfigure(
    stack: PipelineStack, unique: str, tmp_path: Path
) -> None:
    client, topic = stack.client, f"tracked-{unique}"
    gen, sink = f"gen-{unique}", f"sink-{unique}"
    client.create_connector(gen, _datagen(topic))
    client.create_connector(
        sink, {"connector.class": "SparkFileSink", "topics": topic, "path": str(tmp_path / "out")}
    )
    wait_until(lambda: _topics(client, gen) == {topic}, TIMEOUT, 0.5, f"{gen}'s set\n{stack.logs()}")
    wait_until(lambda: _topics(client, sink) == {topic}, TIMEOUT, 0.5, f"{sink}'s set\n{stack.logs()}")
    # Both source tasks have written the topic, in several batches each, yet one record exists.
    bootstrap = stack.plane.broker.bootstrap_servers
    wait_until(lambda: _tasks_seen(bootstrap, topic) == {0, 1}, TIMEOUT, 0.5, "records of both tasks")
    time.sleep(2)
    records = topic_records(stack, gen)
    assert list(records) == [topic]
    (only,) = records[topic]
    assert only["topic"]["name"] == topic
    assert only["topic"]["connector"] == gen
    assert only["topic"]["task"] in (0, 1)
    assert only["topic"]["discoverTimestamp"] > 0
    assert [len(values) for values in topic_records(stack, sink).values()] == [1]
    answer = client.active_topics(gen)
    assert (answer.name, answer.connector_exists) == (f"connectors/{gen}", True)

    # Restart and reconfigure: tasks restart under new generations; the set stays as it was.
    client.restart_connector(gen, include_tasks=True)
    client.patch_connector_config(gen, {"records.per.sec": "300"})
    time.sleep(3)
    assert _topics(client, gen) == {topic}
    assert topic_records(stack, gen) == {topic: [only]}

    # Deletion tombstones the set; the API then knows neither connector nor set.
    client.delete_connector(gen)
    wait_until(lambda: topic_records(stack, gen)[topic][-1] is None, TIMEOUT, 0.5, "tombstone on delete")
    with pytest.raises(NotFoundError):
        client.active_topics(gen)
    client.delete_connector(sink)


def test_a_reset_while_running_empties_the_set_and_running_tasks_record_their_topics_again(
    stack: PipelineStack, unique: str
) -> None:
    client, topic = stack.client, f"refill-{unique}"
    gen = f"gen-{unique}"
    client.create_connector(gen, _datagen(topic))
    wait_until(lambda: _topics(client, gen) == {topic}, TIMEOUT, 0.5, f"{gen}'s set\n{stack.logs()}")

    request_id = uuid.uuid4().hex
    done = client.reset_active_topics(gen, request_id=request_id)
    assert (list(done.removed_topics), done.connector_exists) == ([topic], True)

    # The tasks never stopped: the executor forgot what it had reported and reports the topic again.
    def refilled() -> list[Any] | None:
        history = topic_records(stack, gen).get(topic, [])
        return history if len(history) >= 3 else None

    history = wait_until(refilled, TIMEOUT, 0.5, f"the set refilled\n{stack.logs()}")
    assert history[0] is not None and history[1] is None and history[2] is not None
    assert _topics(client, gen) == {topic}
    # The same request again is answered from the first call: no second tombstone.
    client.reset_active_topics(gen, request_id=request_id)
    time.sleep(1)
    assert None not in topic_records(stack, gen)[topic][2:]
    client.delete_connector(gen)


def test_the_set_of_a_deleted_connector_can_be_read_and_reset(stack: PipelineStack, unique: str) -> None:
    # A set left in the status topic by a connector that no longer exists (written by hand here,
    # as an earlier worker that did not clean up on delete would have left it).
    gone, topic = f"gone-{unique}", f"old-{unique}"
    # The partitioner the control plane uses, so the later tombstone lands on the same partition.
    producer = Producer(
        {"bootstrap.servers": stack.plane.broker.bootstrap_servers, "partitioner": "murmur2_random"}
    )
    value = {"topic": {"name": topic, "connector": gone, "task": 0, "discoverTimestamp": 1700000000000}}
    producer.produce(
        stack.plane.topics["status"], key=f"status-topic-{topic}:connector-{gone}", value=json.dumps(value)
    )
    assert producer.flush(10) == 0

    def recorded() -> topics_pb2.ActiveTopics | None:
        try:
            return stack.client.active_topics(gone)
        except NotFoundError:
            return None

    answer = wait_until(recorded, 20, 0.2, "the recorded set")
    assert (list(answer.topics), answer.connector_exists) == ([topic], False)
    first = stack.client.reset_active_topics(gone)
    assert (list(first.removed_topics), first.connector_exists) == ([topic], False)
    with pytest.raises(NotFoundError):
        stack.client.active_topics(gone)
    # Reapplied with nothing left: the same success, and no second tombstone.
    again = stack.client.reset_active_topics(gone)
    assert (list(again.removed_topics), again.connector_exists) == ([], False)
    assert topic_records(stack, gone) == {topic: [value, None]}


def test_resetting_a_deleted_connectors_topics_succeeds_again_and_again(
    stack: PipelineStack, unique: str
) -> None:
    client, topic, gen = stack.client, f"deleted-{unique}", f"gen-{unique}"
    client.create_connector(gen, _datagen(topic))
    wait_until(lambda: _topics(client, gen) == {topic}, TIMEOUT, 0.5, f"{gen}'s set\n{stack.logs()}")
    client.delete_connector(gen)
    wait_until(lambda: topic_records(stack, gen)[topic][-1] is None, TIMEOUT, 0.5, "tombstone on delete")
    history = topic_records(stack, gen)

    # The deletion emptied the set; each reset afterwards is answered OK and writes nothing.
    for done in (
        client.reset_active_topics(gen),
        client.reset_active_topics(gen, request_id=uuid.uuid4().hex),
    ):
        assert (done.name, list(done.removed_topics), done.connector_exists) == (
            f"connectors/{gen}",
            [],
            False,
        )
    with pytest.raises(NotFoundError):
        client.active_topics(gen)
    time.sleep(1)
    assert topic_records(stack, gen) == history

    # A name that never was a connector cannot be told from a deleted one: the same answer.
    never = f"never-{unique}"
    done = client.reset_active_topics(never)
    assert (list(done.removed_topics), done.connector_exists) == ([], False)
    assert topic_records(stack, never) == {}


def test_bad_names_are_refused_over_the_socket(stack: PipelineStack) -> None:
    with grpc.insecure_channel(stack.plane.address) as channel:
        stub = topics_pb2_grpc.TopicServiceStub(channel)
        for call in (
            lambda: stub.GetActiveTopics(topics_pb2.GetActiveTopicsRequest(name="tasks/x"), timeout=10),
            lambda: stub.ResetActiveTopics(topics_pb2.ResetActiveTopicsRequest(name=""), timeout=10),
        ):
            with pytest.raises(grpc.RpcError) as failed:
                call()
            assert failed.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    with pytest.raises(InvalidArgumentError):
        stack.client.active_topics("a/b")


def test_with_tracking_disabled_nothing_is_recorded_and_the_api_refuses(
    broker: EmbeddedBroker, spark_connect: EmbeddedSparkConnect, unique: str
) -> None:
    disabled = _stack(broker, spark_connect, **{"topic.tracking.enable": "false"})
    try:
        client, topic, gen = disabled.client, f"untracked-{unique}", f"gen-{unique}"
        client.create_connector(gen, _datagen(topic))
        bootstrap = broker.bootstrap_servers
        wait_until(lambda: _tasks_seen(bootstrap, topic) == {0, 1}, TIMEOUT, 0.5, disabled.logs())
        time.sleep(2)
        for call in (lambda: client.active_topics(gen), lambda: client.reset_active_topics(gen)):
            with pytest.raises(PermissionDeniedError) as refused:
                call()
            assert refused.value.reason == "TOPIC_TRACKING_DISABLED"
        assert topic_records(disabled, gen) == {}
        statuses = read_topic(bootstrap, disabled.plane.topics["status"])
        assert not [key for key, _ in statuses if key and key.startswith("status-topic-")]
    finally:
        _close(disabled)


def test_with_resets_disabled_only_the_reset_is_refused(
    control_plane_factory: Callable[..., ControlPlaneProcess], unique: str
) -> None:
    plane = control_plane_factory(**{"topic.tracking.allow.reset": "false"})
    with SluicewayClient(plane.address, timeout=30) as client:
        name = f"src-{unique}"
        client.create_connector(name, {"connector.class": "DataGenSource", "topic": f"t-{unique}"})
        answer = client.active_topics(name)
        assert (list(answer.topics), answer.connector_exists) == ([], True)
        with pytest.raises(PermissionDeniedError) as refused:
            client.reset_active_topics(name)
        assert refused.value.reason == "TOPIC_TRACKING_RESET_DISABLED"
