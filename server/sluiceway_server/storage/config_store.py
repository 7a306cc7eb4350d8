"""The config topic, with Kafka Connect's keys and JSON values (docs/ARCHITECTURE.md §5; Kafka's
KafkaConfigBackingStore).

- `connector-{c}`: `{"properties": {...}}`; tombstone = deleted
- `task-{c}-{n}`: `{"properties": {...}}`, deferred until the connector's commit record
- `commit-{c}`: `{"tasks": N}`
- `target-state-{c}`: `{"state": "STARTED"}`, `{"state": "PAUSED"}`;
  STOPPED as `{"state": "PAUSED", "state.v2": "STOPPED"}`
- `restart-connector-{c}`: `{"include-tasks": bool, "only-failed": bool}`
- `deleted-connector-{c}`: ours, `{"properties": {...}}`, the config of a deleted connector whose
  `deleted()` callback (KIP-883) is still due; tombstone once it ran

Every record goes to partition 0: the config log must be totally ordered (Kafka Connect refuses a
config topic with more partitions; writing to one partition keeps us correct even on such a topic)."""

from __future__ import annotations

import concurrent.futures
import logging
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Protocol

from sluiceway.common.retry import Deadline
from sluiceway_server.model import TargetState
from sluiceway_server.storage import serde
from sluiceway_server.storage.config_changes import ConfigChanges
from sluiceway_server.storage.record_log import LogPosition, LogRecord, RecordLog

log = logging.getLogger(__name__)

CONNECTOR_PREFIX = "connector-"
TASK_PREFIX = "task-"
COMMIT_PREFIX = "commit-"
TARGET_STATE_PREFIX = "target-state-"
RESTART_PREFIX = "restart-connector-"
# Ours, not Kafka Connect's: a deleted connector whose deleted() callback (KIP-883) has not run to
# its end yet, with the config it had; a tombstone once it has.
DELETED_CALLBACK_PREFIX = "deleted-connector-"

_CONFIG_PARTITION = 0


def connector_key(connector: str) -> bytes:
    return f"{CONNECTOR_PREFIX}{connector}".encode()


def task_key(connector: str, task: int) -> bytes:
    return serde.task_record_key(TASK_PREFIX, connector, task)


def commit_key(connector: str) -> bytes:
    return f"{COMMIT_PREFIX}{connector}".encode()


def target_state_key(connector: str) -> bytes:
    return f"{TARGET_STATE_PREFIX}{connector}".encode()


def restart_key(connector: str) -> bytes:
    return f"{RESTART_PREFIX}{connector}".encode()


def deleted_callback_key(connector: str) -> bytes:
    return f"{DELETED_CALLBACK_PREFIX}{connector}".encode()


def encode_target_state(state: TargetState) -> bytes:
    if state is TargetState.STOPPED:
        # Workers older than KIP-875 only know "state"; they see a stopped connector as paused.
        return serde.dumps({"state": TargetState.PAUSED.value, "state.v2": TargetState.STOPPED.value})
    return serde.dumps({"state": state.value})


@dataclass(frozen=True)
class RestartRequest:
    connector: str
    include_tasks: bool
    only_failed: bool


_EMPTY_MAP: Mapping[str, str] = MappingProxyType({})


@dataclass(frozen=True)
class ClusterConfigState:
    """An immutable snapshot of the config topic."""

    position: int  # offset+1 of the last config record applied (0 if none)
    connector_configs: Mapping[str, Mapping[str, str]] = field(default_factory=lambda: MappingProxyType({}))
    target_states: Mapping[str, TargetState] = field(default_factory=lambda: MappingProxyType({}))
    # Committed task configs, by connector, index = task number.
    task_configs: Mapping[str, tuple[Mapping[str, str], ...]] = field(
        default_factory=lambda: MappingProxyType({})
    )
    inconsistent: frozenset[str] = frozenset()
    # Deleted connectors whose deleted() callback is still due, with the config they had.
    pending_deleted_callbacks: Mapping[str, Mapping[str, str]] = field(
        default_factory=lambda: MappingProxyType({})
    )
    # The store's journal of changed connectors (see ``changed_since``); None: not kept.
    changes: ConfigChanges | None = field(default=None, compare=False, repr=False)

    def changed_since(self, position: int) -> set[str] | None:
        """The connectors whose config, target state or task set records after ``position`` (an
        earlier snapshot's, of the same store) up to this snapshot may have changed; None when that
        is not known (a snapshot without the journal, or one older than it keeps)."""
        if self.changes is None or position > self.position:
            return None
        return self.changes.since(position, self.position)

    def connectors(self) -> list[str]:
        return sorted(self.connector_configs)

    def contains(self, connector: str) -> bool:
        return connector in self.connector_configs

    def connector_config(self, connector: str) -> Mapping[str, str] | None:
        return self.connector_configs.get(connector)

    def target_state(self, connector: str) -> TargetState | None:
        """The stored target state (kept even before the connector's config exists, KIP-980); STARTED
        for an existing connector without a target-state record; None otherwise."""
        state = self.target_states.get(connector)
        if state is None and connector in self.connector_configs:
            return TargetState.STARTED
        return state

    def tasks(self, connector: str) -> tuple[Mapping[str, str], ...]:
        """The committed task configs; () when none or when the last commit was incomplete."""
        if connector in self.inconsistent:
            return ()
        return self.task_configs.get(connector, ())


class ConfigUpdateListener(Protocol):
    """Called from the log's consumer thread, after the snapshot was updated, for records read after
    start() returned (historical records at start-up are in the first snapshot instead)."""

    def on_connector_config_update(self, connector: str) -> None: ...

    def on_connector_config_remove(self, connector: str) -> None: ...

    def on_task_config_update(self, connector: str) -> None: ...

    def on_target_state_change(self, connector: str) -> None: ...

    def on_restart_request(self, request: RestartRequest) -> None: ...


_Event = Callable[[ConfigUpdateListener], None]


class ConfigStore:
    """Materialises the config topic and writes to it. Like Kafka Connect's store it expects a single
    writer (the leader); every write returns the position after which it is visible in snapshot()."""

    def __init__(self, log_factory: Callable[[Callable[[LogRecord], None]], RecordLog]) -> None:
        self._lock = threading.Lock()
        self._listener: ConfigUpdateListener | None = None
        self._notify = False
        self._position = 0
        self._configs: dict[str, Mapping[str, str]] = {}
        self._targets: dict[str, TargetState] = {}
        self._tasks: dict[str, tuple[Mapping[str, str], ...]] = {}
        self._deferred: dict[str, dict[int, Mapping[str, str]]] = {}
        self._inconsistent: set[str] = set()
        self._deleted_callbacks: dict[str, Mapping[str, str]] = {}
        self._snapshot: ClusterConfigState | None = None
        self._changes = ConfigChanges()
        self._log = log_factory(self._on_record)

    # -- lifecycle and reads ------------------------------------------------------------------

    def set_listener(self, listener: ConfigUpdateListener | None) -> None:
        self._listener = listener

    def start(self, timeout: float) -> None:
        self._log.start(timeout)
        self._notify = True

    def stop(self) -> None:
        self._notify = False
        self._log.stop()

    def snapshot(self) -> ClusterConfigState:
        with self._lock:
            if self._snapshot is None:
                self._snapshot = ClusterConfigState(
                    position=self._position,
                    connector_configs=MappingProxyType(dict(self._configs)),
                    target_states=MappingProxyType(dict(self._targets)),
                    task_configs=MappingProxyType(dict(self._tasks)),
                    inconsistent=frozenset(self._inconsistent),
                    pending_deleted_callbacks=MappingProxyType(dict(self._deleted_callbacks)),
                    changes=self._changes,
                )
            return self._snapshot

    def read_to_end(self, timeout: float) -> ClusterConfigState:
        self._log.read_to_end(timeout)
        return self.snapshot()

    def read_lag(self) -> int:
        """Records of the config topic written and not read yet (RecordLog.read_lag)."""
        return self._log.read_lag()

    # -- writes ---------------------------------------------------------------------------------

    def put_connector_config(
        self,
        connector: str,
        config: Mapping[str, str],
        target_state: TargetState | None = None,
        timeout: float = 30.0,
    ) -> int:
        """Write the connector's config, preceded by its target state when given (KIP-980: a new
        connector must never be seen running before its initial state)."""
        _check_name(connector)
        serde.check_string_map(f"config of connector {connector!r}", config)
        records: list[tuple[bytes, bytes | None]] = []
        if target_state is not None:
            records.append((target_state_key(connector), encode_target_state(target_state)))
        records.append((connector_key(connector), serde.dumps({"properties": dict(config)})))
        return self._write(records, timeout)

    def remove_connector_config(
        self, connector: str, timeout: float = 30.0, *, deleted_callback: Mapping[str, str] | None = None
    ) -> int:
        """Tombstones for the connector's config and its target state, as Kafka Connect writes them.
        With ``deleted_callback`` (the config the connector had), they are preceded by the record
        saying its deleted() callback is due, so whoever leads next still calls it after a crash."""
        _check_name(connector)
        records: list[tuple[bytes, bytes | None]] = []
        if deleted_callback is not None:
            serde.check_string_map(f"config of connector {connector!r}", deleted_callback)
            records.append(
                (deleted_callback_key(connector), serde.dumps({"properties": dict(deleted_callback)}))
            )
        records += [(connector_key(connector), None), (target_state_key(connector), None)]
        return self._write(records, timeout)

    def remove_deleted_callback(self, connector: str, timeout: float = 30.0) -> int:
        """The deleted() callback of the connector has run (whatever its outcome)."""
        _check_name(connector)
        return self._write([(deleted_callback_key(connector), None)], timeout)

    def put_task_configs(
        self, connector: str, configs: Sequence[Mapping[str, str]], timeout: float = 30.0
    ) -> int:
        """task-{c}-0..N-1, then commit-{c} once all of them are acknowledged; N=0 publishes an empty set."""
        _check_name(connector)
        for index, task_config in enumerate(configs):
            serde.check_string_map(f"config of task {connector}-{index}", task_config)
        deadline = Deadline(timeout)
        tasks = [
            (task_key(connector, i), serde.dumps({"properties": dict(c)})) for i, c in enumerate(configs)
        ]
        if tasks:
            # Never commit a task set that did not fully reach the log.
            self._send(tasks, deadline)
        return self._write(
            [(commit_key(connector), serde.dumps({"tasks": len(configs)}))], deadline.left("config write")
        )

    def put_target_state(self, connector: str, state: TargetState, timeout: float = 30.0) -> int:
        _check_name(connector)
        return self._write([(target_state_key(connector), encode_target_state(state))], timeout)

    def put_restart_request(
        self, connector: str, include_tasks: bool, only_failed: bool, timeout: float = 30.0
    ) -> int:
        _check_name(connector)
        value = serde.dumps({"include-tasks": include_tasks, "only-failed": only_failed})
        return self._write([(restart_key(connector), value)], timeout)

    def _send(self, records: Sequence[tuple[bytes, bytes | None]], deadline: Deadline) -> LogPosition:
        futures = [self._log.send(key, value, _CONFIG_PARTITION) for key, value in records]
        positions = [future.result(timeout=deadline.left("config write")) for future in futures]
        return positions[-1]

    def _write(self, records: Sequence[tuple[bytes, bytes | None]], timeout: float) -> int:
        deadline = Deadline(timeout)
        try:
            last = self._send(records, deadline)
        except concurrent.futures.TimeoutError as exc:
            raise TimeoutError(f"config write not acknowledged within {timeout:.1f}s") from exc
        # One partition: once the last record is applied, every earlier one is too.
        self._log.wait_for(last, deadline.left("config write"))
        return last.offset + 1

    # -- consuming ----------------------------------------------------------------------------

    def _on_record(self, record: LogRecord) -> None:
        with self._lock:
            self._position = max(self._position, record.offset + 1)
            self._snapshot = None
            events = self._apply(record)
        listener = self._listener
        if not (self._notify and listener is not None):
            return
        for event in events:
            try:
                event(listener)
            except Exception:
                log.exception("config listener failed on record %d (%r)", record.offset, record.key)

    def _apply(self, record: LogRecord) -> list[_Event]:
        key = serde.decode_key(record.key)
        if key is None:
            log.warning("config topic: skipping record %d with a missing or non-UTF-8 key", record.offset)
            return []
        value: object = None
        if record.value is not None:
            try:
                value = serde.loads(record.value)
            except ValueError as exc:
                log.warning(
                    "config topic: skipping %r at %d: value is not JSON (%s)", key, record.offset, exc
                )
                return []
        tombstone = record.value is None
        changed = _changed_connector(key)
        if changed is not None:
            self._changes.note(self._position, changed)
        if key.startswith(TARGET_STATE_PREFIX):
            return self._apply_target_state(key[len(TARGET_STATE_PREFIX) :], value, tombstone)
        if key.startswith(CONNECTOR_PREFIX):
            return self._apply_connector(key[len(CONNECTOR_PREFIX) :], value, tombstone)
        if key.startswith(TASK_PREFIX):
            return self._apply_task(key, value, tombstone)
        if key.startswith(COMMIT_PREFIX):
            return self._apply_commit(key[len(COMMIT_PREFIX) :], value, tombstone)
        if key.startswith(RESTART_PREFIX):
            return self._apply_restart(key[len(RESTART_PREFIX) :], value, tombstone)
        if key.startswith(DELETED_CALLBACK_PREFIX):
            return self._apply_deleted_callback(key[len(DELETED_CALLBACK_PREFIX) :], value, tombstone)
        # session-key, tasks-fencing-…, logger-cluster-…: Kafka Connect features we do not implement.
        log.warning("config topic: skipping record %d with unknown key %r", record.offset, key)
        return []

    def _apply_connector(self, connector: str, value: object, tombstone: bool) -> list[_Event]:
        if tombstone:
            self._configs.pop(connector, None)
            self._targets.pop(connector, None)
            self._tasks.pop(connector, None)
            self._deferred.pop(connector, None)
            self._inconsistent.discard(connector)
            return [lambda listener: listener.on_connector_config_remove(connector)]
        properties = serde.parse_string_map(value.get("properties") if isinstance(value, dict) else None)
        if properties is None:
            log.warning(
                'config topic: skipping config of connector %r: not {"properties": {strings}}', connector
            )
            return []
        self._configs[connector] = MappingProxyType(properties)
        # A connector without a target-state record runs (connectors created before pause existed).
        self._targets.setdefault(connector, TargetState.STARTED)
        return [lambda listener: listener.on_connector_config_update(connector)]

    def _apply_deleted_callback(self, connector: str, value: object, tombstone: bool) -> list[_Event]:
        if tombstone:
            self._deleted_callbacks.pop(connector, None)
            return []
        properties = serde.parse_string_map(value.get("properties") if isinstance(value, dict) else None)
        if properties is None:
            log.warning(
                'config topic: skipping deleted-callback record of %r: not {"properties": {strings}}',
                connector,
            )
            return []
        self._deleted_callbacks[connector] = MappingProxyType(properties)
        return []

    def _apply_task(self, key: str, value: object, tombstone: bool) -> list[_Event]:
        parsed = serde.parse_task_record_key(key, TASK_PREFIX)
        if parsed is None:
            log.warning("config topic: skipping task config with unparseable key %r", key)
            return []
        connector, task = parsed
        if tombstone:
            log.warning("config topic: skipping unexpected tombstone for %r", key)
            return []
        properties = serde.parse_string_map(value.get("properties") if isinstance(value, dict) else None)
        if properties is None:
            log.warning('config topic: skipping %r: not {"properties": {strings}}', key)
            return []
        # Invisible until the connector's next commit record.
        self._deferred.setdefault(connector, {})[task] = MappingProxyType(properties)
        return []

    def _apply_commit(self, connector: str, value: object, tombstone: bool) -> list[_Event]:
        if connector not in self._configs:
            # Deleted connector whose config and tombstone were compacted away: drop what is left.
            self._deferred.pop(connector, None)
            self._tasks.pop(connector, None)
            self._inconsistent.discard(connector)
            log.debug("config topic: ignoring task commit for unknown connector %r", connector)
            return []
        count = value.get("tasks") if isinstance(value, dict) else None
        if tombstone or not isinstance(count, int) or isinstance(count, bool) or count < 0:
            log.warning("config topic: skipping malformed task commit for connector %r: %r", connector, value)
            return []
        deferred = self._deferred.pop(connector, {})
        # Only the tasks the commit names must be present: compaction may leave stale higher ones.
        if all(i in deferred for i in range(count)):
            self._tasks[connector] = tuple(deferred[i] for i in range(count))
            self._inconsistent.discard(connector)
        else:
            log.warning(
                "config topic: incomplete task configs for connector %r (commit of %d, have %s); "
                "marking it inconsistent until its tasks are rewritten",
                connector,
                count,
                sorted(deferred),
            )
            self._tasks.pop(connector, None)
            self._inconsistent.add(connector)
        return [lambda listener: listener.on_task_config_update(connector)]

    def _apply_target_state(self, connector: str, value: object, tombstone: bool) -> list[_Event]:
        if tombstone:
            self._targets.pop(connector, None)
            if connector in self._configs:
                self._targets[connector] = TargetState.STARTED
            # The connector's own tombstone tells listeners about the removal.
            return []
        if not isinstance(value, dict):
            log.warning("config topic: skipping target state of %r: not a JSON object", connector)
            return []
        raw = value.get("state.v2")
        if not isinstance(raw, str):
            raw = value.get("state")  # written by a worker older than KIP-875
        try:
            state = TargetState(raw)
        except ValueError:
            log.warning("config topic: skipping target state of %r: unknown state %r", connector, raw)
            return []
        previous = self._targets.get(connector)
        self._targets[connector] = state
        # KIP-980 writes the state before the config: no event until the connector exists.
        if state is previous or connector not in self._configs:
            return []
        return [lambda listener: listener.on_target_state_change(connector)]

    def _apply_restart(self, connector: str, value: object, tombstone: bool) -> list[_Event]:
        if tombstone or not isinstance(value, dict):
            log.warning("config topic: skipping malformed restart request for %r", connector)
            return []
        flags = {}
        for name in ("include-tasks", "only-failed"):
            flag = value.get(name)
            if not isinstance(flag, bool):
                log.warning(
                    "config topic: restart request for %r: %r is %r, using false", connector, name, flag
                )
                flag = False
            flags[name] = flag
        request = RestartRequest(connector, flags["include-tasks"], flags["only-failed"])
        return [lambda listener: listener.on_restart_request(request)]


def _changed_connector(key: str) -> str | None:
    """The connector a record with ``key`` may change the visible state of (its config, target
    state or committed tasks: what ``ConfigChanges`` journals); None for any other record."""
    for prefix in (CONNECTOR_PREFIX, TARGET_STATE_PREFIX, COMMIT_PREFIX):
        if key.startswith(prefix):
            return key[len(prefix) :]
    return None


def _check_name(connector: str) -> None:
    if not isinstance(connector, str) or not connector:
        raise ValueError("connector name must be a non-empty string")
