"""Plain read models the herder returns to the API layer."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass, field, replace

from sluiceway_server.model import ConnectorType, State, TargetState
from sluiceway_server.storage import ConnectorStatusRecord, ErrorEntry, TaskStatusRecord


def connector_etag(config: Mapping[str, str], target: TargetState) -> str:
    """AIP-154 etag of a connector: a digest of its stored (unmasked) config and target state, so
    every replica computes the same one and any change to either changes it."""
    blob = json.dumps({"config": dict(config), "target": target.value}, sort_keys=True)
    return hashlib.sha256(blob.encode()).hexdigest()[:20]


@dataclass(frozen=True)
class Notice:
    """A remark on a call that succeeded, for a person (code in UPPER_SNAKE_CASE)."""

    code: str
    message: str


@dataclass(frozen=True)
class ConnectorInfo:
    name: str
    config: Mapping[str, str]
    type: ConnectorType
    tasks: tuple[int, ...]
    target_state: TargetState
    config_position: int
    etag: str = ""
    # Only in the answer of a call that created the connector (or validated its creation).
    notices: tuple[Notice, ...] = ()


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
    # A RUNNING task that has nothing to do: why ("idle: end of data") and since when (ms since
    # the epoch); "" and 0 otherwise.
    detail: str = ""
    idle_since_ms: int = 0
    # A RUNNING task: the records it left out because a converter or transform failed on them, and
    # those it wrote to its dead-letter topic, since it started; 0 otherwise.
    records_skipped: int = 0
    records_dead_lettered: int = 0

    @classmethod
    def of(cls, record: ConnectorStatusRecord | TaskStatusRecord | None) -> InstanceStatusView:
        """The status a record says; without one, UNASSIGNED: no executor (or, for a connector,
        no replica) has picked the instance up yet."""
        if record is None:
            return cls(State.UNASSIGNED)
        task: tuple[int, int, str, int, int, int] = (0, 0, "", 0, 0, 0)
        if isinstance(record, TaskStatusRecord):
            task = (
                record.restart_attempt,
                record.next_restart_ms,
                record.detail,
                record.idle_since_ms,
                record.records_skipped,
                record.records_dead_lettered,
            )
        return cls(
            record.state,
            record.worker_id,
            record.trace,
            record.generation,
            record.recent_errors,
            record.update_time_ms,
            *task,
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


def restarting(current: InstanceStatusView, now_ms: int, fallback_worker: str = "") -> InstanceStatusView:
    """How a restart request's answer shows an instance it restarts: RESTARTING since `now_ms`, on
    the worker its status names (a task's executor; `fallback_worker` when it names none), trace
    and history kept, as Kafka Connect's answer keeps them."""
    return replace(
        current,
        state=State.RESTARTING,
        worker_id=current.worker_id or fallback_worker,
        update_time_ms=now_ms,
        restart_attempt=0,
        next_restart_ms=0,
        detail="",
        idle_since_ms=0,
        records_skipped=0,
        records_dead_lettered=0,
    )


def planned_restart(
    current: ConnectorStatusView, plan: RestartPlan, now_ms: int, worker_id: str
) -> ConnectorStatusView:
    """KIP-745's answer: the connector's status with the instances `plan` restarts shown as
    RESTARTING (`restarting`). Nothing of it is written to the status topic: each instance's
    worker reports what follows. `worker_id` (this control plane) stands for a connector whose
    status names no worker yet."""
    connector = (
        restarting(current.connector, now_ms, worker_id) if plan.restart_connector else current.connector
    )
    tasks = tuple(
        TaskStatusView(t.connector, t.task, restarting(t.status, now_ms)) if t.task in plan.tasks else t
        for t in current.tasks
    )
    return replace(current, connector=connector, tasks=tasks)
