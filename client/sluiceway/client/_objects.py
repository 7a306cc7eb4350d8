"""What the client returns for connectors, tasks and statuses: typed objects that read the way a
person writes them.

The API's messages name a connector by its resource name (`connectors/gen`) and its states by
enum numbers; the objects here hold the bare name (`gen`) and enums that print their names
(`RUNNING`), compare equal to the API's numbers (`State.RUNNING == connectors_pb2.STATE_RUNNING`)
and to nothing else. Every object keeps the message it was made from in `raw`, for protobuf JSON
or any field added to the API after this module.
"""

from __future__ import annotations

import dataclasses
import datetime
import enum
from typing import Self

from google.protobuf import timestamp_pb2

from sluiceway.api.v1 import common_pb2, connectors_pb2
from sluiceway.common import names
from sluiceway.common.generations import generation_label

__all__ = [
    "Connector",
    "ConnectorPage",
    "ConnectorStatus",
    "ConnectorType",
    "ErrorEvent",
    "Generation",
    "InstanceStatus",
    "Notice",
    "State",
    "StatusEvent",
    "TargetState",
    "Task",
    "TaskStatus",
]


class _NamedEnum(enum.IntEnum):
    """An API enum whose members print as their short name: `print(State.RUNNING)` shows
    `RUNNING`, where the generated module would show `2`."""

    def __str__(self) -> str:
        return self.name

    def __format__(self, spec: str) -> str:
        return format(self.name, spec)

    def __repr__(self) -> str:
        return f"{type(self).__name__}.{self.name}"

    @classmethod
    def of(cls, number: int) -> Self:
        """The member for an API number; a number newer than this client reads as UNSPECIFIED."""
        try:
            return cls(number)
        except ValueError:
            return cls(0)


class State(_NamedEnum):
    """The state of a connector or task (Kafka Connect's, plus RESTARTING)."""

    UNSPECIFIED = common_pb2.STATE_UNSPECIFIED
    UNASSIGNED = common_pb2.STATE_UNASSIGNED
    RUNNING = common_pb2.STATE_RUNNING
    PAUSED = common_pb2.STATE_PAUSED
    STOPPED = common_pb2.STATE_STOPPED
    FAILED = common_pb2.STATE_FAILED
    RESTARTING = common_pb2.STATE_RESTARTING


class TargetState(_NamedEnum):
    """The state a connector was asked to be in."""

    UNSPECIFIED = common_pb2.TARGET_STATE_UNSPECIFIED
    RUNNING = common_pb2.TARGET_STATE_RUNNING
    PAUSED = common_pb2.TARGET_STATE_PAUSED
    STOPPED = common_pb2.TARGET_STATE_STOPPED


class ConnectorType(_NamedEnum):
    """Source or sink; UNSPECIFIED while its plugin is not known."""

    UNSPECIFIED = common_pb2.CONNECTOR_TYPE_UNSPECIFIED
    SOURCE = common_pb2.CONNECTOR_TYPE_SOURCE
    SINK = common_pb2.CONNECTOR_TYPE_SINK


@dataclasses.dataclass(frozen=True, slots=True)
class Generation:
    """Which assignment reported a status. Prints as `EPOCH.COUNT` (the leader epoch and that
    leader's assignment counter) for a task, the epoch alone for a connector, `-` for none; `value`
    is the API's int64."""

    value: int

    @property
    def epoch(self) -> int:
        return self.value >> 32

    @property
    def count(self) -> int:
        return self.value & 0xFFFFFFFF

    def __str__(self) -> str:
        return generation_label(self.value)

    def __int__(self) -> int:
        return self.value


def _time(ts: timestamp_pb2.Timestamp) -> datetime.datetime | None:
    if ts.seconds == 0 and ts.nanos == 0:
        return None
    return ts.ToDatetime(tzinfo=datetime.UTC)


@dataclasses.dataclass(frozen=True, slots=True)
class ErrorEvent:
    """One failure in an instance's history."""

    time: datetime.datetime | None
    message: str
    trace: str
    worker_id: str

    @classmethod
    def from_proto(cls, event: common_pb2.ErrorEvent) -> Self:
        return cls(_time(event.time), event.message, event.trace, event.worker_id)


@dataclasses.dataclass(frozen=True, slots=True)
class InstanceStatus:
    """The status of a connector instance or of one task."""

    state: State
    worker_id: str
    trace: str
    generation: Generation
    update_time: datetime.datetime | None
    recent_errors: tuple[ErrorEvent, ...]
    restart_attempt: int
    next_restart_time: datetime.datetime | None
    # For a RUNNING task with nothing to do: why ("idle: end of data") and since when.
    detail: str
    idle_since: datetime.datetime | None
    # For a RUNNING task: the records it left out because a converter or transform failed on them
    # (errors.tolerance=all), and those it wrote to its dead-letter topic, since it last started.
    records_skipped: int
    records_dead_lettered: int
    raw: connectors_pb2.InstanceStatus = dataclasses.field(repr=False, compare=False)

    @classmethod
    def from_proto(cls, status: connectors_pb2.InstanceStatus) -> Self:
        return cls(
            state=State.of(status.state),
            worker_id=status.worker_id,
            trace=status.trace,
            generation=Generation(status.generation),
            update_time=_time(status.update_time),
            recent_errors=tuple(ErrorEvent.from_proto(e) for e in status.recent_errors),
            restart_attempt=status.restart_attempt,
            next_restart_time=_time(status.next_restart_time),
            detail=status.detail,
            idle_since=_time(status.idle_since),
            records_skipped=status.records_skipped,
            records_dead_lettered=status.records_dead_lettered,
            raw=status,
        )


@dataclasses.dataclass(frozen=True, slots=True)
class TaskStatus:
    """One task's status: `connector` and `id` say which task."""

    connector: str
    id: int
    status: InstanceStatus
    raw: connectors_pb2.TaskStatus = dataclasses.field(repr=False, compare=False)

    @property
    def state(self) -> State:
        return self.status.state

    @classmethod
    def from_proto(cls, task: connectors_pb2.TaskStatus) -> Self:
        connector = names.parse_task_name(task.name).connector if task.name else ""
        return cls(connector, task.id, InstanceStatus.from_proto(task.status), raw=task)


@dataclasses.dataclass(frozen=True, slots=True)
class ConnectorStatus:
    """A connector's status and its tasks' (Kafka Connect's GET /connectors/NAME/status)."""

    name: str
    type: ConnectorType
    connector: InstanceStatus
    tasks: tuple[TaskStatus, ...]
    raw: connectors_pb2.ConnectorStatus = dataclasses.field(repr=False, compare=False)

    @property
    def state(self) -> State:
        """The connector instance's own state (its tasks have theirs)."""
        return self.connector.state

    @classmethod
    def from_proto(cls, status: connectors_pb2.ConnectorStatus) -> Self:
        return cls(
            name=_bare(status.name),
            type=ConnectorType.of(status.type),
            connector=InstanceStatus.from_proto(status.connector),
            tasks=tuple(TaskStatus.from_proto(t) for t in status.tasks),
            raw=status,
        )


@dataclasses.dataclass(frozen=True, slots=True)
class Notice:
    """Something the control plane wants the caller to know about an answer that succeeded."""

    code: str
    message: str


@dataclasses.dataclass(frozen=True, slots=True)
class Connector:
    """A connector as a read or a mutation returned it. `status` is None unless the view (STATUS
    or FULL) carried it; `etag` is empty unless it was INFO or FULL."""

    name: str
    config: dict[str, str]
    type: ConnectorType
    tasks: tuple[int, ...]
    target_state: TargetState
    status: ConnectorStatus | None
    config_position: int
    etag: str
    # What a create wants the caller to know, such as offsets left under the name by an earlier
    # connector (code COMMITTED_OFFSETS_EXIST).
    notices: tuple[Notice, ...]
    raw: connectors_pb2.Connector = dataclasses.field(repr=False, compare=False)

    @property
    def resource_name(self) -> str:
        """`connectors/NAME`, as the API names it."""
        return self.raw.name

    @property
    def state(self) -> State:
        """The connector instance's state when the view carried the status (STATUS or FULL);
        UNSPECIFIED otherwise."""
        return self.status.state if self.status is not None else State.UNSPECIFIED

    @classmethod
    def from_proto(cls, connector: connectors_pb2.Connector) -> Self:
        return cls(
            name=_bare(connector.name),
            config=dict(connector.config),
            type=ConnectorType.of(connector.type),
            tasks=tuple(names.parse_task_name(t).task for t in connector.tasks),
            target_state=TargetState.of(connector.target_state),
            status=ConnectorStatus.from_proto(connector.status) if connector.HasField("status") else None,
            config_position=connector.config_position,
            etag=connector.etag,
            notices=tuple(Notice(n.code, n.message) for n in connector.notices),
            raw=connector,
        )


@dataclasses.dataclass(frozen=True, slots=True)
class ConnectorPage:
    """One page of `list_connectors_page`; an empty `next_page_token` means it was the last."""

    connectors: tuple[Connector, ...]
    next_page_token: str

    @classmethod
    def from_proto(cls, page: connectors_pb2.ListConnectorsResponse) -> Self:
        return cls(tuple(Connector.from_proto(c) for c in page.connectors), page.next_page_token)


@dataclasses.dataclass(frozen=True, slots=True)
class Task:
    """One task config, as the connector generated it."""

    connector: str
    id: int
    config: dict[str, str]
    raw: connectors_pb2.Task = dataclasses.field(repr=False, compare=False)

    @classmethod
    def from_proto(cls, task: connectors_pb2.Task) -> Self:
        parsed = names.parse_task_name(task.name)
        return cls(parsed.connector, parsed.task, dict(task.config), raw=task)


@dataclasses.dataclass(frozen=True, slots=True)
class StatusEvent:
    """One status change from `watch_status`: of the connector when `task` is None, else of that
    task; `removed` when the instance's status went away (connector deleted, task set shrunk)."""

    connector: str
    task: int | None
    status: InstanceStatus
    removed: bool
    raw: connectors_pb2.StatusEvent = dataclasses.field(repr=False, compare=False)

    @classmethod
    def from_proto(cls, event: connectors_pb2.StatusEvent) -> Self:
        if "/tasks/" in event.name:
            parsed = names.parse_task_name(event.name)
            connector, task = parsed.connector, parsed.task
        else:
            connector, task = _bare(event.name), None
        return cls(connector, task, InstanceStatus.from_proto(event.status), event.removed, raw=event)


def _bare(resource_name: str) -> str:
    return resource_name.removeprefix(names.CONNECTORS_PREFIX)
