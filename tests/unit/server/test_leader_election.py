"""When a replica tries to take the lead (cluster/election.py), driven tick by tick with a clock,
a cluster view and a probe of our own: at once when nobody leads or the leader stopped, refuses
connections or was an earlier run of this replica; after the session timeout when it is silent; in
the order of the members' ids; never while a live leader keeps writing."""

from __future__ import annotations

import socket

from sluiceway_server.cluster.election import LeaderElection, Reachability, probe_address
from sluiceway_server.storage.cluster_store import LeaderRecord, MemberRecord

ME = "10.0.0.2:8083"
OTHER = "10.0.0.1:8083"  # sorts before ME
LATER = "10.0.0.3:8083"  # sorts after ME
SESSION = 10.0


class _Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class _Cluster:
    """The cluster topic as read so far: a leader record, members' records and when each was read."""

    def __init__(self, clock: _Clock) -> None:
        self.clock = clock
        self.announced: LeaderRecord | None = None
        self.seen: dict[str, float] = {}
        self.gone: set[str] = set()

    def announce(self, member: str, epoch: int) -> None:
        self.announced = LeaderRecord(member, member, epoch, 0)
        self.heard(member)

    def heard(self, member: str) -> None:
        self.seen[member] = self.clock.now
        self.gone.discard(member)

    def leader(self) -> LeaderRecord | None:
        return self.announced

    def member_seen(self, member_id: str) -> float | None:
        return self.seen.get(member_id)

    def departed(self, member_id: str) -> bool:
        return member_id in self.gone

    def members(self, max_age_ms: int) -> list[MemberRecord]:
        fresh = [m for m, at in self.seen.items() if (self.clock.now - at) * 1000 <= max_age_ms]
        return [MemberRecord(m, m, "", 0) for m in sorted(fresh)]


class _Probe:
    def __init__(self) -> None:
        self.answer = Reachability.ANSWERED
        self.asked: list[str] = []

    def __call__(self, address: str) -> Reachability:
        self.asked.append(address)
        return self.answer


class _Bed:
    def __init__(self, announced: tuple[str, int] | None = None) -> None:
        self.clock = _Clock()
        self.cluster = _Cluster(self.clock)
        if announced is not None:
            self.cluster.announce(*announced)
        self.cluster.heard(ME)
        self.probe = _Probe()
        self.changes: list[bool] = []
        self.election = LeaderElection(
            member_id=ME,
            cluster=self.cluster,
            session_timeout=SESSION,
            on_change=self.changes.append,
            stagger=1.0,
            probe_interval=0.5,
            probe=self.probe,
            clock=self.clock,
        )

    def run(self, seconds: float, step: float = 0.1) -> None:
        end = self.clock.now + seconds
        while self.clock.now < end - 1e-9:
            self.clock.now += step
            self.election.tick()


def test_the_first_replica_of_a_new_cluster_takes_the_lead_at_once() -> None:
    bed = _Bed()
    bed.run(0.1)
    assert bed.changes == [True] and bed.election.elected


def test_a_live_leader_is_left_alone() -> None:
    bed = _Bed(announced=(OTHER, 4))
    for _ in range(30):
        bed.run(1.0)
        bed.cluster.heard(OTHER)  # its refreshes keep coming
    assert bed.changes == []
    assert bed.probe.asked and set(bed.probe.asked) == {OTHER}


def test_a_leader_that_stopped_cleanly_is_replaced_at_once_by_the_first_in_line() -> None:
    bed = _Bed(announced=(OTHER, 4))
    bed.run(1.0)
    bed.cluster.gone.add(OTHER)
    bed.run(0.1)
    assert bed.changes == [True]


def test_the_next_in_line_waits_its_turn_and_not_at_all_once_a_newer_leader_is_announced() -> None:
    bed = _Bed(announced=(OTHER, 4))
    bed.cluster.heard("10.0.0.0:8083")  # a live member before ME in line
    bed.run(0.5)
    bed.cluster.gone.add(OTHER)
    bed.run(0.9)
    assert bed.changes == []  # turn 1: a second after the first in line
    bed.run(0.2)
    assert bed.changes == [True]

    bed = _Bed(announced=(OTHER, 4))
    bed.cluster.heard("10.0.0.0:8083")
    bed.cluster.gone.add(OTHER)
    bed.run(0.5)
    bed.cluster.announce("10.0.0.0:8083", 5)  # the first in line took over
    bed.run(5.0)
    assert bed.changes == []


def test_a_leader_whose_address_refuses_connections_twice_in_a_row_is_replaced() -> None:
    bed = _Bed(announced=(OTHER, 4))
    bed.probe.answer = Reachability.REFUSED
    bed.run(0.45)
    assert bed.changes == []  # one refusal is not enough
    bed.run(0.6)
    assert bed.changes == [True]


def test_a_refusal_followed_by_an_answer_counts_for_nothing() -> None:
    bed = _Bed(announced=(OTHER, 4))
    for _ in range(10):
        bed.probe.answer = Reachability.REFUSED
        bed.run(0.5)
        bed.probe.answer = Reachability.ANSWERED
        bed.run(0.5)
        bed.cluster.heard(OTHER)
    assert bed.changes == []


def test_a_silent_leader_is_replaced_after_the_session_timeout_counted_from_the_start() -> None:
    bed = _Bed(announced=(OTHER, 4))
    bed.probe.answer = Reachability.UNKNOWN  # a hung process or host: connections time out
    bed.run(SESSION - 0.5)
    assert bed.changes == []
    bed.run(1.0)
    assert bed.changes == [True]


def test_a_leader_announced_by_an_earlier_run_of_this_replica_is_replaced_at_once() -> None:
    bed = _Bed(announced=(ME, 7))  # before this process started; it now holds that address
    bed.cluster.heard(OTHER)  # even ahead of a live member in line
    bed.run(0.1)
    assert bed.changes == [True]


def test_after_stepping_aside_a_replica_waits_for_the_one_that_fenced_it() -> None:
    bed = _Bed()
    bed.run(0.1)
    assert bed.changes == [True]
    bed.cluster.announce(ME, 1)  # its own announcement, then another replica fences it
    bed.election.rejoin()
    bed.run(SESSION - 0.5)
    assert bed.changes == [True]  # no second try while the other may still announce
    bed.run(1.0)
    assert bed.changes == [True, True]  # nobody did: it tries again

    bed = _Bed()
    bed.run(0.1)
    bed.cluster.announce(ME, 1)
    bed.election.rejoin()
    bed.run(1.0)
    bed.cluster.announce(LATER, 2)  # the fencer announces and then keeps refreshing
    for _ in range(20):
        bed.run(1.0)
        bed.cluster.heard(LATER)
    assert bed.changes == [True]


def test_stop_reports_the_lead_as_given_up() -> None:
    bed = _Bed()
    bed.run(0.1)
    bed.election.stop()
    assert bed.changes == [True, False]


def test_the_probe_tells_a_refusal_from_an_answer() -> None:
    with socket.socket() as listening:
        listening.bind(("127.0.0.1", 0))
        listening.listen()
        address = f"127.0.0.1:{listening.getsockname()[1]}"
        assert probe_address(address) is Reachability.ANSWERED
    assert probe_address(address) is Reachability.REFUSED
    assert probe_address("no-port") is Reachability.UNKNOWN
