"""Readiness decisions with a fake clock, and the health names a reporter sets, without a server."""

from __future__ import annotations

import asyncio

from grpc_health.v1 import health, health_pb2

from sluiceway_server.readiness import HTTP_STATUS, LIVENESS_SERVICE, HealthReporter, Readiness

SERVING = health_pb2.HealthCheckResponse.SERVING
NOT_SERVING = health_pb2.HealthCheckResponse.NOT_SERVING


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_states_in_their_order() -> None:
    clock, led = Clock(), [False]
    readiness = Readiness(
        unreachable_after=5, leader_known=lambda: led[0], kafka="Kafka at k:9092", clock=clock
    )
    assert readiness.state()[0] == "starting"
    led[0] = True
    assert readiness.state()[0] == "healthy" and readiness.ready
    # A failed check within the threshold changes nothing; past it, the replica is unhealthy.
    clock.now += 3
    readiness.kafka_failed("timed out")
    assert readiness.state()[0] == "healthy"
    clock.now += 3
    status, message = readiness.state()
    assert status == "unhealthy" and "Kafka at k:9092" in message and "timed out" in message
    readiness.kafka_answered()
    assert readiness.state()[0] == "healthy"
    # Later elections do not make it `starting` again.
    led[0] = False
    assert readiness.state()[0] == "healthy"
    readiness.begin_stopping()
    assert readiness.state()[0] == "stopping"
    assert HTTP_STATUS[readiness.state()[0]] == 503 and HTTP_STATUS["unhealthy"] == 500


def test_a_silent_probe_alone_is_not_unhealthy() -> None:
    clock = Clock()
    readiness = Readiness(unreachable_after=5, leader_known=lambda: True, clock=clock)
    clock.now += 60  # no failure reported: the probe may merely be late
    assert readiness.state()[0] == "healthy"


def test_reporter_sets_readiness_names_and_keeps_liveness() -> None:
    async def scenario() -> None:
        servicer = health.aio.HealthServicer()
        answers = [True]

        def check(timeout: float) -> None:
            if not answers[-1]:
                raise RuntimeError("no broker")

        readiness = Readiness(unreachable_after=0.05, leader_known=lambda: True)
        reporter = HealthReporter(readiness, servicer, ("", "svc"), check, interval=0.02)
        await reporter.start()

        async def status(name: str) -> int:
            reply = await servicer.Check(health_pb2.HealthCheckRequest(service=name), None)
            value: int = reply.status
            return value

        await asyncio.sleep(0.15)
        assert [await status(n) for n in ("", "svc", LIVENESS_SERVICE)] == [SERVING] * 3
        answers.append(False)
        await asyncio.sleep(0.3)
        assert [await status(n) for n in ("", "svc")] == [NOT_SERVING] * 2
        assert await status(LIVENESS_SERVICE) == SERVING
        answers.append(True)
        await asyncio.sleep(0.15)
        assert await status("") == SERVING
        await reporter.stopping()
        assert await status("") == NOT_SERVING and await status(LIVENESS_SERVICE) == SERVING

    asyncio.run(scenario())
