"""KIP-910 at run time: when a source task's heartbeat records are due, and where they go.

A source pipeline asks three things of this module:

- whether its task class has a heartbeat hook of its own (``overrides_heartbeat_hook``): a task
  that keeps the SDK's default, which returns nothing, is never asked and costs nothing;
- the connector's heartbeat settings (``heartbeat_settings``): ``heartbeat.interval.ms`` and
  ``heartbeat.records.topic`` from the connector config, or, where the connector leaves a key unset
  or empty, from the worker config the control plane sent (a key missing there has the worker's
  default, as ``sluiceway.connect.worker_settings`` declares it: Kafka Connect's 0, i.e. off, and
  ``connect-heartbeats``; an empty one is an error, which the control plane and the executor's own
  config already refuse at start-up);
- when to call the hook (``HeartbeatTimer``): once the interval has passed since the task started
  or since the last heartbeat, checked before each batch; every call, with or without records,
  schedules the next one an interval later.

``heartbeat_topic_creator`` gives the `TopicCreator` that makes the heartbeat topic exist before the
first heartbeat record is written, on the cluster the task's producer writes to, with the broker's
default partitions and replication factor, whatever the connector's ``topic.creation.*`` keys say.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Final

from sluiceway.connect import ConnectException, DataFrameSourceTask, SourceTask, Task
from sluiceway.connect.config import java_trim
from sluiceway.connect.framework_config import HEARTBEAT_INTERVAL_MS_CONFIG, HEARTBEAT_RECORDS_TOPIC_CONFIG
from sluiceway.connect.topic_creation_config import DEFAULT_TOPIC_CREATION_GROUP, TopicCreationGroup
from sluiceway.connect.worker_fallbacks import connector_setting
from sluiceway.connect.worker_settings import worker_default
from sluiceway_executor.topic_creation import TopicCreator

__all__ = [
    "DEFAULT_HEARTBEAT_INTERVAL_MS",
    "DEFAULT_HEARTBEAT_TOPIC",
    "HeartbeatSettings",
    "HeartbeatTimer",
    "heartbeat_settings",
    "heartbeat_topic_creator",
    "overrides_heartbeat_hook",
]

DEFAULT_HEARTBEAT_INTERVAL_MS: Final = int(worker_default(HEARTBEAT_INTERVAL_MS_CONFIG))
DEFAULT_HEARTBEAT_TOPIC: Final = worker_default(HEARTBEAT_RECORDS_TOPIC_CONFIG)

# The heartbeat topic is made like any topic the broker creates for itself: its default partitions
# and replication factor, no topic-level settings.
_BROKER_DEFAULTS: Final = TopicCreationGroup(
    name=DEFAULT_TOPIC_CREATION_GROUP, include=(), exclude=(), partitions=-1, replication_factor=-1
)
_CREATION_HINT: Final = (
    "Create the heartbeat topic yourself, or point heartbeat.records.topic at a topic that can be "
    "created, then restart the task."
)


def overrides_heartbeat_hook(task_class: type[Task]) -> bool:
    """Whether ``task_class`` replaces the SDK's ``produce_heartbeat_records`` (record-level or
    DataFrame-level) with its own; False for any other class."""
    for base in (SourceTask, DataFrameSourceTask):
        if issubclass(task_class, base):
            return task_class.produce_heartbeat_records is not base.produce_heartbeat_records
    return False


@dataclass(frozen=True)
class HeartbeatSettings:
    """A connector's heartbeat interval (milliseconds; 0: no heartbeats) and heartbeat topic."""

    interval_ms: int
    topic: str

    @property
    def enabled(self) -> bool:
        return self.interval_ms > 0


def _chosen(key: str, connector_config: Mapping[str, str], worker_config: Mapping[str, str]) -> str | None:
    """The connector's value of ``key`` when it sets one that is not empty, else the worker's; None
    when neither has the key."""
    own = connector_setting(connector_config, key)
    if own is not None:
        return own
    raw = worker_config.get(key)
    if raw is None:
        return None
    worker = java_trim(raw)
    if not worker:
        # Falling back to the default here would send heartbeats somewhere nobody configured.
        raise ConnectException(
            f"the worker's {key} is empty; set it in the worker config (or remove it for its default)"
        )
    return worker


def heartbeat_settings(
    worker_config: Mapping[str, str], connector_config: Mapping[str, str]
) -> HeartbeatSettings:
    """The heartbeat settings of a connector: each key from the connector config when set there and
    not empty, else from the worker config, else its default. Raises ConnectException for an
    interval that is not a whole number of milliseconds, 0 or more, and for a worker value that is
    empty."""
    raw = _chosen(HEARTBEAT_INTERVAL_MS_CONFIG, connector_config, worker_config)
    interval = DEFAULT_HEARTBEAT_INTERVAL_MS
    if raw is not None:
        try:
            interval = int(raw)
        except ValueError:
            interval = -1
        if interval < 0:
            raise ConnectException(
                f"{HEARTBEAT_INTERVAL_MS_CONFIG} must be a whole number of milliseconds, 0 or more; "
                f"got {raw!r}"
            )
    topic = _chosen(HEARTBEAT_RECORDS_TOPIC_CONFIG, connector_config, worker_config)
    return HeartbeatSettings(interval, topic or DEFAULT_HEARTBEAT_TOPIC)


class HeartbeatTimer:
    """When a task's next heartbeat is due. Off (never due) with an interval of 0.

    The first heartbeat falls one interval after the timer is made; ``reset`` moves the next one to
    an interval after the moment it is called, which the caller does at every heartbeat, whether or
    not the hook returned records.
    """

    def __init__(self, interval_ms: int, *, clock: Callable[[], float] = time.monotonic) -> None:
        self._interval = max(interval_ms, 0) / 1000.0
        self._clock = clock
        self._next = clock() + self._interval

    @property
    def enabled(self) -> bool:
        return self._interval > 0

    def due(self) -> bool:
        """Whether the interval has run out (always False when off)."""
        return self.enabled and self._clock() >= self._next

    def reset(self) -> None:
        """Schedules the next heartbeat one interval from now."""
        self._next = self._clock() + self._interval

    def seconds_left(self) -> float | None:
        """Seconds until the next heartbeat is due (0 when it is), or None when off."""
        if not self.enabled:
            return None
        return max(self._next - self._clock(), 0.0)


def heartbeat_topic_creator(
    worker_config: Mapping[str, str], connector_config: Mapping[str, str], *, task: str
) -> TopicCreator:
    """The creator of a task's heartbeat topic: on the cluster of the task's producer, with the
    broker's defaults, active even when the connector does not use topic creation (KIP-158)."""
    return TopicCreator(
        worker_config,
        connector_config,
        task=task,
        always=_BROKER_DEFAULTS,
        label="heartbeat topic",
        hint=_CREATION_HINT,
    )
