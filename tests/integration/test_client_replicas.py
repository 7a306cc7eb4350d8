"""Clients given every replica of a three-replica control plane: the replica a client uses is
killed with SIGKILL while it reads and mutates, and no call fails and no mutation acts twice."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from sluiceway.client import Connector, SluicewayClient
from sluiceway.errors import SluicewayError
from sluiceway_server.embedded import EmbeddedBroker
from tests.conftest import ControlPlaneProcess
from tests.integration.api_helpers import read_topic, wait_until

pytestmark = pytest.mark.integration

DATAGEN = {"connector.class": "DataGenSource", "topic": "unused", "tasks.max": "1", "max.records": "1"}
# Validation takes 2 s on the leader: the create is in flight when the replica it went through dies.
SLOW = {
    "connector.class": "testing_connectors.SlowSourceConnector",
    "tasks.max": "1",
    "validate.delay.ms": "2000",
}


class Replicas:
    def __init__(self, broker: EmbeddedBroker, planes: list[ControlPlaneProcess]) -> None:
        self.broker = broker
        self.planes = planes

    def alive(self) -> list[ControlPlaneProcess]:
        return [p for p in self.planes if p.managed is not None and p.managed.process.poll() is None]

    def leader(self) -> ControlPlaneProcess:
        alive = self.alive()
        leader_id = alive[0].server_info().leader.id
        return next(p for p in alive if p.address == leader_id)

    def by_address(self, address: str) -> ControlPlaneProcess:
        return next(p for p in self.planes if p.address == address)

    def followers_first(self) -> str:
        """The live replicas as one target, followers first, so the client starts on a follower
        (its mutations are forwarded) and the leader stays up: no election slows the test."""
        leader = self.leader()
        return ",".join(p.address for p in [*(p for p in self.alive() if p is not leader), leader])

    def created_records(self, name: str) -> int:
        """How many times the connector's config was written."""
        records = read_topic(self.broker.bootstrap_servers, self.planes[0].topics["config"])
        return sum(1 for key, value in records if key == f"connector-{name}" and value is not None)


@pytest.fixture(scope="module")
def replicas(broker: EmbeddedBroker) -> Iterator[Replicas]:
    suffix = f"rp{uuid.uuid4().hex[:8]}"
    settings = {"plugin.callback.timeout.ms": "20000"}
    planes = [ControlPlaneProcess(broker, suffix, settings=dict(settings)) for _ in range(3)]
    planes[0].start()
    for plane in planes[1:]:
        plane.start(lead=False)
    cluster = Replicas(broker, planes)
    wait_until(
        lambda: all(len(p.server_info().members) == 3 and p.server_info().leader.id for p in planes),
        timeout=60,
        what="three members and a leader seen by every replica",
    )
    yield cluster
    for plane in cluster.alive():
        plane.stop()


class Tally:
    def __init__(self) -> None:
        self.calls = 0
        self.failures: list[str] = []
        self._lock = threading.Lock()

    def run(self, call: Callable[[], object]) -> None:
        try:
            call()
        except SluicewayError as exc:
            with self._lock:
                self.failures.append(f"{exc.code.name}: {exc.message}")
        with self._lock:
            self.calls += 1


def test_client_keeps_working_while_the_replica_it_uses_is_killed(replicas: Replicas, unique: str) -> None:
    target = replicas.followers_first()
    tally = Tally()
    created: list[str] = []
    stop = threading.Event()
    with SluicewayClient(target, timeout=60) as client:
        in_use = replicas.by_address(client.server_info().this_replica.id)
        assert in_use is not replicas.leader()

        def loop() -> None:
            index = 0
            while not stop.is_set():
                name = f"loop-{unique}-{index}"
                answers: list[Connector] = []
                tally.run(lambda: answers.append(client.create_connector(name, DATAGEN)))  # noqa: B023
                if answers:
                    created.append(name)
                    position = answers[0].config_position
                    tally.run(lambda: client.get_connector(name, min_config_position=position))  # noqa: B023
                tally.run(lambda: list(client.list_connectors()))
                tally.run(client.server_info)
                index += 1

        with ThreadPoolExecutor(2) as pool:
            looping = pool.submit(loop)
            slow = pool.submit(client.create_connector, f"slow-{unique}", SLOW)
            time.sleep(1.0)
            calls_before_kill = tally.calls
            in_use.kill()
            killed_at = time.monotonic()
            # The loop goes on through the kill until it has made as many calls again.
            wait_until(lambda: tally.calls >= 2 * calls_before_kill + 20, timeout=60, what="calls after kill")
            stop.set()
            looping.result(timeout=60)
            slow_answer = slow.result(timeout=60)
        now_using = client.server_info().this_replica.id
    print(
        f"{tally.calls} calls ({calls_before_kill} before the kill), {len(tally.failures)} failed; "
        f"moved from {in_use.address} to {now_using}; {time.monotonic() - killed_at:.1f}s after the kill"
    )
    assert tally.failures == []
    assert now_using != in_use.address
    assert slow_answer.name == f"slow-{unique}"
    # Every mutation took effect once, also the one in flight through the killed replica.
    for name in [f"slow-{unique}", *created]:
        assert replicas.created_records(name) == 1, name


def cli(*args: str, server: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(Path(sys.executable).parent / "sluiceway"), *args],
        capture_output=True,
        text=True,
        timeout=90,
        env={**os.environ, "SLUICEWAY_SERVER": server},
        check=False,
    )


def test_cli_with_a_replica_list_in_the_environment_survives_a_kill(replicas: Replicas, unique: str) -> None:
    target = replicas.followers_first()
    first = replicas.by_address(target.split(",")[0])
    listed = cli(
        "connectors", "create", f"cli-{unique}", *(f"{k}={v}" for k, v in DATAGEN.items()), server=target
    )
    assert listed.returncode == 0, listed.stderr
    first.kill()
    # Each run starts on the killed replica, the first in the list, and moves on.
    for args in (("connectors", "get", f"cli-{unique}"), ("connectors", "pause", f"cli-{unique}")):
        result = cli(*args, server=target)
        assert result.returncode == 0, result.stderr
        assert f"cli-{unique}" in result.stdout
    info = cli("cluster", "info", server=target)
    assert info.returncode == 0, info.stderr
    assert replicas.created_records(f"cli-{unique}") == 1
