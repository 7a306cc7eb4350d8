"""Connector offsets as the leader keeps them: committed source offsets read for assignments, and the
commits executors send applied to Kafka.

- Source offsets live in the worker's offsets topic and, for a connector that sets
  `offsets.storage.topic`, in that topic too; a commit goes to the connector's own topic when it has
  one, and on reads its own topic wins.
- Sink offsets are the committed offsets of the consumer group `connect-{connector}` (or the
  connector's `consumer.override.group.id`), written through the Admin API.

A connector's own offsets topic is opened (created when missing, then read to its end) in the
background, off the event loop, once; until it is open the connector's source tasks are not ready to
be assigned (their offsets are not known yet), and everything else goes on meanwhile. When an
opening ends, `on_opened` is called (at once on success, after a pause on failure, so the caller
retries).
"""

from __future__ import annotations

import asyncio
import functools
import json
import logging
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from confluent_kafka import ConsumerGroupTopicPartitions, TopicPartition
from confluent_kafka.admin import AdminClient

from sluiceway_server.storage import OffsetStore

log = logging.getLogger(__name__)

OffsetPair = tuple[dict[str, Any], dict[str, Any] | None]


class CommitRejectedError(Exception):
    """An offset commit that must not be applied (stale generation, bad offsets)."""


def own_offsets_topic(config: Mapping[str, str]) -> str | None:
    """The connector's own `offsets.storage.topic`, or None when it uses only the worker's."""
    return config.get("offsets.storage.topic", "").strip() or None


class OffsetCommitter:
    """Reads and writes connector offsets for the executor coordinator.

    Runs on the control plane's event loop; every Kafka call happens in a worker thread.
    """

    def __init__(
        self,
        *,
        offset_store: OffsetStore,
        offset_store_factory: Callable[[str], OffsetStore],
        admin: AdminClient,
        store_timeout: float = 30.0,
        retry_delay: float = 1.0,
    ) -> None:
        self.offset_store = offset_store
        self._offset_store_factory = offset_store_factory
        self._admin = admin
        self._store_timeout = store_timeout
        self._own: dict[str, OffsetStore] = {}
        self._opening: dict[str, asyncio.Task[OffsetStore]] = {}
        self._retry_delay = retry_delay
        self.on_opened: Callable[[], None] = lambda: None

    # ------------------------------------------------------------------ own offsets topics

    def open_stores(self, configs: Iterable[Mapping[str, str]]) -> None:
        """Start opening, in the background, the own offsets topics these connector configs name."""
        for config in configs:
            topic = own_offsets_topic(config)
            if topic is not None and topic not in self._own and topic not in self._opening:
                self._start_opening(topic)

    def ready(self, config: Mapping[str, str]) -> bool:
        """Whether the source offsets of a connector with this config can be read now."""
        topic = own_offsets_topic(config)
        return topic is None or topic in self._own

    async def _store(self, topic: str) -> OffsetStore:
        store = self._own.get(topic)
        if store is not None:
            return store
        return await asyncio.shield(self._opening.get(topic) or self._start_opening(topic))

    def _start_opening(self, topic: str) -> asyncio.Task[OffsetStore]:
        task = asyncio.get_running_loop().create_task(self._open(topic), name=f"open-offsets-{topic}")
        self._opening[topic] = task
        task.add_done_callback(functools.partial(self._opened, topic))
        return task

    async def _open(self, topic: str) -> OffsetStore:
        try:
            store = await asyncio.to_thread(self._offset_store_factory, topic)
        finally:
            self._opening.pop(topic, None)
        self._own[topic] = store
        return store

    def _opened(self, topic: str, task: asyncio.Task[OffsetStore]) -> None:
        if task.cancelled():
            return
        if task.exception() is not None:
            log.warning("cannot open the offsets topic %s yet: %s", topic, task.exception())
            asyncio.get_running_loop().call_later(self._retry_delay, self.on_opened)
        else:
            self.on_opened()

    # ------------------------------------------------------------------ reads

    def source_offsets(self, connector: str, config: Mapping[str, str]) -> list[tuple[dict[str, Any], Any]]:
        """Committed source offsets from the worker's topic and the connector's own one (its own
        wins). Only for a connector that is `ready`."""
        merged = {json.dumps(p, sort_keys=True): (p, o) for p, o in self.offset_store.offsets(connector)}
        topic = own_offsets_topic(config)
        if topic is not None:
            merged.update(
                {json.dumps(p, sort_keys=True): (p, o) for p, o in self._own[topic].offsets(connector)}
            )
        return list(merged.values())

    # ------------------------------------------------------------------ commits

    async def commit_source(
        self, connector: str, config: Mapping[str, str], pairs: Sequence[OffsetPair]
    ) -> None:
        topic = own_offsets_topic(config)
        store = self.offset_store if topic is None else await self._store(topic)
        await asyncio.to_thread(store.put, connector, pairs, self._store_timeout)

    async def commit_sink(
        self, connector: str, config: Mapping[str, str], pairs: Sequence[OffsetPair]
    ) -> None:
        await asyncio.to_thread(self._commit_sink, connector, config, pairs)

    def _commit_sink(self, connector: str, config: Mapping[str, str], pairs: Sequence[OffsetPair]) -> None:
        group = config.get("consumer.override.group.id") or f"connect-{connector}"
        partitions = []
        for partition, offset in pairs:
            try:
                topic, number = str(partition["kafka_topic"]), int(partition["kafka_partition"])
                position = int(offset["kafka_offset"]) if offset is not None else None
            except (KeyError, TypeError, ValueError) as exc:
                raise CommitRejectedError(f"malformed sink offset {partition} → {offset}: {exc}") from exc
            if position is None or position < 0:
                raise CommitRejectedError(f"sink offsets must be non-negative, got {offset} for {partition}")
            partitions.append(TopicPartition(topic, number, position))
        futures = self._admin.alter_consumer_group_offsets([ConsumerGroupTopicPartitions(group, partitions)])
        for future in futures.values():
            result = future.result(timeout=self._store_timeout)
            failed = [tp for tp in result.topic_partitions if tp.error is not None]
            if failed:
                raise RuntimeError(f"committing offsets of group {group} failed: {failed}")

    async def stop(self) -> None:
        for task in list(self._opening.values()):
            task.cancel()
        for store in self._own.values():
            await asyncio.to_thread(store.stop)
