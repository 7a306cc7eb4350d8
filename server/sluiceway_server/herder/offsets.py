"""KIP-875 for the herder: read, alter and reset a connector's offsets.

Reads work in any state. Changes need the connector STOPPED with an empty task set and no task
left on an executor (a task still shutting down could commit over the change); they hold the
connector's lock, so no resume or delete interleaves. The connector's `alter_offsets` is asked
first, on the plugin-call pool and time-limited: raising refuses the change before anything is
written, and its answer is reported as `acknowledged`. Before any offset is written (and, for a
reset, before the offsets it clears are read), every task of the connector that may have committed
is fenced (with a `fencer`; see storage/task_fencing.py), so that an executor the control plane no
longer hears from, still running such a task, cannot commit over the change. Offsets are written
through ConnectorOffsetStorage and read back before the call returns; a change of a sink's offsets
is first recorded in the worker's offsets topic, for the sink's tasks to see when they next start.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import math
from collections.abc import Awaitable, Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from confluent_kafka import KafkaException

from sluiceway.common.offsets import OffsetPair
from sluiceway.connect import SinkConnector, SourceConnector, TopicPartition
from sluiceway.connect.config_providers import ConfigProviders, ConfigReferenceError
from sluiceway.connect.kafka_clients import topic_name_problem
from sluiceway.connect.plugins import PluginDesc, PluginNotFoundError, PluginRegistry
from sluiceway.errors import Reason
from sluiceway_server.errors import (
    FailedPreconditionError,
    FieldViolation,
    InvalidArgumentError,
    NotFoundError,
    ServerError,
    UnavailableError,
    connector_not_found,
)
from sluiceway_server.herder.deadlines import stage
from sluiceway_server.herder.locks import KeyedLocks
from sluiceway_server.herder.plugin_calls import PluginCalls
from sluiceway_server.herder.reconciler import TaskScheduler, tasks_gone
from sluiceway_server.model import TargetState
from sluiceway_server.storage import (
    ClusterConfigState,
    ConnectorOffsetStorage,
    ConsumerGroupActiveError,
    LogStoppedError,
    SinkOffsetsRefusedError,
)
from sluiceway_server.storage.connector_offsets import SinkOffsets
from sluiceway_server.storage.task_fencing import TaskFencer

SINK_TOPIC, SINK_PARTITION, SINK_OFFSET = "kafka_topic", "kafka_partition", "kafka_offset"
_TARGET_LABELS = {
    TargetState.STARTED: "RUNNING",
    TargetState.PAUSED: "PAUSED",
    TargetState.STOPPED: "STOPPED",
}


@dataclass(frozen=True)
class OffsetChange:
    """The outcome of an alter or reset: the message KIP-875 distinguishes by whether the connector
    confirmed the change."""

    acknowledged: bool
    message: str


class OffsetManager:
    """Get, alter and reset the offsets of one connector at a time."""

    def __init__(
        self,
        *,
        snapshot: Callable[[], ClusterConfigState],
        plugins: PluginRegistry,
        plugin_calls: PluginCalls,
        storage: ConnectorOffsetStorage,
        locks: KeyedLocks,
        scheduler: Callable[[], TaskScheduler | None],
        fencer: TaskFencer | None = None,
        providers: ConfigProviders | None = None,
    ) -> None:
        self._snapshot = snapshot
        # The connector's Kafka clients and its alter_offsets get its config with references resolved.
        self._providers = providers or ConfigProviders()
        self._plugins = plugins
        self._plugin_calls = plugin_calls
        self.storage = storage
        self._locks = locks
        self._scheduler = scheduler
        # None: changes fence no task (tests without Kafka).
        self.fencer = fencer

    # ------------------------------------------------------------------ reads

    async def get(self, name: str) -> list[OffsetPair]:
        config = await self._config(name)
        if self._is_sink(name, config):
            with _in_kafka(
                f"reading the offsets of consumer group {self.storage.consumer_group(name, config)}"
            ):
                committed = await self.storage.read_sink(name, config)
            return [
                ({SINK_TOPIC: topic, SINK_PARTITION: partition}, {SINK_OFFSET: offset})
                for (topic, partition), offset in sorted(committed.items())
            ]
        with _in_kafka("reading the source offsets topics"):
            stored = await self.storage.read_source(name, config)
        keyed = sorted(stored, key=lambda pair: json.dumps(pair[0], sort_keys=True))
        return [(partition, offset) for partition, offset in keyed]

    # ------------------------------------------------------------------ changes

    async def alter(self, name: str, offsets: Sequence[OffsetPair]) -> OffsetChange:
        async with self._locks[name]:
            config = await self._config(name)
            self._check_stopped(name)
            sink = self._is_sink(name, config)
            if sink:
                sink_offsets = _sink_offsets(offsets)
                await tasks_gone(self._scheduler(), name)
                acknowledged = await self._ask_sink(name, config, sink_offsets, "alter")
                await self._fence(name, config, source=False)
                await self._record_sink_change(name)
                await self._run_sink_change(name, config, self.storage.write_sink(name, config, sink_offsets))
            else:
                pairs = _source_offsets(offsets)
                await tasks_gone(self._scheduler(), name)
                acknowledged = await self._ask_source(name, config, pairs, "alter")
                await self._fence(name, config, source=True)
                with _in_kafka("writing the source offsets and reading them back"):
                    await self.storage.write_source(name, config, pairs)
        return _outcome(name, acknowledged, "changed", "change")

    async def reset(self, name: str) -> OffsetChange:
        async with self._locks[name]:
            return await self.reset_locked(name)

    async def reset_locked(self, name: str) -> OffsetChange:
        """`reset` for a caller that already holds the connector's lock."""
        config = await self._config(name)
        self._check_stopped(name)
        # First the tasks must be gone: one still running could commit a partition after the read.
        await tasks_gone(self._scheduler(), name)
        sink = self._is_sink(name, config)
        await self._fence(name, config, source=not sink)
        if sink:
            with _in_kafka(
                f"reading the offsets of consumer group {self.storage.consumer_group(name, config)}"
            ):
                committed = await self.storage.read_sink(name, config)
            cleared: SinkOffsets = dict.fromkeys(committed)
            acknowledged = await self._ask_sink(name, config, cleared, "reset")
            await self._record_sink_change(name)
            await self._run_sink_change(name, config, self.storage.reset_sink(name, config))
        else:
            with _in_kafka("reading the source offsets topics"):
                stored = await self.storage.read_source(name, config)
            resets: list[OffsetPair] = [(partition, None) for partition, _ in stored]
            acknowledged = await self._ask_source(name, config, resets, "reset")
            with _in_kafka("writing tombstones for the source offsets and reading them back"):
                await self.storage.write_source(name, config, resets)
        return _outcome(name, acknowledged, "reset", "reset")

    async def _record_sink_change(self, name: str) -> None:
        """Records the change of a sink's offsets before making it, so that its tasks, when they
        next start, do not take a batch their sink wrote before it for one written but never
        committed, and write the records again from the new offsets (`SINK_OFFSETS_CHANGE`).
        Recorded first: if the change then fails, the worst that follows is such a batch written
        twice, never a change that the tasks ignore."""
        with _in_kafka("recording the change of the sink offsets in the offsets topic"):
            await self.storage.record_sink_change(name)

    async def _fence(self, name: str, config: Mapping[str, str], *, source: bool) -> None:
        """Fence every task of the connector that may have committed (none without a fencer)."""
        if self.fencer is None:
            return
        with _in_kafka(f"fencing the offset commits of the tasks of connector {name}"):
            await self.fencer.fence_connector(
                name, config, task_count=len(self._snapshot().tasks(name)), source=source
            )

    # ------------------------------------------------------------------ checks

    async def _config(self, name: str) -> dict[str, str]:
        """The connector's config with its references resolved (a file may be read: off the loop)."""
        config = self._snapshot().connector_config(name)
        if config is None:
            raise connector_not_found(name)
        try:
            return await asyncio.to_thread(self._providers.resolve, config)
        except ConfigReferenceError as exc:
            raise FailedPreconditionError(
                f"Connector {name}'s offsets cannot be handled: {exc}",
                reason=Reason.INVALID_CONFIG,
                metadata={"connector": name, "config_keys": ",".join(sorted(exc.problems))},
            ) from None

    def _check_stopped(self, name: str) -> None:
        snap = self._snapshot()
        target = snap.target_state(name) or TargetState.STARTED
        metadata = {"connector": name, "target_state": _TARGET_LABELS[target]}
        if target is not TargetState.STOPPED:
            raise FailedPreconditionError(
                f"Connector {name} is {_TARGET_LABELS[target]}; its offsets can change only while it is "
                f"STOPPED. Stop it first (`sluiceway connectors stop {name}`), then retry.",
                metadata=metadata,
            )
        if snap.tasks(name):
            raise FailedPreconditionError(
                f"Connector {name} is stopping and still has task configs; retry once it is STOPPED.",
                metadata=metadata,
            )

    def _plugin(self, name: str, config: Mapping[str, str]) -> PluginDesc:
        class_name = config.get("connector.class", "")
        try:
            return self._plugins.resolve(class_name)
        except PluginNotFoundError as exc:
            raise NotFoundError(
                f"Connector {name} uses plugin {class_name!r}, which is not installed here, so its "
                f"offsets cannot be handled: {exc}",
                reason=Reason.PLUGIN_NOT_FOUND,
                metadata={"connector": name, "plugin": class_name},
            ) from exc

    def _is_sink(self, name: str, config: Mapping[str, str]) -> bool:
        return issubclass(self._plugin(name, config).cls, SinkConnector)

    # ------------------------------------------------------------------ the connector's say

    async def _ask_sink(self, name: str, config: Mapping[str, str], offsets: SinkOffsets, verb: str) -> bool:
        desc = self._plugin(name, config)
        partitions = {
            TopicPartition(topic, partition): offset for (topic, partition), offset in offsets.items()
        }

        def call() -> object:
            connector = desc.new_instance()
            assert isinstance(connector, SinkConnector)
            return connector.alter_offsets(dict(config), partitions)

        return await self._ask(name, desc, verb, call)

    async def _ask_source(
        self, name: str, config: Mapping[str, str], offsets: Sequence[OffsetPair], verb: str
    ) -> bool:
        desc = self._plugin(name, config)
        pairs = [(dict(partition), None if offset is None else dict(offset)) for partition, offset in offsets]

        def call() -> object:
            connector = desc.new_instance()
            assert isinstance(connector, SourceConnector)
            return connector.alter_offsets(dict(config), pairs)

        return await self._ask(name, desc, verb, call)

    async def _ask(self, name: str, desc: PluginDesc, verb: str, call: Callable[[], object]) -> bool:
        try:
            with stage(f"asking connector {name} ({desc.class_name}) to {verb} its offsets"):
                answer = await self._plugin_calls.run(f"alter_offsets of connector {name}", call)
        except NotImplementedError as exc:
            raise FailedPreconditionError(
                f"Connector {name} ({desc.class_name}) does not support changing its offsets"
                + (f": {exc}" if str(exc) else ""),
                reason=Reason.CONNECTOR_REJECTED_OFFSETS,
                metadata={"connector": name},
            ) from exc
        except ServerError:
            raise  # the time limit (PLUGIN_TIMEOUT) or the deadline, reported as they are
        except Exception as exc:
            raise FailedPreconditionError(
                f"Connector {name} refused to {verb} its offsets: {exc}",
                reason=Reason.CONNECTOR_REJECTED_OFFSETS,
                metadata={"connector": name, "error": type(exc).__name__},
            ) from exc
        return answer is True

    async def _run_sink_change(self, name: str, config: Mapping[str, str], change: Awaitable[None]) -> None:
        group = self.storage.consumer_group(name, config)
        try:
            with _in_kafka(f"changing the offsets of consumer group {group}"):
                await change
        except ConsumerGroupActiveError as exc:
            raise FailedPreconditionError(
                f"Consumer group {group} of connector {name} has active members; a sink connector's "
                "offsets can change only while no consumer is in its group. Stop those consumers, "
                "then retry.",
                reason=Reason.CONSUMER_GROUP_ACTIVE,
                metadata={"connector": name, "group": group},
            ) from exc


def _outcome(name: str, acknowledged: bool, done: str, change: str) -> OffsetChange:
    """KIP-875's two outcomes: the connector confirmed the change, or only Kafka's offsets moved."""
    if acknowledged:
        return OffsetChange(
            True, f"The offsets of connector {name} were {done}, and the connector confirmed the {change}."
        )
    return OffsetChange(
        False,
        f"The offsets of connector {name} were {done} in Kafka. The connector did not confirm the "
        f"{change}: if it keeps offsets of its own outside Kafka, {change} them there as well.",
    )


@contextlib.contextmanager
def _in_kafka(what: str) -> Iterator[None]:
    """A stage of Kafka work: Kafka unreachable or too slow is UNAVAILABLE (worth a retry), and
    offsets Kafka itself refuses are bad input. The caller's deadline cancels rather than raises
    TimeoutError, so a TimeoutError here is a store's own wait."""
    with stage(what):
        try:
            yield
        except SinkOffsetsRefusedError as exc:
            raise InvalidArgumentError(
                str(exc), reason=Reason.INVALID_OFFSETS, violations=[FieldViolation("offsets", str(exc))]
            ) from exc
        except (KafkaException, LogStoppedError) as exc:
            raise UnavailableError(f"Kafka could not complete {what}: {exc}") from exc
        except TimeoutError as exc:
            raise UnavailableError(f"Kafka did not answer in time while {what}") from exc


# ---------------------------------------------------------------------- request validation


def _field(index: int, part: str, key: str | None = None) -> str:
    path = f"offsets[{index}].{part}"
    return path if key is None else f"{path}.fields[{json.dumps(key)}]"


def _invalid(violations: list[FieldViolation]) -> InvalidArgumentError:
    summary = "; ".join(f"{v.field}: {v.description}" for v in violations[:5])
    more = f" (and {len(violations) - 5} more)" if len(violations) > 5 else ""
    return InvalidArgumentError(
        f"The offsets have {len(violations)} error(s): {summary}{more}",
        reason=Reason.INVALID_OFFSETS,
        violations=violations,
    )


def _non_negative_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _sink_offsets(offsets: Sequence[OffsetPair]) -> SinkOffsets:
    """Kafka Connect's sink offsets: {kafka_topic, kafka_partition} → {kafka_offset} or null."""
    if not offsets:
        raise _invalid([FieldViolation("offsets", "name at least one partition and its offset")])
    violations: list[FieldViolation] = []
    result: SinkOffsets = {}
    for index, (partition, offset) in enumerate(offsets):
        problems = len(violations)
        for key in sorted(set(partition) - {SINK_TOPIC, SINK_PARTITION}):
            violations.append(
                FieldViolation(_field(index, "partition", key), "unknown key of a sink partition")
            )
        topic = partition.get(SINK_TOPIC)
        if topic is None:
            violations.append(FieldViolation(_field(index, "partition", SINK_TOPIC), "is required"))
        elif not isinstance(topic, str):
            violations.append(FieldViolation(_field(index, "partition", SINK_TOPIC), "must be a string"))
        elif (problem := topic_name_problem(topic)) is not None:
            violations.append(FieldViolation(_field(index, "partition", SINK_TOPIC), f"topic name {problem}"))
        number = partition.get(SINK_PARTITION)
        if number is None:
            violations.append(FieldViolation(_field(index, "partition", SINK_PARTITION), "is required"))
        elif not _non_negative_int(number):
            violations.append(
                FieldViolation(_field(index, "partition", SINK_PARTITION), "must be an integer >= 0")
            )
        position: int | None = None
        if offset is not None:
            for key in sorted(set(offset) - {SINK_OFFSET}):
                violations.append(
                    FieldViolation(_field(index, "offset", key), "unknown key of a sink offset")
                )
            value = offset.get(SINK_OFFSET)
            if value is None:
                violations.append(
                    FieldViolation(
                        _field(index, "offset", SINK_OFFSET),
                        "is required (or leave the offset unset to reset the partition)",
                    )
                )
            elif not _non_negative_int(value):
                violations.append(
                    FieldViolation(_field(index, "offset", SINK_OFFSET), "must be an integer >= 0")
                )
            else:
                position = value
        if len(violations) == problems:
            where = (str(topic), int(str(number)))
            if where in result:
                violations.append(
                    FieldViolation(
                        _field(index, "partition"), f"partition {where[0]}-{where[1]} is listed twice"
                    )
                )
            result[where] = position
    if violations:
        raise _invalid(violations)
    return result


def _source_offsets(offsets: Sequence[OffsetPair]) -> list[OffsetPair]:
    """Source offsets: connector-defined maps of primitives; a null offset resets its partition."""
    if not offsets:
        raise _invalid([FieldViolation("offsets", "name at least one partition and its offset")])
    violations: list[FieldViolation] = []
    seen: set[str] = set()
    for index, (partition, offset) in enumerate(offsets):
        if not partition:
            violations.append(
                FieldViolation(_field(index, "partition"), "is required and must hold at least one field")
            )
        for part, values in (("partition", partition), ("offset", offset or {})):
            for key, value in values.items():
                if isinstance(value, float) and not math.isfinite(value):
                    violations.append(FieldViolation(_field(index, part, key), "must be a finite number"))
        canonical = json.dumps(partition, sort_keys=True)
        if canonical in seen:
            violations.append(FieldViolation(_field(index, "partition"), "this partition is listed twice"))
        seen.add(canonical)
    if violations:
        raise _invalid(violations)
    return [(dict(partition), None if offset is None else dict(offset)) for partition, offset in offsets]
