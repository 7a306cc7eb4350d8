"""Whether a running task has anything to do, from the outcomes of its batches: what its RUNNING
status adds as ``detail`` and ``idle_since``.

A task is busy until either its source says it has nothing more to read (``end_of_data``: idle at
once, "idle: end of data"), or its batches have come back empty for at least ``idle_after``
seconds ("idle: no new records"; the threshold keeps a sink whose records trickle in from
flapping). The first batch with records makes it busy again. Heartbeat records (KIP-910) are not
data: a batch of nothing else counts as empty. The tracker says when the state changed, so the
runner reports only the transitions, not every batch.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Final

__all__ = ["END_OF_DATA", "IDLE_AFTER_S", "NO_NEW_RECORDS", "IdleTracker", "Idleness"]

END_OF_DATA: Final = "idle: end of data"
NO_NEW_RECORDS: Final = "idle: no new records"
# How long batches must stay empty before a task is shown idle (without its source saying so).
IDLE_AFTER_S: Final = 10.0


@dataclass(frozen=True)
class Idleness:
    """Why a task is idle (``detail``) and since when (``since_ms``, wall clock)."""

    detail: str
    since_ms: int


class IdleTracker:
    """One run of one task: fed each batch's outcome, it knows whether the task is idle.

    Not thread-safe: the runner's thread alone calls it."""

    def __init__(
        self,
        idle_after: float = IDLE_AFTER_S,
        *,
        clock: Callable[[], float] = time.monotonic,
        wall_clock: Callable[[], float] = time.time,
    ) -> None:
        self._idle_after = idle_after
        self._clock = clock
        self._wall_clock = wall_clock
        # Since when (monotonic, wall ms) every batch has been empty; None while batches bring records.
        self._empty_since: tuple[float, int] | None = None
        self._state: Idleness | None = None

    @property
    def state(self) -> Idleness | None:
        """None while the task is busy."""
        return self._state

    def observe(self, *, empty: bool, end_of_data: bool = False) -> bool:
        """Takes one batch's outcome; True when the task's state (busy, or idle and why) changed."""
        before = self._state
        now, wall_ms = self._clock(), int(self._wall_clock() * 1000)
        if not empty:
            self._empty_since = None
        elif self._empty_since is None:
            self._empty_since = (now, wall_ms)
        if end_of_data:
            # Idle from now, or from the first of the empty batches that led here.
            since_ms = wall_ms if self._empty_since is None else self._empty_since[1]
            if self._state is None or self._state.detail != END_OF_DATA:
                self._state = Idleness(END_OF_DATA, since_ms)
        elif not empty:
            self._state = None
        elif self._state is None and self._empty_since is not None:
            # An idle task (at the end of its data, say) stays so until records come again.
            started, started_ms = self._empty_since
            if now - started >= self._idle_after:
                self._state = Idleness(NO_NEW_RECORDS, started_ms)
        return self._state != before
