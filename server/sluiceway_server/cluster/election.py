"""Leader election through Kafka's group coordination: every replica joins the consumer group
`group.id` subscribed to the cluster topic (one partition), and the member the group assigns that
partition to is the leader. Kafka decides who is in the group (session timeouts, rebalances);
nothing here keeps time of its own.

The cooperative-sticky assignor keeps the partition where it is when replicas join or leave, so a
new replica does not interrupt the leader; a leader that stops heartbeating (killed, stopped, cut
off) loses the partition once its session times out."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Mapping
from typing import Any

from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition

log = logging.getLogger(__name__)

_POLL_SECONDS = 0.1


class LeaderElection:
    """This replica's membership of the control-plane group.

    Owns one consumer and the thread that polls it (heartbeats and rebalance callbacks happen inside
    `poll`). `on_change(leads)` is called on that thread whenever the partition comes or goes: True
    when this replica was assigned it, False when it was revoked or lost. It must not block.

    `rejoin()` leaves and joins the group again, letting the group choose afresh: a replica whose
    term failed (fenced, say) while the group still names it uses this to step aside.
    """

    def __init__(
        self,
        *,
        topic: str,
        bootstrap_servers: str,
        group_id: str,
        member_id: str,
        session_timeout_ms: int,
        on_change: Callable[[bool], None],
        consumer_config: Mapping[str, str] | None = None,
    ) -> None:
        self.topic = topic
        self._on_change = on_change
        self._config: dict[str, Any] = {
            "bootstrap.servers": bootstrap_servers,
            **(consumer_config or {}),
            "group.id": group_id,
            "client.id": f"sluiceway-replica-{member_id}",
            "session.timeout.ms": session_timeout_ms,
            # Frequent heartbeats: a surviving replica learns of the rebalance a dead leader causes
            # from its next heartbeat's answer.
            "heartbeat.interval.ms": max(min(session_timeout_ms // 3, 1000), 100),
            # The rebalance timeout: how long the group waits for members to rejoin. Our poll loop
            # never stalls, and a long value would slow every join on brokers that wait it out.
            "max.poll.interval.ms": session_timeout_ms,
            "partition.assignment.strategy": "cooperative-sticky",
            "enable.auto.commit": "false",
            "enable.auto.offset.store": "false",
            "auto.offset.reset": "latest",
            "logger": log,
        }
        self._leads = False
        self._stop = threading.Event()
        self._rejoin = threading.Event()
        self._thread: threading.Thread | None = None

    @property
    def leads(self) -> bool:
        return self._leads

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="leader-election", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Leave the group (at once, so another replica can take over without waiting for the
        session timeout)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=30)

    def rejoin(self) -> None:
        self._rejoin.set()

    def _run(self) -> None:
        while not self._stop.is_set():
            consumer = Consumer(dict(self._config))
            try:
                consumer.subscribe(
                    [self.topic], on_assign=self._assigned, on_revoke=self._revoked, on_lost=self._revoked
                )
                while not self._stop.is_set() and not self._rejoin.is_set():
                    message = consumer.poll(_POLL_SECONDS)
                    error = None if message is None else message.error()
                    if error is not None:
                        self._report(error)
            except KafkaException as exc:
                log.error("leader election: the group consumer failed: %s", exc)
            finally:
                self._set(False)
                consumer.close()
            if self._rejoin.is_set():
                log.info("leader election: leaving the group to let it choose a leader again")
                self._rejoin.clear()

    @staticmethod
    def _report(error: KafkaError) -> None:
        if error.code() == KafkaError._PARTITION_EOF:
            return
        (log.error if error.fatal() else log.warning)("leader election: group consumer: %s", error)

    def _assigned(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        if any(p.partition == 0 for p in partitions):
            self._set(True)

    def _revoked(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        if any(p.partition == 0 for p in partitions):
            self._set(False)

    def _set(self, leads: bool) -> None:
        if leads == self._leads:
            return
        self._leads = leads
        log.info("leader election: this replica %s the cluster partition", "holds" if leads else "lost")
        self._on_change(leads)
