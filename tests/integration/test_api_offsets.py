"""KIP-875 over the real socket, against the real broker: get, alter and reset the offsets of source
and sink connectors (the seed's offsets test plan), with scripted executors committing offsets as
real ones do. Includes the custom consumer group, the custom offsets topic, a connector whose
clients target a second Kafka cluster, every answer of a connector's alter_offsets, and delete with
delete_offsets. That resumed connectors use the new offsets is shown with real executors in
test_offsets_pipelines.py."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from typing import Any

import grpc
import pytest
from confluent_kafka import Consumer, ConsumerGroupTopicPartitions
from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

from sluiceway.api.v1 import offsets_pb2, offsets_pb2_grpc
from sluiceway.client import SluicewayClient, TargetState
from sluiceway.common.offsets import map_from_proto, offsets_from_proto
from sluiceway.errors import FailedPreconditionError, InvalidArgumentError, NotFoundError
from sluiceway_executor.offset_commits import CommitStatus, KafkaOffsetCommitter
from sluiceway_executor.pipelines.spec import TaskSpec
from sluiceway_server.embedded import EmbeddedBroker, start_broker
from tests.conftest import LOG_DIR
from tests.integration.api_helpers import failure, read_topic, wait_until
from tests.integration.executor_peer import ExecutorPeer, wait_for

pytestmark = pytest.mark.integration

SOURCE = "testing_connectors.ControllableSourceConnector"
SINK = "testing_connectors.ControllableSinkConnector"


@pytest.fixture
def plane(control_plane_factory: Callable[..., Any]) -> Any:
    return control_plane_factory(
        **{"executor.heartbeat.interval.ms": "300", "executor.session.timeout.ms": "1500"}
    )


@pytest.fixture
def client(plane: Any) -> Iterator[SluicewayClient]:
    with SluicewayClient(plane.address, timeout=30) as c:
        yield c


@pytest.fixture
def peer(plane: Any, unique: str) -> Iterator[ExecutorPeer]:
    attached = ExecutorPeer(plane.address, f"peer-{unique}")
    wait_for(lambda: attached.welcome, what="welcome")
    yield attached
    attached.close()


@pytest.fixture
def second_broker() -> Iterator[EmbeddedBroker]:
    """Another Kafka cluster, for connectors whose clients point away from the worker's."""
    started = start_broker(LOG_DIR)
    yield started
    started.stop()


def make_topic(bootstrap: str, topic: str, partitions: int = 2) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for created in admin.create_topics([NewTopic(topic, partitions, 1)]).values():
        created.result(timeout=10)


def group_offsets(bootstrap: str, group: str) -> dict[tuple[str, int], int]:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    answer = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group)])[group].result(
        timeout=10
    )
    return {(tp.topic, tp.partition): tp.offset for tp in answer.topic_partitions if tp.offset >= 0}


def offsets_of(client: SluicewayClient, name: str) -> list[tuple[dict[str, Any], dict[str, Any] | None]]:
    return offsets_from_proto(client.get_offsets(name).offsets)


def sink_item(topic: str, partition: int, offset: int | None) -> dict[str, Any]:
    return {
        "partition": {"kafka_topic": topic, "kafka_partition": partition},
        "offset": None if offset is None else {"kafka_offset": offset},
    }


def commit(peer: ExecutorPeer, task: str, pairs: list[tuple[dict[str, Any], dict[str, Any]]]) -> None:
    """Commit as the task would: with its own transactional committer, straight to Kafka."""
    wait_until(lambda: task in peer.tasks(), what=f"{task} assigned")
    assert peer.welcome is not None
    source = not any("kafka_topic" in partition for partition, _ in pairs)
    committer = KafkaOffsetCommitter(
        TaskSpec.from_proto(peer.assigned[task]), dict(peer.welcome.worker_config), source=source
    )
    committer.open(30)
    try:
        outcome = committer.commit(list(pairs), 30)
    finally:
        committer.close()
    assert outcome.status is CommitStatus.OK, outcome.error


def stop(client: SluicewayClient, peer: ExecutorPeer, name: str) -> None:
    client.stop_connector(name)
    wait_until(lambda: not any(t.startswith(f"connectors/{name}/") for t in peer.tasks()), what="revoked")


# ---------------------------------------------------------------------- reads


def test_offsets_of_an_unknown_connector_are_not_found(client: SluicewayClient, unique: str) -> None:
    with pytest.raises(NotFoundError) as missing:
        client.get_offsets(f"nobody-{unique}")
    assert missing.value.reason == "CONNECTOR_NOT_FOUND"


def test_offsets_of_running_source_and_sink_connectors(
    client: SluicewayClient, peer: ExecutorPeer, broker: EmbeddedBroker, unique: str
) -> None:
    topic = f"in-{unique}"
    make_topic(broker.bootstrap_servers, topic)
    source, sink = f"src-{unique}", f"snk-{unique}"
    client.create_connector(source, {"connector.class": SOURCE})
    client.create_connector(sink, {"connector.class": SINK, "topics": topic})
    assert offsets_of(client, source) == [] and offsets_of(client, sink) == []
    commit(
        peer, f"connectors/{source}/tasks/0", [({"file": "a"}, {"line": 10}), ({"file": "b"}, {"line": 3})]
    )
    commit(peer, f"connectors/{source}/tasks/0", [({"file": "a"}, {"line": 12})])
    commit(
        peer,
        f"connectors/{sink}/tasks/0",
        [
            ({"kafka_topic": topic, "kafka_partition": 0}, {"kafka_offset": 5}),
            ({"kafka_topic": topic, "kafka_partition": 1}, {"kafka_offset": 7}),
        ],
    )
    assert offsets_of(client, source) == [({"file": "a"}, {"line": 12}), ({"file": "b"}, {"line": 3})]
    assert offsets_of(client, sink) == [
        ({"kafka_topic": topic, "kafka_partition": 0}, {"kafka_offset": 5}),
        ({"kafka_topic": topic, "kafka_partition": 1}, {"kafka_offset": 7}),
    ]


# ---------------------------------------------------------------------- state rules


@pytest.mark.parametrize("state", ["RUNNING", "PAUSED"])
def test_offsets_change_only_while_stopped(client: SluicewayClient, unique: str, state: str) -> None:
    name = f"src-{unique}"
    client.create_connector(name, {"connector.class": SOURCE}, initial_state=state)
    for change in (
        lambda: client.alter_offsets(name, [{"partition": {"file": "a"}, "offset": {"line": 1}}]),
        lambda: client.reset_offsets(name),
    ):
        with pytest.raises(FailedPreconditionError) as refused:
            change()
        assert refused.value.reason == "CONNECTOR_NOT_STOPPED"
        assert f"is {state}" in refused.value.message and "connectors stop" in refused.value.message
    assert offsets_of(client, name) == []
    for change in (
        lambda: client.alter_offsets(f"nobody-{unique}", [{"partition": {"a": 1}, "offset": {"b": 2}}]),
        lambda: client.reset_offsets(f"nobody-{unique}"),
    ):
        with pytest.raises(NotFoundError):
            change()


# ---------------------------------------------------------------------- alter and reset


def test_alter_and_reset_a_stopped_source_connector_with_its_own_offsets_topic(
    client: SluicewayClient, peer: ExecutorPeer, plane: Any, broker: EmbeddedBroker, unique: str
) -> None:
    name, own = f"src-{unique}", f"own-offsets-{unique}"
    client.create_connector(name, {"connector.class": SOURCE, "offsets.storage.topic": own})
    commit(peer, f"connectors/{name}/tasks/0", [({"file": "a"}, {"line": 10})])
    stop(client, peer, name)
    changed = client.alter_offsets(
        name,
        [
            {"partition": {"file": "a"}, "offset": {"line": 2**63 - 1}},
            {"partition": {"file": "c"}, "offset": {"line": 4, "eof": True, "ratio": 0.5}},
        ],
    )
    assert not changed.connector_acknowledged and "did not confirm" in changed.message
    expected = [({"file": "a"}, {"line": 2**63 - 1}), ({"file": "c"}, {"line": 4, "eof": True, "ratio": 0.5})]
    assert offsets_of(client, name) == expected
    # a get's answer can be sent back as it is
    client.alter_offsets(name, client.get_offsets(name).offsets)
    assert offsets_of(client, name) == expected
    # a null offset resets one partition; alter never removes the others
    client.alter_offsets(name, [{"partition": {"file": "c"}, "offset": None}])
    assert offsets_of(client, name) == [({"file": "a"}, {"line": 2**63 - 1})]
    # the resumed task is assigned exactly these offsets
    client.resume_connector(name)
    task = f"connectors/{name}/tasks/0"
    wait_until(lambda: task in peer.tasks(), what="reassigned")
    carried = [
        (map_from_proto(o.partition), map_from_proto(o.offset)) for o in peer.assigned[task].source_offsets
    ]
    assert carried == [({"file": "a"}, {"line": 2**63 - 1})]
    stop(client, peer, name)

    reset = client.reset_offsets(name)
    assert not reset.connector_acknowledged and "reset" in reset.message
    assert offsets_of(client, name) == []
    # tombstones in the connector's own topic and in the worker's
    own_records = read_topic(broker.bootstrap_servers, own)
    assert (f'["{name}",{{"file":"a"}}]', None) in own_records
    worker_keys = [k for k, v in read_topic(broker.bootstrap_servers, plane.topics["offset"]) if v is None]
    assert f'["{name}",{{"file":"a"}}]' in worker_keys
    # a second reset succeeds too
    assert not client.reset_offsets(name).connector_acknowledged
    client.resume_connector(name)
    wait_until(lambda: task in peer.tasks(), what="reassigned after the reset")
    assert list(peer.assigned[task].source_offsets) == []


def test_alter_and_reset_a_stopped_sink_connector_with_an_overridden_group(
    client: SluicewayClient, peer: ExecutorPeer, broker: EmbeddedBroker, unique: str
) -> None:
    topic, group, name = f"in-{unique}", f"custom-{unique}", f"snk-{unique}"
    make_topic(broker.bootstrap_servers, topic)
    client.create_connector(
        name, {"connector.class": SINK, "topics": topic, "consumer.override.group.id": group}
    )
    commit(
        peer,
        f"connectors/{name}/tasks/0",
        [({"kafka_topic": topic, "kafka_partition": 0}, {"kafka_offset": 5})],
    )
    assert group_offsets(broker.bootstrap_servers, group) == {(topic, 0): 5}
    stop(client, peer, name)
    client.alter_offsets(name, [sink_item(topic, 1, 40), sink_item(topic, 0, 9)])
    assert group_offsets(broker.bootstrap_servers, group) == {(topic, 0): 9, (topic, 1): 40}
    assert offsets_of(client, name) == [
        ({"kafka_topic": topic, "kafka_partition": 0}, {"kafka_offset": 9}),
        ({"kafka_topic": topic, "kafka_partition": 1}, {"kafka_offset": 40}),
    ]
    # a null offset removes that partition's committed offset and keeps the other
    client.alter_offsets(name, [sink_item(topic, 0, None)])
    assert group_offsets(broker.bootstrap_servers, group) == {(topic, 1): 40}
    # Removing one partition's offset deletes the group and commits the others again. Tansu closes the
    # connection of that first commit, and the client that saw the close can go unanswered for tens
    # of seconds; every removal must still end well inside the client's deadline.
    for offset in range(12):
        client.alter_offsets(name, [sink_item(topic, 0, offset)])
        client.alter_offsets(name, [sink_item(topic, 0, None)], timeout=15)
        assert group_offsets(broker.bootstrap_servers, group) == {(topic, 1): 40}
    client.reset_offsets(name)
    assert group_offsets(broker.bootstrap_servers, group) == {} and offsets_of(client, name) == []
    client.reset_offsets(name)  # idempotent


def test_sink_offsets_stay_while_the_consumer_group_has_members(
    client: SluicewayClient, broker: EmbeddedBroker, unique: str
) -> None:
    topic, group, name = f"in-{unique}", f"busy-{unique}", f"snk-{unique}"
    make_topic(broker.bootstrap_servers, topic)
    client.create_connector(
        name,
        {"connector.class": SINK, "topics": topic, "consumer.override.group.id": group},
        initial_state="STOPPED",
    )
    member = Consumer(
        {"bootstrap.servers": broker.bootstrap_servers, "group.id": group, "session.timeout.ms": 6000}
    )
    member.subscribe([topic])
    try:
        wait_until(lambda: member.poll(0.2) is None and bool(member.assignment()), what="group joined")
        for change in (
            lambda: client.alter_offsets(name, [sink_item(topic, 0, 3)]),
            lambda: client.reset_offsets(name),
        ):
            with pytest.raises(FailedPreconditionError) as refused:
                change()
            assert refused.value.reason == "CONSUMER_GROUP_ACTIVE" and group in refused.value.message
    finally:
        member.close()
    assert group_offsets(broker.bootstrap_servers, group) == {}


def test_offsets_of_connectors_whose_clients_target_another_cluster(
    client: SluicewayClient,
    peer: ExecutorPeer,
    plane: Any,
    broker: EmbeddedBroker,
    second_broker: EmbeddedBroker,
    unique: str,
) -> None:
    other = second_broker.bootstrap_servers
    topic, source, sink = f"in-{unique}", f"src-{unique}", f"snk-{unique}"
    make_topic(other, topic)
    client.create_connector(source, {"connector.class": SOURCE, "producer.override.bootstrap.servers": other})
    client.create_connector(
        sink,
        {
            "connector.class": SINK,
            "topics": topic,
            "consumer.override.bootstrap.servers": other,
            "admin.override.bootstrap.servers": other,
        },
        initial_state="STOPPED",
    )
    commit(peer, f"connectors/{source}/tasks/0", [({"file": "a"}, {"line": 1})])
    stop(client, peer, source)
    client.alter_offsets(source, [{"partition": {"file": "a"}, "offset": {"line": 8}}])
    assert offsets_of(client, source) == [({"file": "a"}, {"line": 8})]
    # Kafka Connect's rule: the worker's offsets topic name, on the cluster the connector writes to
    assert (f'["{source}",{{"file":"a"}}]', {"line": 8}) in read_topic(other, plane.topics["offset"])
    client.alter_offsets(sink, [sink_item(topic, 1, 6)])
    assert group_offsets(other, f"connect-{sink}") == {(topic, 1): 6}
    assert group_offsets(broker.bootstrap_servers, f"connect-{sink}") == {}
    assert offsets_of(client, sink) == [({"kafka_topic": topic, "kafka_partition": 1}, {"kafka_offset": 6})]
    client.reset_offsets(source)
    client.reset_offsets(sink)
    assert offsets_of(client, source) == [] and group_offsets(other, f"connect-{sink}") == {}


# ---------------------------------------------------------------------- the connector's say


@pytest.mark.parametrize("plugin", [SOURCE, SINK], ids=["source", "sink"])
@pytest.mark.parametrize("behaviour", ["default", "ack", "unsupported", "fail"])
def test_the_connectors_answer_decides_the_outcome(
    client: SluicewayClient, broker: EmbeddedBroker, unique: str, plugin: str, behaviour: str
) -> None:
    topic, name = f"in-{unique}", f"c-{unique}"
    make_topic(broker.bootstrap_servers, topic)
    config = {"connector.class": plugin, "alter.offsets": behaviour}
    if plugin == SINK:
        config["topics"] = topic
    client.create_connector(name, config, initial_state="STOPPED")
    item = sink_item(topic, 0, 4) if plugin == SINK else {"partition": {"file": "a"}, "offset": {"line": 4}}
    if behaviour in ("default", "ack"):
        changed = client.alter_offsets(name, [item])
        reset = client.reset_offsets(name)
        assert changed.connector_acknowledged is reset.connector_acknowledged is (behaviour == "ack")
        assert ("confirmed" in changed.message) is (behaviour == "ack")
        return
    for change in (lambda: client.alter_offsets(name, [item]), client_reset(client, name)):
        with pytest.raises(FailedPreconditionError) as refused:
            change()
        assert refused.value.reason == "CONNECTOR_REJECTED_OFFSETS"
        expected = "does not support" if behaviour == "unsupported" else "offsets refused on purpose"
        assert expected in refused.value.message
    assert offsets_of(client, name) == []


def client_reset(client: SluicewayClient, name: str) -> Callable[[], Any]:
    return lambda: client.reset_offsets(name)


# ---------------------------------------------------------------------- bad input


def test_bad_offsets_are_refused_field_by_field(
    plane: Any, client: SluicewayClient, broker: EmbeddedBroker, unique: str
) -> None:
    topic, sink, source = f"in-{unique}", f"snk-{unique}", f"src-{unique}"
    make_topic(broker.bootstrap_servers, topic)
    client.create_connector(sink, {"connector.class": SINK, "topics": topic}, initial_state="STOPPED")
    client.create_connector(source, {"connector.class": SOURCE}, initial_state="STOPPED")
    bad: list[dict[str, Any]] = [
        {"partition": {"kafka_partition": 0}, "offset": {"kafka_offset": 1}},
        {"partition": {"kafka_topic": "bad topic!", "kafka_partition": -1}, "offset": {"kafka_offset": -5}},
        {"partition": {"kafka_topic": topic, "kafka_partition": "0"}, "offset": {"offset": 3}},
        sink_item(topic, 2, 1),
        sink_item(topic, 2, 2),
    ]
    with pytest.raises(InvalidArgumentError) as refused:
        client.alter_offsets(sink, bad)
    assert refused.value.reason == "INVALID_OFFSETS"
    fields = {v.field for v in refused.value.field_violations}
    assert fields == {
        'offsets[0].partition.fields["kafka_topic"]',
        'offsets[1].partition.fields["kafka_topic"]',
        'offsets[1].partition.fields["kafka_partition"]',
        'offsets[1].offset.fields["kafka_offset"]',
        'offsets[2].partition.fields["kafka_partition"]',
        'offsets[2].offset.fields["offset"]',
        'offsets[2].offset.fields["kafka_offset"]',
        "offsets[4].partition",
    }
    with pytest.raises(InvalidArgumentError) as empty_partition:
        client.alter_offsets(source, [{"partition": {}, "offset": {"line": 1}}])
    assert [v.field for v in empty_partition.value.field_violations] == ["offsets[0].partition"]
    with grpc.insecure_channel(plane.address) as channel:
        nothing = failure(
            lambda: offsets_pb2_grpc.OffsetServiceStub(channel).AlterConnectorOffsets(
                offsets_pb2.AlterConnectorOffsetsRequest(name=f"connectors/{source}"), timeout=10
            )
        )
    assert nothing.code == grpc.StatusCode.INVALID_ARGUMENT and "offsets" in nothing.violations
    assert offsets_of(client, sink) == [] and offsets_of(client, source) == []


# ---------------------------------------------------------------------- delete with offsets


def test_delete_with_offsets_stops_resets_and_deletes(
    client: SluicewayClient, peer: ExecutorPeer, plane: Any, broker: EmbeddedBroker, unique: str
) -> None:
    name = f"src-{unique}"
    client.create_connector(name, {"connector.class": SOURCE})
    task = f"connectors/{name}/tasks/0"
    commit(peer, task, [({"file": "a"}, {"line": 10})])
    client.delete_connector(name, delete_offsets=True)
    # it returns with the task gone from its executor and the offsets tombstoned
    assert task not in peer.tasks()
    records = read_topic(broker.bootstrap_servers, plane.topics["offset"])
    assert records[-1] == (f'["{name}",{{"file":"a"}}]', None)
    with pytest.raises(NotFoundError):
        client.get_offsets(name)
    # a new connector of that name starts with no offsets
    client.create_connector(name, {"connector.class": SOURCE}, initial_state="STOPPED")
    assert offsets_of(client, name) == []


def test_delete_with_offsets_keeps_the_connector_when_it_refuses(
    client: SluicewayClient, peer: ExecutorPeer, unique: str
) -> None:
    name = f"src-{unique}"
    client.create_connector(name, {"connector.class": SOURCE, "alter.offsets": "fail"})
    commit(peer, f"connectors/{name}/tasks/0", [({"file": "a"}, {"line": 10})])
    with pytest.raises(FailedPreconditionError) as refused:
        client.delete_connector(name, delete_offsets=True)
    assert refused.value.reason == "CONNECTOR_REJECTED_OFFSETS"
    assert "STOPPED now and was not deleted" in refused.value.message
    assert client.get_connector(name).target_state == TargetState.STOPPED
    assert offsets_of(client, name) == [({"file": "a"}, {"line": 10})]


def test_delete_with_wait_returns_once_the_tasks_are_gone(
    client: SluicewayClient, plane: Any, unique: str
) -> None:
    slow = ExecutorPeer(plane.address, f"slow-{unique}", auto_ack=False)
    try:
        wait_for(lambda: slow.welcome, what="welcome")
        name = f"src-{unique}"
        client.create_connector(name, {"connector.class": SOURCE})
        task = f"connectors/{name}/tasks/0"
        wait_until(lambda: task in slow.tasks(), what="assigned")
        done = threading.Event()

        def delete() -> None:
            client.delete_connector(name, wait=True)
            done.set()

        deleting = threading.Thread(target=delete)
        deleting.start()
        wait_until(lambda: task in slow.revoked, what="revocation")
        assert not done.wait(0.5), "delete(wait=True) returned while the executor still held the task"
        slow.ack([task])
        assert done.wait(15)
        deleting.join()
    finally:
        slow.close()
