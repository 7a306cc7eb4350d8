"""Plain read models the herder returns to the API layer."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass, field

from sluiceway_server.model import ConnectorType, State, TargetState
from sluiceway_server.storage import ConnectorStatusRecord, ErrorEntry, TaskStatusRecord


def connector_etag(config: Mapping[str, str], target: TargetState) -> str:
    """AIP-154 etag of a connector: a digest of its stored (unmasked) config and target state, so
    every replica computes the same one and any change to either changes it."""
    blob = json.dumps({"config": dict(config), "target": target.value}, sort_keys=True)
    return hashlib.sha256(blob.encode()).hexdigest()[:20]


@dataclass(frozen=True)
class ConnectorInfo:
    name: str
    config: Mapping[str, str]
    type: ConnectorType
    tasks: tuple[int, ...]
    target_state: TargetState
    config_position: int
    etag: str = ""


@dataclass(frozen=True)
class InstanceStatusView:
    state: State
    worker_id: str = ""
    trace: str | None = None
    generation: int = 0
    recent_errors: tuple[ErrorEntry, ...] = ()
    update_time_ms: int = 0  # when the state last changed; 0 = not known
    # A task waiting for an automatic restart: which one and when (ms since the epoch); 0 otherwise.
    restart_attempt: int = 0
    next_restart_ms: int = 0

    @classmethod
    def of(cls, record: ConnectorStatusRecord | TaskStatusRecord) -> InstanceStatusView:
        restart = (0, 0)
        if isinstance(record, TaskStatusRecord):
            restart = (record.restart_attempt, record.next_restart_ms)
        return cls(
            record.state,
            record.worker_id,
            record.trace,
            record.generation,
            record.recent_errors,
            record.update_time_ms,
            *restart,
        )


@dataclass(frozen=True)
class TaskStatusView:
    connector: str
    task: int
    status: InstanceStatusView


@dataclass(frozen=True)
class ConnectorStatusView:
    name: str
    type: ConnectorType
    connector: InstanceStatusView
    tasks: tuple[TaskStatusView, ...] = field(default_factory=tuple)


@dataclass(frozen=True)
class TaskConfigView:
    connector: str
    task: int
    config: Mapping[str, str]


@dataclass(frozen=True)
class RestartPlan:
    """KIP-745: which instances a restart request restarts, decided from current statuses."""

    connector: str
    restart_connector: bool
    tasks: tuple[int, ...]
