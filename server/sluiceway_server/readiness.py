"""Liveness and readiness of a replica, for orchestrators, service meshes and load balancers.

gRPC health service names:

- `""` (and each API service's own name): readiness. Most probes (grpc_health_probe, a Kubernetes
  `grpc` probe without `service`, mesh and load-balancer checks) ask for `""`, so that name must be
  the one that turns NOT_SERVING when calls should go elsewhere: SERVING once a leader is known
  (this replica or another) while Kafka answers, NOT_SERVING while starting, when Kafka has not
  answered for `readiness.kafka.unreachable.ms`, and from the moment shutdown begins.
- `sluiceway.liveness`: SERVING from start to exit, also while shutting down. The servicer answers
  on the event loop, so an answer also says the loop turns; a liveness probe names it explicitly.

`Readiness.state()` gives the same decision in Kafka Connect's terms for `GET /health`."""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Final, Literal

from confluent_kafka.admin import AdminClient
from grpc_health.v1 import health, health_pb2

__all__ = ["HTTP_STATUS", "LIVENESS_SERVICE", "HealthReporter", "KafkaProbe", "Readiness", "Status"]

log = logging.getLogger(__name__)

LIVENESS_SERVICE: Final = "sluiceway.liveness"
Status = Literal["starting", "healthy", "unhealthy", "stopping"]
# What Kafka Connect's GET /health answers for each (it has no `stopping`: answered like `starting`).
HTTP_STATUS: Final[Mapping[Status, int]] = {
    "healthy": 200,
    "starting": 503,
    "stopping": 503,
    "unhealthy": 500,
}
_SERVING: Final = health_pb2.HealthCheckResponse.SERVING
_NOT_SERVING: Final = health_pb2.HealthCheckResponse.NOT_SERVING


class Readiness:
    """Whether this replica should be sent calls. Threading: any thread may call any method (the
    Kafka probe reports from the event loop, a REST layer may ask from its own)."""

    def __init__(
        self,
        *,
        unreachable_after: float,
        leader_known: Callable[[], bool],
        kafka: str = "Kafka",
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._unreachable_after = unreachable_after
        self._leader_known = leader_known
        self._kafka = kafka
        self._clock = clock
        self._lock = threading.Lock()
        # Start-up has just read the internal topics, so Kafka answered a moment ago.
        self._last_answer = clock()
        self._error: str | None = None
        self._led = False
        self._stopping = False

    def kafka_answered(self) -> None:
        with self._lock:
            self._last_answer = self._clock()
            self._error = None

    def kafka_failed(self, error: str) -> None:
        with self._lock:
            self._error = error

    def begin_stopping(self) -> None:
        with self._lock:
            self._stopping = True

    def state(self) -> tuple[Status, str]:
        """The replica's state and a sentence for people; `stopping` first, then `unhealthy`."""
        with self._lock:
            if self._stopping:
                return "stopping", "This replica is shutting down."
            silent = self._clock() - self._last_answer
            if self._error is not None and silent > self._unreachable_after:
                return "unhealthy", f"{self._kafka} has not answered for {silent:.0f} s: {self._error}"
            # Once a leader was known the replica stays ready through later elections: calls made
            # meanwhile fail UNAVAILABLE and clients retry them.
            self._led = self._led or self._leader_known()
            if not self._led:
                return "starting", "This replica has started and waits to learn which replica leads."
            return "healthy", f"This replica is ready: a leader is known and {self._kafka} answers."

    @property
    def ready(self) -> bool:
        return self.state()[0] == "healthy"


class KafkaProbe:
    """Asks Kafka for the metadata of one topic with one long-lived admin client: the replica's
    config topic, which exists from start-up on (a request naming a missing topic can make a broker
    create it). One topic, not all: on a broker holding many topics, every replica asking for all
    of them every few seconds is a load of its own."""

    def __init__(self, bootstrap_servers: str, client_config: Mapping[str, str], topic: str) -> None:
        self._topic = topic
        self._admin = AdminClient(
            {
                # Quiet (we log the state changes) and quick to reconnect when Kafka returns.
                "log_level": 0,
                "reconnect.backoff.max.ms": 1000,
                **client_config,
                "bootstrap.servers": bootstrap_servers,
            }
        )

    def check(self, timeout: float) -> None:
        """Returns when a broker answered; raises (KafkaException) when none did within `timeout`."""
        self._admin.list_topics(topic=self._topic, timeout=timeout)


class HealthReporter:
    """Keeps the gRPC health service in line with a Readiness (names in the module docstring): it
    probes Kafka every `interval` seconds off the event loop and flips the readiness names when
    the decision changes."""

    def __init__(
        self,
        readiness: Readiness,
        servicer: health.aio.HealthServicer,
        readiness_names: Sequence[str],
        check: Callable[[float], None],
        interval: float,
    ) -> None:
        self._readiness = readiness
        self._servicer = servicer
        self._names = tuple(readiness_names)
        self._check = check
        self._interval = interval
        self._published: bool | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        self._publishing = asyncio.Lock()

    async def start(self) -> None:
        await self._servicer.set(LIVENESS_SERVICE, _SERVING)
        await self.publish()
        loop = asyncio.get_running_loop()
        self._tasks = {
            loop.create_task(self._run(), name="readiness-kafka"),
            loop.create_task(self._until_led(), name="readiness-leader"),
        }

    async def _until_led(self) -> None:
        # Between probes too: callers waiting for a new replica should not wait a whole interval.
        while self._readiness.state()[0] == "starting":
            await asyncio.sleep(0.1)
        await self.publish()

    async def publish(self) -> None:
        # One at a time, so the names never end up half flipped one way and half the other.
        async with self._publishing:
            status, message = self._readiness.state()
            ready = status == "healthy"
            if ready == self._published:
                return
            if self._published is not None:
                log.log(logging.INFO if ready else logging.WARNING, "readiness: %s: %s", status, message)
            self._published = ready
            for name in self._names:
                await self._servicer.set(name, _SERVING if ready else _NOT_SERVING)

    async def stopping(self) -> None:
        """Not ready from now on; liveness keeps answering SERVING until the server stops."""
        self._readiness.begin_stopping()
        for task in self._tasks:
            task.cancel()
        await self.publish()

    async def _run(self) -> None:
        while True:
            started = time.monotonic()
            try:
                await asyncio.to_thread(self._check, self._interval)
            except Exception as exc:  # any failure to get an answer counts as Kafka being away
                self._readiness.kafka_failed(str(exc))
            else:
                self._readiness.kafka_answered()
            await self.publish()
            await asyncio.sleep(max(0.0, self._interval - (time.monotonic() - started)))
