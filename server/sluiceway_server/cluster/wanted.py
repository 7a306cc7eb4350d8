"""The tasks the leader wants placed, worked out at every rebalance without redoing what has not
changed.

A rebalance follows every create, config change and executor change, and looks at every task of
every connector. Recomputing each connector's tasks, its type and its own offsets topic each time
made a create cost time in proportion to the connectors held (at 2,000 connectors, rebalances took
most of the leader's loop). A connector's config, task configs and target state are the same objects
from one config snapshot to the next until a record changes them (``ClusterConfigState`` keeps the
unchanged values), so what was derived from them is kept while they are. While the snapshot
itself is the same object (no config record arrived since), so is the whole answer: a leader
taking over 10,000 connectors asks for a rebalance after each one it starts, and each of those
walked all 10,000 to find what the one before had found.

The own offsets topic is derived from the config with its provider references resolved at that
time; a provider value that changes later is seen when the connector's config next changes (as
Kafka Connect resolves them when it starts a connector).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from sluiceway_server.cluster.members import DesiredTask, connector_desired_tasks, placeable
from sluiceway_server.model import ConnectorType, TargetState, TaskId
from sluiceway_server.storage.connector_offsets import OwnOffsetsTopic

__all__ = ["OwnTopics", "WantedTasks"]


class OwnTopics(Protocol):
    """The own offsets topics of source connectors (``ConnectorOffsetStorage``)."""

    def own_topic(self, config: Mapping[str, str]) -> OwnOffsetsTopic | None: ...

    def is_open(self, own: OwnOffsetsTopic) -> bool: ...

    def open_topic(self, own: OwnOffsetsTopic) -> None: ...


@dataclass(frozen=True)
class _Derived:
    """What a rebalance needs of one connector, with the snapshot values it came from."""

    config: Mapping[str, str]
    tasks: Sequence[Mapping[str, str]]
    target: TargetState
    # By task: merged into each rebalance's dict with the keys' stored hashes.
    desired: dict[TaskId, DesiredTask]
    # A source connector's own offsets topic; None for a sink or a source using the worker's topic.
    own_topic: OwnOffsetsTopic | None
    source: bool

    def same(
        self, config: Mapping[str, str], tasks: Sequence[Mapping[str, str]], target: TargetState
    ) -> bool:
        return self.config is config and self.tasks is tasks and self.target is target


class WantedTasks:
    """``desired``: the tasks that should run (those of every STARTED or PAUSED connector whose task
    set is consistent, as ``members.desired_tasks``); ``ready``: of some of them, those that can be
    placed now, opening the own offsets topics a source task still waits for."""

    def __init__(
        self, connector_type: Callable[[Mapping[str, str]], ConnectorType], offsets: OwnTopics
    ) -> None:
        self._connector_type = connector_type
        self._offsets = offsets
        self._derived: dict[str, _Derived] = {}
        # The connectors with an own offsets topic, of ``_derived``.
        self._own_topics: list[tuple[str, OwnOffsetsTopic]] = []
        # The last snapshot looked at and what it wanted.
        self._last: tuple[Any, dict[TaskId, DesiredTask]] | None = None

    def desired(self, snap: Any) -> dict[TaskId, DesiredTask]:
        last = self._last
        if last is not None and last[0] is snap:
            return dict(last[1])
        wanted: dict[TaskId, DesiredTask] = {}
        derived: dict[str, _Derived] = {}
        for connector in snap.connectors():
            found = placeable(snap, connector)
            if found is None:
                continue
            config, tasks, target = found
            known = self._derived.get(connector)
            if known is None or not known.same(config, tasks, target):
                known = self._derive(connector, config, tasks, target)
            derived[connector] = known
            wanted.update(known.desired)
        self._derived = derived  # connectors gone or stopped are forgotten
        self._own_topics = [(name, d.own_topic) for name, d in derived.items() if d.own_topic is not None]
        self._last = (snap, wanted)
        return dict(wanted)

    def _derive(
        self,
        connector: str,
        config: Mapping[str, str],
        tasks: Sequence[Mapping[str, str]],
        target: TargetState,
    ) -> _Derived:
        desired = connector_desired_tasks(connector, config, tasks, target)
        source = self._connector_type(config) is ConnectorType.SOURCE
        own = self._offsets.own_topic(config) if source else None
        return _Derived(config, tasks, target, desired, own, source)

    def ready(self, eligible: Mapping[TaskId, DesiredTask]) -> dict[TaskId, DesiredTask]:
        """Of ``eligible`` (tasks of the last ``desired``), those whose committed offsets can be read:
        all but the source tasks whose connector's own offsets topic is not open yet. Opening those
        starts in the background, and its end asks for another rebalance."""
        waiting: set[str] = set()
        for connector, own in self._own_topics:
            if not self._offsets.is_open(own):
                self._offsets.open_topic(own)
                waiting.add(connector)
        if not waiting:
            return dict(eligible)
        return {task: desired for task, desired in eligible.items() if task.connector not in waiting}
