"""This replica's role in the control-plane cluster: follower, or leader for one term.

The election decides when to try (cluster/election.py); this module turns that into a term: it takes over
the leader's fenced producer, reads the internal topics to the end, announces itself with an epoch
above every earlier one, and only then lets the term's duties (the herder's reconciliation, the
executor coordinator) start. Losing the partition, being fenced, or reading a newer leader's
announcement ends the term in the reverse order."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Final, Protocol

from sluiceway.common.retry import RetryPolicy
from sluiceway_server.storage.cluster_store import ClusterStore, LeaderRecord, MemberRecord
from sluiceway_server.storage.record_log import TopicWriter

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class LeaderInfo:
    id: str
    address: str
    epoch: int


class FencedWriter(TopicWriter, Protocol):
    """The leader's transactional producer (storage/leader_writer.py), as this module uses it."""

    def start(self, timeout: float) -> None: ...

    def close(self) -> None: ...


class Election(Protocol):
    def start(self) -> None: ...

    def stop(self) -> None: ...

    def rejoin(self) -> None: ...


class TermDuties(Protocol):
    """What a term runs: begun once this replica's announcement is read back, ended before the
    writer closes. `begin` gets the epoch and the writer every leader-only log must use."""

    async def begin(self, epoch: int, writer: TopicWriter) -> None: ...

    async def end(self) -> None: ...

    def previous_epoch(self) -> int:
        """The highest term recorded anywhere but the cluster topic (statuses of earlier runs)."""
        ...


# Taking the lead again after a failed start of a term, for as long as the election wants this replica
# to lead.
_RETRY: Final = RetryPolicy(initial=0.5, maximum=10.0)


class Leadership:
    """The replica's role, driven by the election and the cluster topic.

    Owns the transitions between follower and leader, serialised by one asyncio lock, and the
    writer of the current term. `leader()` is who to send mutations to: this replica while its term
    runs, otherwise the latest announced leader (None when that is this replica itself, whose term
    has ended, or nobody has announced). `leading` is true only between a completed `begin` and the
    start of `end`.

    Threading: everything runs on the event loop; the election's and the cluster store's callbacks
    come from their threads and are posted to the loop.
    """

    def __init__(
        self,
        *,
        member_id: str,
        address: str,
        version: str,
        cluster: ClusterStore,
        duties: TermDuties,
        writer_factory: Callable[[Callable[[str], None]], FencedWriter],
        election_factory: Callable[[Callable[[bool], None]], Election],
        read_to_end: Callable[[float], Awaitable[None]],
        member_refresh: float,
        timeout: float,
    ) -> None:
        self.member_id = member_id
        self.address = address
        self.version = version
        self.cluster = cluster
        self._duties = duties
        self._writer_factory = writer_factory
        self._election = election_factory(self._elected_changed)
        self._read_to_end = read_to_end
        self._member_refresh = member_refresh
        self._timeout = timeout
        self._loop: asyncio.AbstractEventLoop | None = None
        self._lock = asyncio.Lock()
        self._elected = False
        self._epoch: int | None = None
        self._writer: FencedWriter | None = None
        self._stopping = False
        self._converging: asyncio.Task[None] | None = None
        self._refresh_task: asyncio.Task[None] | None = None
        # Whether the duties' begin() was entered, so a term that failed half-way is ended too.
        self._duties_begun = False

    # -- reads ---------------------------------------------------------------------------------

    @property
    def leading(self) -> bool:
        return self._epoch is not None

    @property
    def epoch(self) -> int | None:
        return self._epoch

    @property
    def writer(self) -> TopicWriter | None:
        """The fenced producer of the current term (None while this replica does not lead)."""
        return self._writer if self._epoch is not None else None

    def leader(self) -> LeaderInfo | None:
        if self._epoch is not None:
            return LeaderInfo(self.member_id, self.address, self._epoch)
        record = self.cluster.leader()
        if record is None or record.id == self.member_id:
            return None
        return LeaderInfo(record.id, record.address, record.epoch)

    def leader_address(self) -> str | None:
        """Where to send mutations: None while this replica leads or no other leader is known."""
        leader = None if self.leading else self.leader()
        return None if leader is None else leader.address

    def members(self, max_age_ms: int) -> list[MemberRecord]:
        return self.cluster.members(max_age_ms)

    # -- life cycle ----------------------------------------------------------------------------

    async def start(self) -> None:
        self._loop = asyncio.get_running_loop()
        self.cluster.on_leader = lambda record: self._post(lambda: self._announced(record))
        await self._write_member()
        self._refresh_task = self._loop.create_task(self._refresh_membership(), name="member-refresh")
        self._election.start()

    async def stop(self) -> None:
        """End the term (if any), then write this replica's tombstone: the other replicas read it
        as the leader's handover and one of them takes the lead at once."""
        self._stopping = True
        if self._refresh_task is not None:
            self._refresh_task.cancel()
        await asyncio.to_thread(self._election.stop)
        await self._converge()
        with contextlib.suppress(Exception):
            await asyncio.to_thread(self.cluster.remove_member, self.member_id, 5.0)

    # -- transitions ---------------------------------------------------------------------------

    def _post(self, fn: Callable[[], None]) -> None:
        if self._loop is not None and not self._loop.is_closed():
            self._loop.call_soon_threadsafe(fn)

    def _elected_changed(self, leads: bool) -> None:
        def apply() -> None:
            self._elected = leads
            self._schedule()

        self._post(apply)

    def _announced(self, record: LeaderRecord) -> None:
        if self._epoch is not None and (record.id != self.member_id or record.epoch > self._epoch):
            log.warning(
                "replica %s announced itself leader with epoch %d; this replica (epoch %d) steps down",
                record.id,
                record.epoch,
                self._epoch,
            )
            self._step_aside()

    def _fenced(self, reason: str) -> None:
        def apply() -> None:
            log.warning("this replica was fenced as leader: %s", reason)
            self._step_aside()

        self._post(apply)

    def _step_aside(self) -> None:
        """End the term and follow: another replica has fenced this one or announced itself, and
        the election waits for it before this replica tries again."""
        self._elected = False
        self._election.rejoin()
        self._schedule()

    def _schedule(self) -> None:
        if self._converging is None or self._converging.done():
            assert self._loop is not None
            self._converging = self._loop.create_task(self._converge(), name="leadership")

    async def _converge(self) -> None:
        async with self._lock:
            retry = _RETRY.start()
            while True:
                want = self._elected and not self._stopping
                if want == (self._epoch is not None):
                    return
                if not want:
                    await self._end_term()
                    continue
                try:
                    await self._begin_term()
                except Exception:
                    delay = retry.next_delay()
                    assert delay is not None  # the policy has neither a deadline nor an attempt limit
                    log.exception("taking the lead failed; trying again in %.1fs", delay)
                    await self._end_term()
                    await asyncio.sleep(delay)

    async def _begin_term(self) -> None:
        started = time.monotonic()
        writer = self._writer_factory(self._fenced)
        self._writer = writer
        # Fences the previous leader's producer: from here on, nothing it sends is committed.
        await asyncio.to_thread(writer.start, self._timeout)
        await self._read_to_end(self._timeout)
        await asyncio.to_thread(self.cluster.read_to_end, self._timeout)
        previous = self.cluster.leader()
        epoch = max(previous.epoch if previous else 0, self._duties.previous_epoch()) + 1
        record = LeaderRecord(self.member_id, self.address, epoch, int(time.time() * 1000))
        await asyncio.to_thread(self.cluster.announce_leader, writer, record, self._timeout)
        self._duties_begun = True
        await self._duties.begin(epoch, writer)
        self._epoch = epoch
        log.info(
            "this replica leads the cluster with epoch %d (took %.2fs)", epoch, time.monotonic() - started
        )

    async def _end_term(self) -> None:
        epoch, self._epoch = self._epoch, None
        writer, self._writer = self._writer, None
        if epoch is not None:
            log.info("this replica stops leading (epoch %d)", epoch)
        if self._duties_begun:
            self._duties_begun = False
            try:
                await self._duties.end()
            except Exception:
                log.exception("ending the leader's term failed")
        if writer is not None:
            await asyncio.to_thread(writer.close)

    # -- membership ----------------------------------------------------------------------------

    async def _write_member(self) -> None:
        record = MemberRecord(self.member_id, self.address, self.version, int(time.time() * 1000))
        await asyncio.wrap_future(self.cluster.put_member(record))

    async def _refresh_membership(self) -> None:
        while True:
            await asyncio.sleep(self._member_refresh)
            try:
                await self._write_member()
            except Exception as exc:
                log.warning("refreshing this replica's member record failed: %s", exc)
