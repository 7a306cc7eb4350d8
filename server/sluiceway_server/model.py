"""The control plane's domain identities and enums, shared by the stores, the herder, the cluster
and the servicers (no proto types here)."""

from __future__ import annotations

import enum
from dataclasses import dataclass

from sluiceway.common.names import format_task_name, parse_task_name


class TargetState(enum.Enum):
    """What a user asked a connector to be (Kafka Connect's TargetState)."""

    STARTED = "STARTED"
    PAUSED = "PAUSED"
    STOPPED = "STOPPED"


class State(enum.Enum):
    """Observed state of a connector or task, as written to the status topic."""

    UNASSIGNED = "UNASSIGNED"
    RUNNING = "RUNNING"
    PAUSED = "PAUSED"
    STOPPED = "STOPPED"
    FAILED = "FAILED"
    RESTARTING = "RESTARTING"


class ConnectorType(enum.Enum):
    SOURCE = "source"
    SINK = "sink"
    UNKNOWN = "unknown"


@dataclass(frozen=True, order=True)
class TaskId:
    connector: str
    task: int

    @property
    def name(self) -> str:
        return format_task_name(self.connector, self.task)

    @classmethod
    def parse(cls, name: str) -> TaskId:
        """Raises sluiceway.common.names.InvalidNameError, a ValueError."""
        parsed = parse_task_name(name)
        return cls(parsed.connector, parsed.task)
