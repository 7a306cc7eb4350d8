"""Answers to mutations with a `request_id`, recorded in the cluster topic so that the next leader
answers a retry the way the last one did (api/idempotency.py)."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from typing import Final

from sluiceway_server.storage.cluster_store import AnswerRecord, ClusterStore
from sluiceway_server.storage.record_log import NotLeaderError, TopicWriter

log = logging.getLogger(__name__)

# Larger answers (a connector with a very large config) are kept in the leader's memory only: every
# replica holds every recorded answer in memory.
MAX_RECORDED_ANSWER_BYTES: Final = 16 * 1024


class RecordedAnswers:
    """`Answers` on the cluster topic: written through the current term's fenced producer, read
    from the replica's own copy of the topic."""

    def __init__(
        self, cluster: ClusterStore, writer: Callable[[], TopicWriter | None], timeout: float
    ) -> None:
        self._cluster = cluster
        self._writer = writer
        self._timeout = timeout

    def lookup(self, method: str, request_id: str, max_age: float) -> tuple[str, bytes] | None:
        found = self._cluster.answer(method, request_id)
        if found is None or time.time() * 1000 - found.time_ms > max_age * 1000:
            return None
        return found.fingerprint, found.response

    async def record(self, method: str, request_id: str, fingerprint: str, response: bytes) -> None:
        if len(response) > MAX_RECORDED_ANSWER_BYTES:
            log.debug("not recording the %d-byte answer to %s %s", len(response), method, request_id)
            return
        writer = self._writer()
        if writer is None:
            raise NotLeaderError("this replica no longer leads")
        answer = AnswerRecord(method, request_id, fingerprint, response, int(time.time() * 1000))
        await asyncio.to_thread(self._cluster.record_answer, writer, answer, self._timeout)
