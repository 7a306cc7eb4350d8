"""The source-offsets topic, in Kafka Connect's format (docs/ARCHITECTURE.md §5; Kafka's
KafkaOffsetBackingStore, KIP-875).

Key: JSON `["{connector}", {source partition}]`; value: JSON offset map; tombstone = reset.

Kafka keeps offsets by raw key bytes, so a partition written with its fields in another order (Kafka
Connect serialises a Java map in hash order) is a different record, possibly on another partition of
the topic. We write keys with sorted fields, index records by that canonical form, and remember every
raw spelling seen for a source partition: a write also tombstones the other spellings, so that after
any of our writes exactly one spelling holds a value and re-reading the topic in any partition order
gives the same answer."""

from __future__ import annotations

import itertools
import logging
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from sluiceway.common.offsets import source_offset_key, source_offset_value
from sluiceway.common.retry import Deadline
from sluiceway_server.storage import serde
from sluiceway_server.storage.record_log import LogPosition, LogRecord, RecordLog

log = logging.getLogger(__name__)


def offset_key(connector: str, partition: Mapping[str, Any]) -> bytes:
    """The canonical key (the one executors commit with): compact JSON with sorted fields."""
    return source_offset_key(connector, partition)


@dataclass(frozen=True)
class _Entry:
    sequence: int  # consumption order, to choose between spellings Kafka Connect left behind
    partition: dict[str, Any]
    offset: dict[str, Any]


class OffsetStore:
    """Materialises the offsets topic and writes to it; put() waits until its records were read back."""

    def __init__(self, log_factory: Callable[[Callable[[LogRecord], None]], RecordLog]) -> None:
        self._lock = threading.Lock()
        self._sequence = itertools.count()
        # connector -> canonical key -> raw key bytes -> live entry (tombstoned spellings are dropped)
        self._entries: dict[str, dict[bytes, dict[bytes, _Entry]]] = {}
        self._log = log_factory(self._on_record)

    def start(self, timeout: float) -> None:
        self._log.start(timeout)

    def stop(self) -> None:
        self._log.stop()

    def read_to_end(self, timeout: float) -> None:
        self._log.read_to_end(timeout)

    def read_lag(self) -> int:
        """Records of its topic written and not read yet (RecordLog.read_lag)."""
        return self._log.read_lag()

    # -- reads ----------------------------------------------------------------------------------

    def offsets(self, connector: str) -> list[tuple[dict[str, Any], dict[str, Any]]]:
        """(partition, offset) pairs of the connector, ordered by canonical key; reset partitions absent."""
        with self._lock:
            by_key = self._entries.get(connector, {})
            result = []
            for canonical in sorted(by_key):
                entry = _current(by_key[canonical])
                if entry is not None:
                    result.append((dict(entry.partition), dict(entry.offset)))
            return result

    def get(self, connector: str, partition: Mapping[str, Any]) -> dict[str, Any] | None:
        serde.check_primitive_map("source partition", partition)
        canonical = offset_key(connector, partition)
        with self._lock:
            entry = _current(self._entries.get(connector, {}).get(canonical, {}))
            return None if entry is None else dict(entry.offset)

    def connectors(self) -> list[str]:
        with self._lock:
            return sorted(c for c, by_key in self._entries.items() if by_key)

    # -- writes ---------------------------------------------------------------------------------

    def put(
        self,
        connector: str,
        offsets: Sequence[tuple[Mapping[str, Any], Mapping[str, Any] | None]],
        timeout: float = 30.0,
    ) -> None:
        """Write offsets (None = tombstone, i.e. reset that partition) and wait until every record
        was read back. Everything is validated before anything is written."""
        if not isinstance(connector, str) or not connector:
            raise ValueError("connector name must be a non-empty string")
        for partition, offset in offsets:
            serde.check_primitive_map("source partition", partition)
            if offset is not None:
                serde.check_primitive_map(f"offset for source partition {dict(partition)}", offset)
        records: list[tuple[bytes, bytes | None]] = []
        with self._lock:
            known = self._entries.get(connector, {})
            for partition, offset in offsets:
                canonical = offset_key(connector, partition)
                records += [(raw, None) for raw in known.get(canonical, {}) if raw != canonical]
                records.append((canonical, source_offset_value(offset)))
        deadline = Deadline(timeout)
        futures = [self._log.send(key, value) for key, value in records]
        positions: list[LogPosition] = [
            future.result(timeout=deadline.left("offset write")) for future in futures
        ]
        # Keys hash to different partitions: wait for each record, not just the last one.
        for position in positions:
            self._log.wait_for(position, deadline.left("offset write"))

    # -- consuming ----------------------------------------------------------------------------

    def _on_record(self, record: LogRecord) -> None:
        where = f"{record.partition}/{record.offset}"
        if record.key is None:
            log.warning("offsets topic: skipping record %s without a key", where)
            return
        try:
            key = serde.loads(record.key)
        except ValueError:
            log.warning("offsets topic: skipping record %s: key is not JSON", where)
            return
        if not (isinstance(key, list) and len(key) == 2 and isinstance(key[0], str)):
            log.warning("offsets topic: skipping record %s: key is not [connector, partition]", where)
            return
        connector, partition = key
        if partition is None:
            return  # Kafka Connect ignores these too
        if not isinstance(partition, dict):
            log.warning("offsets topic: skipping record %s: source partition is not a JSON object", where)
            return
        offset: dict[str, Any] | None = None
        if record.value is not None:
            try:
                value = serde.loads(record.value)
            except ValueError:
                log.warning("offsets topic: skipping record %s: value is not JSON", where)
                return
            if value is not None and not isinstance(value, dict):
                log.warning("offsets topic: skipping record %s: offset is not a JSON object", where)
                return
            offset = value  # JSON null reads as no offset, as Kafka Connect's converter does
        try:
            canonical = offset_key(connector, partition)
        except ValueError:
            log.warning("offsets topic: skipping record %s: partition cannot be re-encoded (NaN?)", where)
            return
        with self._lock:
            by_key = self._entries.setdefault(connector, {})
            spellings = by_key.setdefault(canonical, {})
            if offset is None:
                spellings.pop(record.key, None)
            else:
                spellings[record.key] = _Entry(next(self._sequence), partition, offset)
            if not spellings:
                del by_key[canonical]
            if not by_key:
                del self._entries[connector]


def _current(spellings: Mapping[bytes, _Entry]) -> _Entry | None:
    """The value of a source partition: the most recently read of its live spellings."""
    return max(spellings.values(), key=lambda e: e.sequence, default=None)
