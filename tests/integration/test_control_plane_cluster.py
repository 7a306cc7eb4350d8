"""Three control-plane replicas on the real broker: one leader, elected from the cluster topic and
fenced by its transactional producer; mutations forwarded from followers; fencing of a deposed
leader; failover after kill -9 and handover after a clean stop."""

from __future__ import annotations

import os
import signal
import threading
import time
import uuid
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

import grpc
import pytest

from sluiceway.api.v1 import cluster_pb2, connectors_pb2
from sluiceway.client import SluicewayClient
from sluiceway_server.api.forwarding import FORWARDED_BY
from sluiceway_server.embedded import EmbeddedBroker
from sluiceway_server.storage.kafka_log import KafkaLog
from sluiceway_server.storage.leader_writer import LeaderWriter
from sluiceway_server.storage.record_log import LogRecord, NotLeaderError
from sluiceway_server.storage.topics import TopicSpec
from tests.conftest import ControlPlaneProcess
from tests.integration.api_helpers import Stubs, failure, read_topic, wait_until

DATAGEN = {"connector.class": "DataGenSource", "topic": "unused", "tasks.max": "1", "max.records": "1"}
SLOW_VALIDATION = {
    "connector.class": "testing_connectors.SlowSourceConnector",
    "tasks.max": "1",
    "validate.delay.ms": "4000",
}
# Plugin callbacks must outlive a SIGSTOP in the fencing test.
CLUSTER_SETTINGS = {"plugin.callback.timeout.ms": "60000"}


class Cluster:
    def __init__(self, replicas: list[ControlPlaneProcess]) -> None:
        self.replicas = replicas

    def info(self, replica: ControlPlaneProcess) -> cluster_pb2.ServerInfo:
        return replica.server_info()

    def leader(self, among: list[ControlPlaneProcess] | None = None) -> ControlPlaneProcess:
        replicas = among or self.replicas
        leader_id = self.info(replicas[0]).leader.id
        return next(r for r in self.replicas if r.address == leader_id)

    def followers(self) -> list[ControlPlaneProcess]:
        leader = self.leader()
        return [r for r in self.replicas if r is not leader]

    def wait_agreed(
        self, replicas: list[ControlPlaneProcess], min_epoch: int = 0, timeout: float = 60.0
    ) -> int:
        """Every replica in `replicas` names the same leader, one of them, at an epoch ≥ min_epoch."""
        addresses = {r.address for r in replicas}

        def agreed() -> int | None:
            infos = [self.info(r) for r in replicas]
            leaders = {(i.leader.id, i.leader.leader_epoch) for i in infos}
            if len(leaders) != 1:
                return None
            leader_id, epoch = leaders.pop()
            return epoch if leader_id in addresses and epoch >= min_epoch else None

        return wait_until(agreed, timeout=timeout, interval=0.2, what="replicas agreeing on a leader")


def _started(replicas: list[ControlPlaneProcess]) -> Cluster:
    """The first replica leads; the others join and follow. Waits until all agree."""
    replicas[0].start()
    for replica in replicas[1:]:
        replica.start(lead=False)
    cluster = Cluster(replicas)
    cluster.wait_agreed(cluster.replicas)
    wait_until(
        lambda: all(len(cluster.info(r).members) == len(replicas) for r in cluster.replicas),
        what="every member seen by every replica",
    )
    return cluster


def _stopped(cluster: Cluster) -> None:
    for replica in cluster.replicas:
        process = None if replica.managed is None else replica.managed.process
        if process is not None and process.poll() is None:
            os.kill(process.pid, signal.SIGCONT)
            replica.stop()


@pytest.fixture(scope="module")
def cluster(broker: EmbeddedBroker) -> Iterator[Cluster]:
    """Three replicas shared by the tests that leave them all running."""
    suffix = f"cl{uuid.uuid4().hex[:8]}"
    started = _started(
        [ControlPlaneProcess(broker, suffix, settings=dict(CLUSTER_SETTINGS)) for _ in range(3)]
    )
    yield started
    _stopped(started)


@pytest.fixture
def own_cluster(broker: EmbeddedBroker, unique: str) -> Iterator[Cluster]:
    """Three replicas for a test that kills or stops one."""
    started = _started(
        [ControlPlaneProcess(broker, f"cl{unique}", settings=dict(CLUSTER_SETTINGS)) for _ in range(3)]
    )
    yield started
    _stopped(started)


def _create(
    replica: ControlPlaneProcess, name: str, request_id: str = "", **config: str
) -> connectors_pb2.Connector:
    with grpc.insecure_channel(replica.address) as channel:
        created: connectors_pb2.Connector = Stubs.of(channel).connectors.CreateConnector(
            connectors_pb2.CreateConnectorRequest(
                connector_id=name,
                connector=connectors_pb2.Connector(config={**DATAGEN, **config}),
                request_id=request_id,
            ),
            timeout=60,
        )
        return created


def _get_code(replica: ControlPlaneProcess, name: str) -> grpc.StatusCode:
    with grpc.insecure_channel(replica.address) as channel:
        try:
            Stubs.of(channel).connectors.GetConnector(
                connectors_pb2.GetConnectorRequest(name=f"connectors/{name}"), timeout=10
            )
        except grpc.RpcError as exc:
            return exc.code()
    return grpc.StatusCode.OK


def _config_records(broker: object, replica: ControlPlaneProcess, name: str) -> int:
    records = read_topic(broker.bootstrap_servers, replica.topics["config"])  # type: ignore[attr-defined]
    return sum(1 for key, value in records if key == f"connector-{name}" and value is not None)


def test_replicas_agree_on_leader_and_members(cluster: Cluster) -> None:
    infos = [cluster.info(r) for r in cluster.replicas]
    assert len({i.leader.id for i in infos}) == 1
    assert all(i.leader.leader and i.leader.leader_epoch >= 1 for i in infos)
    for replica, info in zip(cluster.replicas, infos, strict=True):
        assert info.this_replica.id == replica.address
        assert sorted(m.advertised_address for m in info.members) == sorted(
            r.address for r in cluster.replicas
        )
        assert [m.id for m in info.members if m.leader] == [info.leader.id]


def test_mutation_through_each_replica_takes_effect_once(
    cluster: Cluster, broker: object, unique: str
) -> None:
    for index, replica in enumerate(cluster.replicas):
        name = f"each-{index}-{unique}"
        request_id = str(uuid.uuid4())
        created = _create(replica, name, request_id)
        # The same request through the other replicas: the first answer, nothing applied again.
        for other in cluster.replicas:
            assert _create(other, name, request_id) == created
        # Read-your-writes on every replica with the position the mutation answered.
        for other in cluster.replicas:
            with grpc.insecure_channel(other.address) as channel:
                read = Stubs.of(channel).connectors.GetConnector(
                    connectors_pb2.GetConnectorRequest(
                        name=f"connectors/{name}", min_config_position=created.config_position
                    ),
                    timeout=30,
                )
                assert read.config["connector.class"] == "DataGenSource"
        assert _config_records(broker, replica, name) == 1


def test_concurrent_create_through_two_replicas(cluster: Cluster, unique: str) -> None:
    name = f"race-{unique}"
    followers = cluster.followers()
    barrier = threading.Barrier(2)

    def create(replica: ControlPlaneProcess) -> grpc.StatusCode:
        barrier.wait()
        try:
            _create(replica, name)
        except grpc.RpcError as exc:
            return exc.code()
        return grpc.StatusCode.OK

    with ThreadPoolExecutor(2) as pool:
        codes = sorted(c.name for c in pool.map(create, followers))
    assert codes == ["ALREADY_EXISTS", "OK"]


def test_forwarded_call_on_a_follower_does_not_hop_again(cluster: Cluster, unique: str) -> None:
    follower = cluster.followers()[0]
    with grpc.insecure_channel(follower.address) as channel:
        got = failure(
            lambda: Stubs.of(channel).connectors.CreateConnector(
                connectors_pb2.CreateConnectorRequest(
                    connector_id=f"loop-{unique}", connector=connectors_pb2.Connector(config=DATAGEN)
                ),
                timeout=10,
                metadata=((FORWARDED_BY, "some-replica"),),
            )
        )
    assert (got.code, got.reason) == (grpc.StatusCode.UNAVAILABLE, "NOT_LEADER")
    assert got.retry_delay is not None


def test_follower_forwards_the_callers_deadline(cluster: Cluster, unique: str) -> None:
    """The leader itself runs out of time and names the stage it was in: the deadline travelled."""
    follower = cluster.followers()[0]
    with grpc.insecure_channel(follower.address) as channel:
        got = failure(
            lambda: Stubs.of(channel).connectors.CreateConnector(
                connectors_pb2.CreateConnectorRequest(
                    connector_id=f"slow-{unique}", connector=connectors_pb2.Connector(config=SLOW_VALIDATION)
                ),
                timeout=2.5,
            )
        )
    assert got.code == grpc.StatusCode.DEADLINE_EXCEEDED
    assert "validating" in got.message, got.message


def _log_of(replica: ControlPlaneProcess) -> str:
    assert replica.managed is not None
    return replica.managed.log_path.read_text(errors="replace")


def test_leader_killed_another_leads_and_serves_mutations_then_a_clean_stop_hands_over(
    own_cluster: Cluster, broker: object, unique: str
) -> None:
    cluster = own_cluster
    leader = cluster.leader()
    epoch = cluster.info(leader).leader.leader_epoch
    survivors = [r for r in cluster.replicas if r is not leader]
    # Answered by the leader about to die; its retry reaches the next one.
    request_id = str(uuid.uuid4())
    answered = _create(leader, f"before-kill-{unique}", request_id)
    leader.kill()
    killed_at = time.monotonic()
    new_epoch = cluster.wait_agreed(survivors, min_epoch=epoch + 1)
    assert new_epoch > epoch
    assert _create(survivors[1], f"before-kill-{unique}", request_id) == answered
    assert _config_records(broker, survivors[0], f"before-kill-{unique}") == 1
    # Through either survivor, with the client library's retries.
    for index, survivor in enumerate(survivors):
        with SluicewayClient(survivor.address, timeout=60) as client:
            client.create_connector(f"after-kill-{index}-{unique}", DATAGEN)
    print(f"failover to the first successful mutation: {time.monotonic() - killed_at:.1f}s")
    # The survivors saw the killed leader's address refuse connections; neither waited out the
    # session timeout.
    assert any(
        f"leader {leader.address} (epoch {epoch}) refuses connections" in _log_of(s) for s in survivors
    )

    # A clean stop of the new leader: it leaves its tombstone, and the last replica takes over.
    second = cluster.leader(survivors)
    last = next(r for r in survivors if r is not second)
    assert second.stop() == 0
    stopped_at = time.monotonic()
    cluster.wait_agreed([last], min_epoch=new_epoch + 1)
    with SluicewayClient(last.address, timeout=60) as client:
        client.create_connector(f"after-stop-{unique}", DATAGEN)
    print(f"handover to the first successful mutation: {time.monotonic() - stopped_at:.1f}s")
    assert f"leader {second.address} (epoch {new_epoch}) stopped" in _log_of(last)

    # The killed replica, started again at its address, follows the live leader.
    leader.start(lead=False)
    cluster.wait_agreed([leader, last], min_epoch=new_epoch + 1)
    assert cluster.leader([leader, last]) is last


def test_stopped_leader_cannot_change_state_when_resumed(
    cluster: Cluster, broker: object, unique: str
) -> None:
    leader = cluster.leader()
    assert leader.managed is not None
    pid = leader.managed.process.pid
    epoch = cluster.info(leader).leader.leader_epoch
    survivors = [r for r in cluster.replicas if r is not leader]
    name = f"zombie-{unique}"
    with ThreadPoolExecutor(1) as pool:
        # Validation runs for ~5.5 s on the leader; it is stopped in the middle of it.
        pending: Future[connectors_pb2.Connector] = pool.submit(_create, leader, name, "", **SLOW_VALIDATION)
        time.sleep(1.0)
        os.kill(pid, signal.SIGSTOP)
        try:
            cluster.wait_agreed(survivors, min_epoch=epoch + 1)
            _create(survivors[0], f"by-new-leader-{unique}")
        finally:
            os.kill(pid, signal.SIGCONT)
        with pytest.raises(grpc.RpcError) as refused:
            pending.result(timeout=60)
    assert refused.value.code() == grpc.StatusCode.UNAVAILABLE
    # Nothing of the deposed leader's write is anywhere: not in the log, not on any replica.
    assert _config_records(broker, leader, name) == 0
    for replica in cluster.replicas:
        assert _get_code(replica, name) == grpc.StatusCode.NOT_FOUND
    # The resumed replica follows the new leader.
    cluster.wait_agreed(cluster.replicas, min_epoch=epoch + 1)


def test_a_newer_leader_writer_fences_the_older(broker: object, unique: str, tmp_path: Path) -> None:
    """The mechanism under the fencing above: once a writer with the same transactional id starts,
    the older one's writes fail and it reports itself fenced; none of its records is committed."""
    bootstrap = broker.bootstrap_servers  # type: ignore[attr-defined]
    topic = f"fenced-{unique}"
    seen: list[LogRecord] = []
    reader = KafkaLog(topic, bootstrap, seen.append, TopicSpec(1, 1, {}), leader_only=True)
    reader.start(30)
    fenced: list[str] = []
    old = LeaderWriter(f"fence-{unique}", bootstrap, on_fenced=fenced.append)
    old.start(30)
    old.send(topic, b"k", b"old-1").result(30)
    new = LeaderWriter(f"fence-{unique}", bootstrap)
    new.start(30)
    with pytest.raises(NotLeaderError):
        old.send(topic, b"k", b"old-2").result(30)
    assert fenced and old.fenced
    with pytest.raises(NotLeaderError):
        old.send(topic, b"k", b"old-3").result(30)
    reader.route_writes(new)
    reader.wait_for(reader.send(b"k", b"new-1").result(30), 30)
    assert [r.value for r in seen] == [b"old-1", b"new-1"]
    new.close()
    old.close()
    reader.stop()
