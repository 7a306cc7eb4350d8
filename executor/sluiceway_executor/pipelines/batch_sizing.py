"""How many records the next batch of a task takes (``BatchSizer``), and how a sink batch's records
are shared among its partitions (``share_records``).

The sizer starts at the connector's record ceiling, so a task's first batch takes its whole backlog
up to ``batch.max.records`` (and ``batch.max.bytes`` once a record size is known). After each batch
it compares the time the batch took with ``batch.duration.ms``: a batch that used at least half its
limit and took longer shrinks the next one in proportion; a batch that was cut by the limit (or
whose record count is unknown) and took less lets the next one grow in proportion (the time
includes the batch's fixed cost, so growth undershoots and never oscillates). A smaller batch says
little about the limit and leaves it: its time is mostly the fixed cost.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

from sluiceway.connect.batch_config import BatchLimits

__all__ = ["BatchSizer", "share_records"]

# How much one record's size counts in the running estimate (an exponential average).
_SIZE_WEIGHT: Final = 0.5


class BatchSizer:
    """The record limit of a task's next batch, learnt from the batches before it."""

    def __init__(self, limits: BatchLimits) -> None:
        self._limits = limits
        self._limit = limits.max_records
        self._record_bytes: float | None = None

    @property
    def record_bytes(self) -> float | None:
        """The estimated bytes of one record (key and value), once any were seen."""
        return self._record_bytes

    def next_limit(self) -> int:
        """The most records the next batch takes."""
        limit = self._limit  # never above batch.max.records (observe keeps it there)
        if self._record_bytes:
            limit = min(limit, int(self._limits.max_bytes / self._record_bytes))
        return max(limit, 1)

    def observe_sizes(self, records: int, total_bytes: int) -> None:
        """``records`` seen with ``total_bytes`` of keys and values between them."""
        if records <= 0:
            return
        size = max(total_bytes / records, 1.0)
        previous = self._record_bytes
        self._record_bytes = size if previous is None else previous + _SIZE_WEIGHT * (size - previous)

    def observe(self, limit: int, records: int | None, seconds: float) -> None:
        """A batch run with ``limit`` held ``records`` (None: not known) and took ``seconds``."""
        target = self._limits.duration_s
        if seconds <= 0:
            return
        # A batch whose record count is not known (a DataFrame-level source) counts as full, both
        # ways: otherwise a limit it shrank after a slow batch (a cold Spark session) could never
        # grow back, and a rate-limited task would fall behind its rate for good.
        held = limit if records is None else records
        if seconds > target and held * 2 >= limit:
            # Only a batch that used most of its limit shrinks the next: the time of a small one is
            # mostly fixed cost (a cold Spark session's first job above all), not its records'.
            self._limit = max(1, min(self._limit, int(held * target / seconds)))
        elif seconds <= target and held >= limit:
            self._limit = min(self._limits.max_records, max(self._limit, int(held * target / seconds)))


def share_records(pending: Mapping[tuple[str, int], int], limit: int) -> dict[tuple[str, int], int]:
    """How many of its ``pending`` records each partition gives to a batch of at most ``limit``:
    all of them when they fit, else an even share, a partition with less than its share giving
    what it has and the rest going to the others (so no partition is left a small remainder while
    another could have taken it)."""
    total = sum(max(n, 0) for n in pending.values())
    if total <= limit:
        return {key: max(n, 0) for key, n in pending.items()}
    shares = dict.fromkeys(pending, 0)
    left = limit
    open_keys = sorted((key for key, n in pending.items() if n > 0), key=lambda k: (pending[k], k))
    while open_keys and left > 0:
        even = left // len(open_keys)
        smallest = open_keys[0]
        if pending[smallest] <= even:
            # The smallest fits within an even share: it gives all it has.
            shares[smallest] = pending[smallest]
            left -= pending[smallest]
            open_keys.pop(0)
            continue
        # Everyone left has more than an even share: split what is left, the first ones one more.
        extra = left - even * len(open_keys)
        for index, key in enumerate(sorted(open_keys)):
            shares[key] = even + (1 if index < extra else 0)
        left = 0
    return shares
