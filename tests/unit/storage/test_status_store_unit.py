"""StatusStore over MemoryLog: Kafka Connect's status-topic format (KIP-558 topic records included)."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sluiceway_server.model import State
from sluiceway_server.storage import (
    ConnectorStatusRecord,
    ErrorEntry,
    LogRecord,
    MemoryCluster,
    MemoryLog,
    RecordLog,
    StatusChange,
    StatusStore,
    TaskStatusRecord,
    TopicStatusRecord,
)

TIMEOUT = 5.0
TOPIC = "connect-status"


@dataclass
class Env:
    cluster: MemoryCluster = field(default_factory=MemoryCluster)
    logs: list[MemoryLog] = field(default_factory=list)
    changes: list[StatusChange] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def factory(self) -> Callable[[Callable[[LogRecord], None]], RecordLog]:
        def make(on_record: Callable[[LogRecord], None]) -> RecordLog:
            memory_log = MemoryLog(TOPIC, on_record, partitions=5, cluster=self.cluster)
            self.logs.append(memory_log)
            return memory_log

        return make

    def listen(self, change: StatusChange) -> None:
        with self.lock:
            self.changes.append(change)

    def raw(self, key: str | None, value: object) -> None:
        data = value if value is None or isinstance(value, bytes) else json.dumps(value).encode()
        self.logs[0].send(None if key is None else key.encode(), data)

    def latest(self, key: str) -> object:
        matching = [r for r in self.cluster.records(TOPIC) if r.key == key.encode()]
        value = matching[-1].value
        return None if value is None else json.loads(value)


@pytest.fixture
def env() -> Env:
    return Env()


@pytest.fixture
def store(env: Env) -> Iterator[StatusStore]:
    status_store = StatusStore(env.factory())
    status_store.add_listener(env.listen)
    status_store.start(TIMEOUT)
    yield status_store
    status_store.stop()


def running(connector: str, worker: str = "w1", generation: int = 1) -> ConnectorStatusRecord:
    return ConnectorStatusRecord(connector, State.RUNNING, None, worker, generation)


def task(connector: str, number: int, state: State = State.RUNNING) -> TaskStatusRecord:
    return TaskStatusRecord(connector, number, state, None, "w1", 3)


def test_connector_status_round_trip_and_format(env: Env, store: StatusStore) -> None:
    store.put_connector(running("c"))
    assert store.get_connector("c") == running("c")
    raw = next(r for r in env.cluster.records(TOPIC) if r.key == b"status-connector-c")
    # Exactly Kafka Connect's bytes: field order, null trace, no extra field without errors.
    assert raw.value == b'{"state":"RUNNING","trace":null,"worker_id":"w1","generation":1}'
    assert env.changes == [StatusChange("c", None, running("c"))]
    assert store.connectors() == ["c"]


def test_task_status_with_errors_round_trip(env: Env, store: StatusStore) -> None:
    errors = (
        ErrorEntry(1000, "boom", "Traceback ...", "w1"),
        ErrorEntry(2000, "bäng", "", "w2"),
    )
    status = TaskStatusRecord("c", 0, State.FAILED, "Traceback ...", "w2", 4, errors)
    store.put_task(status)
    assert store.get_task("c", 0) == status
    assert env.latest("status-task-c-0") == {
        "state": "FAILED",
        "trace": "Traceback ...",
        "worker_id": "w2",
        "generation": 4,
        "recent_errors": [
            {"time_ms": 1000, "message": "boom", "trace": "Traceback ...", "worker_id": "w1"},
            {"time_ms": 2000, "message": "bäng", "trace": "", "worker_id": "w2"},
        ],
    }
    assert env.changes == [StatusChange("c", 0, status)]


def test_update_time_is_when_the_state_last_changed(
    env: Env, store: StatusStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    # MemoryLog stamps records with time.time(), as a broker stamps them on arrival.
    clock = [1_700_000_000.0]
    monkeypatch.setattr(time, "time", lambda: clock[0])

    def times() -> tuple[int, int]:
        connector, task_status = store.get_connector("c"), store.get_task("c", 0)
        assert connector is not None and task_status is not None
        return connector.update_time_ms, task_status.update_time_ms

    store.put_connector(running("c"))
    store.put_task(task("c", 0))
    assert times() == (1_700_000_000_000, 1_700_000_000_000)
    clock[0] += 5
    # The same state under the same generation again is no change.
    store.put_connector(running("c"))
    store.put_task(task("c", 0))
    assert times() == (1_700_000_000_000, 1_700_000_000_000)
    clock[0] += 5
    store.put_connector(running("c", generation=2))
    store.put_task(task("c", 0, State.FAILED))
    assert times() == (1_700_000_010_000, 1_700_000_010_000)
    # The time comes from the log; the record's JSON stays Kafka Connect's four fields.
    assert env.latest("status-connector-c") == {
        "state": "RUNNING",
        "trace": None,
        "worker_id": "w1",
        "generation": 2,
    }


def test_connector_names_with_dashes(store: StatusStore) -> None:
    store.put_task(task("my-conn-2", 12))
    store.put_task(task("my-conn-2", 3))
    store.put_task(task("status-task-x", 0))
    assert [t.task for t in store.tasks("my-conn-2")] == [3, 12]
    assert store.get_task("my-conn-2", 12) == task("my-conn-2", 12)
    assert store.get_task("status-task-x", 0) == task("status-task-x", 0)
    assert store.connectors() == ["my-conn-2", "status-task-x"]


def test_remove_connector_tombstones_connector_and_tasks(env: Env, store: StatusStore) -> None:
    store.put_connector(running("c"))
    store.put_task(task("c", 0))
    store.put_task(task("c", 1))
    store.put_task(task("c-other", 0))
    env.changes.clear()
    store.remove_connector("c")
    assert store.get_connector("c") is None
    assert store.tasks("c") == []
    assert store.tasks("c-other") == [task("c-other", 0)]
    assert env.latest("status-connector-c") is None
    assert env.latest("status-task-c-0") is None
    assert env.latest("status-task-c-1") is None
    assert sorted(env.changes, key=lambda c: -1 if c.task is None else c.task) == [
        StatusChange("c", None, None),
        StatusChange("c", 0, None),
        StatusChange("c", 1, None),
    ]
    assert store.connectors() == ["c-other"]


def test_remove_task(env: Env, store: StatusStore) -> None:
    store.put_task(task("c", 0))
    store.put_task(task("c", 1))
    store.remove_task("c", 0)
    assert store.tasks("c") == [task("c", 1)]
    assert env.changes[-1] == StatusChange("c", 0, None)


def test_connector_tombstone_alone_leaves_task_statuses(env: Env, store: StatusStore) -> None:
    # Keys live on different partitions, so one key's tombstone must not erase another key's status.
    store.put_task(task("c", 0))
    env.raw("status-connector-c", None)
    store.read_to_end(TIMEOUT)
    assert store.tasks("c") == [task("c", 0)]


def test_records_written_by_kafka_connect_are_read(env: Env, store: StatusStore) -> None:
    env.raw(
        "status-connector-k",
        {"state": "PAUSED", "trace": None, "worker_id": "10.0.0.1:8083", "generation": 7},
    )
    env.raw("status-task-k-0", {"state": "UNASSIGNED", "worker_id": "10.0.0.1:8083", "generation": 7})
    store.read_to_end(TIMEOUT)
    assert store.get_connector("k") == ConnectorStatusRecord("k", State.PAUSED, None, "10.0.0.1:8083", 7)
    assert store.get_task("k", 0) == TaskStatusRecord("k", 0, State.UNASSIGNED, None, "10.0.0.1:8083", 7)


def test_malformed_records_are_skipped(env: Env, store: StatusStore) -> None:
    store.put_connector(running("c"))
    env.raw("status-connector-c", b"not json")
    env.raw("status-connector-c", {"state": "DESTROYED", "worker_id": "w", "generation": 1})
    env.raw("status-connector-c", {"state": "FAILED", "worker_id": "w", "generation": "1"})
    env.raw("status-connector-c", {"state": "FAILED", "worker_id": 5, "generation": 1})
    env.raw("status-connector-c", {"state": "FAILED", "trace": 5, "worker_id": "w", "generation": 1})
    env.raw("status-connector-c", [1])
    env.raw("status-connector-", {"state": "FAILED", "worker_id": "w", "generation": 1})
    env.raw("status-task-c", {"state": "FAILED", "worker_id": "w", "generation": 1})
    env.raw("status-task-c-x", {"state": "FAILED", "worker_id": "w", "generation": 1})
    env.raw("status-other", {"state": "FAILED"})
    env.raw(None, {"state": "FAILED"})
    store.read_to_end(TIMEOUT)
    assert store.get_connector("c") == running("c")
    assert store.connectors() == ["c"]
    assert env.changes == [StatusChange("c", None, running("c"))]


def test_malformed_error_history_keeps_the_status(env: Env, store: StatusStore) -> None:
    env.raw(
        "status-task-c-0",
        {
            "state": "FAILED",
            "trace": "t",
            "worker_id": "w",
            "generation": 2,
            "recent_errors": [{"time_ms": "x"}],
        },
    )
    store.read_to_end(TIMEOUT)
    assert store.get_task("c", 0) == TaskStatusRecord("c", 0, State.FAILED, "t", "w", 2)


def test_task_status_records_the_executor_principal_only_when_there_is_one(
    env: Env, store: StatusStore
) -> None:
    bound = TaskStatusRecord("c", 0, State.RUNNING, None, "e1", 4, worker_principal="CN=exec-a")
    store.put_task(bound)
    store.put_task(TaskStatusRecord("c", 1, State.RUNNING, None, "e2", 4))
    assert store.get_task("c", 0) == bound
    assert env.latest("status-task-c-0") == {
        "state": "RUNNING",
        "trace": None,
        "worker_id": "e1",
        "generation": 4,
        "worker_principal": "CN=exec-a",
    }
    unbound = env.latest("status-task-c-1")
    assert isinstance(unbound, dict) and "worker_principal" not in unbound


def test_a_restarting_task_records_its_attempt_and_due_time_only_when_set(
    env: Env, store: StatusStore
) -> None:
    waiting = TaskStatusRecord(
        "c", 0, State.RESTARTING, "boom", "e1", 4, restart_attempt=3, next_restart_ms=1_700_000_000_000
    )
    store.put_task(waiting)
    assert store.get_task("c", 0) == waiting
    assert env.latest("status-task-c-0") == {
        "state": "RESTARTING",
        "trace": "boom",
        "worker_id": "e1",
        "generation": 4,
        "restart_attempt": 3,
        "next_restart_ms": 1_700_000_000_000,
    }
    store.put_task(TaskStatusRecord("c", 0, State.RUNNING, None, "e1", 4))
    assert env.latest("status-task-c-0") == {
        "state": "RUNNING",
        "trace": None,
        "worker_id": "e1",
        "generation": 4,
    }


def test_malformed_restart_fields_keep_the_status(env: Env, store: StatusStore) -> None:
    env.raw(
        "status-task-c-0",
        {
            "state": "RESTARTING",
            "trace": "t",
            "worker_id": "w",
            "generation": 2,
            "restart_attempt": "x",
            "next_restart_ms": -5,
        },
    )
    store.read_to_end(TIMEOUT)
    assert store.get_task("c", 0) == TaskStatusRecord("c", 0, State.RESTARTING, "t", "w", 2)


def test_malformed_worker_principal_keeps_the_status(env: Env, store: StatusStore) -> None:
    env.raw(
        "status-task-c-0",
        {"state": "RUNNING", "trace": None, "worker_id": "w", "generation": 2, "worker_principal": 7},
    )
    store.read_to_end(TIMEOUT)
    assert store.get_task("c", 0) == TaskStatusRecord("c", 0, State.RUNNING, None, "w", 2)


def test_topic_records(env: Env, store: StatusStore) -> None:
    store.put_topics([TopicStatusRecord("orders", "c", 1, 1700000000000)])
    store.put_topics([TopicStatusRecord("audit", "c", 0, 1700000000001)])
    store.put_topics([TopicStatusRecord("orders", "c-2", 0, 1700000000002)])
    assert env.latest("status-topic-orders:connector-c") == {
        "topic": {"name": "orders", "connector": "c", "task": 1, "discoverTimestamp": 1700000000000}
    }
    assert [t.topic for t in store.topics("c")] == ["audit", "orders"]
    assert store.topics("c")[1] == TopicStatusRecord("orders", "c", 1, 1700000000000)
    store.remove_topics("c")
    assert env.latest("status-topic-orders:connector-c") is None
    assert env.latest("status-topic-audit:connector-c") is None
    assert store.topics("c") == []
    assert store.topics("c-2") == [TopicStatusRecord("orders", "c-2", 0, 1700000000002)]
    store.remove_topics("nothing")  # no records, nothing to wait for
    # Topic records are not connector/task status changes.
    assert env.changes == []


def test_topic_record_key_parsing(env: Env, store: StatusStore) -> None:
    value = {"topic": {"name": "t", "connector": "a:connector-b", "task": 0, "discoverTimestamp": 5}}
    env.raw("status-topic-t:connector-a:connector-b", value)
    env.raw("status-topic-:connector-x", value)
    env.raw("status-topic-t:connector-", value)
    env.raw("status-topic-t", value)
    env.raw("status-topic-t:connector-y", {"topic": {"name": "t"}})
    store.read_to_end(TIMEOUT)
    assert store.topics("a:connector-b") == [TopicStatusRecord("t", "a:connector-b", 0, 5)]
    assert store.topics("x") == []
    assert store.topics("y") == []


def test_listener_sees_only_live_changes_and_failures_are_isolated(env: Env, store: StatusStore) -> None:
    store.put_connector(running("c"))
    second_changes: list[StatusChange] = []
    second = StatusStore(env.factory())

    def broken(change: StatusChange) -> None:
        raise RuntimeError("listener bug")

    second.add_listener(broken)
    second.add_listener(second_changes.append)
    second.start(TIMEOUT)
    try:
        assert second.get_connector("c") == running("c")
        assert second_changes == []
        store.put_connector(running("c", generation=2))
        second.read_to_end(TIMEOUT)
        assert second_changes == [StatusChange("c", None, running("c", generation=2))]
    finally:
        second.stop()


def test_invalid_writes_are_rejected(store: StatusStore) -> None:
    with pytest.raises(ValueError, match="task number"):
        store.put_task(TaskStatusRecord("c", -1, State.RUNNING, None, "w", 1))
    with pytest.raises(ValueError, match="non-empty"):
        store.put_connector(ConnectorStatusRecord("", State.RUNNING, None, "w", 1))
    with pytest.raises(ValueError, match="topic"):
        store.put_topics([TopicStatusRecord("", "c", 0, 0)])


texts = st.text(st.characters(codec="utf-8"), max_size=30)
errors = st.lists(
    st.builds(ErrorEntry, st.integers(0, 2**53), texts, texts, texts),
    max_size=3,
).map(tuple)
task_statuses = st.builds(
    TaskStatusRecord,
    texts.filter(bool),
    st.integers(0, 1000),
    st.sampled_from(State),
    st.none() | texts,
    texts,
    st.integers(-(2**31), 2**31 - 1),
    errors,
    worker_principal=texts,
    restart_attempt=st.integers(0, 2**31 - 1),
    next_restart_ms=st.integers(0, 2**53),
)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(statuses=st.lists(task_statuses, max_size=8))
def test_task_status_round_trip(statuses: list[TaskStatusRecord]) -> None:
    env = Env()
    writer = StatusStore(env.factory())
    writer.start(TIMEOUT)
    try:
        for status in statuses:
            writer.put_task(status)
        expected = {(s.connector, s.task): s for s in statuses}
        reader = StatusStore(env.factory())
        reader.start(TIMEOUT)
        try:
            for (connector, number), status in expected.items():
                assert reader.get_task(connector, number) == status
                assert writer.get_task(connector, number) == status
            assert reader.connectors() == sorted({c for c, _ in expected})
        finally:
            reader.stop()
    finally:
        writer.stop()
