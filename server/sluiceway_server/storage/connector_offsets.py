"""Connector offsets in Kafka: the one place the control plane reads and writes them, for the
executors' assignments and for KIP-875's get, alter and reset (executors commit their offsets to
Kafka themselves).

- Source offsets live in the worker's offsets topic and, for a connector with an offsets topic of
  its own (`kafka_clients.own_offsets_topic`: its `offsets.storage.topic`, or the worker's topic
  name on the other cluster its producer writes to), in that topic too. Reads merge both, the
  connector's own winning; writes go to its own topic, and a null offset (a reset) is written to
  both, so the worker's older value cannot show through again.
- Sink offsets are the committed offsets of the consumer group `connect-{connector}` (or the
  connector's `consumer.override.group.id`) on the cluster its admin settings name (the worker's,
  unless the connector sets `admin.override.bootstrap.servers`), read and written with the Admin API.
  Each KIP-875 change of them is also recorded in the worker's offsets topic
  (`sluiceway.common.offsets.SINK_OFFSETS_CHANGE`), and sink task assignments carry that record.

A connector's own offsets topic is opened (created when missing, then read to its end) once, off
the event loop; until it is open the connector's source tasks are not ready to be assigned, and
everything else goes on meanwhile. When an opening ends, `on_opened` is called (at once on success,
after a pause on failure, so the caller retries).
"""

from __future__ import annotations

import asyncio
import functools
import json
import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from confluent_kafka import (
    ConsumerGroupState,
    ConsumerGroupTopicPartitions,
    KafkaError,
    KafkaException,
    TopicPartition,
)
from confluent_kafka.admin import AdminClient

from sluiceway.common.kafka_errors import error_of, transient_exception
from sluiceway.common.offsets import SINK_OFFSETS_CHANGE, new_sink_offsets_change
from sluiceway.common.retry import Deadline, RetryPolicy
from sluiceway.connect.config_providers import ConfigProviders, ConfigProvidersError
from sluiceway.connect.kafka_clients import (
    OWN_OFFSETS_TOPIC_KEYS,
    WORKER_OFFSETS_TOPIC_CONFIG,
    connection_settings,
    kafka_client_config,
    own_offsets_topic,
    sink_consumer_group,
)
from sluiceway.connect.worker_settings import worker_default
from sluiceway_server.storage.offset_store import OffsetStore

log = logging.getLogger(__name__)

OffsetPair = tuple[dict[str, Any], dict[str, Any] | None]
SinkOffsets = dict[tuple[str, int], int | None]
"""(topic, partition) → Kafka offset; None deletes the partition's committed offset."""
CommittedOffsets = dict[tuple[str, int], int]
AdminSettings = frozenset[tuple[str, str]]
"""The settings of one admin client; connectors whose settings match share it."""
StoredPair = tuple[dict[str, Any], dict[str, Any]]

# The Admin API calls of offset changes, within the store timeout.
_RETRY = RetryPolicy(initial=0.2, maximum=0.2, transient=transient_exception)
T = TypeVar("T")
# Seconds one Admin API request of an offsets change may take before it is sent again.
_ATTEMPT_TIMEOUT = 10.0
_MIN_ATTEMPT_TIMEOUT = 0.5
# Failures after which the admin client's connection is in doubt: the next attempt gets a new client.
# Tansu closes the connection when a group is committed to right after it was deleted, and the
# client that saw the close sometimes gets no answer about that group for tens of seconds.
_CONNECTION_FAILURES = frozenset({KafkaError._TRANSPORT, KafkaError._TIMED_OUT, KafkaError._ALL_BROKERS_DOWN})
_IDLE_GROUP_STATES = (ConsumerGroupState.EMPTY, ConsumerGroupState.DEAD, ConsumerGroupState.UNKNOWN)


class SinkOffsetsRefusedError(Exception):
    """Kafka refused some of the committed offsets (a topic it does not know, say)."""


class ConsumerGroupActiveError(Exception):
    """The sink connector's consumer group has members, so its offsets cannot change."""

    def __init__(self, group: str) -> None:
        super().__init__(f"consumer group {group} has active members")
        self.group = group


@dataclass(frozen=True)
class OwnOffsetsTopic:
    """A connector's own offsets topic and how to reach the cluster that holds it."""

    topic: str
    # The connector's producer settings (worker's, then its producer.override.*).
    producer_config: tuple[tuple[str, str], ...]

    @property
    def producer(self) -> dict[str, str]:
        return dict(self.producer_config)

    @property
    def connection(self) -> dict[str, str]:
        """The settings that reach the cluster, for this topic's consumer and admin client."""
        return connection_settings(self.producer)

    @property
    def key(self) -> tuple[str, str]:
        return (self.producer["bootstrap.servers"], self.topic)


class ConnectorOffsetStorage:
    """Reads and writes connector offsets. Runs on the control plane's event loop; every Kafka call
    happens in a worker thread."""

    def __init__(
        self,
        *,
        worker_config: Mapping[str, str],
        offset_store: OffsetStore,
        offset_store_factory: Callable[[OwnOffsetsTopic], OffsetStore],
        admin_factory: Callable[[dict[str, Any]], AdminClient],
        store_timeout: float = 30.0,
        retry_delay: float = 1.0,
    ) -> None:
        self.worker_config = dict(worker_config)
        try:
            # Connector settings that reach Kafka (client overrides, offsets.storage.topic) may be
            # ${provider:path:key} references: resolved at each use, as the worker's providers allow.
            self._providers = ConfigProviders.from_worker_config(worker_config)
        except ConfigProvidersError:
            self._providers = ConfigProviders()  # WorkerConfig.validate reports the key
        self.offset_store = offset_store
        self._offset_store_factory = offset_store_factory
        self._admin_factory = admin_factory
        self._admins: dict[AdminSettings, AdminClient] = {}
        self._store_timeout = store_timeout
        self._own: dict[tuple[str, str], OffsetStore] = {}
        self._opening: dict[tuple[str, str], asyncio.Task[OffsetStore]] = {}
        self._retry_delay = retry_delay
        self.on_opened: Callable[[], None] = lambda: None

    # ------------------------------------------------------------------ where offsets live

    def _resolved(self, config: Mapping[str, str]) -> Mapping[str, str]:
        """The config with the references that resolve replaced (one that does not stays as it is,
        and the Kafka client it reaches reports the failure)."""
        return self._providers.try_resolve(config).config

    def own_topic(self, config: Mapping[str, str]) -> OwnOffsetsTopic | None:
        # Asked of every source connector on each rebalance: only the keys that decide it are
        # resolved first, and the whole config only for a connector that has its own topic.
        deciding = {key: config[key] for key in OWN_OFFSETS_TOPIC_KEYS if key in config}
        topic = own_offsets_topic(self.worker_config, self._resolved(deciding))
        if topic is None:
            return None
        config = self._resolved(config)
        producer = kafka_client_config(self.worker_config, "producer", config)
        return OwnOffsetsTopic(topic, tuple(sorted(producer.items())))

    def consumer_group(self, connector: str, config: Mapping[str, str]) -> str:
        return sink_consumer_group(connector, config)

    def _admin_settings(self, config: Mapping[str, str]) -> AdminSettings:
        return frozenset(kafka_client_config(self.worker_config, "admin", self._resolved(config)).items())

    def _admin(self, settings: AdminSettings) -> AdminClient:
        admin = self._admins.get(settings)
        if admin is None:
            admin = self._admins[settings] = self._admin_factory(dict(settings))
        return admin

    def _replace_admin(self, settings: AdminSettings, admin: AdminClient) -> None:
        """Forget `admin`, so that the next call with these settings makes a new client."""
        if self._admins.get(settings) is admin:
            del self._admins[settings]

    # ------------------------------------------------------------------ own offsets topics

    def open_topic(self, own: OwnOffsetsTopic) -> None:
        """Starts opening ``own`` in the background, unless it is open or opening."""
        if own.key not in self._own and own.key not in self._opening:
            self._start_opening(own)

    def is_open(self, own: OwnOffsetsTopic) -> bool:
        """Whether the offsets in ``own`` can be read now."""
        return own.key in self._own

    async def _store(self, own: OwnOffsetsTopic) -> OffsetStore:
        store = self._own.get(own.key)
        if store is not None:
            return store
        return await asyncio.shield(self._opening.get(own.key) or self._start_opening(own))

    def _start_opening(self, own: OwnOffsetsTopic) -> asyncio.Task[OffsetStore]:
        task = asyncio.get_running_loop().create_task(self._open(own), name=f"open-offsets-{own.topic}")
        self._opening[own.key] = task
        task.add_done_callback(functools.partial(self._opened, own))
        return task

    async def _open(self, own: OwnOffsetsTopic) -> OffsetStore:
        try:
            store = await asyncio.to_thread(self._offset_store_factory, own)
        finally:
            self._opening.pop(own.key, None)
        self._own[own.key] = store
        return store

    def _opened(self, own: OwnOffsetsTopic, task: asyncio.Task[OffsetStore]) -> None:
        if task.cancelled():
            return
        if task.exception() is not None:
            log.warning("cannot open the offsets topic %s yet: %s", own.topic, task.exception())
            asyncio.get_running_loop().call_later(self._retry_delay, self.on_opened)
        else:
            self.on_opened()

    # ------------------------------------------------------------------ source offsets

    def source_offsets(self, connector: str, config: Mapping[str, str]) -> list[StoredPair]:
        """Committed source offsets, the connector's own topic winning over the worker's. Only for a
        connector that is `ready`."""
        own = self.own_topic(config)
        return _merged(self.offset_store, None if own is None else self._own[own.key], connector)

    def known_source_offsets(self, connector: str, config: Mapping[str, str]) -> tuple[list[StoredPair], str]:
        """The committed source offsets this process has read so far, without waiting for Kafka or
        opening a topic: those of the worker's offsets topic and, when it is open already, of the
        connector's own one (winning). Also the topics they come from, for a message."""
        own = self.own_topic(config)
        own_store = None if own is None else self._own.get(own.key)
        topics = [
            self.worker_config.get(WORKER_OFFSETS_TOPIC_CONFIG) or worker_default(WORKER_OFFSETS_TOPIC_CONFIG)
        ]
        if own is not None and own_store is not None:
            topics.append(own.topic)
        return _merged(self.offset_store, own_store, connector), " and ".join(dict.fromkeys(topics))

    async def read_source(self, connector: str, config: Mapping[str, str]) -> list[StoredPair]:
        """Like `source_offsets`, first opening the connector's own topic if it is not open, and
        reading both topics to their end so that every write acknowledged so far is seen."""
        own = self.own_topic(config)
        own_store = None if own is None else await self._store(own)
        for store in (self.offset_store, own_store):
            if store is not None:
                await asyncio.to_thread(store.read_to_end, self._store_timeout)
        return _merged(self.offset_store, own_store, connector)

    async def write_source(
        self, connector: str, config: Mapping[str, str], pairs: Sequence[OffsetPair]
    ) -> None:
        """Write source offsets and return once they were read back. With an own topic, offsets go
        there, and null offsets (resets) to the worker's topic as well."""
        own = self.own_topic(config)
        if own is None:
            await asyncio.to_thread(self.offset_store.put, connector, pairs, self._store_timeout)
            return
        store = await self._store(own)
        await asyncio.to_thread(store.put, connector, pairs, self._store_timeout)
        resets = [(partition, None) for partition, offset in pairs if offset is None]
        if resets:
            await asyncio.to_thread(self.offset_store.put, connector, resets, self._store_timeout)

    # ------------------------------------------------------------------ sink offsets

    def sink_change(self, connector: str) -> list[StoredPair]:
        """The record of the latest KIP-875 change of a sink connector's offsets, as the one pair
        a sink task's assignment carries; empty when they were never changed."""
        offset = self.offset_store.get(connector, SINK_OFFSETS_CHANGE)
        return [] if offset is None else [(dict(SINK_OFFSETS_CHANGE), offset)]

    async def record_sink_change(self, connector: str) -> None:
        """Records a new change of a sink connector's offsets in the worker's offsets topic (read
        back before returning), for the tasks that start after it (`sink_change`)."""
        pairs = [(SINK_OFFSETS_CHANGE, new_sink_offsets_change())]
        await asyncio.to_thread(self.offset_store.put, connector, pairs, self._store_timeout)

    async def read_sink(
        self, connector: str, config: Mapping[str, str], timeout: float | None = None
    ) -> dict[tuple[str, int], int]:
        """The committed offsets of the sink's consumer group, asked for within `timeout` seconds
        (the store timeout when None)."""
        settings, group = self._admin_settings(config), self.consumer_group(connector, config)
        return await asyncio.to_thread(self._read_sink, settings, group, timeout)

    def _read_sink(
        self, settings: AdminSettings, group: str, timeout: float | None = None
    ) -> CommittedOffsets:
        return self._retrying(
            f"reading the offsets of consumer group {group}",
            settings,
            lambda admin, attempt_timeout: self._list(admin, group, attempt_timeout),
            timeout,
        )

    def _list(self, admin: AdminClient, group: str, timeout: float) -> CommittedOffsets:
        futures = admin.list_consumer_group_offsets(
            [ConsumerGroupTopicPartitions(group)], request_timeout=timeout
        )
        answer = futures[group].result(timeout=timeout)
        result: CommittedOffsets = {}
        for tp in answer.topic_partitions or []:
            if tp.error is not None:
                raise KafkaException(tp.error)
            if tp.offset >= 0:  # negative: nothing committed
                result[(tp.topic, tp.partition)] = tp.offset
        return result

    async def write_sink(self, connector: str, config: Mapping[str, str], offsets: SinkOffsets) -> None:
        """KIP-875 alter: set these committed offsets, delete those given as None, keep the rest.
        Refused (ConsumerGroupActiveError) while the group has members."""
        settings, group = self._admin_settings(config), self.consumer_group(connector, config)
        await asyncio.to_thread(self._check_idle, settings, group)
        if all(offset is not None for offset in offsets.values()):
            await asyncio.to_thread(
                self._alter_sink, settings, group, {k: v for k, v in offsets.items() if v is not None}
            )
            return
        # The Admin API of our Kafka client cannot delete one partition's offset (OffsetDelete), so
        # the group goes and the offsets that stay are committed again. If the control plane dies
        # between the two steps, the kept partitions have no committed offset until the alter is
        # repeated; `kept` is logged first so that it can be.
        current = await asyncio.to_thread(self._read_sink, settings, group)
        kept: CommittedOffsets = {key: value for key, value in current.items() if key not in offsets}
        kept.update({key: value for key, value in offsets.items() if value is not None})
        log.info("rewriting the offsets of consumer group %s to %s", group, _format_offsets(kept))
        await asyncio.to_thread(self._delete_group, settings, group)
        if kept:
            await asyncio.to_thread(self._alter_sink, settings, group, kept)

    async def reset_sink(self, connector: str, config: Mapping[str, str]) -> None:
        """KIP-875 reset: delete the consumer group (nothing to do when there is none)."""
        settings, group = self._admin_settings(config), self.consumer_group(connector, config)
        await asyncio.to_thread(self._check_idle, settings, group)
        await asyncio.to_thread(self._delete_group, settings, group)

    def _check_idle(self, settings: AdminSettings, group: str) -> None:
        self._retrying(
            f"describing consumer group {group}",
            settings,
            lambda admin, timeout: self._describe_group(admin, group, timeout),
        )

    def _describe_group(self, admin: AdminClient, group: str, timeout: float) -> None:
        futures = admin.describe_consumer_groups([group], request_timeout=timeout)
        try:
            description = futures[group].result(timeout=timeout)
        except KafkaException as exc:
            if _code(exc) == KafkaError.GROUP_ID_NOT_FOUND:
                return
            raise
        if description.members or description.state not in _IDLE_GROUP_STATES:
            raise ConsumerGroupActiveError(group)

    def _alter_sink(self, settings: AdminSettings, group: str, offsets: CommittedOffsets) -> None:
        self._retrying(
            f"committing offsets of consumer group {group}",
            settings,
            lambda admin, timeout: self._alter(admin, group, offsets, timeout),
        )

    def _alter(self, admin: AdminClient, group: str, offsets: CommittedOffsets, timeout: float) -> None:
        partitions = [TopicPartition(topic, number, offset) for (topic, number), offset in offsets.items()]
        if not partitions:
            return
        futures = admin.alter_consumer_group_offsets(
            [ConsumerGroupTopicPartitions(group, partitions)], request_timeout=timeout
        )
        try:
            result = futures[group].result(timeout=timeout)
        except KafkaException as exc:
            if _code(exc) in (KafkaError.UNKNOWN_MEMBER_ID, KafkaError.REBALANCE_IN_PROGRESS):
                raise ConsumerGroupActiveError(group) from exc
            raise
        failed = [tp for tp in result.topic_partitions if tp.error is not None]
        if failed:
            refused = ", ".join(f"{tp.topic}-{tp.partition}: {tp.error}" for tp in failed)
            raise SinkOffsetsRefusedError(f"Kafka refused offsets of consumer group {group}: {refused}")

    def _delete_group(self, settings: AdminSettings, group: str) -> None:
        self._retrying(
            f"deleting consumer group {group}",
            settings,
            lambda admin, timeout: self._delete(admin, group, timeout),
        )

    def _delete(self, admin: AdminClient, group: str, timeout: float) -> None:
        futures = admin.delete_consumer_groups([group], request_timeout=timeout)
        try:
            futures[group].result(timeout=timeout)
        except KafkaException as exc:
            code = _code(exc)
            if code == KafkaError.GROUP_ID_NOT_FOUND:
                return  # nothing committed: already reset
            if code == KafkaError.NON_EMPTY_GROUP:
                raise ConsumerGroupActiveError(group) from exc
            raise

    def _retrying(
        self,
        what: str,
        settings: AdminSettings,
        call: Callable[[AdminClient, float], T],
        timeout: float | None = None,
    ) -> T:
        """`call(admin, attempt_timeout)`, again after a retriable Kafka error (a dropped connection,
        a coordinator moving) or an attempt that got no answer, until `timeout` (the store timeout
        when None) has passed. An attempt gets at most _ATTEMPT_TIMEOUT, so one request lost on a
        closed connection cannot use up the whole time, and an attempt after a connection failure
        gets a new admin client. Each call here is idempotent: committing the same offsets twice or
        deleting a group that is gone already changes nothing."""
        deadline = Deadline(self._store_timeout if timeout is None else timeout)
        retry = _RETRY.start(deadline)
        while True:
            admin = self._admin(settings)
            try:
                return call(admin, min(deadline.remaining(at_least=_MIN_ATTEMPT_TIMEOUT), _ATTEMPT_TIMEOUT))
            except (KafkaException, TimeoutError) as exc:
                if not retry.again(exc):
                    raise
                replaced = _connection_failure(exc)
                if replaced:
                    self._replace_admin(settings, admin)
                log.info(
                    "%s failed (%s); retrying%s",
                    what,
                    _describe_failure(exc),
                    " with a new admin client" if replaced else "",
                )

    async def stop(self) -> None:
        for task in list(self._opening.values()):
            task.cancel()
        for store in self._own.values():
            await asyncio.to_thread(store.stop)


def _merged(worker: OffsetStore, own: OffsetStore | None, connector: str) -> list[StoredPair]:
    merged: dict[str, StoredPair] = {
        json.dumps(p, sort_keys=True): (p, o) for p, o in worker.offsets(connector)
    }
    if own is not None:
        merged.update({json.dumps(p, sort_keys=True): (p, o) for p, o in own.offsets(connector)})
    # The record of a sink's offset change is not a source offset: a source connector given the
    # name of a deleted sink must neither show it nor get it with its tasks.
    return [(p, o) for p, o in merged.values() if p != SINK_OFFSETS_CHANGE]


def _code(exc: KafkaException) -> int | None:
    error = exc.args[0] if exc.args else None
    return error.code() if isinstance(error, KafkaError) else None


def _connection_failure(exc: KafkaException | TimeoutError) -> bool:
    if isinstance(exc, TimeoutError):
        return True
    error = error_of(exc)
    return error is not None and error.code() in _CONNECTION_FAILURES


def _describe_failure(exc: KafkaException | TimeoutError) -> str:
    if isinstance(exc, TimeoutError):
        return "no answer in time"
    return str(error_of(exc))


def _format_offsets(offsets: CommittedOffsets) -> str:
    return ", ".join(
        f"{topic}-{partition}={offset}" for (topic, partition), offset in sorted(offsets.items())
    )
