"""The cluster topic (`cluster.storage.topic`, default `connect-cluster`, one partition, compacted):
who leads the control-plane cluster and which replicas are in it. Our own topic; Kafka Connect has
no counterpart (its workers learn the leader from Kafka's group protocol).

- `leader`: `{"id", "address", "epoch", "time_ms"}`, written by each new leader through its fenced
  producer, so a deposed leader cannot announce itself again. Epochs only grow.
- `member-{id}`: `{"id", "address", "version", "time_ms"}`, written by each replica when it starts
  and again every refresh interval; a tombstone when it stops cleanly.
- `request-{slot}`: `{"method", "request_id", "fingerprint", "response", "time_ms"}`, the answer the
  leader gave a mutation with a `request_id` (base64 of the serialized response), so that a retry a
  later leader receives gets the same answer. Written through the fenced producer. The slot (a
  hash of method and id, one of REQUEST_SLOTS) bounds the keys: a newer answer in the same slot
  replaces the older one, as an eviction would.

The replicas elect the leader from what this topic holds (cluster/election.py): the leader record,
how recently each member's record was read, and the tombstone a leader leaves when it stops."""

from __future__ import annotations

import base64
import concurrent.futures
import hashlib
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from sluiceway_server.storage import serde
from sluiceway_server.storage.record_log import LogPosition, LogRecord, RecordLog, TopicWriter

log = logging.getLogger(__name__)

LEADER_KEY = "leader"
MEMBER_PREFIX = "member-"
REQUEST_PREFIX = "request-"
REQUEST_SLOTS = 4096


def request_slot(method: str, request_id: str) -> int:
    digest = hashlib.sha256(f"{method}\0{request_id}".encode()).digest()
    return int.from_bytes(digest[:4], "big") % REQUEST_SLOTS


@dataclass(frozen=True)
class LeaderRecord:
    id: str
    address: str
    epoch: int
    time_ms: int


@dataclass(frozen=True)
class AnswerRecord:
    method: str
    request_id: str
    fingerprint: str  # hex digest of the request without its request_id
    response: bytes  # the serialized answer
    time_ms: int


@dataclass(frozen=True)
class MemberRecord:
    id: str
    address: str
    version: str
    time_ms: int


class ClusterStore:
    """The materialised cluster topic: the latest leader record and the members' records.

    Threading: records are applied on the log's consumer thread under a lock; readers may call from
    any thread. `on_leader` runs on the consumer thread for every leader record with a higher
    epoch than any before; it must not wait for the log.
    """

    def __init__(self, log_factory: Callable[[Callable[[LogRecord], None]], RecordLog]) -> None:
        self._log = log_factory(self._apply)
        self._lock = threading.Lock()
        self._leader: LeaderRecord | None = None
        self._members: dict[str, MemberRecord] = {}
        # When (time.monotonic(), this process's clock) each member's latest record was read, and the
        # members whose latest record is the tombstone of a clean stop.
        self._member_seen: dict[str, float] = {}
        self._departed: set[str] = set()
        self._answers: dict[int, AnswerRecord] = {}
        self.on_leader: Callable[[LeaderRecord], None] | None = None

    @property
    def topic(self) -> str:
        return self._log.topic

    def start(self, timeout: float) -> None:
        self._log.start(timeout)

    def stop(self) -> None:
        self._log.stop()

    def read_to_end(self, timeout: float) -> None:
        self._log.read_to_end(timeout)

    def read_lag(self) -> int:
        """Records of its topic written and not read yet (RecordLog.read_lag)."""
        return self._log.read_lag()

    # -- reads -----------------------------------------------------------------------------------

    def leader(self) -> LeaderRecord | None:
        with self._lock:
            return self._leader

    def members(self, max_age_ms: int, now_ms: int | None = None) -> list[MemberRecord]:
        """Replicas that wrote their record within `max_age_ms` (by the writer's clock)."""
        now = int(time.time() * 1000) if now_ms is None else now_ms
        with self._lock:
            return sorted(
                (m for m in self._members.values() if now - m.time_ms <= max_age_ms), key=lambda m: m.id
            )

    def member_seen(self, member_id: str) -> float | None:
        """When this replica last read a record of that member (time.monotonic()); None when it
        read none, or the latest is a tombstone."""
        with self._lock:
            return self._member_seen.get(member_id)

    def departed(self, member_id: str) -> bool:
        """Whether that member's latest record is the tombstone it writes when it stops cleanly."""
        with self._lock:
            return member_id in self._departed

    def answer(self, method: str, request_id: str) -> AnswerRecord | None:
        """The recorded answer to this mutation, if its slot still holds it."""
        with self._lock:
            found = self._answers.get(request_slot(method, request_id))
        if found is None or found.method != method or found.request_id != request_id:
            return None
        return found

    # -- writes ----------------------------------------------------------------------------------

    def record_answer(self, writer: TopicWriter, answer: AnswerRecord, timeout: float) -> None:
        """Write the answer through the leader's fenced producer; returns once it is committed."""
        value = serde.dumps(
            {
                "method": answer.method,
                "request_id": answer.request_id,
                "fingerprint": answer.fingerprint,
                "response": base64.b64encode(answer.response).decode("ascii"),
                "time_ms": answer.time_ms,
            }
        )
        key = f"{REQUEST_PREFIX}{request_slot(answer.method, answer.request_id)}".encode()
        writer.send(self._log.topic, key, value, 0).result(timeout)

    def announce_leader(self, writer: TopicWriter, record: LeaderRecord, timeout: float) -> None:
        """Write the leader record through the leader's fenced producer and wait until it is read
        back, so this replica's own view names itself before it acts as leader."""
        value = serde.dumps(
            {"id": record.id, "address": record.address, "epoch": record.epoch, "time_ms": record.time_ms}
        )
        position = writer.send(self._log.topic, LEADER_KEY.encode(), value, 0).result(timeout)
        self._log.wait_for(position, timeout)

    def put_member(self, record: MemberRecord) -> concurrent.futures.Future[LogPosition]:
        value = serde.dumps(
            {"id": record.id, "address": record.address, "version": record.version, "time_ms": record.time_ms}
        )
        return self._log.send(f"{MEMBER_PREFIX}{record.id}".encode(), value, 0)

    def remove_member(self, member_id: str, timeout: float) -> None:
        self._log.send(f"{MEMBER_PREFIX}{member_id}".encode(), None, 0).result(timeout)

    # -- the consumer thread ---------------------------------------------------------------------

    def _apply(self, record: LogRecord) -> None:
        key = serde.decode_key(record.key)
        if key is None:
            log.warning("cluster topic: skipping a record without a UTF-8 key at offset %d", record.offset)
            return
        try:
            value = None if record.value is None else serde.loads(record.value)
        except ValueError:
            log.warning("cluster topic: skipping %s at offset %d: not JSON", key, record.offset)
            return
        if key == LEADER_KEY:
            self._apply_leader(value, record.offset)
        elif key.startswith(MEMBER_PREFIX):
            self._apply_member(key[len(MEMBER_PREFIX) :], value, record.offset)
        elif key.startswith(REQUEST_PREFIX):
            self._apply_answer(key[len(REQUEST_PREFIX) :], value, record.offset)
        else:
            log.warning("cluster topic: skipping unknown key %s at offset %d", key, record.offset)

    def _apply_leader(self, value: object, offset: int) -> None:
        if not isinstance(value, dict):
            return
        try:
            leader = LeaderRecord(
                str(value["id"]), str(value["address"]), int(value["epoch"]), int(value.get("time_ms", 0))
            )
        except (KeyError, TypeError, ValueError):
            log.warning("cluster topic: skipping a malformed leader record at offset %d", offset)
            return
        with self._lock:
            if self._leader is not None and leader.epoch <= self._leader.epoch:
                return
            self._leader = leader
        if self.on_leader is not None:
            self.on_leader(leader)

    def _apply_answer(self, slot: str, value: object, offset: int) -> None:
        if not slot.isdigit():
            log.warning("cluster topic: skipping request record with slot %r at offset %d", slot, offset)
            return
        with self._lock:
            if value is None:
                self._answers.pop(int(slot), None)
                return
            if not isinstance(value, dict):
                return
            try:
                self._answers[int(slot)] = AnswerRecord(
                    str(value["method"]),
                    str(value["request_id"]),
                    str(value["fingerprint"]),
                    base64.b64decode(str(value["response"]), validate=True),
                    int(value["time_ms"]),
                )
            except (KeyError, TypeError, ValueError):
                log.warning("cluster topic: skipping a malformed request record at offset %d", offset)

    def _apply_member(self, member_id: str, value: object, offset: int) -> None:
        with self._lock:
            if value is None:
                self._members.pop(member_id, None)
                self._member_seen.pop(member_id, None)
                self._departed.add(member_id)
                return
            if not isinstance(value, dict):
                return
            try:
                self._members[member_id] = MemberRecord(
                    member_id, str(value["address"]), str(value.get("version", "")), int(value["time_ms"])
                )
            except (KeyError, TypeError, ValueError):
                log.warning("cluster topic: skipping a malformed member record at offset %d", offset)
                return
            self._member_seen[member_id] = time.monotonic()
            self._departed.discard(member_id)
