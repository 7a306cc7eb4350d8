"""An in-memory RecordLog for unit tests, with the ordering and threading of KafkaLog: records are
delivered in order per partition by a background thread, never from inside send()."""

from __future__ import annotations

import concurrent.futures
import itertools
import logging
import threading
import time
import zlib
from collections.abc import Callable

from sluiceway_server.storage.record_log import LogPosition, LogRecord, LogStoppedError

log = logging.getLogger(__name__)


class MemoryCluster:
    """Topics shared by MemoryLogs, standing in for a broker: several stores (replicas) on one topic,
    or a store and its restarted successor, see the same records."""

    def __init__(self) -> None:
        # One condition for the whole cluster: appends and consumption progress both signal it.
        self.cond = threading.Condition()
        self._topics: dict[str, list[list[LogRecord]]] = {}

    def partitions(self, topic: str, create_with: int) -> list[list[LogRecord]]:
        """The topic's partitions, created with `create_with` partitions when missing (existing topics
        keep their partition count, as on a broker)."""
        with self.cond:
            parts = self._topics.get(topic)
            if parts is None:
                parts = [[] for _ in range(create_with)]
                self._topics[topic] = parts
            return parts

    def records(self, topic: str) -> list[LogRecord]:
        """Every record of the topic, partition by partition, in offset order."""
        with self.cond:
            return [record for part in self._topics.get(topic, []) for record in part]


class MemoryLog:
    """RecordLog in memory. Same semantics as KafkaLog: the callback runs on the log's own thread,
    `read_to_end` and `wait_for` return once callbacks ran for the records concerned."""

    def __init__(
        self,
        topic: str,
        on_record: Callable[[LogRecord], None],
        partitions: int = 1,
        *,
        cluster: MemoryCluster | None = None,
    ) -> None:
        if partitions < 1:
            raise ValueError("partitions must be >= 1")
        self.topic = topic
        self.cluster = cluster if cluster is not None else MemoryCluster()
        self._on_record = on_record
        self._partition_count = partitions
        self._parts: list[list[LogRecord]] = []
        self._consumed: list[int] = []
        self._round_robin = itertools.count()
        self._running = False
        self._stopped = False
        self._thread: threading.Thread | None = None

    def start(self, timeout: float) -> None:
        if self._running or self._stopped:
            raise RuntimeError(f"memory log {self.topic} already started (a stopped log cannot be restarted)")
        cond = self.cluster.cond
        with cond:
            self._parts = self.cluster.partitions(self.topic, self._partition_count)
            self._consumed = [0] * len(self._parts)
            self._running = True
        self._thread = threading.Thread(target=self._deliver, name=f"memory-log-{self.topic}", daemon=True)
        self._thread.start()
        self.read_to_end(timeout)

    def stop(self) -> None:
        with self.cluster.cond:
            self._running = False
            self._stopped = True
            self.cluster.cond.notify_all()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout=10)
        self._thread = None

    def send(
        self, key: bytes | None, value: bytes | None, partition: int | None = None
    ) -> concurrent.futures.Future[LogPosition]:
        with self.cluster.cond:
            if not self._running:
                raise LogStoppedError(f"memory log {self.topic} is not running")
            count = len(self._parts)
            if partition is None:
                # Stable per key, like a real partitioner; keyless records spread round robin.
                partition = (zlib.crc32(key) if key is not None else next(self._round_robin)) % count
            elif not 0 <= partition < count:
                raise ValueError(f"partition {partition} out of range for {self.topic} ({count} partitions)")
            part = self._parts[partition]
            record = LogRecord(partition, len(part), key, value, int(time.time() * 1000))
            part.append(record)
            self.cluster.cond.notify_all()
        future: concurrent.futures.Future[LogPosition] = concurrent.futures.Future()
        future.set_result(LogPosition(partition, record.offset))
        return future

    def flush(self, timeout: float) -> None:
        """Records are acknowledged when appended: nothing is ever in flight."""

    def read_to_end(self, timeout: float) -> None:
        with self.cluster.cond:
            targets = [len(part) for part in self._parts]
            self._wait(
                lambda: all(c >= t for c, t in zip(self._consumed, targets, strict=True)),
                timeout,
                f"memory log {self.topic}: not at the end after {timeout:.1f}s",
            )

    def read_lag(self) -> int:
        with self.cluster.cond:
            pairs = zip(self._parts, self._consumed, strict=True)
            return sum(len(part) - consumed for part, consumed in pairs)

    def wait_for(self, position: LogPosition, timeout: float) -> None:
        with self.cluster.cond:
            self._wait(
                lambda: self._consumed[position.partition] > position.offset,
                timeout,
                f"memory log {self.topic}: {position} not read back after {timeout:.1f}s",
            )

    def records(self) -> list[LogRecord]:
        """Everything in the topic (for tests that check the raw format)."""
        return self.cluster.records(self.topic)

    def _wait(self, done: Callable[[], bool], timeout: float, message: str) -> None:
        # Called with the cluster condition held.
        if threading.current_thread() is self._thread:
            # The thread that would make progress is the one waiting.
            raise RuntimeError(
                f"memory log {self.topic}: cannot wait for the log from its own record callback"
            )
        deadline = time.monotonic() + timeout
        while True:
            if not self._running:
                raise LogStoppedError(f"memory log {self.topic} is not running")
            if done():
                return
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError(message)
            self.cluster.cond.wait(left)

    def _deliver(self) -> None:
        cond = self.cluster.cond
        while True:
            with cond:
                while self._running and all(
                    c >= len(part) for c, part in zip(self._consumed, self._parts, strict=True)
                ):
                    cond.wait()
                if not self._running:
                    return
                pending = [part[self._consumed[i] :] for i, part in enumerate(self._parts)]
            for records in pending:
                for record in records:
                    if not self._running:
                        return  # stopped: no callbacks after stop()
                    try:
                        self._on_record(record)
                    except Exception:
                        log.exception(
                            "memory log %s: record callback failed at %d/%d",
                            self.topic,
                            record.partition,
                            record.offset,
                        )
                    with cond:
                        self._consumed[record.partition] = record.offset + 1
                        cond.notify_all()
