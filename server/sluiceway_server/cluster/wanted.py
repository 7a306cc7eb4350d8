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
walked all 10,000 to find what the one before had found. Nor is a new snapshot walked whole: it
says which connectors records changed since the last one (``config_changes``), and only those are
looked at again.

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
        # What was derived for each placeable connector of the last snapshot looked at.
        self._derived: dict[str, _Derived] = {}
        # The tasks they want, and the connectors with an own offsets topic.
        self._wanted: dict[TaskId, DesiredTask] = {}
        self._own_topics: dict[str, OwnOffsetsTopic] = {}
        self._last: Any = None  # that snapshot

    def desired(self, snap: Any) -> dict[TaskId, DesiredTask]:
        """The tasks ``snap`` wants (a new dict each call). A snapshot that says which connectors
        changed since the last one (``ClusterConfigState.changed_since``) has only those looked at
        again; any other is walked whole."""
        last = self._last
        if last is not snap:
            changed = None
            since = getattr(snap, "changed_since", None)
            if last is not None and since is not None:
                changed = since(last.position)
            if changed is None:
                self._walk(snap)
            else:
                for connector in changed:
                    self._look_again(snap, connector)
            self._last = snap
        return dict(self._wanted)

    def _walk(self, snap: Any) -> None:
        """Looks at every connector of ``snap``; connectors gone or stopped are forgotten."""
        previous, self._derived = self._derived, {}
        self._wanted, self._own_topics = {}, {}
        for connector in snap.connectors():
            self._look_again(snap, connector, previous.get(connector))

    def _look_again(self, snap: Any, connector: str, known: _Derived | None = None) -> None:
        """Replaces what ``connector`` wants with what it wants in ``snap``, reusing ``known`` (by
        default what was derived for it last) while its values are the same objects."""
        if known is None:
            known = self._derived.get(connector)
        dropped = self._derived.pop(connector, None)
        if dropped is not None:
            for task in dropped.desired:
                self._wanted.pop(task, None)
            self._own_topics.pop(connector, None)
        found = placeable(snap, connector)
        if found is None:
            return
        config, tasks, target = found
        if known is None or not known.same(config, tasks, target):
            known = self._derive(connector, config, tasks, target)
        self._derived[connector] = known
        self._wanted.update(known.desired)
        if known.own_topic is not None:
            self._own_topics[connector] = known.own_topic

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
        for connector, own in self._own_topics.items():
            if not self._offsets.is_open(own):
                self._offsets.open_topic(own)
                waiting.add(connector)
        if not waiting:
            return dict(eligible)
        return {task: desired for task, desired in eligible.items() if task.connector not in waiting}
