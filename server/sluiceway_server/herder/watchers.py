"""Status watchers: every status change the status store reads, fanned out to one queue per
WatchStatus call."""

from __future__ import annotations

import asyncio

from sluiceway_server.storage import StatusChange


class StatusWatchers:
    """The open watches. Runs on the event loop only (the store's listener posts to it)."""

    def __init__(self) -> None:
        self._queues: set[asyncio.Queue[StatusChange]] = set()

    def subscribe(self) -> asyncio.Queue[StatusChange]:
        """Status changes from now on; pair with unsubscribe(). Slow readers lose nothing (unbounded)."""
        queue: asyncio.Queue[StatusChange] = asyncio.Queue()
        self._queues.add(queue)
        return queue

    def unsubscribe(self, queue: asyncio.Queue[StatusChange]) -> None:
        self._queues.discard(queue)

    def publish(self, change: StatusChange) -> None:
        for queue in self._queues:
            queue.put_nowait(change)
