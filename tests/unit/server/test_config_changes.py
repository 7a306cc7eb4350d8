"""ConfigChanges: the connectors changed between two positions of the config topic, as long as the
journal keeps them; and ClusterConfigState.changed_since over a real store's records."""

from __future__ import annotations

from collections.abc import Callable

from sluiceway_server.model import TargetState
from sluiceway_server.storage import ConfigStore
from sluiceway_server.storage.config_changes import ConfigChanges
from sluiceway_server.storage.memory_log import MemoryLog
from sluiceway_server.storage.record_log import LogRecord, RecordLog


def test_since_gives_the_connectors_noted_after_start_up_to_end() -> None:
    changes = ConfigChanges()
    for position, name in [(1, "a"), (2, "b"), (3, "a"), (5, "c")]:
        changes.note(position, name)
    assert changes.since(0, 5) == {"a", "b", "c"}
    assert changes.since(1, 3) == {"b", "a"}
    assert changes.since(3, 4) == set()
    assert changes.since(3, 5) == {"c"}
    assert changes.since(5, 5) == set()
    assert changes.since(5, 3) == set()


def test_a_record_read_again_is_noted_at_the_newest_position() -> None:
    changes = ConfigChanges()
    changes.note(5, "a")
    changes.note(3, "b")  # read again after a seek back
    assert changes.since(4, 5) == {"a", "b"}
    changes.note(6, "c")
    assert changes.since(5, 6) == {"c"}


def test_a_start_older_than_the_journal_keeps_is_not_known() -> None:
    changes = ConfigChanges(keep=3)
    for position in range(1, 8):
        changes.note(position, f"c{position}")
    # Seven notes over a bound of twice three: the oldest four were dropped.
    assert changes.since(3, 7) is None
    assert changes.since(4, 7) == {"c5", "c6", "c7"}
    assert changes.since(6, 7) == {"c7"}


def _memory(on_record: Callable[[LogRecord], None]) -> RecordLog:
    return MemoryLog("configs", on_record)


def test_a_snapshot_names_the_connectors_changed_since_an_earlier_one() -> None:
    store = ConfigStore(_memory)
    store.start(5)
    try:
        store.put_connector_config("a", {"connector.class": "X", "name": "a"})
        store.put_connector_config("b", {"connector.class": "X", "name": "b"})
        first = store.snapshot()
        assert first.changed_since(0) == {"a", "b"}
        assert first.changed_since(first.position) == set()
        store.put_task_configs("a", [{"task.id": "0"}])
        store.put_target_state("b", TargetState.PAUSED)
        store.put_restart_request("b", include_tasks=True, only_failed=False)  # changes nothing
        second = store.snapshot()
        assert second.changed_since(first.position) == {"a", "b"}
        store.put_restart_request("a", include_tasks=False, only_failed=False)
        store.remove_connector_config("b")
        third = store.snapshot()
        assert third.changed_since(second.position) == {"b"}
        # A later snapshot's position is not an earlier one: nothing is known.
        assert first.changed_since(third.position) is None
    finally:
        store.stop()
