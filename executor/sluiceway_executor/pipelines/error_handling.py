"""What a task does with a record it cannot convert or transform: Kafka Connect's ``errors.*``
keys, read once per task, and the records that failed in a batch.

``errors.tolerance=none`` (the default) fails the task on the first such record, naming it.
``all`` skips it: a sink writes it to the dead-letter queue (``errors.deadletterqueue.topic.name``)
when one is set, in the same transaction as the batch's offsets (docs/ARCHITECTURE.md §7), and
``errors.log.enable`` logs every one. (``errors.retry.*`` is read by the transform chain: only
record-level transforms can fail on something that passes by itself, see
``transforms/record_level.py``.)
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from sluiceway.connect import ConnectException
from sluiceway.connect.framework_config import (
    DLQ_CONTEXT_HEADERS_ENABLE_CONFIG,
    DLQ_TOPIC_NAME_CONFIG,
    DLQ_TOPIC_REPLICATION_FACTOR_CONFIG,
    ERRORS_LOG_ENABLE_CONFIG,
    ERRORS_LOG_INCLUDE_MESSAGES_CONFIG,
    ERRORS_TOLERANCE_CONFIG,
)
from sluiceway_executor.pipelines.pipeline import ProducedRecord

__all__ = [
    "HEADER_PREFIX",
    "ErrorHandling",
    "FailedRecord",
    "first_failure_message",
    "log_failures",
    "log_source_failures",
]

log = logging.getLogger(__name__)

# Kafka Connect's names for the headers a dead-letter record carries.
HEADER_PREFIX: Final = "__connect.errors."


def _flag(props: Mapping[str, str], key: str, default: bool) -> bool:
    raw = (props.get(key) or "").strip().lower()
    return default if not raw else raw == "true"


def _number(props: Mapping[str, str], key: str, default: int) -> int:
    raw = (props.get(key) or "").strip()
    try:
        return int(raw) if raw else default
    except ValueError:
        raise ConnectException(f"{key} must be a whole number, got {raw!r}") from None


@dataclass(frozen=True)
class ErrorHandling:
    """A connector's ``errors.*`` settings (Kafka Connect's keys and defaults)."""

    tolerant: bool = False
    log_enable: bool = False
    log_include_messages: bool = False
    dlq_topic: str = ""
    dlq_replication_factor: int = 3
    dlq_context_headers: bool = False

    @classmethod
    def of(cls, props: Mapping[str, str]) -> ErrorHandling:
        tolerance = (props.get(ERRORS_TOLERANCE_CONFIG) or "none").strip().lower()
        if tolerance not in ("none", "all"):
            raise ConnectException(f"{ERRORS_TOLERANCE_CONFIG} must be none or all, got {tolerance!r}")
        return cls(
            tolerant=tolerance == "all",
            log_enable=_flag(props, ERRORS_LOG_ENABLE_CONFIG, False),
            log_include_messages=_flag(props, ERRORS_LOG_INCLUDE_MESSAGES_CONFIG, False),
            dlq_topic=(props.get(DLQ_TOPIC_NAME_CONFIG) or "").strip(),
            dlq_replication_factor=_number(props, DLQ_TOPIC_REPLICATION_FACTOR_CONFIG, 3),
            dlq_context_headers=_flag(props, DLQ_CONTEXT_HEADERS_ENABLE_CONFIG, False),
        )


@dataclass(frozen=True)
class FailedRecord:
    """A record a stage could not handle: where it came from, as it was read, and why."""

    topic: str
    partition: int
    offset: int
    timestamp_ms: int | None
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes | None], ...]
    stage: str
    class_name: str
    exception: str
    message: str

    @classmethod
    def from_row(cls, row: Any) -> FailedRecord:
        """From a row of the raw record columns and the error column (``record_errors``)."""
        from sluiceway_executor.record_errors import ERROR_COLUMN

        error = row[ERROR_COLUMN]
        stamp = row["timestamp"]
        return cls(
            topic=str(row["topic"]),
            partition=int(row["partition"]),
            offset=int(row["offset"]),
            timestamp_ms=None if stamp is None else int(stamp.timestamp() * 1000),
            key=None if row["key"] is None else bytes(row["key"]),
            value=None if row["value"] is None else bytes(row["value"]),
            headers=tuple(
                (str(h["key"]), None if h["value"] is None else bytes(h["value"]))
                for h in row["headers"] or ()
            ),
            stage=str(error["stage"]),
            class_name=str(error["class_name"]),
            exception=str(error["exception"]),
            message=str(error["message"] or ""),
        )

    @property
    def where(self) -> str:
        return f"{self.topic}-{self.partition}@{self.offset}"

    def describe(self) -> str:
        return f"record {self.where} failed at stage {self.stage} ({self.class_name}): {self.message}"

    def dead_letter(self, handling: ErrorHandling, connector: str, task: int) -> ProducedRecord:
        """The record as it goes to the dead-letter queue: its key, value, headers and timestamp as
        read, plus the context headers when they are enabled."""
        headers = list(self.headers)
        if handling.dlq_context_headers:
            context = {
                "topic": self.topic,
                "partition": str(self.partition),
                "offset": str(self.offset),
                "connector.name": connector,
                "task.id": str(task),
                "stage": self.stage,
                "class.name": self.class_name,
                "exception.class.name": self.exception,
                "exception.message": self.message,
            }
            headers.extend((HEADER_PREFIX + name, text.encode("utf-8")) for name, text in context.items())
        return ProducedRecord(handling.dlq_topic, self.key, self.value, tuple(headers), self.timestamp_ms)


def log_failures(handling: ErrorHandling, task_name: str, failures: Sequence[FailedRecord]) -> None:
    """One error line per failed record when ``errors.log.enable`` is set; the record's place and
    time only with ``errors.log.include.messages`` (never its key, value or headers)."""
    if not handling.log_enable:
        return
    for failure in failures:
        if handling.log_include_messages:
            log.error(
                "task %s: %s (timestamp %s); skipped", task_name, failure.describe(), failure.timestamp_ms
            )
        else:
            log.error(
                "task %s: a record failed at stage %s (%s): %s; skipped",
                task_name,
                failure.stage,
                failure.class_name,
                failure.message,
            )


def log_source_failures(handling: ErrorHandling, task_name: str, errors: Sequence[Any]) -> None:
    """One error line per record a source skipped (each ``errors`` item is an error column's
    struct), when ``errors.log.enable`` is set; never the record's contents."""
    if not handling.log_enable:
        return
    for error in errors:
        log.error(
            "task %s: a record failed at stage %s (%s): %s; skipped",
            task_name,
            error["stage"],
            error["class_name"],
            error["message"],
        )


def first_failure_message(failure: FailedRecord) -> str:
    """What a task that tolerates no errors fails with."""
    return (
        f"{failure.describe()}. errors.tolerance=none stops the task on the first record it cannot "
        "convert or transform; set errors.tolerance=all to skip such records (and "
        "errors.deadletterqueue.topic.name to keep them)"
    )
