"""OffsetStore over MemoryLog: Kafka Connect's offsets-topic format and key canonicalisation."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sluiceway_server.storage import LogRecord, MemoryCluster, MemoryLog, OffsetStore, RecordLog, offset_key

TIMEOUT = 5.0
TOPIC = "connect-offsets"


@dataclass
class Env:
    cluster: MemoryCluster = field(default_factory=MemoryCluster)
    logs: list[MemoryLog] = field(default_factory=list)

    def factory(self) -> Callable[[Callable[[LogRecord], None]], RecordLog]:
        def make(on_record: Callable[[LogRecord], None]) -> RecordLog:
            memory_log = MemoryLog(TOPIC, on_record, partitions=25, cluster=self.cluster)
            self.logs.append(memory_log)
            return memory_log

        return make

    def new_store(self) -> OffsetStore:
        store = OffsetStore(self.factory())
        store.start(TIMEOUT)
        return store

    def raw(self, key: bytes | None, value: bytes | None) -> None:
        self.logs[0].send(key, value)

    def records(self) -> list[tuple[bytes | None, bytes | None]]:
        return [(r.key, r.value) for r in self.cluster.records(TOPIC)]


@pytest.fixture
def env() -> Env:
    return Env()


@pytest.fixture
def store(env: Env) -> Iterator[OffsetStore]:
    offset_store = env.new_store()
    yield offset_store
    offset_store.stop()


def test_put_get_and_format(env: Env, store: OffsetStore) -> None:
    store.put("c", [({"task": 0}, {"seq": 41}), ({"filename": "/tmp/a", "b": True}, {"position": 10})])
    assert store.get("c", {"task": 0}) == {"seq": 41}
    assert store.get("c", {"b": True, "filename": "/tmp/a"}) == {"position": 10}
    assert store.get("c", {"task": 1}) is None
    assert store.get("other", {"task": 0}) is None
    assert sorted(env.records()) == sorted(
        [
            (b'["c",{"task":0}]', b'{"seq":41}'),
            (b'["c",{"b":true,"filename":"/tmp/a"}]', b'{"position":10}'),
        ]
    )
    assert store.connectors() == ["c"]


def test_offsets_order_is_stable(store: OffsetStore) -> None:
    store.put("c", [({"task": n}, {"seq": n}) for n in (3, 1, 2)])
    listed = store.offsets("c")
    assert listed == sorted(listed, key=lambda pair: offset_key("c", pair[0]))
    assert {json.dumps(p, sort_keys=True) for p, _ in listed} == {json.dumps({"task": n}) for n in (1, 2, 3)}
    assert store.offsets("c") == listed


def test_tombstone_resets_partition(env: Env, store: OffsetStore) -> None:
    store.put("c", [({"task": 0}, {"seq": 1}), ({"task": 1}, {"seq": 2})])
    store.put("c", [({"task": 0}, None)])
    assert [v for k, v in env.records() if k == b'["c",{"task":0}]'] == [b'{"seq":1}', None]
    assert store.offsets("c") == [({"task": 1}, {"seq": 2})]
    store.put("c", [({"task": 1}, None)])
    assert store.offsets("c") == []
    assert store.connectors() == []


def test_json_null_value_reads_as_reset(env: Env, store: OffsetStore) -> None:
    store.put("c", [({"task": 0}, {"seq": 1})])
    env.raw(b'["c",{"task":0}]', b"null")
    store.read_to_end(TIMEOUT)
    assert store.get("c", {"task": 0}) is None


def test_keys_in_another_field_order_are_the_same_partition(env: Env, store: OffsetStore) -> None:
    # Kafka Connect serialises a Java HashMap, whose field order is not sorted.
    legacy = b'["mm",{"topic":"t","partition":3,"cluster":"a"}]'
    env.raw(legacy, b'{"offset":100}')
    store.read_to_end(TIMEOUT)
    partition = {"cluster": "a", "partition": 3, "topic": "t"}
    assert store.get("mm", partition) == {"offset": 100}
    assert store.offsets("mm") == [(partition, {"offset": 100})]
    # Writing it again moves it to the canonical spelling and tombstones the legacy one.
    store.put("mm", [(partition, {"offset": 200})])
    assert (legacy, None) in env.records()
    assert (b'["mm",{"cluster":"a","partition":3,"topic":"t"}]', b'{"offset":200}') in env.records()
    assert store.get("mm", partition) == {"offset": 200}
    # A restarted store, reading partitions in its own order, agrees.
    again = env.new_store()
    try:
        assert again.offsets("mm") == [(partition, {"offset": 200})]
    finally:
        again.stop()


def test_reset_tombstones_every_spelling(env: Env, store: OffsetStore) -> None:
    env.raw(b'["c",{"b":1,"a":2}]', b'{"o":1}')
    env.raw(b'["c", {"a": 2, "b": 1}]', b'{"o":2}')
    store.read_to_end(TIMEOUT)
    assert store.get("c", {"a": 2, "b": 1}) == {"o": 2}  # the latest spelling read wins
    store.put("c", [({"a": 2, "b": 1}, None)])
    tombstoned = {key for key, value in env.records() if value is None}
    assert tombstoned == {b'["c",{"b":1,"a":2}]', b'["c", {"a": 2, "b": 1}]', b'["c",{"a":2,"b":1}]'}
    assert store.offsets("c") == []
    again = env.new_store()
    try:
        assert again.offsets("c") == []
        assert again.connectors() == []
    finally:
        again.stop()


def test_malformed_records_are_skipped(env: Env, store: OffsetStore) -> None:
    store.put("c", [({"task": 0}, {"seq": 1})])
    for key, value in [
        (None, b'{"seq":9}'),
        (b"not json", b'{"seq":9}'),
        (b'{"c":{"task":0}}', b'{"seq":9}'),
        (b'["c"]', b'{"seq":9}'),
        (b'["c",{"task":0},1]', b'{"seq":9}'),
        (b'[1,{"task":0}]', b'{"seq":9}'),
        (b'["c",null]', b'{"seq":9}'),
        (b'["c",[1]]', b'{"seq":9}'),
        (b'["c",{"task":0}]', b"not json"),
        (b'["c",{"task":0}]', b"[1,2]"),
        (b'["c",{"task":NaN}]', b'{"seq":9}'),
    ]:
        env.raw(key, value)
    store.read_to_end(TIMEOUT)
    assert store.offsets("c") == [({"task": 0}, {"seq": 1})]
    assert store.connectors() == ["c"]


@pytest.mark.parametrize(
    ("partition", "offset", "message"),
    [
        ({"task": {"nested": 1}}, {"seq": 1}, "'task'"),
        ({"task": [1]}, {"seq": 1}, "'task'"),
        ({"task": 0}, {"seq": {"deep": 1}}, "'seq'"),
        ({"task": 0}, {"pos": [1, 2]}, "'pos'"),
        ({1: 0}, {"seq": 1}, "key 1"),
        ({"task": 0}, {"seq": float("nan")}, "'seq'"),
    ],
)
def test_non_primitive_values_are_rejected(
    store: OffsetStore, partition: dict[Any, Any], offset: dict[str, Any], message: str
) -> None:
    with pytest.raises(ValueError, match=message):
        store.put("c", [({"ok": 1}, {"ok": 1}), (partition, offset)])
    # Validation happens before any write.
    assert store.offsets("c") == []


def test_empty_connector_name_is_rejected(store: OffsetStore) -> None:
    with pytest.raises(ValueError, match="non-empty"):
        store.put("", [({"a": 1}, {"b": 2})])


primitives = (
    st.none()
    | st.booleans()
    | st.integers(-(2**63), 2**63 - 1)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=20)
)
maps = st.dictionaries(st.text(max_size=10), primitives, max_size=4)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    connector=st.text(min_size=1, max_size=10),
    offsets=st.lists(st.tuples(maps, st.none() | maps), max_size=8),
)
def test_round_trip(connector: str, offsets: list[tuple[dict[str, Any], dict[str, Any] | None]]) -> None:
    env = Env()
    writer = env.new_store()
    try:
        writer.put(connector, offsets)
        expected: dict[bytes, tuple[dict[str, Any], dict[str, Any]] | None] = {}
        for partition, offset in offsets:
            expected[offset_key(connector, partition)] = None if offset is None else (partition, offset)
        live = [expected[k] for k in sorted(expected) if expected[k] is not None]
        reader = env.new_store()
        try:
            for store in (writer, reader):
                assert _typed(store.offsets(connector)) == _typed(live)
                for partition, _ in offsets:
                    final = expected[offset_key(connector, partition)]
                    assert _typed(store.get(connector, partition)) == _typed(
                        None if final is None else final[1]
                    )
        finally:
            reader.stop()
    finally:
        writer.stop()


def _typed(value: object) -> str:
    """Compare through JSON so that 1, 1.0 and True are told apart, as they are on the wire."""
    return json.dumps(value, sort_keys=True)
