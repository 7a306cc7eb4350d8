"""One task assignment as plain values (`TaskSpec`) and the batch bounds its connector sets."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass

from sluiceway.api.v1 import common_pb2, executor_pb2
from sluiceway.common.names import parse_task_name
from sluiceway.common.offsets import OffsetPair, offsets_from_proto, sink_offsets_change
from sluiceway.connect import ConnectException
from sluiceway.connect.batch_config import BatchLimits
from sluiceway.connect.config import ConfigException
from sluiceway.connect.config_providers import ConfigProviders, ConfigReferenceError

__all__ = ["TaskSpec", "batch_limits"]


@dataclass(frozen=True)
class TaskSpec:
    """One task assignment as plain values."""

    name: str
    connector: str
    task_index: int
    generation: int
    connector_config: Mapping[str, str]
    task_config: Mapping[str, str]
    paused: bool
    task_count: int
    # Source tasks: the committed source offsets. Sink tasks: the record of the latest change of
    # the connector's offsets through the control plane, when there was one (``offsets_change``).
    source_offsets: tuple[OffsetPair, ...] = ()
    # The leader's name for this assignment's configs, target state and task count; the executor
    # hands it back when it attaches again (``Hello.running_tasks``).
    fingerprint: str = ""

    @classmethod
    def from_proto(cls, assignment: executor_pb2.TaskAssignment) -> TaskSpec:
        connector, index = parse_task_name(assignment.task)
        return cls(
            name=assignment.task,
            connector=connector,
            task_index=index,
            generation=assignment.generation,
            connector_config=dict(assignment.connector_config),
            task_config=dict(assignment.task_config),
            paused=assignment.target_state == common_pb2.TARGET_STATE_PAUSED,
            task_count=max(assignment.task_count, index + 1),
            source_offsets=tuple(offsets_from_proto(assignment.source_offsets)),
            fingerprint=assignment.fingerprint,
        )

    @property
    def offsets_change(self) -> str:
        """For a sink task: the id of the latest change of its connector's offsets through the
        control plane that its assignment carried ("" when none; ``SINK_OFFSETS_CHANGE``)."""
        return sink_offsets_change(self.source_offsets)

    def resolved(self, providers: ConfigProviders) -> tuple[TaskSpec, dict[str, str]]:
        """A copy whose connector and task configs have their ``${provider:path:key}`` references
        resolved, for the pipeline and the committer only: the assignment itself (``same_work``,
        the fingerprint handed back) keeps the raw configs. With it, each value a reference was
        replaced by and the reference (for ``hide_resolved``). ConfigReferenceError names what did
        not resolve, never a value."""
        connector = providers.try_resolve(self.connector_config)
        task = providers.try_resolve(self.task_config)
        problems = {**{f"task config {k}": v for k, v in task.problems.items()}, **connector.problems}
        if problems:
            raise ConfigReferenceError(problems)
        resolved = dataclasses.replace(self, connector_config=connector.config, task_config=task.config)
        return resolved, {**task.substituted, **connector.substituted}

    def same_work(self, other: TaskSpec) -> bool:
        """Whether ``other`` asks for exactly what this assignment runs (a repeated message)."""
        return (
            self.generation == other.generation
            and self.connector_config == other.connector_config
            and self.task_config == other.task_config
            and self.paused == other.paused
            and self.task_count == other.task_count
            and self.fingerprint == other.fingerprint
        )


def batch_limits(connector_config: Mapping[str, str]) -> BatchLimits:
    """The connector's ``batch.*`` bounds; ConnectException names a malformed key."""
    try:
        return BatchLimits.from_config(connector_config)
    except ConfigException as exc:
        raise ConnectException(str(exc)) from None
