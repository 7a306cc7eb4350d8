"""ConfigStore over MemoryLog: Kafka Connect's config-topic format and replay semantics."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sluiceway_server.model import TargetState
from sluiceway_server.storage import (
    ConfigStore,
    LogRecord,
    MemoryCluster,
    MemoryLog,
    RecordLog,
    RestartRequest,
)

TIMEOUT = 5.0


@dataclass
class Recorder:
    """A ConfigUpdateListener that records what it was told."""

    events: list[tuple[str, object]] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def _add(self, kind: str, arg: object) -> None:
        with self.lock:
            self.events.append((kind, arg))

    def on_connector_config_update(self, connector: str) -> None:
        self._add("config", connector)

    def on_connector_config_remove(self, connector: str) -> None:
        self._add("remove", connector)

    def on_task_config_update(self, connector: str) -> None:
        self._add("tasks", connector)

    def on_target_state_change(self, connector: str) -> None:
        self._add("target", connector)

    def on_restart_request(self, request: RestartRequest) -> None:
        self._add("restart", request)


@dataclass
class Env:
    cluster: MemoryCluster
    logs: list[MemoryLog]
    recorder: Recorder

    def factory(self) -> Callable[[Callable[[LogRecord], None]], RecordLog]:
        def make(on_record: Callable[[LogRecord], None]) -> RecordLog:
            memory_log = MemoryLog("connect-configs", on_record, cluster=self.cluster)
            self.logs.append(memory_log)
            return memory_log

        return make

    def new_store(self) -> ConfigStore:
        store = ConfigStore(self.factory())
        store.start(TIMEOUT)
        return store

    @property
    def log(self) -> MemoryLog:
        return self.logs[0]

    def raw(self, key: str | bytes | None, value: object) -> None:
        """Write a record as another worker (or Kafka Connect) would, bypassing the store."""
        key_bytes = key.encode() if isinstance(key, str) else key
        if value is None or isinstance(value, bytes):
            data = value
        else:
            data = json.dumps(value, separators=(",", ":")).encode()
        self.log.send(key_bytes, data, 0)

    def records(self) -> list[tuple[str, object]]:
        return [
            (r.key.decode() if r.key else "", None if r.value is None else json.loads(r.value))
            for r in self.cluster.records("connect-configs")
        ]


@pytest.fixture
def env() -> Env:
    return Env(MemoryCluster(), [], Recorder())


@pytest.fixture
def store(env: Env) -> Iterator[ConfigStore]:
    config_store = env.new_store()
    config_store.set_listener(env.recorder)
    yield config_store
    config_store.stop()


def test_connector_config_round_trip_and_format(env: Env, store: ConfigStore) -> None:
    position = store.put_connector_config("c", {"connector.class": "DataGen", "tasks.max": "2"})
    snapshot = store.snapshot()
    assert position == 1 == snapshot.position
    assert snapshot.contains("c")
    assert snapshot.connectors() == ["c"]
    assert snapshot.connector_config("c") == {"connector.class": "DataGen", "tasks.max": "2"}
    assert snapshot.target_state("c") is TargetState.STARTED
    assert snapshot.tasks("c") == ()
    raw = env.cluster.records("connect-configs")[0]
    assert raw.key == b"connector-c"
    assert raw.value == b'{"properties":{"connector.class":"DataGen","tasks.max":"2"}}'
    assert env.recorder.events == [("config", "c")]


def test_initial_target_state_written_first(env: Env, store: ConfigStore) -> None:
    position = store.put_connector_config("c", {"k": "v"}, target_state=TargetState.STOPPED)
    assert position == 2
    assert env.records() == [
        ("target-state-c", {"state": "PAUSED", "state.v2": "STOPPED"}),
        ("connector-c", {"properties": {"k": "v"}}),
    ]
    assert store.snapshot().target_state("c") is TargetState.STOPPED
    # The state arrived before the connector existed: no target-state event, only the config one.
    assert env.recorder.events == [("config", "c")]


@pytest.mark.parametrize(
    ("state", "encoded"),
    [
        (TargetState.STARTED, {"state": "STARTED"}),
        (TargetState.PAUSED, {"state": "PAUSED"}),
        (TargetState.STOPPED, {"state": "PAUSED", "state.v2": "STOPPED"}),
    ],
)
def test_target_state_encoding(env: Env, store: ConfigStore, state: TargetState, encoded: object) -> None:
    store.put_connector_config("c", {})
    store.put_target_state("c", TargetState.PAUSED if state is TargetState.STARTED else TargetState.STARTED)
    env.recorder.events.clear()
    store.put_target_state("c", state)
    assert env.records()[-1] == ("target-state-c", encoded)
    assert store.snapshot().target_state("c") is state
    assert env.recorder.events == [("target", "c")]


def test_target_state_reading_prefers_v2_and_falls_back(env: Env, store: ConfigStore) -> None:
    store.put_connector_config("c", {})
    env.raw("target-state-c", {"state": "PAUSED", "state.v2": "STOPPED"})
    assert store.read_to_end(TIMEOUT).target_state("c") is TargetState.STOPPED
    env.raw("target-state-c", {"state": "PAUSED"})  # an older worker
    assert store.read_to_end(TIMEOUT).target_state("c") is TargetState.PAUSED
    env.raw("target-state-c", {"state": "STARTED", "state.v2": 7})  # bad v2: fall back on state
    assert store.read_to_end(TIMEOUT).target_state("c") is TargetState.STARTED
    env.raw("target-state-c", {"state": "BOGUS"})  # skipped, state unchanged
    env.raw("target-state-c", [1, 2])
    assert store.read_to_end(TIMEOUT).target_state("c") is TargetState.STARTED


def test_unchanged_target_state_is_not_an_event(env: Env, store: ConfigStore) -> None:
    store.put_connector_config("c", {})
    store.put_target_state("c", TargetState.STARTED)
    assert env.recorder.events == [("config", "c")]


def test_target_state_for_unknown_connector_is_kept(env: Env, store: ConfigStore) -> None:
    store.put_target_state("later", TargetState.PAUSED)
    snapshot = store.snapshot()
    assert not snapshot.contains("later")
    assert snapshot.target_state("later") is TargetState.PAUSED
    assert snapshot.target_state("nobody") is None
    store.put_connector_config("later", {"a": "b"})
    assert store.snapshot().target_state("later") is TargetState.PAUSED
    assert env.recorder.events == [("config", "later")]


def test_target_state_tombstone_falls_back_to_started(env: Env, store: ConfigStore) -> None:
    store.put_connector_config("c", {}, target_state=TargetState.PAUSED)
    env.raw("target-state-c", None)
    assert store.read_to_end(TIMEOUT).target_state("c") is TargetState.STARTED


def test_task_configs_deferred_until_commit(env: Env, store: ConfigStore) -> None:
    store.put_connector_config("c", {})
    env.raw("task-c-0", {"properties": {"t": "0"}})
    env.raw("task-c-1", {"properties": {"t": "1"}})
    snapshot = store.read_to_end(TIMEOUT)
    assert snapshot.tasks("c") == ()
    assert ("tasks", "c") not in env.recorder.events
    env.raw("commit-c", {"tasks": 2})
    snapshot = store.read_to_end(TIMEOUT)
    assert snapshot.tasks("c") == ({"t": "0"}, {"t": "1"})
    assert "c" not in snapshot.inconsistent
    assert env.recorder.events[-1] == ("tasks", "c")


def test_put_task_configs_format_and_position(env: Env, store: ConfigStore) -> None:
    store.put_connector_config("c", {})
    position = store.put_task_configs("c", [{"a": "1"}, {"a": "2"}])
    assert position == 4 == store.snapshot().position
    assert env.records()[1:] == [
        ("task-c-0", {"properties": {"a": "1"}}),
        ("task-c-1", {"properties": {"a": "2"}}),
        ("commit-c", {"tasks": 2}),
    ]
    assert store.snapshot().tasks("c") == ({"a": "1"}, {"a": "2"})
    assert store.snapshot().task_configs["c"] == ({"a": "1"}, {"a": "2"})


def test_empty_task_set_replaces_previous_tasks(env: Env, store: ConfigStore) -> None:
    store.put_connector_config("c", {})
    store.put_task_configs("c", [{"a": "1"}])
    store.put_task_configs("c", [])
    assert env.records()[-1] == ("commit-c", {"tasks": 0})
    snapshot = store.snapshot()
    assert snapshot.tasks("c") == ()
    assert "c" not in snapshot.inconsistent
    assert env.recorder.events.count(("tasks", "c")) == 2


def test_incomplete_task_set_marks_connector_inconsistent(env: Env, store: ConfigStore) -> None:
    store.put_connector_config("c", {})
    store.put_task_configs("c", [{"gen": "1"}])
    # Compaction removed task-c-1 of a 3-task commit.
    env.raw("task-c-0", {"properties": {"gen": "2"}})
    env.raw("task-c-2", {"properties": {"gen": "2"}})
    env.raw("commit-c", {"tasks": 3})
    snapshot = store.read_to_end(TIMEOUT)
    assert snapshot.inconsistent == frozenset({"c"})
    assert snapshot.tasks("c") == ()
    assert env.recorder.events[-1] == ("tasks", "c")
    # Deferred configs were cleared by that commit: a commit alone does not reuse them.
    env.raw("commit-c", {"tasks": 1})
    assert store.read_to_end(TIMEOUT).inconsistent == frozenset({"c"})
    # A fresh complete set repairs it.
    store.put_task_configs("c", [{"gen": "3"}])
    snapshot = store.snapshot()
    assert snapshot.inconsistent == frozenset()
    assert snapshot.tasks("c") == ({"gen": "3"},)


def test_stale_higher_task_configs_do_not_matter(env: Env, store: ConfigStore) -> None:
    # Shrinking from 2 tasks to 1 can leave task-c-1 behind after compaction; it is ignored.
    store.put_connector_config("c", {})
    env.raw("task-c-1", {"properties": {"old": "1"}})
    env.raw("task-c-0", {"properties": {"new": "0"}})
    env.raw("commit-c", {"tasks": 1})
    snapshot = store.read_to_end(TIMEOUT)
    assert snapshot.tasks("c") == ({"new": "0"},)
    assert snapshot.inconsistent == frozenset()


def test_connector_tombstone_removes_everything(env: Env, store: ConfigStore) -> None:
    store.put_connector_config("c", {"a": "b"}, target_state=TargetState.PAUSED)
    store.put_task_configs("c", [{"t": "0"}])
    env.raw("task-c-0", {"properties": {"pending": "yes"}})
    position = store.remove_connector_config("c")
    assert env.records()[-2:] == [("connector-c", None), ("target-state-c", None)]
    snapshot = store.snapshot()
    assert snapshot.position == position
    assert not snapshot.contains("c")
    assert snapshot.connector_config("c") is None
    assert snapshot.target_state("c") is None
    assert snapshot.tasks("c") == ()
    assert "c" not in snapshot.task_configs
    assert env.recorder.events[-1] == ("remove", "c")
    # The pending task config died with the connector: re-created, a bare commit is incomplete.
    store.put_connector_config("c", {"a": "b"})
    env.raw("commit-c", {"tasks": 1})
    assert store.read_to_end(TIMEOUT).inconsistent == frozenset({"c"})


def test_commit_for_unknown_connector_is_ignored(env: Env, store: ConfigStore) -> None:
    env.raw("task-gone-0", {"properties": {}})
    env.raw("commit-gone", {"tasks": 1})
    snapshot = store.read_to_end(TIMEOUT)
    assert snapshot.tasks("gone") == ()
    assert snapshot.inconsistent == frozenset()
    assert env.recorder.events == []


def test_restart_requests(env: Env, store: ConfigStore) -> None:
    store.put_restart_request("c", include_tasks=True, only_failed=False)
    assert env.records() == [("restart-connector-c", {"include-tasks": True, "only-failed": False})]
    env.raw("restart-connector-d", {"include-tasks": "yes"})  # malformed flags default to false
    store.read_to_end(TIMEOUT)
    assert env.recorder.events == [
        ("restart", RestartRequest("c", include_tasks=True, only_failed=False)),
        ("restart", RestartRequest("d", include_tasks=False, only_failed=False)),
    ]
    # Restart requests are events, not state.
    assert store.snapshot().connectors() == []


def test_connector_names_with_dashes(env: Env, store: ConfigStore) -> None:
    for name in ("my-conn-1", "connector-x", "commit-y", "7"):
        store.put_connector_config(name, {"n": name})
        store.put_task_configs(name, [{"i": "0"}, {"i": "1"}])
    snapshot = store.snapshot()
    assert snapshot.connectors() == ["7", "commit-y", "connector-x", "my-conn-1"]
    for name in ("my-conn-1", "connector-x", "commit-y", "7"):
        assert snapshot.connector_config(name) == {"n": name}
        assert snapshot.tasks(name) == ({"i": "0"}, {"i": "1"})


def test_unknown_and_malformed_records_are_skipped(env: Env, store: ConfigStore) -> None:
    store.put_connector_config("c", {"a": "b"})
    env.raw("session-key", {"key": "x", "algorithm": "HmacSHA256", "creation-timestamp": 1})
    env.raw("tasks-fencing-c", {"task-count": 1})
    env.raw("logger-cluster-org.foo", {"level": "DEBUG"})
    env.raw("connector-c", b"{not json")
    env.raw("connector-c", {"properties": {"a": 1}})
    env.raw("connector-c", {"props": {}})
    env.raw("task-c", {"properties": {}})
    env.raw("task-c-x", {"properties": {}})
    env.raw("task-c-0", None)
    env.raw("commit-c", {"tasks": "1"})
    env.raw("commit-c", {"tasks": True})
    env.raw("commit-c", None)
    env.raw(b"\xff\xfe", {"properties": {}})
    env.raw(None, {"properties": {}})
    env.raw("restart-connector-c", None)
    snapshot = store.read_to_end(TIMEOUT)
    assert snapshot.connector_config("c") == {"a": "b"}
    assert snapshot.tasks("c") == ()
    assert snapshot.inconsistent == frozenset()
    assert snapshot.position == 16  # skipped records still move the position
    assert env.recorder.events == [("config", "c")]


def test_null_property_values_are_dropped(env: Env, store: ConfigStore) -> None:
    env.raw("connector-c", {"properties": {"a": "b", "gone": None}})
    assert store.read_to_end(TIMEOUT).connector_config("c") == {"a": "b"}


def test_failing_listener_does_not_break_the_store(env: Env, store: ConfigStore) -> None:
    class Broken(Recorder):
        def on_connector_config_update(self, connector: str) -> None:
            raise RuntimeError("listener bug")

    store.set_listener(Broken())
    store.put_connector_config("a", {})
    store.put_connector_config("b", {})
    assert store.snapshot().connectors() == ["a", "b"]


def test_restart_replays_state_without_events(env: Env, store: ConfigStore) -> None:
    store.put_connector_config("a", {"x": "1"}, target_state=TargetState.PAUSED)
    store.put_task_configs("a", [{"t": "0"}])
    store.put_connector_config("b", {"x": "2"})
    store.put_target_state("b", TargetState.STOPPED)
    store.put_connector_config("gone", {})
    store.remove_connector_config("gone")
    store.put_restart_request("a", True, True)
    second_recorder = Recorder()
    second = ConfigStore(env.factory())
    second.set_listener(second_recorder)
    second.start(TIMEOUT)
    try:
        assert second.snapshot() == store.snapshot()
        assert second_recorder.events == []  # history is in the snapshot, not replayed as events
        # Live changes reach both.
        store.put_target_state("a", TargetState.STARTED)
        second.read_to_end(TIMEOUT)
        assert second_recorder.events == [("target", "a")]
        assert second.snapshot().target_state("a") is TargetState.STARTED
    finally:
        second.stop()


def test_snapshots_are_immutable(store: ConfigStore) -> None:
    store.put_connector_config("c", {"a": "b"})
    store.put_task_configs("c", [{"t": "0"}])
    snapshot = store.snapshot()
    with pytest.raises(TypeError):
        snapshot.connector_configs["d"] = {}  # type: ignore[index]
    with pytest.raises(TypeError):
        snapshot.connector_config("c")["a"] = "x"  # type: ignore[index]
    with pytest.raises(TypeError):
        snapshot.tasks("c")[0]["t"] = "x"  # type: ignore[index]
    store.put_connector_config("c", {"a": "changed"})
    assert snapshot.connector_config("c") == {"a": "b"}
    assert snapshot is not store.snapshot()


def test_invalid_writes_are_rejected(store: ConfigStore) -> None:
    with pytest.raises(ValueError, match="not a string"):
        store.put_connector_config("c", {"a": 1})  # type: ignore[dict-item]
    with pytest.raises(ValueError, match="non-empty"):
        store.put_connector_config("", {})
    with pytest.raises(ValueError, match="not a string"):
        store.put_task_configs("c", [{"a": None}])  # type: ignore[dict-item]
    assert store.snapshot().position == 0


names = st.text(st.characters(codec="utf-8"), min_size=1, max_size=20)
string_maps = st.dictionaries(st.text(max_size=20), st.text(max_size=40), max_size=6)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    connectors=st.dictionaries(
        names,
        st.tuples(string_maps, st.sampled_from(TargetState), st.lists(string_maps, max_size=4)),
        max_size=4,
    )
)
def test_round_trip_through_the_log(
    connectors: dict[str, tuple[dict[str, str], TargetState, list[dict[str, str]]]],
) -> None:
    env = Env(MemoryCluster(), [], Recorder())
    writer = env.new_store()
    try:
        for name, (config, state, tasks) in connectors.items():
            writer.put_connector_config(name, config, target_state=state)
            writer.put_task_configs(name, tasks)
        reader = env.new_store()
        try:
            snapshot = reader.snapshot()
            assert snapshot == writer.snapshot()
            assert snapshot.connectors() == sorted(connectors)
            for name, (config, state, tasks) in connectors.items():
                assert snapshot.connector_config(name) == config
                assert snapshot.target_state(name) is state
                assert snapshot.tasks(name) == tuple(tasks)
        finally:
            reader.stop()
    finally:
        writer.stop()
