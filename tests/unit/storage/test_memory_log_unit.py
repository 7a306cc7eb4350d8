"""MemoryLog: the in-memory RecordLog keeps KafkaLog's ordering and waiting semantics."""

from __future__ import annotations

import threading
from collections.abc import Iterator

import pytest

from sluiceway_server.storage import LogPosition, LogRecord, LogStoppedError, MemoryCluster, MemoryLog


@pytest.fixture
def seen() -> list[LogRecord]:
    return []


@pytest.fixture
def log(seen: list[LogRecord]) -> Iterator[MemoryLog]:
    memory_log = MemoryLog("topic", seen.append, partitions=3)
    memory_log.start(5)
    yield memory_log
    memory_log.stop()


def test_send_before_start_fails() -> None:
    with pytest.raises(LogStoppedError):
        MemoryLog("t", lambda r: None).send(b"k", b"v")


def test_records_delivered_in_order_per_partition(log: MemoryLog, seen: list[LogRecord]) -> None:
    for i in range(200):
        log.send(f"k{i % 7}".encode(), str(i).encode())
    log.read_to_end(5)
    assert len(seen) == 200
    for partition in range(3):
        offsets = [r.offset for r in seen if r.partition == partition]
        assert offsets == list(range(len(offsets)))
    # Same key, same partition: per-key order is the send order.
    values = [int(r.value or b"") for r in seen if r.key == b"k3"]
    assert values == sorted(values)
    assert len({r.partition for r in seen if r.key == b"k3"}) == 1


def test_wait_for_and_explicit_partition(log: MemoryLog, seen: list[LogRecord]) -> None:
    position = log.send(b"k", None, partition=2).result()
    assert position == LogPosition(2, 0)
    log.wait_for(position, 5)
    assert seen[-1] == LogRecord(2, 0, b"k", None, seen[-1].timestamp_ms)
    with pytest.raises(ValueError, match="out of range"):
        log.send(b"k", b"v", partition=3)


def test_callbacks_run_on_another_thread(log: MemoryLog) -> None:
    threads: list[threading.Thread] = []
    other = MemoryLog("t2", lambda r: threads.append(threading.current_thread()))
    other.start(5)
    other.wait_for(other.send(b"k", b"v").result(), 5)
    other.stop()
    assert threads == [threads[0]]
    assert threads[0] is not threading.current_thread()


def test_failing_callback_does_not_stop_delivery() -> None:
    seen: list[int] = []

    def on_record(record: LogRecord) -> None:
        if record.value == b"bad":
            raise RuntimeError("boom")
        seen.append(record.offset)

    memory_log = MemoryLog("t", on_record)
    memory_log.start(5)
    memory_log.send(b"a", b"bad")
    memory_log.wait_for(memory_log.send(b"b", b"good").result(), 5)
    memory_log.stop()
    assert seen == [1]


def test_shared_cluster_second_log_reads_history_and_live_writes() -> None:
    cluster = MemoryCluster()
    first: list[LogRecord] = []
    second: list[LogRecord] = []
    a = MemoryLog("t", first.append, partitions=2, cluster=cluster)
    a.start(5)
    for i in range(10):
        a.send(str(i).encode(), b"x")
    # Partition count comes from the topic, not from the second log's argument.
    b = MemoryLog("t", second.append, partitions=5, cluster=cluster)
    b.start(5)
    assert len(second) == 10
    a.send(b"late", b"y")
    b.read_to_end(5)
    a.read_to_end(5)
    assert [(r.partition, r.offset) for r in sorted(first, key=lambda r: (r.partition, r.offset))] == [
        (r.partition, r.offset) for r in sorted(second, key=lambda r: (r.partition, r.offset))
    ]
    assert len(cluster.records("t")) == 11
    a.stop()
    b.stop()


def test_stopped_log_refuses_work(log: MemoryLog) -> None:
    log.stop()
    with pytest.raises(LogStoppedError):
        log.send(b"k", b"v")
    with pytest.raises(LogStoppedError):
        log.read_to_end(1)
    with pytest.raises(RuntimeError):
        log.start(1)


def test_wait_for_times_out_for_unwritten_position(log: MemoryLog) -> None:
    with pytest.raises(TimeoutError):
        log.wait_for(LogPosition(0, 5), 0.05)


def test_read_lag_counts_what_the_callbacks_have_not_seen_yet() -> None:
    release = threading.Event()

    def held(record: LogRecord) -> None:
        release.wait(5)

    log = MemoryLog("slow", held, partitions=2)
    log.start(5)
    try:
        for i in range(4):
            log.send(b"k", str(i).encode(), partition=i % 2)
        # The first callback holds the log's thread: at least the three records after it wait.
        assert log.read_lag() >= 3
        release.set()
        log.read_to_end(5)
        assert log.read_lag() == 0
    finally:
        release.set()
        log.stop()
