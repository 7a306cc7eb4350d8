"""What the election reads of the members' records (storage/cluster_store.py): when each member's
latest record was read, and whether it is the tombstone of a clean stop."""

from __future__ import annotations

import time
from typing import Any, cast

from sluiceway_server.storage import MemoryLog, RecordLog
from sluiceway_server.storage.cluster_store import ClusterStore, MemberRecord


def _store() -> ClusterStore:
    def memory_log(on_record: Any) -> RecordLog:
        return MemoryLog("cluster", cast(Any, on_record))

    store = ClusterStore(memory_log)
    store.start(5.0)
    return store


def test_a_members_record_is_seen_and_its_tombstone_marks_it_departed() -> None:
    store = _store()
    assert store.member_seen("a:1") is None and not store.departed("a:1")

    before = time.monotonic()
    store.put_member(MemberRecord("a:1", "a:1", "1", int(time.time() * 1000))).result(5)
    store.read_to_end(5)
    seen = store.member_seen("a:1")
    assert seen is not None and seen >= before and not store.departed("a:1")

    store.remove_member("a:1", 5)
    store.read_to_end(5)
    assert store.member_seen("a:1") is None and store.departed("a:1")

    # started again: no longer departed
    store.put_member(MemberRecord("a:1", "a:1", "1", int(time.time() * 1000))).result(5)
    store.read_to_end(5)
    assert store.member_seen("a:1") is not None and not store.departed("a:1")
    assert not store.departed("b:2")
