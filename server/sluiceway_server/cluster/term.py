"""What a leader does for one term: route the leader-only logs through the term's fenced writer,
have the herder reconcile, and coordinate the executors with a coordinator of the term."""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence

from sluiceway_server.cluster.coordinator import ExecutorCoordinator
from sluiceway_server.herder.herder import Herder
from sluiceway_server.storage.kafka_log import KafkaLog
from sluiceway_server.storage.record_log import TopicWriter

log = logging.getLogger(__name__)


class LeaderTerm:
    """TermDuties (cluster/leadership.py) of a control plane.

    Owns the executor coordinator of the current term (None between terms): a new term gets a new
    one, made by the factory once the leader's logs are read to their end (so it sees the statuses
    earlier terms left), whose assignment generations start above every earlier term's (the epoch
    in the high bits). `end` stops it first, while the writer still works: it closes the executors'
    streams and leaves their tasks running for the next leader to adopt. Then it stops the herder's
    reconciliation, and only then takes the writer away from the logs.
    """

    def __init__(
        self,
        herder: Herder,
        leader_logs: Sequence[KafkaLog],
        coordinator_factory: Callable[[], ExecutorCoordinator],
    ) -> None:
        self.herder = herder
        self._logs = tuple(leader_logs)
        self._coordinator_factory = coordinator_factory
        self.coordinator: ExecutorCoordinator | None = None

    def previous_epoch(self) -> int:
        return self.herder.status.previous_term()

    async def begin(self, epoch: int, writer: TopicWriter) -> None:
        for leader_log in self._logs:
            leader_log.route_writes(writer)
        await self.herder.lead(epoch)
        coordinator = self._coordinator_factory()
        self.herder.scheduler = coordinator
        coordinator.start()
        coordinator.request_rebalance()
        self.coordinator = coordinator

    async def end(self) -> None:
        coordinator, self.coordinator = self.coordinator, None
        self.herder.scheduler = None
        try:
            if coordinator is not None:
                await coordinator.stop()
            await self.herder.follow()
        finally:
            for leader_log in self._logs:
                leader_log.route_writes(None)
