"""A sink connector's offset change sends an Admin API request again when one gets no answer, within
the store's time: one request lost on a closed connection must not use up the caller's deadline."""

from __future__ import annotations

import asyncio
from concurrent.futures import Future
from types import SimpleNamespace
from typing import Any, cast

import pytest
from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import AdminClient

from sluiceway_server.storage import (
    ConnectorOffsetStorage,
    MemoryLog,
    OffsetStore,
    RecordLog,
    connector_offsets,
)

TOPIC = "orders"


class _Admin:
    """The two Admin API calls an alter makes: the group is not found (so it has no members), and
    the first `unanswered` offset commits never get an answer while later ones succeed."""

    def __init__(self, unanswered: int, failure: int | None = None) -> None:
        self.unanswered = unanswered
        self.failure = failure  # a KafkaError code every commit fails with, when set
        self.alter_timeouts: list[float] = []
        self.committed: list[tuple[str, int, int]] = []

    def describe_consumer_groups(self, groups: list[str], request_timeout: float) -> dict[str, Future[Any]]:
        future: Future[Any] = Future()
        future.set_exception(KafkaException(KafkaError(KafkaError.GROUP_ID_NOT_FOUND)))
        return {groups[0]: future}

    def alter_consumer_group_offsets(
        self, requests: list[Any], request_timeout: float
    ) -> dict[str, Future[Any]]:
        self.alter_timeouts.append(request_timeout)
        request = requests[0]
        future: Future[Any] = Future()
        if self.failure is not None:
            future.set_exception(KafkaException(KafkaError(self.failure)))
        elif len(self.alter_timeouts) > self.unanswered:
            partitions = request.topic_partitions
            self.committed.extend((tp.topic, tp.partition, tp.offset) for tp in partitions)
            future.set_result(SimpleNamespace(topic_partitions=[SimpleNamespace(error=None)]))
        return {request.group_id: future}


def _storage(admin: _Admin | list[_Admin], store_timeout: float) -> ConnectorOffsetStorage:
    """A storage whose admin clients are `admin` (each new client the next of a list)."""
    clients = iter(admin) if isinstance(admin, list) else None

    def memory_log(on_record: Any) -> RecordLog:
        return MemoryLog("offsets", cast(Any, on_record))

    def no_own_store(own: object) -> OffsetStore:
        raise AssertionError("a sink's offsets are its consumer group's")

    return ConnectorOffsetStorage(
        worker_config={"bootstrap.servers": "127.0.0.1:1", "offset.storage.topic": "offsets"},
        offset_store=OffsetStore(memory_log),
        offset_store_factory=no_own_store,
        admin_factory=lambda settings: cast(AdminClient, admin if clients is None else next(clients)),
        store_timeout=store_timeout,
    )


def test_an_alter_request_without_an_answer_is_sent_again(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(connector_offsets, "_ATTEMPT_TIMEOUT", 0.3)
    admin = _Admin(unanswered=1)
    storage = _storage(admin, store_timeout=5.0)

    asyncio.run(storage.write_sink("lake", {"connector.class": "SparkFileSink"}, {(TOPIC, 0): 7}))

    assert admin.committed == [(TOPIC, 0, 7)]
    assert admin.alter_timeouts == [0.3, 0.3]


def test_an_alter_never_answered_fails_once_the_store_time_is_spent(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(connector_offsets, "_ATTEMPT_TIMEOUT", 0.3)
    admin = _Admin(unanswered=1000)
    storage = _storage(admin, store_timeout=1.0)

    with pytest.raises(TimeoutError):
        asyncio.run(storage.write_sink("lake", {"connector.class": "SparkFileSink"}, {(TOPIC, 0): 7}))

    assert admin.committed == []
    assert 2 <= len(admin.alter_timeouts) <= 4
    assert all(timeout <= 0.3 for timeout in admin.alter_timeouts)


@pytest.mark.parametrize("failure", [KafkaError._TRANSPORT, KafkaError._TIMED_OUT])
def test_the_attempt_after_a_connection_failure_gets_a_new_admin_client(failure: int) -> None:
    # Tansu closes the connection of a commit to a group it has just deleted, and the client that saw
    # the close can go without answers for that group longer than the caller's deadline.
    broken, fresh = _Admin(unanswered=0, failure=failure), _Admin(unanswered=0)
    storage = _storage([broken, fresh], store_timeout=5.0)

    asyncio.run(storage.write_sink("lake", {"connector.class": "SparkFileSink"}, {(TOPIC, 0): 7}))

    assert len(broken.alter_timeouts) == 1 and broken.committed == []
    assert fresh.committed == [(TOPIC, 0, 7)]
    # later calls keep the new client
    asyncio.run(storage.write_sink("lake", {"connector.class": "SparkFileSink"}, {(TOPIC, 0): 9}))
    assert fresh.committed == [(TOPIC, 0, 7), (TOPIC, 0, 9)]


def test_a_coordinator_still_loading_keeps_the_admin_client() -> None:
    loading = _Admin(unanswered=0, failure=KafkaError.COORDINATOR_LOAD_IN_PROGRESS)
    storage = _storage([loading], store_timeout=0.5)  # a second client would end the list

    with pytest.raises(KafkaException):
        asyncio.run(storage.write_sink("lake", {"connector.class": "SparkFileSink"}, {(TOPIC, 0): 7}))

    assert len(loading.alter_timeouts) >= 2
