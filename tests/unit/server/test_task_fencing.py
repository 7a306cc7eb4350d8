"""Fencing tasks' offset commits: the TaskFencer takes over each task's transactional id on the
cluster its offsets live on (with a stand-in producer), retries what Kafka says is retriable, and
gives up on what is not; KIP-875 alter and reset fence every task of the connector that may have
committed before any offset is written, and write nothing when fencing fails."""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine, Iterable, Mapping
from typing import Any, TypeVar, cast

import pytest
from confluent_kafka import KafkaError, KafkaException, Producer

from sluiceway_server.errors import UnavailableError
from sluiceway_server.model import State, TargetState
from sluiceway_server.storage import MemoryLog, StatusStore, TaskStatusRecord
from sluiceway_server.storage.task_fencing import TaskFencer
from tests.unit.server.test_herder_memory import CONTROLLABLE, Bed, run

WORKER = {
    "bootstrap.servers": "worker:9092",
    "group.id": "cluster-a",
    "security.protocol": "PLAINTEXT",
    "producer.linger.ms": "5",
    "admin.request.timeout.ms": "1000",
}


T = TypeVar("T")


def run_async(coroutine: Coroutine[Any, Any, T]) -> T:
    return asyncio.run(coroutine)


class FakeProducer:
    """Stands in for confluent_kafka.Producer: init_transactions raises the queued errors first."""

    def __init__(self, config: dict[str, Any], errors: list[KafkaError]) -> None:
        self.config = config
        self.errors = errors
        self.inits = 0
        self.closed = False

    def list_topics(self, topic: str | None = None, timeout: float = -1) -> object:
        return None

    def init_transactions(self, timeout: float = -1) -> None:
        self.inits += 1
        if self.errors:
            raise KafkaException(self.errors.pop(0))

    def close(self) -> bool:
        self.closed = True
        return True


class Producers:
    def __init__(self, errors: list[KafkaError] | None = None) -> None:
        self.made: list[FakeProducer] = []
        self.errors = errors or []

    def __call__(self, config: dict[str, Any]) -> Producer:
        producer = FakeProducer(config, self.errors)
        self.made.append(producer)
        return cast(Producer, producer)


def _fencer(producers: Producers, **kwargs: Any) -> TaskFencer:
    return TaskFencer(WORKER, producer_factory=producers, timeout=5.0, **kwargs)


def test_each_task_gets_its_transactional_id_on_the_cluster_of_its_offsets() -> None:
    producers = Producers()
    fencer = _fencer(producers)
    source = {"connector.class": "X", "producer.override.acks": "all"}
    run_async(fencer.fence("src", source, [1, 0, 1], source=True))
    assert [p.config["transactional.id"] for p in producers.made] == ["cluster-a-src-0", "cluster-a-src-1"]
    first = producers.made[0].config
    assert first["bootstrap.servers"] == "worker:9092" and first["linger.ms"] == "5"
    assert all(p.inits == 1 and p.closed for p in producers.made)
    # A sink task commits to its consumer group on the connector's admin cluster.
    sink = {"connector.class": "Y", "admin.override.bootstrap.servers": "other:9092"}
    run_async(fencer.fence("snk", sink, [0], source=False))
    config = producers.made[-1].config
    assert config["transactional.id"] == "cluster-a-snk-0"
    assert config["bootstrap.servers"] == "other:9092" and "linger.ms" not in config
    run_async(fencer.fence("none", source, [], source=True))
    assert len(producers.made) == 3


def test_retriable_errors_are_retried_and_others_raised() -> None:
    producers = Producers([KafkaError(KafkaError.COORDINATOR_LOAD_IN_PROGRESS, "loading", retriable=True)])
    run_async(_fencer(producers).fence("c", {}, [0], source=True))
    assert producers.made[0].inits == 2
    denied = Producers([KafkaError(KafkaError.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, "denied")])
    with pytest.raises(KafkaException):
        run_async(_fencer(denied).fence("c", {}, [0, 1], source=True))
    assert len(denied.made) == 1 and denied.made[0].closed


def test_a_connector_is_fenced_up_to_its_largest_known_task() -> None:
    store = StatusStore(lambda on_record: MemoryLog("status", on_record))
    store.start(5)
    store.put_task(TaskStatusRecord("c", 4, State.RUNNING, None, "e1", 1), 5)
    producers = Producers()
    fencer = _fencer(producers, status_store=store)
    assert run_async(fencer.fence_connector("c", {"tasks.max": "2"}, task_count=0, source=True)) == list(
        range(5)
    )
    assert run_async(fencer.fence_connector("d", {"tasks.max": "3"}, task_count=1, source=True)) == [0, 1, 2]
    assert run_async(fencer.fence_connector("d", {}, task_count=2, source=True)) == [0, 1]
    store.stop()


class RecordingFencer(TaskFencer):
    """Checks that nothing was written to the offsets topic when fencing happens."""

    def __init__(self, bed: Bed, fail: bool = False) -> None:
        super().__init__({"bootstrap.servers": "memory", "group.id": "g"}, status_store=bed.status_store)
        self.bed = bed
        self.fail = fail
        self.calls: list[tuple[str, list[int], bool, int]] = []

    async def fence(
        self, connector: str, connector_config: Mapping[str, str], tasks: Iterable[int], *, source: bool
    ) -> None:
        if self.fail:
            raise KafkaException(KafkaError(KafkaError._ALL_BROKERS_DOWN, "down"))
        self.calls.append((connector, list(tasks), source, len(self.bed.logs["offsets"].records())))


def test_alter_and_reset_fence_the_tasks_before_writing() -> None:
    async def test(bed: Bed) -> None:
        fencer = RecordingFencer(bed)
        bed.herder.offsets.fencer = fencer
        await bed.herder.create_connector(
            "c",
            {"connector.class": CONTROLLABLE, "tasks.max": "3", "alter.offsets": "ack"},
            TargetState.STOPPED,
        )
        await bed.herder.offsets.alter("c", [({"file": "a"}, {"line": 1})])
        assert fencer.calls == [("c", [0, 1, 2], True, 0)]
        written = len(bed.logs["offsets"].records())
        assert written > 0
        await bed.herder.offsets.reset("c")
        assert fencer.calls[1] == ("c", [0, 1, 2], True, written)

    run(test)


def test_a_change_whose_fencing_fails_writes_nothing() -> None:
    async def test(bed: Bed) -> None:
        bed.herder.offsets.fencer = RecordingFencer(bed, fail=True)
        await bed.herder.create_connector(
            "c", {"connector.class": CONTROLLABLE, "alter.offsets": "ack"}, TargetState.STOPPED
        )
        with pytest.raises(UnavailableError):
            await bed.herder.offsets.alter("c", [({"file": "a"}, {"line": 1})])
        with pytest.raises(UnavailableError):
            await bed.herder.offsets.reset("c")
        assert bed.logs["offsets"].records() == []

    run(test)
