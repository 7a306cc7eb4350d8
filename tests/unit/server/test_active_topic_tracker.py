"""ActiveTopicTracker (KIP-558) on an in-memory status topic: what is recorded once, what a reset
and a deletion remove, and what the worker settings refuse."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence

import pytest

from sluiceway_server.errors import NotFoundError, PermissionDeniedError
from sluiceway_server.herder.active_topics import ActiveTopicsReset, ActiveTopicTracker
from sluiceway_server.storage import MemoryLog, StatusStore, TopicStatusRecord


class Configs:
    """The config topic as the tracker sees it: which connectors exist."""

    def __init__(self, *names: str) -> None:
        self.names = set(names)

    def connector_config(self, connector: str) -> Mapping[str, str] | None:
        return {"connector.class": "DataGenSource"} if connector in self.names else None


class CountingStatusStore(StatusStore):
    def __init__(self) -> None:
        super().__init__(lambda on_record: MemoryLog("status", on_record))
        self.writes = 0

    def put_topics(self, records: Sequence[TopicStatusRecord], timeout: float = 30.0) -> None:
        self.writes += 1
        super().put_topics(records, timeout)


def _tracker(
    configs: Configs, *, enabled: bool = True, allow_reset: bool = True
) -> tuple[ActiveTopicTracker, CountingStatusStore]:
    store = CountingStatusStore()
    store.start(5)
    tracker = ActiveTopicTracker(
        status_store=store,
        snapshot=lambda: configs,
        enabled=enabled,
        allow_reset=allow_reset,
        store_timeout=5,
    )
    return tracker, store


def test_each_topic_is_recorded_once_whichever_task_reports_it() -> None:
    tracker, store = _tracker(Configs("c"))

    async def scenario() -> None:
        await asyncio.gather(
            tracker.record("c", 0, ["orders", "audit"]),
            tracker.record("c", 1, ["orders"]),
            tracker.record("c", 1, ["orders", "audit", ""]),
        )

    asyncio.run(scenario())
    view = tracker.get("c")
    assert sorted(view.topics) == ["audit", "orders"]
    assert view.connector_exists
    assert store.writes == 1
    assert {r.topic: r.task for r in store.topics("c")} == {"audit": 0, "orders": 0}


def test_reports_for_a_connector_that_does_not_exist_are_dropped() -> None:
    tracker, store = _tracker(Configs())
    asyncio.run(tracker.record("gone", 0, ["orders"]))
    assert store.topics("gone") == []
    with pytest.raises(NotFoundError):
        tracker.get("gone")


def test_reset_empties_the_set_tells_the_executors_and_the_set_refills() -> None:
    configs = Configs("c")
    tracker, _ = _tracker(configs)
    resets: list[str] = []
    tracker.on_reset = resets.append

    async def scenario() -> ActiveTopicsReset:
        await tracker.record("c", 0, ["orders", "audit"])
        outcome = await tracker.reset("c")
        assert tracker.get("c").topics == ()
        await tracker.record("c", 0, ["orders"])
        return outcome

    assert asyncio.run(scenario()) == ActiveTopicsReset("c", ("audit", "orders"), connector_exists=True)
    assert resets == ["c"]
    assert tracker.get("c").topics == ("orders",)


def test_a_deleted_connectors_recorded_set_can_be_read_and_reset() -> None:
    configs = Configs("c")
    tracker, _ = _tracker(configs)
    asyncio.run(tracker.record("c", 0, ["orders"]))
    configs.names.clear()

    view = tracker.get("c")
    assert (view.topics, view.connector_exists) == (("orders",), False)
    assert asyncio.run(tracker.reset("c")) == ActiveTopicsReset("c", ("orders",), connector_exists=False)
    with pytest.raises(NotFoundError):
        tracker.get("c")
    # Again, with nothing left: the same success, nothing removed (KIP-558: reapplied after deletion).
    assert asyncio.run(tracker.reset("c")) == ActiveTopicsReset("c", (), connector_exists=False)


def test_a_reset_of_a_name_that_never_was_a_connector_succeeds_and_writes_nothing() -> None:
    tracker, store = _tracker(Configs())
    resets: list[str] = []
    tracker.on_reset = resets.append
    assert asyncio.run(tracker.reset("never")) == ActiveTopicsReset("never", (), connector_exists=False)
    assert store.topics("never") == []
    # No executor runs a task of a connector that does not exist: none is told to forget.
    assert resets == []


def test_remove_drops_the_set_even_with_tracking_disabled_now() -> None:
    store = CountingStatusStore()
    store.start(5)
    enabled = ActiveTopicTracker(status_store=store, snapshot=lambda: Configs("c"))
    asyncio.run(enabled.record("c", 0, ["orders"]))
    disabled = ActiveTopicTracker(status_store=store, snapshot=Configs, enabled=False)
    asyncio.run(disabled.remove("c"))
    assert store.topics("c") == []


def test_tracking_disabled_records_nothing_and_refuses_reads_and_resets() -> None:
    tracker, store = _tracker(Configs("c"), enabled=False)
    asyncio.run(tracker.record("c", 0, ["orders"]))
    assert store.writes == 0
    with pytest.raises(PermissionDeniedError) as read:
        tracker.get("c")
    assert read.value.reason == "TOPIC_TRACKING_DISABLED"
    with pytest.raises(PermissionDeniedError) as reset:
        asyncio.run(tracker.reset("c"))
    assert reset.value.reason == "TOPIC_TRACKING_DISABLED"


def test_reset_disabled_still_records_and_reads() -> None:
    tracker, _ = _tracker(Configs("c"), allow_reset=False)
    asyncio.run(tracker.record("c", 0, ["orders"]))
    assert tracker.get("c").topics == ("orders",)
    with pytest.raises(PermissionDeniedError) as reset:
        asyncio.run(tracker.reset("c"))
    assert reset.value.reason == "TOPIC_TRACKING_RESET_DISABLED"
    assert tracker.get("c").topics == ("orders",)
