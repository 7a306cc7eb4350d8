"""Domain enums shared by the stores, the herder and the servicers (no proto types here)."""

from __future__ import annotations

import enum


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
