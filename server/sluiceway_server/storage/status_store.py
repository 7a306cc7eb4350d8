"""The status topic, with Kafka Connect's keys and JSON values (docs/ARCHITECTURE.md §5; Kafka's
KafkaStatusBackingStore, KIP-558).

- `status-connector-{c}`, `status-task-{c}-{n}`:
  `{"state", "trace", "worker_id", "generation"}`, plus our own optional `"recent_errors"`; in a
  task status an authenticated executor reported, `"worker_principal"`; for a task RESTARTING
  after its own failure, `"restart_attempt"` and `"next_restart_ms"`; for a RUNNING task with
  nothing to do, `"detail"` (such as "idle: end of data") and `"idle_since_ms"`; and for a RUNNING
  task that left records out (errors.tolerance=all), `"records_skipped"` and
  `"records_dead_lettered"`, each only when not 0. Kafka Connect's reader takes the keys it knows
  by name and ignores the others
- `status-topic-{topic}:connector-{c}`: `{"topic": {"name", "connector", "task", "discoverTimestamp"}}`

A tombstone removes the entry. Records are routed by key hash, so each key's history is ordered but
different keys may be read in any order: the reader is strictly last-write-wins per key and never
lets one key's record remove another's (a connector tombstone does not drop its task statuses;
remove_connector writes a tombstone for each of them instead)."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from sluiceway.common.retry import Deadline
from sluiceway.common.traces import summarize_trace
from sluiceway_server.model import State
from sluiceway_server.storage import serde
from sluiceway_server.storage.record_log import LogPosition, LogRecord, RecordLog

log = logging.getLogger(__name__)

CONNECTOR_STATUS_PREFIX = "status-connector-"
TASK_STATUS_PREFIX = "status-task-"
TOPIC_STATUS_PREFIX = "status-topic-"
TOPIC_STATUS_SEPARATOR = ":connector-"


def connector_status_key(connector: str) -> bytes:
    return f"{CONNECTOR_STATUS_PREFIX}{connector}".encode()


def task_status_key(connector: str, task: int) -> bytes:
    return serde.task_record_key(TASK_STATUS_PREFIX, connector, task)


def topic_status_key(topic: str, connector: str) -> bytes:
    return f"{TOPIC_STATUS_PREFIX}{topic}{TOPIC_STATUS_SEPARATOR}{connector}".encode()


@dataclass(frozen=True)
class ErrorEntry:
    time_ms: int
    message: str
    trace: str
    worker_id: str


# How many failures a connector's or task's status keeps in "recent_errors".
MAX_RECENT_ERRORS = 10


def add_recent_error(
    history: Sequence[ErrorEntry],
    trace: str | None,
    worker_id: str,
    *,
    message: str | None = None,
    time_ms: int | None = None,
) -> tuple[ErrorEntry, ...]:
    """`history` (newest first) with a new failure in front, cut to MAX_RECENT_ERRORS entries.

    The entry's message is `summarize_trace(trace)`: the exception's type and message from a
    Python traceback, or the first line of plain text; `message` when the trace has none. The
    time defaults to now. This lives beside ErrorEntry rather than in the shared `sluiceway`
    package because ErrorEntry is the status topic's record type, which stays in the server.
    """
    entry = ErrorEntry(
        int(time.time() * 1000) if time_ms is None else time_ms,
        summarize_trace(trace or "") or message or "",
        trace or "",
        worker_id,
    )
    return (entry, *history)[:MAX_RECENT_ERRORS]


@dataclass(frozen=True)
class ConnectorStatusRecord:
    connector: str
    state: State
    trace: str | None
    worker_id: str
    generation: int
    recent_errors: tuple[ErrorEntry, ...] = ()
    # When the state last changed: the timestamp of the record that changed it. Set by the reader,
    # never written, and left out of comparisons so an unchanged status compares equal.
    update_time_ms: int = field(default=0, compare=False)


@dataclass(frozen=True)
class TaskStatusRecord:
    connector: str
    task: int
    state: State
    trace: str | None
    worker_id: str
    generation: int
    recent_errors: tuple[ErrorEntry, ...] = ()
    update_time_ms: int = field(default=0, compare=False)  # as in ConnectorStatusRecord
    # The principal the executor `worker_id` attached as, when authenticated ("" otherwise): a new
    # leader keeps that executor's id for it while it waits for it to attach again.
    worker_principal: str = ""
    # While RESTARTING after the task's own failure: the number of the automatic restart to come
    # and when it is due (ms since the epoch); 0 otherwise.
    restart_attempt: int = 0
    next_restart_ms: int = 0
    # A RUNNING task with nothing to do: a short note for people ("idle: end of data") and since
    # when (ms since the epoch); "" and 0 otherwise.
    detail: str = ""
    idle_since_ms: int = 0
    # A RUNNING task: the records its converters or transforms failed on and it left out, and those
    # it wrote to its dead-letter topic, since it started on its executor; 0 otherwise.
    records_skipped: int = 0
    records_dead_lettered: int = 0


@dataclass(frozen=True)
class TopicStatusRecord:
    topic: str
    connector: str
    task: int
    discover_timestamp_ms: int


@dataclass(frozen=True)
class StatusChange:
    """Delivered to listeners from the consumer thread."""

    connector: str
    task: int | None  # None for the connector itself
    status: ConnectorStatusRecord | TaskStatusRecord | None  # None = removed


def encode_status(status: ConnectorStatusRecord | TaskStatusRecord) -> bytes:
    # Kafka Connect's field order; "recent_errors" only when there are some, so the common record
    # is byte-for-byte what Kafka Connect writes (its reader ignores unknown fields).
    value: dict[str, Any] = {
        "state": status.state.value,
        "trace": status.trace,
        "worker_id": status.worker_id,
        "generation": status.generation,
    }
    if status.recent_errors:
        value["recent_errors"] = [
            {"time_ms": e.time_ms, "message": e.message, "trace": e.trace, "worker_id": e.worker_id}
            for e in status.recent_errors
        ]
    if isinstance(status, TaskStatusRecord):
        if status.worker_principal:
            value["worker_principal"] = status.worker_principal
        if status.restart_attempt:
            value["restart_attempt"] = status.restart_attempt
        if status.next_restart_ms:
            value["next_restart_ms"] = status.next_restart_ms
        if status.detail:
            value["detail"] = status.detail
        if status.idle_since_ms:
            value["idle_since_ms"] = status.idle_since_ms
        if status.records_skipped:
            value["records_skipped"] = status.records_skipped
        if status.records_dead_lettered:
            value["records_dead_lettered"] = status.records_dead_lettered
    return serde.dumps(value)


def encode_topic_status(record: TopicStatusRecord) -> bytes:
    return serde.dumps(
        {
            "topic": {
                "name": record.topic,
                "connector": record.connector,
                "task": record.task,
                "discoverTimestamp": record.discover_timestamp_ms,
            }
        }
    )


@dataclass(frozen=True)
class _StatusFields:
    state: State
    trace: str | None
    worker_id: str
    generation: int
    recent_errors: tuple[ErrorEntry, ...]
    worker_principal: str
    restart_attempt: int = 0
    next_restart_ms: int = 0
    detail: str = ""
    idle_since_ms: int = 0
    records_skipped: int = 0
    records_dead_lettered: int = 0


def _parse_status(key: str, data: bytes) -> _StatusFields | None:
    try:
        value = serde.loads(data)
    except ValueError as exc:
        log.warning("status topic: skipping %r: value is not JSON (%s)", key, exc)
        return None
    if not isinstance(value, dict):
        log.warning("status topic: skipping %r: value is not a JSON object", key)
        return None
    try:
        state = State(value.get("state"))
    except ValueError:
        log.warning("status topic: skipping %r: unknown state %r", key, value.get("state"))
        return None
    trace, worker_id, generation = value.get("trace"), value.get("worker_id"), value.get("generation")
    if trace is not None and not isinstance(trace, str):
        log.warning("status topic: skipping %r: trace is not a string", key)
        return None
    if worker_id is not None and not isinstance(worker_id, str):
        log.warning("status topic: skipping %r: worker_id is not a string", key)
        return None
    if not isinstance(generation, int) or isinstance(generation, bool):
        log.warning("status topic: skipping %r: generation %r is not an integer", key, generation)
        return None
    principal = value.get("worker_principal", "")
    if not isinstance(principal, str):
        # An extra of ours, like recent_errors: malformed, it is dropped, not the status.
        log.warning("status topic: ignoring the malformed worker_principal of %r", key)
        principal = ""
    detail = value.get("detail", "")
    if not isinstance(detail, str):
        log.warning("status topic: ignoring the malformed detail of %r", key)
        detail = ""
    return _StatusFields(
        state,
        trace,
        worker_id or "",
        generation,
        _parse_errors(key, value.get("recent_errors")),
        principal,
        restart_attempt=_extra_count(key, value, "restart_attempt"),
        next_restart_ms=_extra_count(key, value, "next_restart_ms"),
        detail=detail,
        idle_since_ms=_extra_count(key, value, "idle_since_ms"),
        records_skipped=_extra_count(key, value, "records_skipped"),
        records_dead_lettered=_extra_count(key, value, "records_dead_lettered"),
    )


def _extra_count(key: str, value: dict[str, Any], name: str) -> int:
    """A whole number 0 or more among our extras; a malformed one reads as 0, keeping the status."""
    raw = value.get(name, 0)
    if serde.is_int(raw) and int(raw) >= 0:
        return int(raw)
    log.warning("status topic: ignoring the malformed %s of %r", name, key)
    return 0


def _parse_errors(key: str, raw: object) -> tuple[ErrorEntry, ...]:
    if raw is None:
        return ()
    entries: list[ErrorEntry] = []
    if isinstance(raw, list):
        for item in raw:
            if not isinstance(item, dict):
                break
            time_ms, message = item.get("time_ms"), item.get("message")
            trace, worker_id = item.get("trace", ""), item.get("worker_id", "")
            if not (
                serde.is_int(time_ms)
                and isinstance(message, str)
                and isinstance(trace, str)
                and isinstance(worker_id, str)
            ):
                break
            entries.append(ErrorEntry(time_ms, message, trace, worker_id))
        else:
            return tuple(entries)
    # The history is an extra of ours: a malformed one must not cost us the status itself.
    log.warning("status topic: ignoring malformed recent_errors of %r", key)
    return ()


def _parse_topic_status(key: str, topic: str, connector: str, data: bytes) -> TopicStatusRecord | None:
    try:
        value = serde.loads(data)
    except ValueError as exc:
        log.warning("status topic: skipping %r: value is not JSON (%s)", key, exc)
        return None
    inner = value.get("topic") if isinstance(value, dict) else None
    task = inner.get("task") if isinstance(inner, dict) else None
    discovered = inner.get("discoverTimestamp") if isinstance(inner, dict) else None
    if not (serde.is_int(task) and serde.is_int(discovered)):
        log.warning(
            'status topic: skipping %r: not {"topic": {name, connector, task, discoverTimestamp}}', key
        )
        return None
    # Indexed by the key's names: they are what a tombstone for this entry will carry.
    return TopicStatusRecord(topic, connector, task, discovered)


class StatusStore:
    """Materialises the status topic and writes to it; every write waits until it was read back."""

    def __init__(self, log_factory: Callable[[Callable[[LogRecord], None]], RecordLog]) -> None:
        self._lock = threading.Lock()
        self._listeners: list[Callable[[StatusChange], None]] = []
        self._notify = False
        self._connectors: dict[str, ConnectorStatusRecord] = {}
        self._tasks: dict[str, dict[int, TaskStatusRecord]] = {}
        self._topics: dict[str, dict[str, TopicStatusRecord]] = {}
        self._log = log_factory(self._on_record)

    # -- lifecycle ----------------------------------------------------------------------------

    def start(self, timeout: float) -> None:
        self._log.start(timeout)
        self._notify = True

    def stop(self) -> None:
        self._notify = False
        self._log.stop()

    def read_to_end(self, timeout: float) -> None:
        self._log.read_to_end(timeout)

    def read_lag(self) -> int:
        """Records of its topic written and not read yet (RecordLog.read_lag)."""
        return self._log.read_lag()

    def add_listener(self, listener: Callable[[StatusChange], None]) -> None:
        """Called from the consumer thread for every change read after start() returned."""
        with self._lock:
            self._listeners.append(listener)

    # -- writes ---------------------------------------------------------------------------------

    def put_connector(self, status: ConnectorStatusRecord, timeout: float = 30.0) -> None:
        _check_name(status.connector)
        self._write([(connector_status_key(status.connector), encode_status(status))], timeout)

    def put_task(self, status: TaskStatusRecord, timeout: float = 30.0) -> None:
        _check_name(status.connector)
        _check_task(status.task)
        self._write([(task_status_key(status.connector, status.task), encode_status(status))], timeout)

    def remove_connector(self, connector: str, timeout: float = 30.0) -> None:
        """Tombstones the connector's status and every task status known for it."""
        _check_name(connector)
        with self._lock:
            tasks = sorted(self._tasks.get(connector, {}))
        keys = [connector_status_key(connector)] + [task_status_key(connector, task) for task in tasks]
        self._write([(key, None) for key in keys], timeout)

    def remove_task(self, connector: str, task: int, timeout: float = 30.0) -> None:
        _check_name(connector)
        _check_task(task)
        self._write([(task_status_key(connector, task), None)], timeout)

    def put_topics(self, records: Sequence[TopicStatusRecord], timeout: float = 30.0) -> None:
        """Records active topics (KIP-558), all in one write."""
        for record in records:
            _check_name(record.connector)
            if not record.topic:
                raise ValueError("topic name must not be empty")
        if records:
            self._write(
                [(topic_status_key(r.topic, r.connector), encode_topic_status(r)) for r in records], timeout
            )

    def remove_topics(self, connector: str, timeout: float = 30.0) -> list[str]:
        """Tombstones every active-topic record of the connector (a reset, or its deletion) and
        returns the topics it removed."""
        _check_name(connector)
        with self._lock:
            topics = sorted(self._topics.get(connector, {}))
        if topics:
            self._write([(topic_status_key(topic, connector), None) for topic in topics], timeout)
        return topics

    def _write(self, records: Sequence[tuple[bytes, bytes | None]], timeout: float) -> None:
        deadline = Deadline(timeout)
        futures = [self._log.send(key, value) for key, value in records]
        positions: list[LogPosition] = [
            future.result(timeout=deadline.left("status write")) for future in futures
        ]
        # Keys spread over partitions: wait for each record, not just the last one.
        for position in positions:
            self._log.wait_for(position, deadline.left("status write"))

    # -- reads ----------------------------------------------------------------------------------

    def get_connector(self, connector: str) -> ConnectorStatusRecord | None:
        with self._lock:
            return self._connectors.get(connector)

    def get_task(self, connector: str, task: int) -> TaskStatusRecord | None:
        with self._lock:
            return self._tasks.get(connector, {}).get(task)

    def tasks(self, connector: str) -> list[TaskStatusRecord]:
        with self._lock:
            tasks = self._tasks.get(connector, {})
            return [tasks[n] for n in sorted(tasks)]

    def connectors(self) -> list[str]:
        """Connectors with a connector status or at least one task status."""
        with self._lock:
            return sorted(set(self._connectors) | {c for c, tasks in self._tasks.items() if tasks})

    def topics(self, connector: str) -> list[TopicStatusRecord]:
        with self._lock:
            topics = self._topics.get(connector, {})
            return [topics[t] for t in sorted(topics)]

    # -- consuming ----------------------------------------------------------------------------

    def _on_record(self, record: LogRecord) -> None:
        with self._lock:
            change = self._apply(record)
            listeners = list(self._listeners) if self._notify else []
        if change is None:
            return
        for listener in listeners:
            try:
                listener(change)
            except Exception:
                log.exception("status listener failed on record %d/%d", record.partition, record.offset)

    def _apply(self, record: LogRecord) -> StatusChange | None:
        key = serde.decode_key(record.key)
        if key is None:
            log.warning(
                "status topic: skipping record %d/%d with a missing or non-UTF-8 key",
                record.partition,
                record.offset,
            )
            return None
        if key.startswith(CONNECTOR_STATUS_PREFIX):
            return self._apply_connector(key, key[len(CONNECTOR_STATUS_PREFIX) :], record)
        if key.startswith(TASK_STATUS_PREFIX):
            return self._apply_task(key, record)
        if key.startswith(TOPIC_STATUS_PREFIX):
            self._apply_topic(key, record.value)
            return None
        log.warning("status topic: skipping record with unknown key %r", key)
        return None

    def _apply_connector(self, key: str, connector: str, record: LogRecord) -> StatusChange | None:
        data = record.value
        if not connector:
            log.warning("status topic: skipping %r: empty connector name", key)
            return None
        if data is None:
            if self._connectors.pop(connector, None) is None:
                return None
            return StatusChange(connector, None, None)
        fields = _parse_status(key, data)
        if fields is None:
            return None
        status = ConnectorStatusRecord(
            connector,
            fields.state,
            fields.trace,
            fields.worker_id,
            fields.generation,
            fields.recent_errors,
            _update_time(self._connectors.get(connector), fields, record.timestamp_ms),
        )
        self._connectors[connector] = status
        return StatusChange(connector, None, status)

    def _apply_task(self, key: str, record: LogRecord) -> StatusChange | None:
        data = record.value
        parsed = serde.parse_task_record_key(key, TASK_STATUS_PREFIX)
        if parsed is None:
            log.warning("status topic: skipping task status with unparseable key %r", key)
            return None
        connector, task = parsed
        if data is None:
            tasks = self._tasks.get(connector)
            if tasks is None or tasks.pop(task, None) is None:
                return None
            if not tasks:
                del self._tasks[connector]
            return StatusChange(connector, task, None)
        fields = _parse_status(key, data)
        if fields is None:
            return None
        status = TaskStatusRecord(
            connector,
            task,
            fields.state,
            fields.trace,
            fields.worker_id,
            fields.generation,
            fields.recent_errors,
            _update_time(self._tasks.get(connector, {}).get(task), fields, record.timestamp_ms),
            fields.worker_principal,
            fields.restart_attempt,
            fields.next_restart_ms,
            fields.detail,
            fields.idle_since_ms,
            fields.records_skipped,
            fields.records_dead_lettered,
        )
        self._tasks.setdefault(connector, {})[task] = status
        return StatusChange(connector, task, status)

    def _apply_topic(self, key: str, data: bytes | None) -> None:
        topic, sep, connector = key[len(TOPIC_STATUS_PREFIX) :].partition(TOPIC_STATUS_SEPARATOR)
        if not sep or not topic or not connector:
            log.warning("status topic: skipping topic status with unparseable key %r", key)
            return
        if data is None:
            topics = self._topics.get(connector)
            if topics is not None:
                topics.pop(topic, None)
                if not topics:
                    del self._topics[connector]
            return
        record = _parse_topic_status(key, topic, connector, data)
        if record is not None:
            self._topics.setdefault(connector, {})[topic] = record


def _update_time(
    previous: ConnectorStatusRecord | TaskStatusRecord | None, fields: _StatusFields, timestamp_ms: int
) -> int:
    """A record that repeats the state under the same generation is no change: keep the earlier time."""
    if previous is not None and (previous.state, previous.generation) == (fields.state, fields.generation):
        return previous.update_time_ms
    return max(timestamp_ms, 0)  # Kafka gives -1 when a record has no timestamp


def _check_name(connector: str) -> None:
    if not isinstance(connector, str) or not connector:
        raise ValueError("connector name must be a non-empty string")


def _check_task(task: int) -> None:
    if not isinstance(task, int) or isinstance(task, bool) or task < 0:
        raise ValueError(f"task number must be a non-negative integer, got {task!r}")
