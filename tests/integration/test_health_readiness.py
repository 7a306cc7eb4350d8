"""Liveness and readiness over gRPC health on a real control plane: readiness follows Kafka (on a
broker of this test's own, killed and started again) and shutdown; liveness answers throughout."""

from __future__ import annotations

import os
import signal
import time
import uuid
from collections.abc import Callable, Iterator

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

from sluiceway_server.embedded import EmbeddedBroker, start_broker
from sluiceway_server.readiness import LIVENESS_SERVICE
from tests.conftest import LOG_DIR, ControlPlaneProcess

SERVING = health_pb2.HealthCheckResponse.SERVING
NOT_SERVING = health_pb2.HealthCheckResponse.NOT_SERVING
# Short, so a test sees Kafka's absence within seconds.
QUICK = {"readiness.kafka.check.interval.ms": "500", "readiness.kafka.unreachable.ms": "1500"}


def status(address: str, service: str) -> int | None:
    """The health status of `service`, or None when the call itself fails."""
    with grpc.insecure_channel(address) as channel:
        try:
            reply = health_pb2_grpc.HealthStub(channel).Check(
                health_pb2.HealthCheckRequest(service=service), timeout=2
            )
        except grpc.RpcError:
            return None
        answer: int = reply.status
        return answer


def wait_status(address: str, service: str, wanted: int, timeout: float) -> float:
    """Seconds it took `service` to report `wanted`."""
    start = time.monotonic()
    while (seen := status(address, service)) != wanted:
        if time.monotonic() - start > timeout:
            raise AssertionError(f"{service!r} is {seen} after {timeout:.0f}s, not {wanted}")
        time.sleep(0.1)
    return time.monotonic() - start


@pytest.fixture
def own_broker() -> Iterator[list[EmbeddedBroker]]:
    """A broker for this test alone (the list holds its current incarnation); stopped at the end."""
    brokers = [start_broker(LOG_DIR)]
    yield brokers
    brokers[-1].stop()


def test_readiness_follows_kafka_and_liveness_does_not(own_broker: list[EmbeddedBroker]) -> None:
    plane = ControlPlaneProcess(own_broker[0], uuid.uuid4().hex[:8], settings=dict(QUICK)).start()
    try:
        assert status(plane.address, "") == SERVING
        assert status(plane.address, "sluiceway.api.v1.ConnectorService") == SERVING
        assert status(plane.address, LIVENESS_SERVICE) == SERVING
        port = own_broker[0].port
        own_broker[0].managed.kill()
        wait_status(plane.address, "", NOT_SERVING, timeout=15)
        assert status(plane.address, "sluiceway.api.v1.ConnectorService") == NOT_SERVING
        assert status(plane.address, LIVENESS_SERVICE) == SERVING
        # The embedded broker keeps everything in memory: the one started again on the same port
        # answers, but without the internal topics. Readiness asks whether Kafka answers, so it
        # comes back; the replica's lost state is not what this shows.
        own_broker.append(start_broker(LOG_DIR, port=port))
        wait_status(plane.address, "", SERVING, timeout=20)
        assert status(plane.address, LIVENESS_SERVICE) == SERVING
    finally:
        # Its Kafka lost every internal topic: a clean stop has nothing to gain.
        plane.kill()


def test_shutdown_turns_readiness_off_while_liveness_answers(
    control_plane_factory: Callable[..., ControlPlaneProcess],
) -> None:
    plane = control_plane_factory(**{"shutdown.drain.ms": "3000"})
    assert plane.managed is not None
    assert status(plane.address, "") == SERVING
    os.kill(plane.managed.process.pid, signal.SIGTERM)
    wait_status(plane.address, "", NOT_SERVING, timeout=2)
    assert status(plane.address, LIVENESS_SERVICE) == SERVING
    assert status(plane.address, "sluiceway.api.v1.ConnectorService") == NOT_SERVING
    assert plane.managed.process.wait(30) == 0
    assert status(plane.address, LIVENESS_SERVICE) is None
