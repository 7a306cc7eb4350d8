"""The leader's side of the executor protocol over the real socket: balanced sticky
assignment, revoke-before-reassign, generation fencing, heartbeat expiry, adoption of the tasks an
executor runs when it attaches again, and offsets that tasks commit to Kafka themselves (source
offsets topic, sink consumer group) read back into assignments."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from typing import Any

import grpc
import pytest
from confluent_kafka import ConsumerGroupTopicPartitions, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

from sluiceway.api.v1 import cluster_pb2, common_pb2, connectors_pb2, executor_pb2
from sluiceway.common.offsets import OffsetPair, map_from_proto
from sluiceway_executor.offset_commits import CommitOutcome, CommitStatus, KafkaOffsetCommitter
from sluiceway_executor.pipelines.spec import TaskSpec
from tests.integration.api_helpers import Stubs, read_topic, wait_until
from tests.integration.executor_peer import ExecutorPeer, wait_for

pytestmark = pytest.mark.integration


@pytest.fixture
def plane(control_plane_factory: Callable[..., Any]) -> Any:
    # Short timeouts so expiry is quick; a plane of its own so no other test's tasks are assigned.
    return control_plane_factory(
        **{"executor.heartbeat.interval.ms": "300", "executor.session.timeout.ms": "1500"}
    )


@pytest.fixture
def stubs(plane: Any) -> Iterator[Stubs]:
    with grpc.insecure_channel(plane.address) as channel:
        yield Stubs.of(channel)


@pytest.fixture
def peers(plane: Any) -> Iterator[Callable[..., ExecutorPeer]]:
    started: list[ExecutorPeer] = []

    def attach(executor_id: str, **kw: Any) -> ExecutorPeer:
        peer = ExecutorPeer(plane.address, executor_id, **kw)
        started.append(peer)
        wait_for(lambda: peer.welcome, what=f"welcome of {executor_id}")
        return peer

    yield attach
    for peer in started:
        peer.close()


def create(stubs: Stubs, name: str, config: dict[str, str]) -> None:
    stubs.connectors.CreateConnector(
        connectors_pb2.CreateConnectorRequest(
            connector_id=name, connector=connectors_pb2.Connector(config=config)
        ),
        timeout=30,
    )


def datagen(unique: str, tasks: int) -> dict[str, str]:
    return {"connector.class": "DataGenSource", "topic": f"t-{unique}", "tasks.max": str(tasks)}


def test_balanced_assignment_status_and_failover(
    stubs: Stubs, peers: Callable[..., ExecutorPeer], unique: str
) -> None:
    first, second = peers(f"e1-{unique}"), peers(f"e2-{unique}")
    assert first.welcome is not None and first.welcome.worker_config["bootstrap.servers"]
    name = f"dg-{unique}"
    create(stubs, name, datagen(unique, 4))
    wait_until(lambda: len(first.tasks()) == 2 and len(second.tasks()) == 2, what="2 + 2 tasks")
    assert not first.tasks() & second.tasks()
    assignment = next(iter(first.assigned.values()))
    assert assignment.task_count == 4 and assignment.connector_config["connector.class"] == "DataGenSource"
    assert assignment.task_config["task.class"].endswith("Task")
    assert assignment.target_state == common_pb2.TARGET_STATE_RUNNING

    task = sorted(first.tasks())[0]
    first.report(task, common_pb2.STATE_RUNNING)

    def running() -> connectors_pb2.TaskStatus | None:
        reply = stubs.connectors.GetTaskStatus(connectors_pb2.GetTaskStatusRequest(name=task), timeout=5)
        return reply if reply.status.state == common_pb2.STATE_RUNNING else None

    status = wait_until(running, what="task RUNNING")
    assert status.status.worker_id == first.id
    # a report from a stale generation is refused
    first.report(task, common_pb2.STATE_FAILED, trace="stale", generation=1)
    info = stubs.cluster.GetServerInfo(cluster_pb2.GetServerInfoRequest(), timeout=5)
    assert {e.id for e in info.executors} == {first.id, second.id}
    assert stubs.connectors.GetTaskStatus(
        connectors_pb2.GetTaskStatusRequest(name=task), timeout=5
    ).status.state == (common_pb2.STATE_RUNNING)

    # the second executor leaves: its tasks move to the first, which keeps its own
    kept = first.tasks()
    moved = second.tasks()
    second.close()
    wait_until(lambda: first.tasks() == kept | moved, what="failover to the first executor")
    # a reported task of the departed executor reads UNASSIGNED until someone reports it
    for task_name in moved:
        state = stubs.connectors.GetTaskStatus(connectors_pb2.GetTaskStatusRequest(name=task_name), timeout=5)
        assert state.status.state == common_pb2.STATE_UNASSIGNED


def test_new_executor_gets_tasks_only_after_revocation_ack(
    stubs: Stubs, peers: Callable[..., ExecutorPeer], unique: str
) -> None:
    first = peers(f"e1-{unique}", auto_ack=False)
    name = f"dg-{unique}"
    create(stubs, name, datagen(unique, 4))
    wait_until(lambda: len(first.tasks()) == 4, what="all on the first")
    second = peers(f"e2-{unique}")
    wait_until(lambda: len(first.revoked) == 2, what="two revocations")
    # nothing is assigned to the newcomer while the first still holds the tasks
    time.sleep(1.0)
    assert second.tasks() == set()
    first.ack(list(first.revoked))
    wait_until(lambda: second.tasks() == set(first.revoked), what="moved tasks assigned after the ack")
    acked = {t: when for when, kind, t in first.events if kind == "ack"}
    assigned = {t: when for when, kind, t in second.events if kind == "assign"}
    assert all(assigned[t] >= acked[t] for t in first.revoked)


def test_pause_stop_and_heartbeat_expiry(
    stubs: Stubs, peers: Callable[..., ExecutorPeer], unique: str
) -> None:
    peer = peers(f"e1-{unique}")
    name = f"dg-{unique}"
    create(stubs, name, datagen(unique, 2))
    wait_until(lambda: len(peer.tasks()) == 2, what="assigned")
    generations = {t: a.generation for t, a in peer.assigned.items()}
    stubs.connectors.PauseConnector(
        connectors_pb2.PauseConnectorRequest(name=f"connectors/{name}"), timeout=30
    )
    wait_until(
        lambda: all(a.target_state == common_pb2.TARGET_STATE_PAUSED for a in peer.assigned.values()),
        what="paused assignment",
    )
    assert all(peer.assigned[t].generation > g for t, g in generations.items())
    stubs.connectors.StopConnector(connectors_pb2.StopConnectorRequest(name=f"connectors/{name}"), timeout=30)
    wait_until(lambda: peer.tasks() == set() and len(peer.revoked) == 2, what="revoked on stop")
    stubs.connectors.ResumeConnector(
        connectors_pb2.ResumeConnectorRequest(name=f"connectors/{name}"), timeout=30
    )
    wait_until(lambda: len(peer.tasks()) == 2, what="assigned again on resume")

    # a silent executor is fenced and its tasks go to the one still beating
    other = peers(f"e2-{unique}")
    peer.stop_heartbeats()
    wait_until(lambda: peer.fenced is not None, timeout=10, what="fenced")
    wait_until(lambda: len(other.tasks()) == 2, timeout=10, what="tasks moved")


def commit(peer: ExecutorPeer, task: str, pairs: list[OffsetPair], *, source: bool) -> CommitOutcome:
    """Commit as the executor does: with the task's own transactional committer, straight to Kafka."""
    assert peer.welcome is not None
    spec = TaskSpec.from_proto(peer.assigned[task])
    committer = KafkaOffsetCommitter(spec, dict(peer.welcome.worker_config), source=source)
    committer.open(30)
    try:
        return committer.commit(pairs, 30)
    finally:
        committer.close()


def test_offsets_tasks_commit_reach_kafka_and_their_next_assignment(
    stubs: Stubs, peers: Callable[..., ExecutorPeer], plane: Any, broker: Any, unique: str
) -> None:
    peer = peers(f"e1-{unique}")
    source = f"src-{unique}"
    create(stubs, source, datagen(unique, 1))
    task = f"connectors/{source}/tasks/0"
    wait_until(lambda: task in peer.tasks(), what="source task assigned")
    generation = peer.assigned[task].generation
    # The largest Java long: it must reach Kafka and come back in the next assignment exactly.
    top = 2**63 - 1
    outcome = commit(peer, task, [({"task": 0}, {"seq": top})], source=True)
    assert outcome.status is CommitStatus.OK, outcome.error
    records = read_topic(broker.bootstrap_servers, plane.topics["offset"])
    assert (f'["{source}",{{"task":0}}]', {"seq": top}) in records

    # a restarted task gets a new generation and the committed offsets with its assignment
    stubs.connectors.RestartTask(connectors_pb2.RestartTaskRequest(name=task), timeout=10)
    wait_until(lambda: peer.assigned[task].generation > generation, what="restarted under a new generation")
    carried = peer.assigned[task].source_offsets
    assert len(carried) == 1 and map_from_proto(carried[0].offset)["seq"] == top

    sink = f"sink-{unique}"
    topic = f"in-{unique}"
    admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
    for created in admin.create_topics([NewTopic(topic, 1, 1)]).values():
        created.result(timeout=10)
    create(stubs, sink, {"connector.class": "FileStreamSink", "file": "/tmp/unused", "topics": topic})
    sink_task = f"connectors/{sink}/tasks/0"
    wait_until(lambda: sink_task in peer.tasks(), what="sink task assigned")
    outcome = commit(
        peer, sink_task, [({"kafka_topic": topic, "kafka_partition": 0}, {"kafka_offset": 42})], source=False
    )
    assert outcome.status is CommitStatus.OK, outcome.error
    future = admin.list_consumer_group_offsets(
        [ConsumerGroupTopicPartitions(f"connect-{sink}", [TopicPartition(topic, 0)])]
    )
    committed = next(iter(future.values())).result(timeout=10)
    assert [(tp.topic, tp.partition, tp.offset) for tp in committed.topic_partitions] == [(topic, 0, 42)]

    # active topics are recorded once in the status topic (KIP-558)
    peer.send(
        executor_pb2.ExecutorMessage(
            active_topics=executor_pb2.ActiveTopicsReport(
                task=sink_task, generation=peer.assigned[sink_task].generation, topics=[topic]
            )
        )
    )
    wait_until(
        lambda: any(
            k == f"status-topic-{topic}:connector-{sink}"
            for k, _ in read_topic(broker.bootstrap_servers, plane.topics["status"])
        ),
        what="topic status record",
    )


def test_source_offsets_go_to_the_connectors_own_offsets_topic(
    stubs: Stubs, peers: Callable[..., ExecutorPeer], plane: Any, broker: Any, unique: str
) -> None:
    peer = peers(f"e1-{unique}")
    name, own = f"own-{unique}", f"own-offsets-{unique}"
    create(stubs, name, {**datagen(unique, 1), "offsets.storage.topic": own})
    task = f"connectors/{name}/tasks/0"
    wait_until(lambda: task in peer.tasks(), what="assigned")
    generation = peer.assigned[task].generation
    outcome = commit(peer, task, [({"task": 0}, {"seq": 7})], source=True)
    assert outcome.status is CommitStatus.OK, outcome.error
    key = f'["{name}",{{"task":0}}]'
    assert (key, {"seq": 7}) in read_topic(broker.bootstrap_servers, own)
    assert key not in {k for k, _ in read_topic(broker.bootstrap_servers, plane.topics["offset"])}
    # read back from its own topic when the task is assigned again
    stubs.connectors.RestartTask(connectors_pb2.RestartTaskRequest(name=task), timeout=10)
    wait_until(lambda: peer.assigned[task].generation > generation, what="reassigned")
    carried = peer.assigned[task].source_offsets
    assert len(carried) == 1 and map_from_proto(carried[0].offset)["seq"] == 7


def test_sink_offsets_go_to_the_overridden_consumer_group(
    stubs: Stubs, peers: Callable[..., ExecutorPeer], broker: Any, unique: str
) -> None:
    peer = peers(f"e1-{unique}")
    name, topic, group = f"grp-{unique}", f"in-{unique}", f"custom-{unique}"
    admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
    for created in admin.create_topics([NewTopic(topic, 1, 1)]).values():
        created.result(timeout=10)
    create(
        stubs,
        name,
        {
            "connector.class": "FileStreamSink",
            "file": "/tmp/unused",
            "topics": topic,
            "consumer.override.group.id": group,
        },
    )
    task = f"connectors/{name}/tasks/0"
    wait_until(lambda: task in peer.tasks(), what="assigned")
    outcome = commit(
        peer, task, [({"kafka_topic": topic, "kafka_partition": 0}, {"kafka_offset": 9})], source=False
    )
    assert outcome.status is CommitStatus.OK, outcome.error
    request = [ConsumerGroupTopicPartitions(group, [TopicPartition(topic, 0)])]
    committed = next(iter(admin.list_consumer_group_offsets(request).values())).result(timeout=10)
    assert [(tp.topic, tp.offset) for tp in committed.topic_partitions] == [(topic, 9)]


def test_a_reattaching_executor_keeps_its_tasks_and_one_that_stays_away_loses_them(
    stubs: Stubs, peers: Callable[..., ExecutorPeer], unique: str
) -> None:
    first = peers(f"r1-{unique}")
    name = f"dg-{unique}"
    create(stubs, name, datagen(unique, 2))
    wait_until(lambda: len(first.tasks()) == 2, what="assigned")
    running = first.running()
    generations = {t.task: t.generation for t in running}
    # The stream breaks (no Goodbye) and the executor attaches again, still running both tasks.
    first.close()
    again = peers(f"r1-{unique}", running=running)
    assert again.welcome is not None and sorted(again.welcome.adopted_tasks) == sorted(generations)
    time.sleep(1.0)
    assert again.assigned == {}, "an adopted task is not assigned again"
    info = stubs.cluster.GetServerInfo(cluster_pb2.GetServerInfoRequest(), timeout=5)
    assert {e.id: sorted(e.tasks) for e in info.executors} == {again.id: sorted(generations)}

    # Now it goes away for longer than the session timeout: its tasks are released to another.
    other = peers(f"r2-{unique}")
    again.stop_heartbeats()
    again.close()
    wait_until(lambda: sorted(other.tasks()) == sorted(generations), timeout=15, what="tasks moved")
    assert all(other.assigned[t].generation > g for t, g in generations.items())
    # Back late, it adopts nothing: the tasks run elsewhere now.
    late = peers(f"r1-{unique}", running=running)
    assert late.welcome is not None and list(late.welcome.adopted_tasks) == []


@pytest.mark.parametrize("goodbye", [False, True], ids=["executors-stay", "executors-say-goodbye"])
def test_shutdown_leaves_running_tasks_alone_and_logs_no_errors(
    plane: Any,
    stubs: Stubs,
    peers: Callable[..., ExecutorPeer],
    broker: Any,
    unique: str,
    goodbye: bool,
) -> None:
    first, second = peers(f"s1-{unique}"), peers(f"s2-{unique}")
    name = f"dg-{unique}"
    create(stubs, name, datagen(unique, 4))
    wait_until(lambda: len(first.tasks()) == 2 and len(second.tasks()) == 2, what="2 + 2 tasks")
    for peer in (first, second):
        for task in peer.tasks():
            peer.report(task, common_pb2.STATE_RUNNING)

    def reported_running() -> bool:
        status = stubs.connectors.GetConnectorStatus(
            connectors_pb2.GetConnectorStatusRequest(name=f"connectors/{name}"), timeout=5
        )
        return [t.status.state for t in status.tasks] == [common_pb2.STATE_RUNNING] * 4

    wait_until(reported_running, what="4 tasks RUNNING")

    if goodbye:
        # As under `sluiceway dev` on Ctrl-C: the executors leave as the control plane stops, so
        # the releases of their tasks are still being written when the shutdown begins. The stop
        # waits until the plane has read both goodbyes (a goodbye still in the socket when the
        # shutdown begins is never read, and then there is nothing to release).
        first.goodbye()
        second.goodbye()

        def both_goodbyes_read() -> bool:
            log = plane.managed.log_path.read_text()
            return all(f"executor {who}-{unique} released: it shut down" in log for who in ("s1", "s2"))

        wait_until(both_goodbyes_read, what="both goodbyes read")
    assert plane.stop() == 0
    wait_for(lambda: first.closed.is_set() and second.closed.is_set(), what="streams closed")
    latest = dict(read_topic(broker.bootstrap_servers, plane.topics["status"]))
    # A control plane that stops releases nothing: executors keep running their tasks and attach
    # to the next leader. Executors that said goodbye had their tasks released, and every release
    # reached Kafka before the stores stopped.
    expected = "UNASSIGNED" if goodbye else "RUNNING"
    for index in range(4):
        assert latest[f"status-task-{name}-{index}"]["state"] == expected
    log_text = plane.managed.log_path.read_text()
    for stray in ("Task exception was never retrieved", "LogStoppedError", "Traceback"):
        assert stray not in log_text
