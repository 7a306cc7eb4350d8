"""Leader election from the cluster topic: a replica takes the lead when the announced leader is
gone, and the leader's fenced producer settles any race.

Safety does not rest on this module. Taking the lead starts with the leader's transactional producer
(storage/leader_writer.py): initialising it fences every earlier holder, so of two replicas that
both believe they should lead, only the later one can still write, and the other finds itself
fenced (or reads the newer announcement) and steps aside. What this module decides is only *when*
a replica tries, so that a dead leader is replaced quickly and a live one is left alone.

A follower takes the announced leader for gone when
- its latest member record is the tombstone a replica writes when it stops cleanly (a handover);
- the leader's id is this replica's own, announced by an earlier run of this process (member ids
  are the advertised addresses, so the earlier run is dead: this one holds the address);
- two connection attempts in a row to the leader's address, `probe_interval` apart, are refused
  (the process is gone; its host answered for it);
- no record of the leader was read for `session_timeout` (it hangs, or cannot reach Kafka, or its
  host is down), counting from when this replica started watching.
The leader refreshes its member record every third of the session timeout, so a live leader is
never silent that long. The survivors then try in the order of their ids: the first at once, each
next one `stagger` later, and only while no newer leader has been announced. A replica that stepped
aside waits `session_timeout` (or for a newer announcement) before trying again, so the replica
that fenced it can announce itself.

`on_change(True)` asks Leadership to take the lead; `on_change(False)` is sent only on stop."""

from __future__ import annotations

import logging
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from enum import Enum
from typing import Protocol

from sluiceway_server.storage.cluster_store import LeaderRecord, MemberRecord

log = logging.getLogger(__name__)

_TICK_SECONDS = 0.1


class Reachability(Enum):
    ANSWERED = "answered"  # something accepted the connection
    REFUSED = "refused"  # the host answered that nothing listens there
    UNKNOWN = "unknown"  # no answer in time, no route, a name that does not resolve


def probe_address(address: str, timeout: float = 1.0) -> Reachability:
    """Whether a process listens at `host:port` (a bare TCP connect; TLS and gRPC play no part)."""
    host, _, port = address.rpartition(":")
    host = host.strip("[]")
    if not host or not port.isdigit():
        return Reachability.UNKNOWN
    try:
        with socket.create_connection((host, int(port)), timeout=timeout):
            return Reachability.ANSWERED
    except ConnectionRefusedError:
        return Reachability.REFUSED
    except OSError:
        return Reachability.UNKNOWN


class ClusterView(Protocol):
    """What the election reads of the cluster topic (storage/cluster_store.py)."""

    def leader(self) -> LeaderRecord | None: ...

    def member_seen(self, member_id: str) -> float | None: ...

    def departed(self, member_id: str) -> bool: ...

    def members(self, max_age_ms: int) -> list[MemberRecord]: ...


@dataclass(frozen=True)
class _Verdict:
    gone: bool
    why: str = ""
    # The leader is this replica's earlier run: no other replica waits for its turn.
    own_earlier_run: bool = False


class LeaderElection:
    """Decides when this replica tries to take the lead (see the module doc).

    Owns one thread, which reads `cluster` and probes the leader's address; `on_change` is called on
    it and must not block. `rejoin()` (after this replica was fenced or saw a newer leader) makes it
    a follower that waits its turn again.
    """

    def __init__(
        self,
        *,
        member_id: str,
        cluster: ClusterView,
        session_timeout: float,
        on_change: Callable[[bool], None],
        stagger: float = 1.0,
        probe_interval: float = 0.5,
        probe: Callable[[str], Reachability] = probe_address,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.member_id = member_id
        self._cluster = cluster
        self._session_timeout = session_timeout
        self._on_change = on_change
        self._stagger = stagger
        self._probe_interval = probe_interval
        self._probe = probe
        self._clock = clock
        self._lock = threading.Lock()
        self._elected = False
        self._watch_started = clock()
        # The epoch announced when this process started: a leader record naming this replica with
        # that epoch or an older one was written by an earlier run.
        first = cluster.leader()
        self._epoch_at_start = first.epoch if first is not None else 0
        self._gone_since: tuple[int, float] | None = None  # (announced epoch, since)
        self._hold: tuple[int, float] | None = None  # (announced epoch, until) after stepping aside
        self._refusals: tuple[int, float] | None = None  # (epoch, since) of consecutive refusals
        self._last_probe = float("-inf")
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    @property
    def elected(self) -> bool:
        return self._elected

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="leader-election", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=10)
        self._set(False)

    def rejoin(self) -> None:
        """Follow again, and wait before trying to lead: another replica fenced this one, or
        announced itself, and should have the time to show that it leads."""
        with self._lock:
            self._elected = False
            announced = self._cluster.leader()
            epoch = announced.epoch if announced is not None else 0
            self._hold = (epoch, self._clock() + self._session_timeout)
            self._gone_since = None

    def _run(self) -> None:
        while not self._stop.wait(_TICK_SECONDS):
            try:
                self.tick()
            except Exception:
                log.exception("leader election: a check failed")

    def tick(self) -> None:
        """One look at the cluster: try to lead when the leader is gone and it is this replica's
        turn. Called by the thread; tests call it directly."""
        if self._elected:
            return
        self._probe_leader()  # outside the lock: a connection attempt may take a second
        with self._lock:
            if self._elected:
                return
            claim = self._should_claim()
            if claim:
                self._elected = True
        if claim:
            self._on_change(True)

    def _probe_leader(self) -> None:
        """Every `probe_interval`, try to connect to the announced leader (another replica's)."""
        now = self._clock()
        leader = self._cluster.leader()
        if leader is None or leader.id == self.member_id or now - self._last_probe < self._probe_interval:
            return
        self._last_probe = now
        refused = self._probe(leader.address) is Reachability.REFUSED
        with self._lock:
            if not refused:
                self._refusals = None
            elif self._refusals is None or self._refusals[0] != leader.epoch:
                self._refusals = (leader.epoch, now)

    def _set(self, elected: bool) -> None:
        with self._lock:
            changed, self._elected = self._elected != elected, elected
        if changed:
            self._on_change(elected)

    # -- the decision (under the lock) ---------------------------------------------------------

    def _should_claim(self) -> bool:
        now = self._clock()
        leader = self._cluster.leader()
        epoch = leader.epoch if leader is not None else 0
        verdict = self._verdict(leader, now)
        if not verdict.gone:
            self._gone_since = None
            return False
        if self._hold is not None:
            held_epoch, until = self._hold
            if held_epoch == epoch and now < until:
                return False
            self._hold = None
        if self._gone_since is None or self._gone_since[0] != epoch:
            self._gone_since = (epoch, now)
            log.info("leader election: %s", verdict.why)
        turn = 0 if verdict.own_earlier_run else self._turn(leader)
        if now < self._gone_since[1] + turn * self._stagger:
            return False
        log.info("leader election: this replica takes the lead (turn %d after epoch %d)", turn, epoch)
        return True

    def _verdict(self, leader: LeaderRecord | None, now: float) -> _Verdict:
        if leader is None:
            return _Verdict(True, "no leader has been announced")
        if leader.id == self.member_id:
            if leader.epoch <= self._epoch_at_start:
                return _Verdict(
                    True, f"the leader (epoch {leader.epoch}) was an earlier run of this replica", True
                )
            return _Verdict(True, f"this replica no longer leads (epoch {leader.epoch})")
        if self._cluster.departed(leader.id):
            return _Verdict(True, f"leader {leader.id} (epoch {leader.epoch}) stopped")
        if self._refused_twice(leader, now):
            return _Verdict(True, f"leader {leader.id} (epoch {leader.epoch}) refuses connections")
        seen = self._cluster.member_seen(leader.id)
        last = self._watch_started if seen is None else max(seen, self._watch_started)
        if now - last >= self._session_timeout:
            return _Verdict(
                True, f"leader {leader.id} (epoch {leader.epoch}) was silent for {now - last:.1f}s"
            )
        return _Verdict(False)

    def _refused_twice(self, leader: LeaderRecord, now: float) -> bool:
        """Whether connections to the leader were refused at two probes in a row (the first at least
        `probe_interval` ago)."""
        return (
            self._refusals is not None
            and self._refusals[0] == leader.epoch
            and now - self._refusals[1] >= self._probe_interval
        )

    def _turn(self, leader: LeaderRecord | None) -> int:
        """This replica's place among the live members that could lead next, by id."""
        gone = None if leader is None else leader.id
        max_age_ms = int(self._session_timeout * 1000)
        candidates = {m.id for m in self._cluster.members(max_age_ms) if m.id != gone}
        candidates.add(self.member_id)
        return sorted(candidates).index(self.member_id)
