"""One task assignment as plain values (`TaskSpec`) and the batch size its connector asks for."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final

from sluiceway.api.v1 import common_pb2, executor_pb2
from sluiceway.connect import ConnectException
from sluiceway.connect.config_providers import ConfigProviders, ConfigReferenceError
from sluiceway.names import parse_task_name
from sluiceway.offsets import OffsetPair, offsets_from_proto

__all__ = ["BATCH_MAX_RECORDS_CONFIG", "DEFAULT_BATCH_MAX_RECORDS", "TaskSpec", "batch_max_records"]

BATCH_MAX_RECORDS_CONFIG: Final = "batch.max.records"
DEFAULT_BATCH_MAX_RECORDS: Final = 100_000


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


def batch_max_records(connector_config: Mapping[str, str]) -> int:
    raw = connector_config.get(BATCH_MAX_RECORDS_CONFIG)
    if raw is None or not raw.strip():
        return DEFAULT_BATCH_MAX_RECORDS
    try:
        value = int(raw.strip())
    except ValueError:
        raise ConnectException(f"{BATCH_MAX_RECORDS_CONFIG} must be an integer, got {raw!r}") from None
    if value < 1:
        raise ConnectException(f"{BATCH_MAX_RECORDS_CONFIG} must be at least 1, got {value}")
    return value
