"""KIP-558 active topics: the set of topics each connector's tasks have used, kept in the status
topic as `status-topic-{topic}:connector-{c}` records.

Executors report the topics a task writes or reads; the coordinator hands those reports here.
Every write of the sets — recording, reset, removal on deletion — goes through one lock, so a
report racing a deletion cannot leave a record behind for a connector that is gone: a report is
applied only while the connector exists, and the deletion's removal runs after it.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Protocol

from sluiceway.errors import Reason
from sluiceway_server.errors import PermissionDeniedError, connector_not_found
from sluiceway_server.storage import StatusStore, TopicStatusRecord


class ConfigView(Protocol):
    """What the tracker reads of the config topic: whether a connector exists."""

    def connector_config(self, connector: str) -> Mapping[str, str] | None: ...


@dataclass(frozen=True)
class ActiveTopicsView:
    connector: str
    topics: tuple[str, ...]
    # False for a deleted connector whose set is still recorded.
    connector_exists: bool


@dataclass(frozen=True)
class ActiveTopicsReset:
    """What a reset did: the topics it removed from the set (none when nothing was recorded)."""

    connector: str
    removed: tuple[str, ...]
    # False for a deleted connector, and for a name that never was one.
    connector_exists: bool


class ActiveTopicTracker:
    """Reads, records and resets the connectors' active topics.

    ``enabled`` is the worker's ``topic.tracking.enable``: when false nothing is recorded and the
    API refuses to read or reset. ``allow_reset`` is ``topic.tracking.allow.reset``. After a reset
    ``on_reset(connector)`` runs, which tells the executors to forget what they already reported
    (set by whoever owns the executor connections).
    """

    def __init__(
        self,
        *,
        status_store: StatusStore,
        snapshot: Callable[[], ConfigView],
        enabled: bool = True,
        allow_reset: bool = True,
        store_timeout: float = 30.0,
    ) -> None:
        self.store = status_store
        self._snapshot = snapshot
        self.enabled = enabled
        self.allow_reset = allow_reset
        self.store_timeout = store_timeout
        self.on_reset: Callable[[str], None] = lambda connector: None
        self._lock = asyncio.Lock()

    def _exists(self, connector: str) -> bool:
        return self._snapshot().connector_config(connector) is not None

    def _recorded(self, connector: str) -> list[str]:
        return [record.topic for record in self.store.topics(connector)]

    def _check_enabled(self) -> None:
        if not self.enabled:
            raise PermissionDeniedError(
                "topic tracking is disabled on this cluster (topic.tracking.enable=false)",
                reason=Reason.TOPIC_TRACKING_DISABLED,
            )

    # ------------------------------------------------------------------ the API

    def get(self, connector: str) -> ActiveTopicsView:
        """The connector's set; NOT_FOUND when there is neither a connector nor a recorded set."""
        self._check_enabled()
        topics = self._recorded(connector)
        exists = self._exists(connector)
        if not topics and not exists:
            raise connector_not_found(connector)
        return ActiveTopicsView(connector, tuple(topics), exists)

    async def reset(self, connector: str) -> ActiveTopicsReset:
        """Tombstones the connector's set, whether it runs or was deleted, and says what it removed.
        Running tasks record the topics they still use again.

        A reset of a connector that is gone succeeds whether or not a set remains, so a reset can
        be repeated after the deletion (KIP-558) and a retry after a lost answer does not fail.
        A deleted connector leaves nothing in the config store's view, so a name that never was a
        connector cannot be told from a deleted one: its reset succeeds the same way, as any name's
        does in Kafka Connect."""
        self._check_enabled()
        if not self.allow_reset:
            raise PermissionDeniedError(
                "resetting active topics is disabled on this cluster (topic.tracking.allow.reset=false)",
                reason=Reason.TOPIC_TRACKING_RESET_DISABLED,
            )
        async with self._lock:
            exists = self._exists(connector)
            removed = await asyncio.to_thread(self.store.remove_topics, connector, self.store_timeout)
        # Only a connector that exists has tasks whose memory of reported topics must be cleared.
        if exists:
            self.on_reset(connector)
        return ActiveTopicsReset(connector, tuple(removed), exists)

    # ------------------------------------------------------------------ from the cluster

    async def record(self, connector: str, task: int, topics: Iterable[str]) -> None:
        """Records the topics a task reported that are not in the connector's set yet, in one write."""
        if not self.enabled:
            return
        async with self._lock:
            if not self._exists(connector):
                return
            known = set(self._recorded(connector))
            now = int(time.time() * 1000)
            new = [
                TopicStatusRecord(topic, connector, task, now)
                for topic in sorted(set(topics))
                if topic and topic not in known
            ]
            if new:
                await asyncio.to_thread(self.store.put_topics, new, self.store_timeout)

    async def remove(self, connector: str) -> None:
        """The connector was deleted: its set goes with it (whether or not tracking is enabled now)."""
        async with self._lock:
            if self._recorded(connector):
                await asyncio.to_thread(self.store.remove_topics, connector, self.store_timeout)
