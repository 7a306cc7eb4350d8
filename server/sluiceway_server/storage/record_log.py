"""What the stores read and write through: RecordLog, one compacted topic consumed from the
beginning (KafkaLog in kafka_log.py, MemoryLog in memory_log.py for tests), its records and
positions, the errors of a log that is not running or not the leader's, and TopicWriter, where a
leader-only log sends its records."""

from __future__ import annotations

import concurrent.futures
from dataclasses import dataclass
from typing import Protocol


@dataclass(frozen=True)
class LogRecord:
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None  # None = tombstone
    timestamp_ms: int


@dataclass(frozen=True)
class LogPosition:
    partition: int
    offset: int  # offset of the record written


class RecordLog(Protocol):
    """One compacted topic, consumed from the beginning by a background thread that calls
    the consumer callback for every record in order (per partition)."""

    topic: str

    def start(self, timeout: float) -> None: ...

    def stop(self) -> None: ...

    def send(
        self, key: bytes | None, value: bytes | None, partition: int | None = None
    ) -> concurrent.futures.Future[LogPosition]: ...

    def flush(self, timeout: float) -> None: ...

    def read_to_end(self, timeout: float) -> None: ...

    def wait_for(self, position: LogPosition, timeout: float) -> None: ...

    def read_lag(self) -> int:
        """Records of the topic written and not read (callbacks not run) yet, as far as this log
        knows without asking the broker; 0 once it has caught up."""
        ...


class LogStoppedError(RuntimeError):
    """The log is not running (not started yet, stopped, or its consumer thread died)."""


class NotLeaderError(LogStoppedError):
    """A write needs the leader's fenced producer and this replica has none: it does not lead, or a
    newer leader fenced it."""


class TopicWriter(Protocol):
    """Where a leader-only log sends its records: the leader's transactional producer."""

    def send(
        self, topic: str, key: bytes | None, value: bytes | None, partition: int | None = None
    ) -> concurrent.futures.Future[LogPosition]: ...
